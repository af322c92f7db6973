"""Benchmark: the power-cap (batch size, frequency) selection replayed on real A40 and V100 training traces.

Data: ``../shared/data/zeus-nsdi23/`` (ml-energy/zeus, Zeus NSDI'23 traces, Apache-2.0; not shipped).
For each GPU and workload, caps every 5 W across the GPU's range, two folds (selection sees one half
of the seeds' runs, oracle and scoring the other half; see ``thor_sdk/power/replay.py``). Every ratio
model is run (``unimodal`` is the default, decided before measuring: docs/power-aware-training.md),
on the run-index-parity split and on ``--splits`` random balanced half-splits.

    python bench/bench_power_replay.py [--data DIR] [--power-column bound|average] [--ratio-model all|NAME]
                                       [--splits 20] [--seed 0] [--json]

Prints per-workload tables (parity split), a summary of every variant, the references, and the commands.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def _table(rows, header):
    w = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w[i]) if i == 0 else str(c).rjust(w[i]) for i, c in enumerate(r))  # noqa: E731
    return "\n".join([line(header), "  ".join("-" * x for x in w)] + [line(r) for r in rows])


def _row(label, r):
    return [label, r["cases"], _f(r["within_5pct_share"], ".0%"), _f(r["within_10pct_share"], ".0%"),
            _f(r["median_slowdown"], ".3f"), _f(r["max_slowdown"], ".3f"), _f(r["speedup_vs_baseline1"], ".2f"),
            _f(r["speedup_vs_baseline2"], ".2f")]


HEAD = ["cases", "within 5%", "within 10%", "median slow", "max slow", "x vs b1", "x vs b2"]


def main(argv=None):
    sys.path.insert(0, str(REPO))
    from thor_sdk.power.ratios import EFFICIENCY_MODELS
    from thor_sdk.power.replay import REFERENCES, replay

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "zeus-nsdi23"))
    ap.add_argument("--power-column", choices=["bound", "average"], default="bound")
    ap.add_argument("--cap-step", type=float, default=5.0)
    ap.add_argument("--ratio-model", choices=("all",) + EFFICIENCY_MODELS, default="all")
    ap.add_argument("--splits", type=int, default=20, help="random half-splits (0: parity split only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    train = os.path.join(args.data, "summary_train.csv")
    if not os.path.isfile(train):
        print(f"no Zeus traces under {args.data}: nothing to benchmark", file=sys.stderr)
        return 0
    models = EFFICIENCY_MODELS if args.ratio_model == "all" else (args.ratio_model,)
    split_opts = [None] + ([args.splits] if args.splits > 0 else [])
    results = {}
    for gpu in ("a40", "v100"):
        power = os.path.join(args.data, f"summary_power_{gpu}.csv")
        for model in models:
            for sp in split_opts:
                t0 = time.perf_counter()
                res = replay(power, train, args.power_column, args.cap_step, ratio_model=model, splits=sp,
                             seed=args.seed)
                res["wall_s"] = time.perf_counter() - t0
                results[(gpu, model, "parity" if sp is None else f"random x{sp}")] = res
    if args.json:
        print(json.dumps({"/".join(k): v for k, v in results.items()}, indent=1))
        return 0
    for (gpu, model, split), res in results.items():
        if split != "parity":
            continue
        print(f"\n== {gpu.upper()}, ratio model {model}{' (default)' if model == 'unimodal' else ''}, "
              f"parity split ({res['wall_s']:.2f} s) ==")
        rows = [_row(w["workload"], w) for w in res["workloads"]] + [_row("ALL", res)]
        print(_table(rows, ["workload"] + HEAD))
        print(f"command: thor-sdk table replay --power-trace {os.path.join(args.data, f'summary_power_{gpu}.csv')} "
              f"--train-trace {train} --power-column {args.power_column} --cap-step {args.cap_step:g} --json"
              + ("" if model == "unimodal" else f"   (library: replay(..., ratio_model={model!r}))"))
    print("\n== every variant ==")
    rows = []
    for (gpu, model, split), res in results.items():
        rows.append(_row(f"{gpu} {model}{'*' if model == 'unimodal' else ''} {split}", res))
    print(_table(rows, ["gpu  ratio-model  split"] + HEAD))
    print("(* default, chosen before measuring; speed-ups: geometric mean over cases; cases where a baseline's "
          "pick failed in the scoring runs are left out of its mean)")
    print("\n== references (the same scoring; independent of the ratio model) ==")
    rows = []
    for (gpu, model, split), res in results.items():
        if model != models[0]:
            continue
        ref = res["reference"]
        rows.append([f"{gpu} {split}"] + [f"{_f(ref[n]['within_5pct_share'], '.0%')} / "
                                          f"{_f(ref[n]['within_10pct_share'], '.0%')}" for n in REFERENCES])
    print(_table(rows, ["gpu  split"] + [f"{n} (5% / 10%)" for n in REFERENCES]))
    for n, note in REFERENCES.items():
        print(f"  {n}: {note}")
    print("\nper-workload within 5% (parity split):")
    wl = sorted({w["workload"] for r in results.values() for w in r["workloads"]})
    rows = []
    for (gpu, model, split), res in results.items():
        if split != "parity":
            continue
        by = {w["workload"]: w for w in res["workloads"]}
        rows.append([f"{gpu} {model}"] + [_f(by[w]["within_5pct_share"], ".0%") if w in by else "" for w in wl])
    for gpu in ("a40", "v100"):
        res = results[(gpu, models[0], "parity")]
        by = {w["workload"]: w for w in res["workloads"]}
        rows.append([f"{gpu} all_runs_oracle"] + [
            _f(by[w]["reference"]["all_runs_oracle"]["within_5pct_share"], ".0%") if w in by else "" for w in wl])
    print(_table(rows, ["gpu  model"] + [w.split("/")[0] for w in wl]))
    print(f"\ncommand: python bench/bench_power_replay.py --power-column {args.power_column} "
          f"--cap-step {args.cap_step:g} --ratio-model {args.ratio_model} --splits {args.splits} --seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
