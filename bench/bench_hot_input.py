"""Why forward-only probes overstate: a layer reading an input just written (hot) vs one read after 64 MB went by (cold).

    python bench/bench_hot_input.py [--batch-size 16] [--repeats 200] [--report PATH]

A frozen backbone's middle layers run forward only, each reading the activation the layer before it has just
written. Their THOR probe (role ``input``) reads the probe's fixed input batch instead, which the previous step's
backward and optimizer update have pushed out of the caches. ``bench/bench_forward_only.py`` found the probes of
such layers above their marginal cost in a net (conv 1.05x, batch norm 1.08x, an in-place ReLU 2.2x). This times
the same layers (32 channels, 32x32, frozen) on one tensor right after it was written in place (hot) and after a
64 MB buffer was written too (cold), interleaved, median of ``--repeats`` calls in each of 3 rounds. One intra-op
thread. Time only. Writes ``bench/results/hot-input-host-<stamp>.md`` and ``.json``.

Followed up (2026-11-29): probes that write their input just before the layer moved neither ``bench_forward_only``
nor a fine-tune's composition (1.38x -> 1.32x); the cause was the probe's tail (``bench/bench_probe_tail.py``), and
forward-only probes are now swept (``thor_sdk.probes.build``).
"""

import argparse
import datetime as dt
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition's report helpers

C, SIDE = 32, 32
FLUSH_FLOATS = 16 * 1024 * 1024  # 64 MB


def cases():
    bn = torch.nn.BatchNorm2d(C).requires_grad_(False)
    conv = torch.nn.Conv2d(C, C, 3, padding=1, bias=False).requires_grad_(False)
    return {"relu in place": lambda t: t.relu_(), "relu": torch.relu, "batchnorm2d frozen": bn,
            "conv 3x3 frozen": conv}


def time_op(op, x, flush, hot, repeats):
    """Median seconds of ``op(x)``, ``x`` written in place just before (and, when cold, 64 MB after it)."""
    ts = []
    with torch.no_grad():
        for _ in range(repeats):
            x.mul_(1.0)
            if not hot:
                flush.fill_(1.0)
            t0 = time.perf_counter()
            op(x)
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None):
    from bench_composition import machine_line, check_report, save_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    argv = sys.argv[1:] if argv is None else argv
    torch.set_num_threads(1)
    load_start = os.getloadavg()[0]
    x = torch.randn(args.batch_size, C, SIDE, SIDE)
    flush = torch.empty(FLUSH_FLOATS)
    rows = []
    for name, op in cases().items():
        hot, cold = [], []
        for _ in range(3):  # rounds, hot and cold interleaved
            hot.append(time_op(op, x, flush, True, args.repeats))
            cold.append(time_op(op, x, flush, False, args.repeats))
        rows.append({"case": name, "hot_s": statistics.median(hot), "cold_s": statistics.median(cold),
                     "ratios": [c / h for h, c in zip(hot, cold)],
                     "cold_over_hot": statistics.median(cold) / statistics.median(hot)})
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    command = "python bench/bench_hot_input.py " + " ".join(argv)
    lines = [f"# Hot vs cold input of forward-only layers (host, {stamp} UTC)", "", f"Command: `{command}`", "",
             machine_line(1, load_start, os.getloadavg()[0]) + f" Batch {args.batch_size}, {C} channels "
             f"{SIDE}x{SIDE}, median of {args.repeats} calls per round, 3 rounds. Time only.", "",
             "| layer | hot (input just written) | cold (64 MB written since) | cold / hot per round | median |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['hot_s'] * 1e3:.3f} ms | {r['cold_s'] * 1e3:.3f} ms | "
                     f"{', '.join(f'{v:.2f}' for v in r['ratios'])} | **{r['cold_over_hot']:.2f}** |")
    save_report("\n".join(lines) + "\n", {"rows": rows, "batch_size": args.batch_size, "repeats": args.repeats,
                                          "stamp": stamp}, command, args.report, f"hot-input-host-{stamp}")


if __name__ == "__main__":
    main()
