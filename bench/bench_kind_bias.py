"""A tried idea, measured: per-kind context factors learned from a profile's own calibration runs.

    python bench/bench_kind_bias.py --campaign host-torch.db --estimator host-torch.json \
        --results report/results.json [--results ...] [--user-nets user-nets-host-X.json ...] [--ridge 3] [--report F]

Layers measured alone in their probes do not cost what they cost inside a net (``bench_additivity.py``: vgg_small's
convs read 1.11-1.21x their in-context cost). ``thor-sdk profile`` also measures zoo nets whole (its calibration
runs), and ``fit`` corrects a bias common to all kinds when those runs show one. This fits one log factor per kind
instead: each calibration (model, batch size) gives ``r = ln(measured / (estimated x device level))`` and its
estimate's cost share per kind ``s_k``; ``r - median(r) ~ sum_k s_k b_k`` by ridge regression (penalty
``--ridge``; kinds with at least 10% of some calibration net's estimate), and each ``b_k`` is added to that
kind's ``residual_offset``. Both estimators then estimate, nothing re-measured: the held-out rows of ``thor-sdk
evaluate`` results (``bench_rescore.rescore``) and the nets of ``bench_user_nets.py`` results (rebuilt from
``bench/user_nets.py``, ``--unknown-ops approx``). Needs the ``[fit]`` extra; writes the Markdown report only.
"""

import argparse
import copy
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

MIN_SHARE = 0.10


def kind_factors(doc, campaign, ridge):
    """``({kind: b}, pairs)``: per-kind log factors from the campaign's calibration runs, ridge around their median."""
    import numpy as np

    from thor_sdk.fitting.pipeline import CALIBRATION_PREFIX, device_levels
    from thor_sdk.layers.kinds import entry_key
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store import Campaign

    est = load_estimator(doc)
    with Campaign.open(campaign) as c:
        metric = c.meta["metric"]
        runs = c.model_runs()
    levels = device_levels(runs, metric)
    pairs = {}
    for r in runs:
        layers = (r.get("detail") or {}).get("layers")
        if r["model"].startswith(CALIBRATION_PREFIX) and r["metric"] == metric and r["mean"] > 0 and layers:
            level = levels(r.get("created_utc")) if levels else 1.0
            pairs.setdefault((r["model"], r["batch_size"]), (layers, []))[1].append(r["mean"] / level)
    kinds = sorted(doc["kinds"])
    shares, logs = [], []
    for (_, batch), (layers, values) in sorted(pairs.items()):
        e = est.estimate(layers, batch, unknown="approx")
        per = {}
        for row, layer in zip(e["layers"], layers):
            key = entry_key(layer["kind"], layer["config"], batch, doc["kinds"])
            per[key] = per.get(key, 0.0) + row["mean"]
        total = sum(per.values())
        shares.append([per.get(k, 0.0) / total for k in kinds])
        logs.append(math.log(statistics.median(values) / e["layers_total"]["mean"]))
    if len(logs) < 3:
        return {}, len(logs)
    S, y = np.array(shares), np.array(logs)
    used = [i for i in range(len(kinds)) if S[:, i].max() >= MIN_SHARE]
    X = S[:, used]
    b = np.linalg.solve(X.T @ X + ridge * np.eye(len(used)), X.T @ (y - np.median(y)))
    return {kinds[i]: float(v) for i, v in zip(used, b)}, len(logs)


def with_factors(doc, factors):
    out = copy.deepcopy(doc)
    for k, v in factors.items():
        out["kinds"][k]["residual_offset"] += v
    return out


def user_net_scores(results, est):
    """(MAPE %, covered, nets) of a bench_user_nets result's nets estimated again with ``est``."""
    import user_nets

    from thor_sdk.layers import layers_of

    shapes = dict(user_nets.NETS)
    apes, covered = [], 0
    for r in results["rows"]:
        name = r["net"]
        layers = layers_of(getattr(user_nets, name)(), input_shape=list(shapes[name]), unknown_ops="approx").layers
        e = est.estimate(layers, r["batch_size"], unknown="approx")["total"]
        apes.append(abs(e["mean"] - r["measured"]) / r["measured"])
        covered += abs(e["mean"] - r["measured"]) <= 1.96 * e["std"]
    return 100 * sum(apes) / len(apes), covered, len(apes)


def main(argv=None):
    from bench_rescore import load_results, rescore

    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.files import read_json, write_text

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True)
    ap.add_argument("--estimator", required=True, help="the campaign's estimator (thor-sdk fit)")
    ap.add_argument("--results", action="append", default=[], help="thor-sdk evaluate results.json (repeatable)")
    ap.add_argument("--user-nets", action="append", default=[], help="bench_user_nets.py results JSON (repeatable)")
    ap.add_argument("--ridge", type=float, default=3.0)
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not (math.isfinite(args.ridge) and args.ridge > 0):
        raise SystemExit("Error: --ridge must be a positive number")
    doc = read_json(args.estimator, "estimator")
    factors, n = kind_factors(doc, args.campaign, args.ridge)
    plain, biased = load_estimator(doc), load_estimator(with_factors(doc, factors))
    command = "python bench/bench_kind_bias.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = ["# Per-kind context factors from the calibration runs", "", f"Command: `{command}`", "",
             f"{n} calibration (model, batch size) pairs; factors (e^b): "
             + (", ".join(f"{k} {math.exp(v):.3f}" for k, v in factors.items()) or "none"), "",
             "| measurements | nets | as fitted: MAPE % (covered) | with the factors: MAPE % (covered) |",
             "|---|---|---|---|"]
    for path in args.results:
        res = load_results(path)
        a, b = (rescore(res, e)["groups"].get("heldout") for e in (plain, biased))
        if a:
            lines.append(f"| {os.path.basename(os.path.dirname(path))} (held out) | {a['n']} | {a['thor_mape']:.1f} "
                         f"({a['coverage95']:.0%}) | {b['thor_mape']:.1f} ({b['coverage95']:.0%}) |")
    for path in args.user_nets:
        res = read_json(path, "user-nets results")
        (ma, ca, k), (mb, cb, _) = (user_net_scores(res, e) for e in (plain, biased))
        lines.append(f"| {os.path.basename(path)} (user nets) | {k} | {ma:.1f} ({ca}/{k}) | {mb:.1f} ({cb}/{k}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.report:
        write_text(args.report, text)


if __name__ == "__main__":
    main()
