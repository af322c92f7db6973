"""Why a warm forward-only probe over-charges a small layer: its head's tail runs warm alone and cold after the layer.

    python bench/bench_probe_tail.py [--rounds 9] [--steps 200]

A THOR probe charges a layer T(layer + head) - T(head). The head part's step (head forward, loss, backward, update:
the *tail*) touches a few hundred KB, which stay in the caches from step to step when it runs alone; after a layer
that moves more memory they do not, so the tail is slower in the 2-layer part and the difference charges that to the
layer. Inside a net every step runs after other layers, so a layer's cost there has no such share. Here the tail of
one probe (the head of MobileNetV3-small's frozen 1x1 conv 96->576 at 3x3, batch 16) is timed alone and right after
each of: a tiny op, the swept probes' own sweep (``thor_sdk.probes.torch_build.Swept``: 4 MiB written and read), the
layer itself, a depthwise 3x3 conv and a 256x256 matmul; and the layer's probe difference warm and swept (the sweep,
then a small frozen conv block, then the layer), beside the layer's forward alone in a loop. All in one process, as the host measures (one intra-op thread, denormals flushed),
rounds in alternating order. Time only.
"""

import argparse
import datetime as dt
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition's report helpers

#: MobileNetV3-small's features.10.block.0.0 at 96x96 input, frozen (its classifier-only fine-tune)
CONFIG = {"in_channels": 96, "out_channels": 576, "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "height": 3,
          "width": 3, "bias": 0, "frozen": 1}


def _ops(tail, layer, x):
    """``{name: callable}``: what runs before the tail (None: nothing)."""
    import torch
    from torch import nn

    from thor_sdk.probes.build import SWEEP_BYTES

    small = torch.zeros(100)
    bias, n = tail.module.fc.bias, SWEEP_BYTES // 4
    dw = nn.Conv2d(576, 576, 3, padding=1, groups=576, bias=False).requires_grad_(False)
    h = layer(x).detach()
    a = torch.randn(256, 256)
    return {"nothing": None, "tiny op (100 floats)": lambda: small.add_(1.0),
            "the sweep (4 MiB)": lambda: bias.detach()[:1].repeat(n).sum(),
            "the layer (1x1 conv 96->576)": lambda: layer(x), "depthwise 3x3 conv 576": lambda: dw(h),
            "matmul 256": lambda: torch.mm(a, a)}


def _pairs(op, tail, steps):
    """Median seconds of ``op`` and of the tail step after it, over ``steps`` pairs."""
    ops, tails = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        if op is not None:
            op()
        t1 = time.perf_counter()
        tail.step()
        t2 = time.perf_counter()
        ops.append(t1 - t0)
        tails.append(t2 - t1)
    return statistics.median(ops), statistics.median(tails)


def _per_step(fn, steps):
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def run(rounds=9, steps=200, progress=None):
    """The result document: per preceding op the medians over rounds of its time and the tail's after it; the
    layer's probe difference warm and swept and its forward alone (seconds)."""
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.harness.torch_trainer import trainer_for_probe_model
    from thor_sdk.probes.build import Probe

    dev = HostDevice(threads=1)
    with dev.measuring():  # as the host measures; torch's settings restored after
        warm, swept = Probe("conv2d", CONFIG, 16, "input", "warm"), Probe("conv2d", CONFIG, 16, "input")
        parts = {(c, part): trainer_for_probe_model(p.build(part)) for c, p in (("warm", warm), ("swept", swept))
                 for part in ("head", "input")}
        tail = parts[("warm", "head")]
        layer, x = parts[("warm", "input")].module[0], parts[("warm", "input")].x
        ops = _ops(tail, layer, x)
        for fn in [t.step for t in parts.values()] + [o for o in ops.values() if o is not None]:
            for _ in range(20):
                fn()
        got = {k: {"op_s": [], "tail_s": []} for k in ops}
        probe = {k: [] for k in parts}
        alone = []
        for r in range(rounds):
            names = list(ops) if r % 2 == 0 else list(ops)[::-1]
            for name in names:
                o, t = _pairs(ops[name], tail, steps)
                got[name]["op_s"].append(o)
                got[name]["tail_s"].append(t)
            for k in (list(parts) if r % 2 == 0 else list(parts)[::-1]):
                probe[k].append(_per_step(parts[k].step, steps))
            alone.append(_per_step(lambda: layer(x), steps))
            if progress:
                progress(r + 1, rounds)
    base = statistics.median(got["nothing"]["tail_s"])
    rows = [{"before": k, "op_s": statistics.median(v["op_s"]), "tail_s": statistics.median(v["tail_s"]),
             "tail_ratio": statistics.median(v["tail_s"]) / base} for k, v in got.items()]
    diff = {c: statistics.median(i - h for i, h in zip(probe[(c, "input")], probe[(c, "head")]))
            for c in ("warm", "swept")}
    return {"config": CONFIG, "batch_size": 16, "rounds": rounds, "steps": steps, "rows": rows,
            "probe_difference_s": diff, "layer_alone_s": statistics.median(alone), "device_info": dev.info()}


def report(result, command, load_start, load_end, stamp):
    from bench_composition import machine_line

    lines = [f"# A probe's tail after other work (host, {stamp} UTC)", "", f"Command: `{command}`", "",
             machine_line(result["device_info"]["torch_threads"], load_start, load_end)
             + f" Batch {result['batch_size']}, {result['rounds']} rounds of {result['steps']} steps, medians."
             " Time only.", "",
             "The tail: the head part's step of the frozen 1x1 conv 96->576 at 3x3 (head forward, loss, backward, "
             "update).", "", "| before the tail | that op | the tail | tail / tail alone |", "|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['before']} | {r['op_s'] * 1e3:.3f} ms | {r['tail_s'] * 1e3:.3f} ms | "
                     f"**{r['tail_ratio']:.2f}** |")
    d = result["probe_difference_s"]
    lines += ["", f"The layer's probe difference: warm {d['warm'] * 1e3:.3f} ms, swept {d['swept'] * 1e3:.3f} ms; "
              f"its forward alone in a loop {result['layer_alone_s'] * 1e3:.3f} ms."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    from bench_composition import check_report, save_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/probe-tail-host-*.md)")
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    if not (1 <= args.rounds <= 1000 and 1 <= args.steps <= 100000):
        raise SystemExit("--rounds 1..1000, --steps 1..100000")
    command = "python bench/bench_probe_tail.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load_start = os.getloadavg()[0]
    result = run(args.rounds, args.steps, progress=lambda r, n: print(f"round {r}/{n}", file=sys.stderr, flush=True))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, load_start, os.getloadavg()[0], stamp), result, command, args.report,
                f"probe-tail-host-{stamp}")


if __name__ == "__main__":
    main()
