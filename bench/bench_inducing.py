"""How many inducing points a device profile's kinds need: one campaign fitted at several floors, side by side.

    python bench/bench_inducing.py --campaign host-torch.db --results report/results.json [--results ...] \
        [--floor 128 --floor 64] [--cv-kinds conv2d,lstm,gru] [--report F]

``KindGP`` keeps ``max(MIN_INDUCING, n // 3)`` inducing points (at most 256) for a kind of ``n`` samples: a
profile's largest kinds (100-200 conv2d, lstm, gru probes) sit at the floor. This fits the same campaign with
each ``--floor`` as MIN_INDUCING and reports, per floor and nothing re-measured:

- the estimator's size and its largest kinds' inducing points;
- held-out accuracy on ``thor-sdk evaluate`` results measured beside the profile (``bench_rescore.rescore``:
  the same measured nets, estimated again), per results file: THOR MAPE, the FLOPs baseline's, 95% coverage;
- per-layer 5-fold cross-validation (seeded folds, the same for every floor) on ``--cv-kinds``: each fold's
  GP (``fit_kind``, the campaign's samples as ``fit`` fits them) predicts the held-out samples; MAPE and coverage
  of the 95% interval (the GP's std and the sample's own, combined; ``thor_sdk.fitting.crossval``);
- estimate latency in the stdlib runtime, all floors in one process, interleaved block by block (11 calls a
  block, 60 blocks per layer list, the order alternating): the median of the blocks' medians and the paired
  ratio to the first floor. Layer lists: the first 50 layers of mobilenetv2 and resnet18 and 50 distinct
  synthetic layers (``bench_runtime.synthetic50``), batch 16. Pin it to one core (``taskset -c 1``).

Needs the ``[fit]`` extra; writes the Markdown report (``--report``) and nothing else.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def fit_at(campaign, floor):
    """The estimator document of ``campaign`` fitted with MIN_INDUCING = ``floor`` (restored after)."""
    import thor_sdk.fitting.gp as gp
    from thor_sdk import api

    saved = gp.MIN_INDUCING
    gp.MIN_INDUCING = floor
    try:
        return api.fit(campaign=campaign)
    finally:
        gp.MIN_INDUCING = saved


def cv(campaign, kinds, floors, folds=5):
    """``{kind: {floor: (n, non-positive, mape, median ape, coverage)}}``: per-layer k-fold CV on the campaign's
    samples as ``fit`` fits them (``fitting.crossval.cross_validate``, the same seeded folds at every floor); a sample
    at or below zero (a subtraction within noise) has no relative error and is counted apart."""
    import thor_sdk.fitting.gp as gp
    from thor_sdk.fitting.crossval import cross_validate
    from thor_sdk.fitting.pipeline import fit_samples
    from thor_sdk.store import Campaign

    with Campaign.open(campaign) as c:
        prep = fit_samples(c.samples(), c.model_runs(), c.meta["metric"])
    out = {}
    saved = gp.MIN_INDUCING
    try:
        for floor in floors:
            gp.MIN_INDUCING = floor
            for key, got in cross_validate(prep["samples"], prep["drift_var"], folds, kinds=kinds)["kinds"].items():
                out.setdefault(key, {})[floor] = (got["n"], got["nonpositive"], got["mape"], got["median_ape"],
                                                  got["covered95"])
    finally:
        gp.MIN_INDUCING = saved
    return out


def latency(estimators, blocks=60, calls=11):
    """``{list name: [(median ms, paired ratio to the first estimator's)]}`` per estimator."""
    import numpy as np
    from bench_runtime import synthetic50

    from thor_sdk.layers import layers_of

    lists = {f"{m} (first 50)": [dict(x) for x in layers_of(m).layers[:50]] for m in ("mobilenetv2", "resnet18")}
    lists["synthetic50 (distinct)"] = synthetic50(np.random.default_rng(0))

    def block(est, layers):
        ts = []
        for _ in range(calls):
            t = time.perf_counter()
            est.estimate(layers, 16)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e3

    out = {}
    for name, layers in lists.items():
        times = [[] for _ in estimators]
        for est in estimators:
            block(est, layers)  # warm-up
        for b in range(blocks):
            order = list(range(len(estimators)))
            for i in (order if b % 2 == 0 else order[::-1]):
                times[i].append(block(estimators[i], layers))
        out[name] = [(statistics.median(t), statistics.median(x / y for x, y in zip(t, times[0]))) for t in times]
    return out


def main(argv=None):
    from bench_rescore import load_results, rescore

    from thor_sdk.fitting.estimator import dumps_estimator
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.files import write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="a device profile (SQLite)")
    ap.add_argument("--results", action="append", default=[], help="an evaluation's results.json (repeatable)")
    ap.add_argument("--floor", action="append", type=int, help="MIN_INDUCING values [default: 128 and 64]")
    ap.add_argument("--cv-kinds", default="conv2d,conv2d:grouped,lstm,gru,linear,relu")
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    floors = args.floor or [128, 64]
    if any(f < 1 for f in floors):
        raise SystemExit("Error: --floor must be positive")
    docs = [(p, load_results(p)) for p in args.results]
    command = "python bench/bench_inducing.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Inducing points of a device profile's kinds", "", f"Command: `{command}`", "",
             f"Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
             f"{os.getloadavg()[0]:.2f} at start.", ""]
    fitted = []
    for floor in floors:
        t = time.perf_counter()
        doc = fit_at(args.campaign, floor)
        fit_s = time.perf_counter() - t
        text = dumps_estimator(doc)
        t = time.perf_counter()
        est = load_estimator(json.loads(text))
        load_ms = (time.perf_counter() - t) * 1e3
        fitted.append((floor, doc, est, len(text.encode()), fit_s, load_ms))
    lines += ["## Estimators", "", "| floor | bytes | fit s | load ms (parse excluded) | largest kinds' inducing points |",
              "|---|---|---|---|---|"]
    for floor, doc, _, size, fit_s, load_ms in fitted:
        big = sorted(((len(k["inducing"]), name) for name, k in doc["kinds"].items()), reverse=True)[:5]
        lines.append(f"| {floor} | {size:,} | {fit_s:.1f} | {load_ms:.1f} | "
                     + ", ".join(f"{name} {m}" for m, name in big) + " |")
    if docs:
        lines += ["", "## Held out, the same measurements estimated again", "",
                  "| results | floor | group | nets | THOR MAPE % | FLOPs MAPE % | 95% coverage |", "|---|---|---|---|---|---|---|"]
        cache = {}
        for path, res in docs:
            for floor, _, est, *_ in fitted:
                for g, s in rescore(res, est, cache)["groups"].items():
                    lines.append(f"| {os.path.basename(os.path.dirname(path))} | {floor} | {g} | {s['n']} | "
                                 f"{s['thor_mape']:.1f} | {s['flops_mape']:.1f} | {s['coverage95']:.0%} |")
    kinds = [k for k in args.cv_kinds.split(",") if k]
    if kinds:
        lines += ["", "## Per-layer 5-fold cross-validation", "",
                  "| kind | samples (not positive, not scored) | floor | MAPE % | median APE % | 95% coverage |",
                  "|---|---|---|---|---|---|"]
        for key, per in cv(args.campaign, kinds, floors).items():
            for floor, (n, bad, mape, med, cov) in per.items():
                lines.append(f"| {key} | {n} ({bad}) | {floor} | {mape:.1f} | {med:.1f} | {cov:.0%} |")
    lines += ["", "## Estimate latency (stdlib runtime, batch 16, one process, interleaved)", "",
              "| layer list | " + " | ".join(f"floor {f}: ms (ratio to {floors[0]})" for f in floors) + " |",
              "|---|" + "---|" * len(floors)]
    for name, per in latency([f[2] for f in fitted]).items():
        lines.append(f"| {name} | " + " | ".join(f"{ms:.2f} ({r:.2f})" for ms, r in per) + " |")
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.2f}.")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.report:
        write_text(args.report, text)


if __name__ == "__main__":
    main()
