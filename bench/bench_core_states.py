"""Whether this host's cores change speed together or apart, and how often: what a reference re-measured can track.

    python bench/bench_core_states.py [--seconds 40] [--report F]

One process per core, each pinned to its core (``os.sched_setaffinity``), runs the same fixed work (200 products of a
96 x 96 matrix with one torch thread) over and over for ``--seconds``, timing each block. Printed per second:
each core's median block time and their ratio; then per core the median, the 10th and 90th percentiles, how
often its speed moved by more than 15% from one second to the next, and the share of seconds in which the two
cores differed by more than 15%.

Why: ``thor-sdk profile`` re-measures a reference probe every minute or two and ``fit`` puts every sample at the
level it read; ``evaluate --relevel`` measures the level once. A level read on one core at one moment describes
another core, or the same core ten seconds later, only where the cores move together and slowly. Time only (no
energy sensor here); it measures the host, not thor_sdk.
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

WORKER = r'''
import json, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[3])})
import torch
torch.set_num_threads(1)
a = torch.randn(96, 96)
out = []
end = time.time() + float(sys.argv[2])
while time.time() < end:
    t0 = time.perf_counter()
    for _ in range(200):
        a @ a
    out.append((time.time(), time.perf_counter() - t0))
json.dump(out, open(sys.argv[1], "w"))
'''

MOVE = 0.15  # a relative change this large counts as a change of state


def per_second(blocks):
    """``{whole second: median block time}`` of ``[(unix time, block seconds)]``."""
    by = {}
    for t, v in blocks:
        by.setdefault(int(t), []).append(v)
    return {k: statistics.median(v) for k, v in by.items()}


def summary(series):
    """Median, p10, p90 (ms) of a per-second series and the share of seconds whose speed moved by more than MOVE
    from the second before."""
    vals = [series[k] for k in sorted(series)]
    s = sorted(vals)
    moves = sum(1 for a, b in zip(vals, vals[1:]) if abs(b / a - 1.0) > MOVE)
    return {"median_ms": statistics.median(s) * 1e3, "p10_ms": s[len(s) // 10] * 1e3,
            "p90_ms": s[9 * len(s) // 10] * 1e3, "moved_share": moves / max(1, len(vals) - 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--report")
    a = ap.parse_args(argv)
    if not 5 <= a.seconds <= 600:
        ap.error(f"--seconds must be 5 to 600, got {a.seconds}")  # before any work
    cores = sorted(os.sched_getaffinity(0))
    command = "python bench/bench_core_states.py " + " ".join(argv if argv is not None else sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        procs, files = [], []
        for c in cores:
            f = os.path.join(tmp, f"core{c}.json")
            files.append(f)
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER, f, str(a.seconds), str(c)]))
        for p in procs:
            if p.wait() != 0:
                raise SystemExit(f"a worker failed (exit {p.returncode})")
        series = [per_second(json.load(open(f))) for f in files]
    common = sorted(set.intersection(*(set(s) for s in series)))
    lines = [f"# Core states of this host ({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{command}`", "", f"Machine: {platform.platform()}, cores {cores}; one pinned process per core "
             "doing the same work (200 products of a 96 x 96 matrix, one torch thread) per block.", "",
             "| second | " + " | ".join(f"core {c} ms" for c in cores) + (" | ratio |" if len(cores) == 2 else " |"),
             "|---" * (len(cores) + 1 + (len(cores) == 2)) + "|"]
    for k in common:
        vals = [s[k] * 1e3 for s in series]
        lines.append(f"| {k - common[0]} | " + " | ".join(f"{v:.2f}" for v in vals)
                     + (f" | {vals[0] / vals[1]:.2f} |" if len(cores) == 2 else " |"))
    lines += ["", "| core | median ms | p10 ms | p90 ms | seconds moved > 15% from the one before |", "|---|---|---|---|---|"]
    for c, s in zip(cores, series):
        m = summary(s)
        lines.append(f"| {c} | {m['median_ms']:.2f} | {m['p10_ms']:.2f} | {m['p90_ms']:.2f} | {m['moved_share']:.0%} |")
    if len(cores) == 2 and common:
        apart = sum(1 for k in common if abs(series[0][k] / series[1][k] - 1.0) > MOVE) / len(common)
        lines += ["", f"Seconds in which the two cores' speeds differed by more than 15%: {apart:.0%} of {len(common)}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.report:
        from thor_sdk.store.files import write_text

        write_text(a.report, text)


if __name__ == "__main__":
    main()
