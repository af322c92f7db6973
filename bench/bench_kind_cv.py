"""Per-layer accuracy on configs a profile never probed: k-fold cross-validation per kind, fitted as ``fit`` fits.

    python bench/bench_kind_cv.py --campaign host-torch.db [--campaign nocanary.db ...] [--kinds conv2d,gru] \
        [--folds 5] [--report F]

A held-out *net* tests the sum of its layers; this tests each layer kind apart, on configs of its own kind
that the fold never saw. For each campaign: the samples ``fit`` fits on (``fitting.pipeline.fit_samples``: at
the campaign's level, the canary's where the samples read it, heads included), per kind (``model_key``) with at
least 2 x ``--folds`` samples, in seeded folds; each fold's GP (``fit_kind`` with the campaign's drift as its
extra noise) predicts the held-out samples (``thor_sdk.fitting.crossval``, what ``thor-sdk fit --cv`` stores).
Per kind: samples, MAPE, median APE, median ln(measured / estimated) (a lean), and the share of held-out samples
inside the 95% interval (the GP's std and the sample's own standard error combined). Per campaign: the mean over kinds, and MAPE and coverage pooled over every
held-out sample. A sample at or below zero (a subtraction within its noise) has no relative error: counted
apart, and a tiny positive one (a flatten of microseconds) can read 10x: the pooled MAPE and the plain mean over
kinds carry those (profile 66's 28 flatten samples: 1,235%). The summary's **zoo-weighted median APE** weighs each
kind's median APE by its weight in a profile (its share of the zoo's cost, ``campaign.prior.kind_share``; a
structural variant such as ``conv2d:grouped`` by its base kind's), as a whole net's error would weigh it. Campaigns side by side, e.g. one and its copy derived again without the canary (``bench_canary.py
rederive --no-canary``): the same measurements, levelled two ways. Needs the ``[fit]`` extra; nothing timed.
"""

import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def campaign_cv(path, kinds=None, folds=5, seed=0):
    """``{"campaign", "metric", "canary_s", "drift_log_std", "kinds": {key: cv_kind's}, "summary"}`` for one
    campaign file (``fitting.crossval.cross_validate`` on ``fit_samples``'s samples); ``kinds``: the keys to
    score (default: every kind with enough samples)."""
    from thor_sdk.campaign.prior import kind_share, load_prior
    from thor_sdk.fitting.crossval import cross_validate
    from thor_sdk.fitting.pipeline import fit_samples
    from thor_sdk.layers.kinds import base_kind
    from thor_sdk.store import Campaign

    with Campaign.open(path) as c:
        metric = c.meta["metric"]
        samples, runs = c.samples(), c.model_runs()
    prep = fit_samples(samples, runs, metric, [os.path.basename(path)])
    cv = cross_validate(prep["samples"], prep["drift_var"], folds, seed, kinds)
    out, pooled, summary = cv["kinds"], cv["pooled"], None
    if out:
        zoo = load_prior()["kinds"]
        share = {k: kind_share(zoo[base_kind(k)]) if base_kind(k) in zoo else 0.0 for k in out}
        total = sum(share.values())
        summary = {"kinds": len(out), "mean_kind_mape": statistics.mean(v["mape"] for v in out.values()),
                   "zoo_weighted_median_ape": (sum(out[k]["median_ape"] * share[k] for k in out) / total
                                               if total > 0 else None),
                   "pooled_mape": pooled["mape"], "pooled_median_ape": pooled["median_ape"],
                   "heldout": pooled["heldout"], "pooled_covered95": pooled["covered95"]}
    return {"campaign": os.path.basename(path), "metric": metric, "canary_s": prep["canary_s"],
            "drift_log_std": math.sqrt(prep["drift_var"]), "kinds": out, "summary": summary}


def report(results, command):
    """Markdown: one column per campaign, ``MAPE / coverage`` per kind, the summaries below."""
    keys = sorted({k for r in results for k in r["kinds"]})
    lines = ["# Per-layer k-fold cross-validation: configs each fold never saw", "", f"Command: `{command}`", "",
             "Each cell: samples, MAPE of the held-out samples (their median APE), the share inside their 95% interval, "
             "and the median ln(measured / estimated).", "",
             "| kind | " + " | ".join(f"{r['campaign']}: n, MAPE (median), 95%, lean" for r in results) + " |",
             "|---|" + "---|" * len(results)]
    for k in keys:
        cells = []
        for r in results:
            v = r["kinds"].get(k)
            cells.append("-" if v is None else f"{v['n']}, {v['mape']:.1f}% ({v['median_ape']:.1f}%), "
                                               f"{v['covered95']:.0%}, {v['median_ln']:+.3f}")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines += ["", "| campaign | canary level | sample drift (ln) | kinds | zoo-weighted median APE | mean of kinds' MAPE | "
                  "pooled MAPE (median APE) | pooled 95% coverage |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        s = r["summary"]
        canary = "-" if not r["canary_s"] else f"{r['canary_s'] * 1e3:.3f} ms"
        if s is None:
            lines.append(f"| {r['campaign']} | {canary} | {r['drift_log_std']:.3f} | 0 | - | - | - | - |")
            continue
        zoo = "-" if s["zoo_weighted_median_ape"] is None else f"{s['zoo_weighted_median_ape']:.1f}%"
        lines.append(f"| {r['campaign']} | {canary} | {r['drift_log_std']:.3f} | {s['kinds']} | {zoo} | "
                     f"{s['mean_kind_mape']:.1f}% | {s['pooled_mape']:.1f}% ({s['pooled_median_ape']:.1f}%; "
                     f"{s['heldout']} samples) | {s['pooled_covered95']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="append", required=True, help="a campaign (SQLite); repeatable")
    ap.add_argument("--kinds", default=None, help="comma-separated kinds (default: every kind with enough samples)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--report", default=None, help="also write the Markdown here (and its .json beside it)")
    args = ap.parse_args(argv)
    if not 2 <= args.folds <= 20:
        raise SystemExit("--folds 2..20")
    for path in args.campaign:
        if not os.path.isfile(path):
            raise SystemExit(f"no campaign file {path}")
    kinds = [k for k in args.kinds.split(",") if k] if args.kinds else None
    results = [campaign_cv(path, kinds, args.folds) for path in args.campaign]
    command = "python bench/bench_kind_cv.py " + " ".join(argv if argv is not None else sys.argv[1:])
    publish(report(results, command), {"command": command, "campaigns": results}, args.report)


def publish(text, doc, out=None):
    """Print the Markdown ``text``; with ``out``, also write it there and ``doc`` as JSON beside it (``.json``)."""
    print(text)
    if out:
        from thor_sdk.store.files import write_text

        write_text(out, text)
        write_text(out[:-3] + ".json" if out.endswith(".md") else out + ".json", json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
