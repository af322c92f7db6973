"""Per-layer cross-validation on REAL energy measured by others (RAPL, Broadwell-EP CPU, PyTorch training).

Data: ``../shared/data/willowec-broadwell/{conv,linear}.csv`` (willowec/characterizing-pytorch-power,
MIT; see that folder's SOURCES.md). Each row is one layer trained alone on random data: energy per
batch in microjoules of the forward pass plus MSE loss + backward + SGD step. The rows are mapped to
``thor-sdk fit --samples`` CSVs (kind conv2d / linear, role input: the data needs no gradient), and
fitted through the very code ``thor-sdk fit --samples`` runs. 5-fold cross-validation (seeded shuffle):
each fold's estimator predicts the held-out rows; THOR's APE and 95%-interval coverage are reported
beside the FLOPs baseline of the same estimator (its kind's cost per training FLOP plus a per-step
overhead, both >= 0, fitted for relative error: ``thor_sdk.baselines.flops``).

    python bench/bench_layers_real.py                        # energy, both kinds, 5 folds
    python bench/bench_layers_real.py --metric time

Not shipped data: the benchmark skips when the folder is absent. Writes a Markdown report and JSON
to ``bench/results/``.
"""

import argparse
import csv
import datetime as dt
import json
import math
import os
import statistics
import sys
import tempfile
import time

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "willowec-broadwell")


def rows_of(kind, data_dir=DATA):
    """The CSV rows of one kind as samples-CSV dicts (both metrics, SI units)."""
    path = os.path.join(data_dir, "conv.csv" if kind == "conv2d" else "linear.csv")
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            b = int(r["batch_size"])
            energy = (float(r["for_energy"]) + float(r["back_energy"])) * 1e-6
            secs = (float(r["for_time"]) + float(r["back_time"])) * 1e-6
            if kind == "conv2d":
                side, k = int(r["side_len"]), int(r["k_size"])
                cfg = {"in_channels": int(r["in_chan"]), "out_channels": int(r["out_chan"]), "kernel": k,
                       "stride": int(r["stride"]), "padding": 0, "groups": 1, "height": side, "width": side, "bias": 1}
                if k > side:
                    continue
            else:
                cfg = {"in_features": int(r["in_size"]), "out_features": int(r["out_size"]), "tokens": 1, "bias": 1}
            out.append(dict(cfg, kind=kind, role="input", batch_size=b, energy_j=energy, time_s=secs))
    return out


def write_csv(rows, path, metric):
    col = "energy_j" if metric == "energy" else "time_s"
    keys = ["kind", "role", "batch_size", col] + sorted({k for r in rows for k in r} - {"kind", "role", "batch_size",
                                                                                       "energy_j", "time_s"})
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def cross_validate(kind, metric="energy", folds=5, seed=0, data_dir=DATA):
    import random

    import thor_sdk
    from thor_sdk.baselines.flops import baseline_cost
    from thor_sdk.runtime import load_estimator
    from thor_sdk.runtime.terms import at_batch, cost_terms

    rows = rows_of(kind, data_dir)
    col = "energy_j" if metric == "energy" else "time_s"
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    res, fit_s = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(folds):
            test = set(idx[k::folds])
            train = [rows[i] for i in idx if i not in test]
            path = os.path.join(tmp, f"fold{k}.csv")
            write_csv(train, path, metric)
            t0 = time.process_time()
            doc = thor_sdk.fit(samples_csv=path, metric=metric)
            fit_s.append(time.process_time() - t0)
            est = load_estimator(doc)
            for i in sorted(test):
                r = rows[i]
                cfg = {f: r[f] for f in r if f not in ("kind", "role", "batch_size", "energy_j", "time_s")}
                m, s = est.predict_layer(kind, dict(cfg, batch_size=r["batch_size"], role="input"))
                flops, _, _ = at_batch(cost_terms(kind, cfg, "input"), r["batch_size"])
                truth = r[col]
                res.append({"truth": truth, "thor": m, "std": s,
                            "flops": baseline_cost(doc["flops_baseline"], kind, flops),
                            "covered": abs(truth - m) <= 1.959964 * s})
    ape = [abs(x["thor"] - x["truth"]) / x["truth"] * 100 for x in res]
    fape = [abs(x["flops"] - x["truth"]) / x["truth"] * 100 for x in res]
    return {"kind": kind, "metric": metric, "rows": len(rows), "folds": folds,
            "thor_mape": statistics.fmean(ape), "thor_median_ape": statistics.median(ape),
            "flops_mape": statistics.fmean(fape), "flops_over_thor": statistics.fmean(fape) / statistics.fmean(ape),
            "coverage95": sum(x["covered"] for x in res) / len(res), "fit_cpu_s_median": statistics.median(fit_s)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metric", default="energy", choices=["energy", "time"])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not os.path.isdir(args.data):
        print(f"skipped: {args.data} is absent (real measurements by others, not shipped)")
        return 0
    command = "python bench/bench_layers_real.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = [cross_validate(k, args.metric, args.folds, data_dir=args.data) for k in ("conv2d", "linear")]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# Per-layer {args.metric} on real RAPL measurements (willowec Broadwell-EP), {args.folds}-fold CV "
             f"({stamp} UTC)", "", f"Command: `{command}`", "",
             "| kind | rows | THOR MAPE % | THOR median APE % | 95% coverage | FLOPs MAPE % | FLOPs / THOR | fit CPU s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        lines.append(f"| {r['kind']} | {r['rows']} | {r['thor_mape']:.1f} | {r['thor_median_ape']:.1f} | "
                     f"{100 * r['coverage95']:.0f}% | {r['flops_mape']:.1f} | {r['flops_over_thor']:.1f}x | "
                     f"{r['fit_cpu_s_median']:.1f} |")
    report = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                         f"layers-real-{args.metric}-{stamp}.md")
    with open(report, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(report[:-3] + ".json", "w", encoding="utf-8") as f:
        json.dump({"command": command, "results": out}, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
