"""On a GPU, is a net's step the sum of its layers' probe costs, or the larger of two sums (host side, GPU side)?

    python bench/bench_gpu_overlap.py --device host:cuda [--models zoo:heldout] [--batch-size 16] [--rounds 2]

THOR sums each layer's probe difference (3-layer minus 2-layer probe, or the 1-layer head for an output
layer) of *wall* time per synchronized step. On a GPU a step has two sides that overlap: the host's (Python,
dispatch, kernel launches) and the GPU's (kernels). Measured alone, a small layer costs whichever side is
longer for it; inside a net, the host launches the next layers while the GPU runs the last ones, so the net
costs about the larger of the two sides' sums, not the sum of each layer's larger side. If that is why THOR
overestimates normalisation-heavy conv nets on an H100 (bench/results/gpu-profile-h100-20261127-1014), the
sums of per-layer host and GPU times should each add up to the net's own, and their larger one should
predict the net's wall time where the sum of walls does not.

Every distinct probe part of every layer of each net, and the net itself, is measured three ways in one
process, interleaved round by round (order reversed every other round), medians over rounds:
- wall: seconds per step, each step ending in a CUDA synchronize (as THOR's probes and ``measure`` time it);
- host: seconds from a step's start until its last kernel is launched (no synchronize inside);
- GPU: seconds the step's kernels take back to back: a spin kernel (``torch.cuda._sleep``) holds the GPU
  until the host has queued the whole step, then CUDA events time the queue from its first kernel to its
  last. A step that waited on the GPU before it was queued (an implicit synchronize) would time launch gaps
  again: each figure says in how many steps the queue was whole;
- host, GPU busy: the host figure again, timed in those same steps (the GPU still spinning while the host
  queues: are launches cheaper when the GPU has work?);
- pipelined: seconds per step over a window of steps queued back to back with one synchronize at its end, as
  a training loop that does not read its loss each step runs.
The per-layer differences use THOR's subtraction, not its GP: this checks the decomposition, not a fit.
On the CPU (``--device host``) host time is the wall time and there is no GPU figure (for tests).
Time only; nothing changes a GPU setting.
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


class Timer:
    """Times a trainer three ways on one torch device (see the module's docstring)."""

    def __init__(self, device, window_s, steps):
        import torch

        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        self.window_s = window_s
        self.steps = steps
        self.sleep_cycles_per_s = self._sleep_rate() if self.cuda else None

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def _sleep_rate(self):
        """Spin-kernel cycles per second (the GPU's clock as ``torch.cuda._sleep`` counts it), median of 5."""
        torch = self.torch
        rates = []
        for _ in range(5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._sync()
            e0.record()
            torch.cuda._sleep(5_000_000)
            e1.record()
            self._sync()
            rates.append(5_000_000 / (e0.elapsed_time(e1) / 1e3))
        return statistics.median(rates)

    def figures(self, trainer):
        """``(wall_s, host_s, gpu_s, whole_queues, host_busy_s, pipelined_s)``: ``gpu_s``, ``whole_queues`` and
        ``host_busy_s`` None on the CPU."""
        wall = trainer.seconds_per_step(self.window_s, warmup=3, min_steps=3)
        pipelined = trainer.seconds_per_step(self.window_s, warmup=0, min_steps=3, pipelined=True)
        if not self.cuda:
            return wall, wall, None, None, None, pipelined
        host = []
        for _ in range(self.steps):
            self._sync()
            a = time.perf_counter()
            trainer.enqueue()
            host.append(time.perf_counter() - a)
            self._sync()
        torch = self.torch
        cycles = int(self.sleep_cycles_per_s * (1.5 * max(host) + 1e-3))
        gpu, busy, whole = [], [], 0
        for _ in range(self.steps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._sync()
            torch.cuda._sleep(cycles)
            e0.record()
            a = time.perf_counter()
            trainer.enqueue()
            busy.append(time.perf_counter() - a)
            e1.record()
            whole += not e0.query()  # the GPU was still spinning when the last kernel was queued
            self._sync()
            gpu.append(e0.elapsed_time(e1) / 1e3)
        return wall, statistics.median(host), statistics.median(gpu), whole, statistics.median(busy), pipelined


def plan(models, batch_size):
    """``(nets, parts)``: per net its layers as ``(layer name, kind, probe id, [part keys])`` (cost = last
    part minus the first, or the one part alone), and every distinct part as ``key -> (Probe, part)``.
    Layers whose kind has no probe are listed apart with the reason."""
    from thor_sdk.errors import ThorError
    from thor_sdk.layers import layers_of
    from thor_sdk.probes import Probe

    nets, parts = {}, {}
    for name in models:
        rows, skipped = [], []
        for layer in layers_of(name).layers:
            try:
                p = Probe(layer["kind"], layer["config"], batch_size, layer["role"])
            except ThorError as e:
                skipped.append(f"{layer['name']}: {e}")
                continue
            keys = []
            for part in p.parts():
                key = f"{p.id}:{part}"
                parts.setdefault(key, (p, part))
                keys.append(key)
            rows.append((layer["name"], layer["kind"], keys))
        nets[name] = {"layers": rows, "skipped": skipped}
    return nets, parts


def layer_cost(fig, keys, i):
    """Figure ``i`` (0 wall, 1 host, 2 GPU, 4 host with the GPU busy, 5 pipelined) of one layer by THOR's
    subtraction."""
    if len(keys) == 1:
        return fig[keys[0]][i]
    return fig[keys[-1]][i] - fig[keys[0]][i]


def summarize(nets, fig, net_fig):
    """Per net: its own figures, the sums of its layers' differences, and the larger-of-two prediction."""
    out = []
    for name, net in nets.items():
        w, h, g, _, hb, pipe = net_fig[name]
        sw = sum(layer_cost(fig, k, 0) for _, _, k in net["layers"])
        sh = sum(layer_cost(fig, k, 1) for _, _, k in net["layers"])
        row = {"net": name, "layers": len(net["layers"]), "skipped": net["skipped"],
               "wall_ms": w * 1e3, "host_ms": h * 1e3, "gpu_ms": None if g is None else g * 1e3,
               "sum_wall_ms": sw * 1e3, "sum_host_ms": sh * 1e3, "sum_gpu_ms": None, "max_sums_ms": None,
               "pipelined_ms": pipe * 1e3, "sum_pipelined_ms": 1e3 * sum(layer_cost(fig, k, 5) for _, _, k in net["layers"]),
               "host_busy_ms": None, "sum_host_busy_ms": None}
        if g is not None:
            sg = sum(layer_cost(fig, k, 2) for _, _, k in net["layers"])
            row["sum_gpu_ms"] = sg * 1e3
            row["max_sums_ms"] = max(sh, sg) * 1e3
            row["host_busy_ms"] = hb * 1e3
            row["sum_host_busy_ms"] = 1e3 * sum(layer_cost(fig, k, 4) for _, _, k in net["layers"])
        out.append(row)
    return out


def _mape(rows, key, truth="wall_ms"):
    vals = [abs(r[key] / r[truth] - 1) for r in rows if r.get(key) is not None and r[truth] > 0]
    return 100 * statistics.mean(vals) if vals else None


def report(rows, meta):
    def f(v):
        return "-" if v is None else f"{v:.2f}"

    def ratio(a, b):
        return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}"

    lines = [f"# Host side, GPU side: {meta['device']}, batch {meta['batch_size']} ({meta['stamp']} UTC)", "",
             f"Command: `{meta['command']}`", "",
             f"Machine: {meta['machine']}. {meta['parts']} distinct probe parts and {len(rows)} nets, "
             f"{meta['rounds']} rounds interleaved, {meta['seconds']:.0f} s; load average {meta['load'][0]:.2f} at "
             f"start, {meta['load'][1]:.2f} at end. Whole queues (GPU figure valid): {meta['whole_queues']}.", "",
             "Per net (ms per step): its own wall, host and GPU times; beside each, the sum of its layers' probe "
             "differences and that sum over the net's own figure.", "",
             "| net | wall | Σ wall (ratio) | host | Σ host (ratio) | GPU | Σ GPU (ratio) | max(Σ host, Σ GPU) / wall |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['net']} | {f(r['wall_ms'])} | {f(r['sum_wall_ms'])} ({ratio(r['sum_wall_ms'], r['wall_ms'])}) "
                     f"| {f(r['host_ms'])} | {f(r['sum_host_ms'])} ({ratio(r['sum_host_ms'], r['host_ms'])}) "
                     f"| {f(r['gpu_ms'])} | {f(r['sum_gpu_ms'])} ({ratio(r['sum_gpu_ms'], r['gpu_ms'])}) "
                     f"| {ratio(r['max_sums_ms'], r['wall_ms'])} |")
    lines += ["", "The same, the host timed while the GPU is busy (spinning ahead of the queue), and steps pipelined "
              "(queued back to back, one synchronize per window):", "",
              "| net | host, GPU busy | Σ (ratio) | pipelined | Σ (ratio) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['net']} | {f(r['host_busy_ms'])} | {f(r['sum_host_busy_ms'])} "
                     f"({ratio(r['sum_host_busy_ms'], r['host_busy_ms'])}) | {f(r['pipelined_ms'])} | "
                     f"{f(r['sum_pipelined_ms'])} ({ratio(r['sum_pipelined_ms'], r['pipelined_ms'])}) |")
    lines += ["", "Error against each net's measured wall time (mean |ratio - 1|):", "",
              f"- sum of walls (THOR's decomposition): {f(_mape(rows, 'sum_wall_ms'))}%",
              f"- larger of the host and GPU sums: {f(_mape(rows, 'max_sums_ms'))}%",
              f"- sum of host times alone: {f(_mape(rows, 'sum_host_ms'))}%",
              f"- pipelined steps, sum against the net's own: {f(_mape(rows, 'sum_pipelined_ms', 'pipelined_ms'))}%",
              f"- host with the GPU busy, sum against the net's own: "
              f"{f(_mape(rows, 'sum_host_busy_ms', 'host_busy_ms'))}%"]
    skipped = [f"{r['net']}: {s}" for r in rows for s in r["skipped"]]
    if skipped:
        lines += ["", "Layers with no probe (left out of the sums): " + "; ".join(skipped)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.models import expand_models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="host:cuda", choices=["host", "host:cuda"])
    ap.add_argument("--models", default="zoo:heldout")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--window-s", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=7, help="steps timed for the host and GPU figures")
    ap.add_argument("--max-seconds", type=float, default=600, help="no new round starts after this")
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not (1 <= args.rounds <= 100 and 1 <= args.batch_size <= 1024 and 0.001 <= args.window_s <= 10
            and 1 <= args.steps <= 1000 and 0 < args.max_seconds <= 86400):
        raise SystemExit("--rounds 1..100, --batch-size 1..1024, --window-s 0.001..10, --steps 1..1000, "
                         "--max-seconds (0, 86400]")
    command = "python bench/bench_gpu_overlap.py " + " ".join(argv if argv is not None else sys.argv[1:])
    dev = HostDevice(threads=1, accelerator="cuda" if args.device == "host:cuda" else "cpu")
    with dev.measuring():
        return _run(args, command, dev, expand_models(args.models.split(",")))


def _run(args, command, dev, models):
    import torch

    from thor_sdk.harness.torch_trainer import trainer_for_model, trainer_for_probe_model

    device = dev.torch_device()
    load_start = os.getloadavg()[0]
    t_start = time.perf_counter()
    nets, parts = plan(models, args.batch_size)
    trainers = {k: trainer_for_probe_model(p.build(part), device=device) for k, (p, part) in parts.items()}
    net_trainers = {n: trainer_for_model(n, args.batch_size, device=device) for n in nets}
    timer = Timer(device, args.window_s, args.steps)
    per = {k: [] for k in trainers}
    per_net = {k: [] for k in net_trainers}
    rounds = 0
    for r in range(args.rounds):
        if r and time.perf_counter() - t_start > args.max_seconds:
            break
        for table, items in ((per_net, net_trainers), (per, trainers)):
            keys = list(items) if r % 2 == 0 else list(items)[::-1]
            for k in keys:
                table[k].append(timer.figures(items[k]))
        rounds += 1
        print(f"round {r + 1}/{args.rounds}: {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)

    def med(samples):
        cols = list(zip(*samples))
        return tuple(None if c[0] is None else statistics.median(c) for c in cols[:3]) + (
            None if cols[3][0] is None else sum(cols[3]),) + tuple(
            None if c[0] is None else statistics.median(c) for c in cols[4:])

    fig = {k: med(v) for k, v in per.items()}
    net_fig = {k: med(v) for k, v in per_net.items()}
    rows = summarize(nets, fig, net_fig)
    whole = [v[3] for v in list(fig.values()) + list(net_fig.values()) if v[3] is not None]
    total = rounds * args.steps
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else "no GPU"
    meta = {"device": dev.name, "batch_size": args.batch_size, "stamp": stamp, "command": command,
            "machine": f"{platform.platform()}, {os.cpu_count()} cores, torch {torch.__version__}, {gpu}, "
                       f"torch threads 1",
            "parts": len(parts), "rounds": rounds, "seconds": time.perf_counter() - t_start,
            "load": [load_start, os.getloadavg()[0]],
            "whole_queues": "-" if not whole else f"{sum(whole)} of {len(whole) * total} steps "
                                                  f"(worst figure {min(whole)} of {total})"}
    text = report(rows, meta)
    print(text)
    out = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                      f"gpu-overlap-{dev.name.replace(':', '')}-{stamp}.md")
    from thor_sdk.store.files import write_text

    write_text(out, text)
    write_text(out[:-3] + ".json", json.dumps({"meta": meta, "nets": rows, "parts": {
        k: {"probe": parts[k][0].to_dict(), "part": parts[k][1], "figures": fig[k]} for k in parts}},
        indent=1) + "\n")
    print(f"report: {out}", file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
