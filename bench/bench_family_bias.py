"""One common calibration bias against one per kind family (convolutions, the rest), on measurements already taken.

    python bench/bench_family_bias.py --campaign host-torch.db [--campaign ...] --results eval/results.json \
        [--results ...] [--pool] [--user-nets bench/results/user-nets-host-*.json ...] [--report R.md]

Each campaign is fitted twice with this tree's ``fit`` (``thor_sdk.api.fit``): once with a common whole-model bias
only (``family=False``), once with the bias per kind family (``family_biases``). Both estimators then
estimate the nets of earlier evaluations (``evaluate``'s ``results.json``: its held-out group, through
``bench_rescore.rescore``; ``--pool``: each net's median over all of them, ``bench_rescore.pool_results``) and
of earlier user-net runs (``bench_user_nets.py``'s JSON, its nets rebuilt from ``bench/user_nets.py``); nothing
is measured, so a difference between the two is the calibration's alone. Per (campaign, measurement file): THOR's MAPE as estimated, at the device level measured around each net (held out),
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

def fit_both(campaign_path):
    """``{"common": estimator dict, "family": estimator dict}`` of one campaign (``thor_sdk.api.fit``)."""
    from thor_sdk.api import fit

    return {"common": fit(campaign_path, family=False), "family": fit(campaign_path, family=True)}


def score_results(est, doc):
    """Held-out MAPE (as estimated, at the level, at the best single scale) and coverage of ``est`` on an
    evaluation's loaded ``results.json``, or None without held-out nets."""
    from bench_rescore import rescore

    from thor_sdk.evaluate.unseen import best_scale_mape

    got = rescore(doc, est)
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


def run(campaigns, results=(), user_runs=(), pool=False):
    from bench_rescore import load_results, pool_results

    from thor_sdk.runtime import load_estimator

    loaded = [(p, load_results(p)) for p in results]
    if pool and loaded:
        loaded = [(f"median of {len(loaded)} runs", pool_results(loaded))]

    out = []
    for c in campaigns:
        docs = fit_both(c)
        ests = {k: load_estimator(d) for k, d in docs.items()}
        wm = docs["family"]["whole_model"]
        entry = {"campaign": c, "common_log_bias": docs["common"]["whole_model"].get("log_bias", 0.0),
                 "family_log_bias": wm.get("log_bias", 0.0), "kind_log_bias": wm.get("kind_log_bias", {}), "rows": []}
        for kind, items, scorer in (("held out", loaded, score_results),
                                    ("user nets", [(p, p) for p in user_runs], score_user_nets)):
            for p, what in items:
                a, b = scorer(ests["common"], what), scorer(ests["family"], what)
                if a and b:
                    entry["rows"].append({"what": kind, "measurements": p, "common": a, "family": b})
        out.append(entry)
    return {"campaigns": out}


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def report(result, command, stamp):
    lines = [f"# Calibration bias: one common, or one per kind family ({stamp} UTC)", "", f"Command: `{command}`", "",
             "Each campaign fitted twice by this tree; the same measurements estimated by both (nothing measured). "
             "MAPE %: as estimated / at the level measured around each net / at the best single scale; coverage of "
             "the 95% intervals.", "",
             "| campaign | biases (common; by kind family) | nets | measurements | n | common | family | coverage |",
             "|---|---|---|---|---|---|---|---|"]
    tally = {"mape": [0, 0], "best_scale": [0, 0]}
    for c in result["campaigns"]:
        first = {}  # each distinct family bias, named by the first of its kinds
        for k, v in sorted(c["kind_log_bias"].items()):
            first.setdefault(v, k)
        biases = f"{c['common_log_bias']:+.3f}; " + (
            ", ".join(f"{k} {v:+.3f}" for v, k in sorted(first.items(), key=lambda kv: kv[1])) if first else "none")
        for r in c["rows"]:
            a, b = r["common"], r["family"]
            for k in tally:
                tally[k][0] += b[k] < a[k]
                tally[k][1] += 1
            lines.append(f"| `{c['campaign']}` | {biases} | {r['what']} | `{r['measurements']}` | {a['n']} | "
                         f"{_fmt(a['mape'])} / {_fmt(a['at_level'])} / {_fmt(a['best_scale'])} | "
                         f"{_fmt(b['mape'])} / {_fmt(b['at_level'])} / {_fmt(b['best_scale'])} | "
                         f"{a['coverage95']:.0%} -> {b['coverage95']:.0%} |")
    lines += ["", f"Family lower: as estimated in {tally['mape'][0]} of {tally['mape'][1]}; at the best single scale in "
              f"{tally['best_scale'][0]} of {tally['best_scale'][1]}."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    from bench_composition import check_report, save_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="append", required=True, help="a campaign database (read, never written)")
    ap.add_argument("--results", action="append", default=[], help="an evaluation's results.json (its held-out nets)")
    ap.add_argument("--pool", action="store_true", help="score against each net's median over every --results")
    ap.add_argument("--user-nets", action="append", default=[], help="a bench_user_nets.py JSON")
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/family-bias-*.md)")
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    missing = [p for p in args.campaign + args.results + args.user_nets if not os.path.isfile(p)]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    if not args.results and not args.user_nets:
        raise SystemExit("give measurements: --results and/or --user-nets")
    if args.pool and len(args.results) < 2:
        raise SystemExit("--pool needs at least two --results")
    command = "python bench/bench_family_bias.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = run(args.campaign, args.results, args.user_nets, pool=args.pool)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, stamp), result, command, args.report, f"family-bias-host-{stamp}")


if __name__ == "__main__":
    main()
