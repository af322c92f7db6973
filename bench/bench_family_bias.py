"""One common calibration bias against one per kind family (convolutions, the rest), on measurements already taken.

    python bench/bench_family_bias.py --campaign host-torch.db [--campaign ...] --results eval/results.json \
        [--results ...] [--user-nets bench/results/user-nets-host-*.json ...] [--report R.md]

Each campaign is fitted twice with this tree's ``fit`` (``thor_sdk.api.fit``): once with a common whole-model bias
only (``family=False``), once with the bias per kind family (``family_bias``); other ``fit`` options tried the same
way go in ``VARIANTS`` (``--compare``; ``bench/results/sample-levels-host-20261129-*.md`` came from a ``levels``
variant of commit 3acf092, samples left as measured where the reference's changes did not last, not taken). Both
estimators then estimate the nets of earlier evaluations (``evaluate``'s ``results.json``: its held-out group,
through ``bench_rescore.rescore``) and of earlier user-net runs (``bench_user_nets.py``'s JSON, its nets rebuilt
from ``bench/user_nets.py``); nothing is measured, so a difference between the two is the fit option's alone. Per
(campaign, measurement file): THOR's MAPE as estimated, at the device level measured around each net (held out),
at the best single scale of all its estimates (a machine that ran uniformly faster or slower than when profiled
moves every estimate alike: this reads what is left), and the 95% coverage.
"""

import argparse
import datetime as dt
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: what ``--compare`` fits each campaign with: (label, ``thor_sdk.api.fit`` options) for A, then B, and the title
VARIANTS = {
    "family": (("common", {"family": False}), ("family", {"family": True}),
               "Calibration bias: one common, or one per kind family"),
}


def fit_both(campaign_path, compare="family"):
    """``{label A: estimator dict, label B: estimator dict}`` of one campaign (``VARIANTS[compare]``)."""
    from thor_sdk.api import fit

    return {label: fit(campaign_path, **options) for label, options in VARIANTS[compare][:2]}


def score_results(est, path):
    from bench_rescore import load_results, rescore

    from thor_sdk.evaluate.unseen import best_scale_mape

    got = rescore(load_results(path), est)
    rows = [r for r in got["rows"] if r["group"] == "heldout"]
    if not rows:
        return None
    g = got["groups"]["heldout"]
    return {"n": len(rows), "mape": g["thor_mape"], "flops_mape": g["flops_mape"],
            "at_level": g["thor_level_adjusted_mape"], "best_scale": best_scale_mape([(r["measured"], r["thor"])
                                                                                      for r in rows]),
            "coverage95": g["coverage95"]}


def score_user_nets(est, path):
    from user_nets import NETS

    import user_nets
    from thor_sdk.api import estimate
    from thor_sdk.evaluate.unseen import best_scale_mape

    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    shapes = dict(NETS)
    pairs, covered = [], 0
    for row in doc["rows"]:
        name = row["model"].split(":")[-1].split(" ")[0]
        if name not in shapes:
            continue
        e = estimate(est, getattr(user_nets, name)(), batch_size=row["batch_size"], input_shape=list(shapes[name]),
                     unknown_ops="approx")
        pairs.append((row["measured"], e["total"]["mean"]))
        covered += abs(e["total"]["mean"] - row["measured"]) <= 1.96 * e["total"]["std"]
    if not pairs:
        return None
    return {"n": len(pairs), "mape": 100.0 * statistics.mean(abs(e / m - 1.0) for m, e in pairs), "at_level": None,
            "best_scale": best_scale_mape(pairs), "coverage95": covered / len(pairs)}


def run(campaigns, results=(), user_runs=(), compare="family"):
    from thor_sdk.runtime import load_estimator

    (a, _), (b, _), _ = VARIANTS[compare]
    out = []
    for c in campaigns:
        docs = fit_both(c, compare)
        ests = {k: load_estimator(d) for k, d in docs.items()}
        wm = docs[b]["whole_model"]
        entry = {"campaign": c, "a_log_bias": docs[a]["whole_model"].get("log_bias", 0.0),
                 "b_log_bias": wm.get("log_bias", 0.0), "kind_log_bias": wm.get("kind_log_bias", {}),
                 "sample_levels": {k: d["provenance"].get("sample_levels") for k, d in docs.items()}, "rows": []}
        for kind, paths, scorer in (("held out", results, score_results), ("user nets", user_runs, score_user_nets)):
            for p in paths:
                ra, rb = scorer(ests[a], p), scorer(ests[b], p)
                if ra and rb:
                    entry["rows"].append({"what": kind, "measurements": p, "a": ra, "b": rb})
        out.append(entry)
    return {"compare": compare, "labels": [a, b], "campaigns": out}


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def report(result, command, stamp):
    a, b = result["labels"]
    lines = [f"# {VARIANTS[result['compare']][2]} ({stamp} UTC)", "", f"Command: `{command}`", "",
             "Each campaign fitted twice by this tree; the same measurements estimated by both (nothing measured). "
             "MAPE %: as estimated / at the level measured around each net / at the best single scale; coverage of "
             "the 95% intervals.", "",
             f"| campaign | biases ({a}; {b}: other, conv) | nets | measurements | n | {a} | {b} | coverage |",
             "|---|---|---|---|---|---|---|---|"]
    tally = {"mape": [0, 0], "best_scale": [0, 0]}
    for c in result["campaigns"]:
        conv = sorted(set(c["kind_log_bias"].values()))
        biases = f"{c['a_log_bias']:+.3f}; {c['b_log_bias']:+.3f}, " + (
            ", ".join(f"{v:+.3f}" for v in conv) if conv else "none")
        for r in c["rows"]:
            ra, rb = r["a"], r["b"]
            for k in tally:
                tally[k][0] += rb[k] < ra[k]
                tally[k][1] += 1
            lines.append(f"| `{c['campaign']}` | {biases} | {r['what']} | `{r['measurements']}` | {ra['n']} | "
                         f"{_fmt(ra['mape'])} / {_fmt(ra['at_level'])} / {_fmt(ra['best_scale'])} | "
                         f"{_fmt(rb['mape'])} / {_fmt(rb['at_level'])} / {_fmt(rb['best_scale'])} | "
                         f"{ra['coverage95']:.0%} -> {rb['coverage95']:.0%} |")
    lines += ["", f"{b.capitalize()} lower: as estimated in {tally['mape'][0]} of {tally['mape'][1]}; at the best single "
              f"scale in {tally['best_scale'][0]} of {tally['best_scale'][1]}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    from bench_composition import save_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="append", required=True, help="a campaign database (read, never written)")
    ap.add_argument("--results", action="append", default=[], help="an evaluation's results.json (its held-out nets)")
    ap.add_argument("--user-nets", action="append", default=[], help="a bench_user_nets.py JSON")
    ap.add_argument("--compare", choices=sorted(VARIANTS), default="family", help="which fit option (default family)")
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/<compare>-bias-*.md)")
    args = ap.parse_args(argv)
    missing = [p for p in args.campaign + args.results + args.user_nets if not os.path.isfile(p)]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    if not args.results and not args.user_nets:
        raise SystemExit("give measurements: --results and/or --user-nets")
    command = "python bench/bench_family_bias.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = run(args.campaign, args.results, args.user_nets, args.compare)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, stamp), result, command, args.report, f"{args.compare}-bias-host-{stamp}")


if __name__ == "__main__":
    main()
