"""Per-layer cross-validation on REAL energy measured by others (RAPL, Broadwell-EP CPU, PyTorch training).

Data: ``../shared/data/willowec-broadwell/{conv,linear}.csv`` (willowec/characterizing-pytorch-power,
MIT; see that folder's SOURCES.md). Each row is one layer trained alone on random data: energy per
batch in microjoules of the forward pass plus MSE loss + backward + SGD step. Rows whose energy or time
is not positive (one linear row: a RAPL counter wrap) and convs with a kernel wider than the input are
left out and counted in the report. The rows are mapped to
``thor-sdk fit --samples`` CSVs (kind conv2d / linear, role input: the data needs no gradient), and
fitted through the very code ``thor-sdk fit --samples`` runs. 5-fold cross-validation (seeded shuffle):
each fold's estimator predicts the held-out rows; THOR's APE and 95%-interval coverage are reported
beside the FLOPs baseline of the same estimator (its kind's cost per training FLOP plus a per-step
overhead, both >= 0, fitted for relative error: ``thor_sdk.baselines.flops``).

    python bench/bench_layers_real.py                        # energy, both kinds, 5 folds
    python bench/bench_layers_real.py --metric time
    python bench/bench_layers_real.py --reference-learners   # + how low flexible learners get (noise floor)

Not shipped data: the benchmark skips when the folder is absent. Writes a Markdown report and JSON
to ``bench/results/``.
"""

import argparse
import csv
import datetime as dt
import json
import os
import statistics
import sys
import tempfile
import time

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "willowec-broadwell")


def rows_of(kind, data_dir=DATA):
    """The CSV rows of one kind as samples-CSV dicts (both metrics, SI units), and how many rows of the file
    were left out (non-positive energy or time, kernel wider than the input)."""
    path = os.path.join(data_dir, "conv.csv" if kind == "conv2d" else "linear.csv")
    out, dropped = [], 0
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            b = int(r["batch_size"])
            energy = (float(r["for_energy"]) + float(r["back_energy"])) * 1e-6
            secs = (float(r["for_time"]) + float(r["back_time"])) * 1e-6
            if kind == "conv2d":
                side, k = int(r["side_len"]), int(r["k_size"])
                cfg = {"in_channels": int(r["in_chan"]), "out_channels": int(r["out_chan"]), "kernel": k,
                       "stride": int(r["stride"]), "padding": 0, "groups": 1, "height": side, "width": side, "bias": 1}
            else:
                side = k = 0
                cfg = {"in_features": int(r["in_size"]), "out_features": int(r["out_size"]), "tokens": 1, "bias": 1}
            # a kernel wider than its input; a RAPL counter wrap (one linear row reads -2621 J): not a cost
            if k > side or not (energy > 0 and secs > 0):
                dropped += 1
                continue
            out.append(dict(cfg, kind=kind, role="input", batch_size=b, energy_j=energy, time_s=secs))
    return out, dropped


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

    rows, dropped = rows_of(kind, data_dir)
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
                flops = at_batch(cost_terms(kind, cfg, "input"), r["batch_size"])[0]
                truth = r[col]
                res.append({"truth": truth, "thor": m, "std": s,
                            "flops": baseline_cost(doc["flops_baseline"], kind, flops),
                            "covered": abs(truth - m) <= 1.959964 * s})
    ape = [abs(x["thor"] - x["truth"]) / x["truth"] * 100 for x in res]
    fape = [abs(x["flops"] - x["truth"]) / x["truth"] * 100 for x in res]
    return {"kind": kind, "metric": metric, "rows": len(rows), "dropped": dropped,
            "folds": folds,
            "thor_mape": statistics.fmean(ape), "thor_median_ape": statistics.median(ape),
            "flops_mape": statistics.fmean(fape), "flops_over_thor": statistics.fmean(fape) / statistics.fmean(ape),
            "coverage95": sum(x["covered"] for x in res) / len(res), "fit_cpu_s_median": statistics.median(fit_s)}


def reference_learners(kind, metric="energy", folds=5, seed=0, data_dir=DATA):
    """MAPE of three flexible learners on the same folds (log target; the layer's features, batch size,
    padded features (conv2d: ``in_channels_pad8``, ``out_channels_pad8``, ``..._pad16``), training FLOPs and bytes as ``ln(1 + x)``
    inputs): gradient boosting, extra trees and an exact
    scikit-learn GP. Not baselines a user has: they say how low any model of these features gets on this
    data (its noise floor), so a bar below all of them asks for more than the data holds."""
    import random

    import numpy as np
    from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    from thor_sdk.layers.kinds import PADDED_FEATURES, padded_value
    from thor_sdk.runtime.terms import at_batch, cost_terms

    rows, _ = rows_of(kind, data_dir)
    col = "energy_j" if metric == "energy" else "time_s"
    feats = [f for f in rows[0] if f not in ("kind", "role", "energy_j", "time_s")]
    padded = PADDED_FEATURES.get(kind, ())  # the same padded features THOR's fit adds (in_channels_pad8, ...)
    X = np.log1p(np.array([[r[f] for f in feats] + [padded_value(r[f], n) for f, n in padded] + list(at_batch(
        cost_terms(kind, {f: r[f] for f in feats if f != "batch_size"}, "input"), r["batch_size"])[:2])
        for r in rows], float))
    y = np.log(np.array([r[col] for r in rows]))
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    learners = {"gradient boosting": lambda: HistGradientBoostingRegressor(max_iter=500, learning_rate=0.05,
                                                                            random_state=0),
                "extra trees": lambda: ExtraTreesRegressor(500, min_samples_leaf=2, random_state=0),
                "exact GP": lambda: GaussianProcessRegressor(
                    ConstantKernel() * Matern(np.ones(X.shape[1]), nu=2.5) + WhiteKernel(), normalize_y=True)}
    out = {}
    for name, make in learners.items():
        pred = np.empty(len(rows))
        for k in range(folds):
            test = np.array(sorted(idx[k::folds]))
            train = np.setdiff1d(np.arange(len(rows)), test)
            pred[test] = make().fit(X[train], y[train]).predict(X[test])
        out[name] = float(np.mean(np.abs(np.expm1(pred - y))) * 100)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metric", default="energy", choices=["energy", "time"])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--report", default=None)
    ap.add_argument("--reference-learners", action="store_true",
                    help="also score gradient boosting, extra trees and an exact GP on the same folds (noise floor)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.data):
        print(f"skipped: {args.data} is absent (real measurements by others, not shipped)")
        return 0
    command = "python bench/bench_layers_real.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = [cross_validate(k, args.metric, args.folds, data_dir=args.data) for k in ("conv2d", "linear")]
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# Per-layer {args.metric} on real RAPL measurements (willowec Broadwell-EP), {args.folds}-fold CV "
             f"({stamp} UTC)", "", f"Command: `{command}`", "",
             "| kind | rows (dropped) | THOR MAPE % | THOR median APE % | 95% coverage | FLOPs MAPE % | FLOPs / THOR | fit CPU s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in out:
        lines.append(f"| {r['kind']} | {r['rows']} ({r['dropped']}) | {r['thor_mape']:.1f} | {r['thor_median_ape']:.1f} | "
                     f"{100 * r['coverage95']:.0f}% | {r['flops_mape']:.1f} | {r['flops_over_thor']:.1f}x | "
                     f"{r['fit_cpu_s_median']:.1f} |")
    if args.reference_learners:
        lines += ["", "Reference learners on the same folds (MAPE %; not baselines: how low any model of these "
                  "features gets on this data):", "", "| kind | " + " | ".join(
                      ("gradient boosting", "extra trees", "exact GP")) + " | THOR |", "|---|---|---|---|---|"]
        for r in out:
            ref = reference_learners(r["kind"], args.metric, args.folds, data_dir=args.data)
            r["reference_learners"] = ref
            lines.append(f"| {r['kind']} | " + " | ".join(f"{v:.1f}" for v in ref.values())
                         + f" | {r['thor_mape']:.1f} |")
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
