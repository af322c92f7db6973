"""Benchmark: the power-cap (batch size, frequency) selection replayed on real A40 and V100 training traces.

Data: ``../shared/data/zeus-nsdi23/`` (ml-energy/zeus, Zeus NSDI'23 traces, Apache-2.0; not shipped).
For each GPU and workload, caps every 5 W across the GPU's range, two folds (selection sees one half
of the seeds' runs, oracle and scoring the other half; see ``thor_sdk/power/replay.py``).

    python bench/bench_power_replay.py [--data DIR] [--power-column bound|average] [--json]

Prints one table per GPU, the overall figures, and the equivalent ``thor-sdk table replay`` command.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None):
    sys.path.insert(0, str(REPO))
    from thor_sdk.cli.table import replay_table
    from thor_sdk.power.replay import replay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "zeus-nsdi23"))
    ap.add_argument("--power-column", choices=["bound", "average"], default="bound")
    ap.add_argument("--cap-step", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    train = os.path.join(args.data, "summary_train.csv")
    if not os.path.isfile(train):
        print(f"no Zeus traces under {args.data}: nothing to benchmark", file=sys.stderr)
        return 0
    results = {}
    for gpu in ("a40", "v100"):
        power = os.path.join(args.data, f"summary_power_{gpu}.csv")
        t0 = time.perf_counter()
        res = replay(power, train, args.power_column, args.cap_step)
        res["wall_s"] = time.perf_counter() - t0
        results[gpu] = res
        if not args.json:
            print(f"\n== {gpu.upper()} ({res['wall_s']:.2f} s) ==")
            print(replay_table(res))
            print(f"command: thor-sdk table replay --power-trace {power} --train-trace {train} "
                  f"--power-column {args.power_column} --cap-step {args.cap_step:g} --json")
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print("\n== summary ==")
    keys = ("cases", "within_5pct_share", "median_slowdown", "max_slowdown", "speedup_vs_baseline1",
            "speedup_vs_baseline2")
    print("gpu   " + "  ".join(f"{k:>20}" for k in keys) + "  in-sample  seed-noise")
    for gpu, r in results.items():
        cells = [f"{r[k]:>20.3f}" if isinstance(r[k], float) else f"{r[k]:>20}" for k in keys]
        ref = r["reference"]
        print(f"{gpu:<6}" + "  ".join(cells)
              + f"  {ref['in_sample_within_5pct_share']:>9.3f}  {ref['seed_noise_within_5pct_share']:>10.3f}")
    print(f"\ncommand: python bench/bench_power_replay.py --power-column {args.power_column} "
          f"--cap-step {args.cap_step:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
