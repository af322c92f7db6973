"""What does a hidden layer cost by THOR's probes, and what does it cost after a real layer, as inside a net?

    python bench/bench_probe_input.py [--rounds 6] [--window-s 0.3] [--only conv2d,relu]

Our hidden-role probe is the layer and the head on an input that requires its gradient (an identity input
layer), minus the head alone on such an input (``Probe.parts()``: "head", "hidden"). Two other ways to
take the same layer's cost, each with a real input layer (the same layer again, on an input that needs no
gradient, so it computes its weights' gradient only, as a net's first layer does):
- **3-layer**: input + layer + head, minus input + head (the THOR paper's 3-layer minus 2-layer);
- **chain**: input + layer + layer + head, minus input + layer + head (the layer's second copy in a chain,
  its input made by the same kind of layer and its output's gradient by the next one, as inside a net).
Only layers whose output has their input's shape are cases (so the same layer can follow itself). Each
trainer's seconds per step over one window, all interleaved round by round (order reversed every other
round), medians over rounds. One intra-op thread, denormals flushed, freed memory held (the host device's
settings, restored after). Time only.

A stable ratio above 1 of probe over chain means the probe reads that kind high against its cost inside a
net (bench_additivity.py saw convs 1.11-1.21x by ablating them from vgg_small).
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CASES = (
    ("conv2d", {"in_channels": 32, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                "height": 32, "width": 32, "bias": 1}),
    ("conv2d", {"in_channels": 64, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                "height": 16, "width": 16, "bias": 0}),
    ("conv2d", {"in_channels": 96, "out_channels": 96, "kernel": 3, "stride": 1, "padding": 1, "groups": 96,
                "height": 16, "width": 16, "bias": 0}),
    ("conv2d", {"in_channels": 64, "out_channels": 64, "kernel": 1, "stride": 1, "padding": 0, "groups": 1,
                "height": 16, "width": 16, "bias": 0}),
    ("batchnorm2d", {"channels": 32, "height": 32, "width": 32}),
    ("relu", {"numel": 32768}),
    ("linear", {"in_features": 512, "out_features": 512, "bias": 1, "tokens": 1}),
    ("conv1d", {"in_channels": 64, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                "length": 100, "bias": 1}),
)


def trainers(kind, config, batch_size):
    """``{name: trainer}`` of the five probe models of one case, or None when the layer changes its shape."""
    import torch
    from torch import nn

    from thor_sdk.harness.torch_trainer import TorchTrainer, trainer_for_probe_model
    from thor_sdk.layers.build import build_layer, example_input
    from thor_sdk.layers.kinds import get_kind
    from thor_sdk.probes import Probe
    from thor_sdk.probes.torch_build import build_part, cross_entropy

    k = get_kind(kind)
    if list(k.in_shape(config)) != list(k.out_shape(config)):
        return None
    p = Probe(kind, config, batch_size, "hidden")
    out = {"probe head": trainer_for_probe_model(build_part(p, "head")),
           "probe layer": trainer_for_probe_model(build_part(p, "hidden"))}
    hidden = build_part(p, "hidden")  # its head and labels, reused below
    head, y = hidden.module[-1], hidden.y
    x = example_input(k, config, batch_size, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    stacks = {"input + head": 1, "input + layer + head": 2, "input + layer + layer + head": 3}
    for name, n in stacks.items():
        layers = [build_layer(kind, config) for _ in range(n)]
        out[name] = TorchTrainer(nn.Sequential(*layers, _copy(head)), x, y, cross_entropy)
    return out


def _copy(module):
    import copy

    return copy.deepcopy(module)


def costs(ms):
    """The three costs of one case from its five trainers' medians (ms)."""
    return {"probe": ms["probe layer"] - ms["probe head"],
            "three_layer": ms["input + layer + head"] - ms["input + head"],
            "chain": ms["input + layer + layer + head"] - ms["input + layer + head"]}


def main(argv=None):
    from thor_sdk.devices.host import HostDevice

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window-s", type=float, default=0.3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--only", default=None, help="comma-separated kinds")
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not (2 <= args.rounds <= 1000 and 0.01 <= args.window_s <= 60 and 1 <= args.batch_size <= 1024):
        raise SystemExit("--rounds 2..1000, --window-s 0.01..60, --batch-size 1..1024")
    command = "python bench/bench_probe_input.py " + " ".join(argv if argv is not None else sys.argv[1:])
    only = set(args.only.split(",")) if args.only else None
    with HostDevice(threads=1).measuring():
        return _run(args, command, [c for c in CASES if not only or c[0] in only])


def _run(args, command, cases):
    import torch

    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    built = {}
    for kind, config in cases:
        tr = trainers(kind, config, args.batch_size)
        if tr is not None:
            built[f"{kind} {json.dumps(config, sort_keys=True)}"] = tr
    times = {c: {n: [] for n in tr} for c, tr in built.items()}
    for r in range(args.rounds):
        for c in (list(built) if r % 2 == 0 else list(built)[::-1]):
            names = list(built[c]) if r % 2 == 0 else list(built[c])[::-1]
            for n in names:
                times[c][n].append(built[c][n].seconds_per_step(args.window_s) * 1e3)
        print(f"round {r + 1}/{args.rounds}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    rows = []
    for c in built:
        ms = {n: statistics.median(v) for n, v in times[c].items()}
        per_round = [costs({n: v[i] for n, v in times[c].items()}) for i in range(args.rounds)]
        row = {"case": c, "ms": ms, **costs(ms),
               "probe_over_chain_rounds": [d["probe"] / d["chain"] for d in per_round if d["chain"] > 0]}
        rows.append(row)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# A hidden layer's cost: our probe, THOR's 3-layer probe, and in a chain (host, {stamp} UTC)", "",
             f"Command: `{command}`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores, torch {torch.__version__}, 1 thread; load "
             f"average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end; batch {args.batch_size}, "
             f"{args.rounds} rounds of {args.window_s} s windows, {time.perf_counter() - t0:.0f} s.", "",
             "| layer | probe (ours) ms | 3-layer ms | chain ms | probe / chain | its rounds (quartiles) | 3-layer / chain |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        q = r["probe_over_chain_rounds"]
        qs = statistics.quantiles(q, n=4) if len(q) >= 4 else [min(q), 0, max(q)] if q else ["-"]
        quart = "-" if not q else f"{qs[0]:.2f}-{qs[-1]:.2f}"
        pc = f"{r['probe'] / r['chain']:.2f}" if r["chain"] > 0 else "-"
        tc = f"{r['three_layer'] / r['chain']:.2f}" if r["chain"] > 0 else "-"
        lines.append(f"| {r['case']} | {r['probe']:.3f} | {r['three_layer']:.3f} | {r['chain']:.3f} | {pc} | "
                     f"{quart} | {tc} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                      f"probe-input-host-{stamp}.md")
    from thor_sdk.store.files import write_text

    write_text(out, text)
    write_text(out[:-3] + ".json", json.dumps({"command": command, "rows": rows}, indent=1) + "\n")
    print(f"report: {out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
