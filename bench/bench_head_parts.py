"""The output kind's estimates against the heads a campaign measured: each layer probe's 1-layer part is one.

    python bench/bench_head_parts.py --campaign host-torch.db --estimator A.json [--estimator B.json] [--report R.md]

A THOR probe of a layer measures its head alone (flatten + Linear(numel -> 10) + cross-entropy, the step's backward
and update) as the part it subtracts; that part is the very model an output probe of that head measures
(``Probe.head_probe``). A profile holds about one per probe, where its own output probes are a handful. Per
estimator: its output estimate for each such head (its batch size, its input size) over the head's measured median,
put at the campaign's level as fit puts samples (``at_campaign_level``), as the median ratio, its 10th and 90th
percentiles, the MAPE and the share inside the estimate's 95% interval, overall and by the head's number of inputs.
An estimator's whole-model bias is in its layer estimates: divide it out (``--unbiased``) to read the output GP alone.
Nothing is measured; the heads are the campaign's.
"""

import argparse
import datetime as dt
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition's report helpers

#: bands of the head's inputs (numel of the layer's output)
BANDS = ((1, 512), (512, 4096), (4096, 32768), (32768, None))


def heads(campaign_path, metric="time"):
    """``[{"batch_size", "in_features", "config", "value", "std"}]``: the campaign's head parts that are output
    probes, at its level (``fitting.pipeline.head_part_samples`` and ``at_campaign_level``)."""
    from thor_sdk.fitting.pipeline import at_campaign_level, head_part_samples
    from thor_sdk.store import Campaign

    with Campaign.open(campaign_path) as c:
        samples, runs = c.samples(metric), c.model_runs()
    derived, _ = at_campaign_level(head_part_samples(samples), runs, metric)
    return [{"batch_size": s["batch_size"], "in_features": s["config"]["in_features"], "config": s["config"],
             "value": s["value"], "std": s["std"]} for s in derived]


def score(estimator, rows, unbiased=False):
    """One estimator's figures over ``rows`` (``heads``'s)."""
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.files import read_json

    doc = read_json(estimator, "estimator")
    est = load_estimator(doc)
    scale = math.exp(-est.whole_model_log_bias) if unbiased else 1.0
    pts = []
    for r in rows:
        got = est.estimate([{"kind": "output", "role": "output", "config": r["config"]}], r["batch_size"])["layers"][0]
        mean, std = got["mean"] * scale, got["std"] * scale
        pts.append((r["in_features"], mean / r["value"], abs(mean - r["value"]) <= 1.96 * std))

    def summary(sel):
        if not sel:
            return None
        ratios = sorted(p[1] for p in sel)
        return {"n": len(sel), "median_ratio": statistics.median(ratios), "p10": ratios[len(ratios) // 10],
                "p90": ratios[(9 * len(ratios)) // 10], "mape": 100.0 * statistics.mean(abs(x - 1) for x in ratios),
                "covered95": sum(1 for p in sel if p[2]) / len(sel)}

    bands = {f"{lo}-{hi or ''}": summary([p for p in pts if p[0] >= lo and (hi is None or p[0] < hi)])
             for lo, hi in BANDS}
    return {"estimator": estimator, "output_samples": ((doc.get("kinds") or {}).get("output") or {}).get("n_samples"),
            "head_part_samples": est.provenance.get("head_part_samples"),
            "all": summary(pts), "bands": {k: v for k, v in bands.items() if v}}


def report(result, command, stamp):
    lines = [f"# The output kind against a campaign's measured heads ({stamp} UTC)", "", f"Command: `{command}`", "",
             f"Campaign: `{result['campaign']}`, {result['heads']} head parts that are output probes (at the "
             f"campaign's level). Ratio: the estimate over the measured head"
             f"{' (the whole-model bias divided out)' if result['unbiased'] else ' (as the estimator gives it)'}. "
             "Nothing measured.", "",
             "| estimator | output samples | heads among them | inputs | heads | median ratio | p10 | p90 | MAPE | "
             "in 95% interval |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in result["estimators"]:
        for band, f in [("all", s["all"])] + list(s["bands"].items()):
            lines.append(f"| `{s['estimator']}` | {s['output_samples']} | {s['head_part_samples'] or 0} | {band} | "
                         f"{f['n']} | {f['median_ratio']:.2f} | {f['p10']:.2f} | {f['p90']:.2f} | {f['mape']:.1f}% | "
                         f"{f['covered95']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    from bench_composition import check_report, save_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="a campaign database (its heads are read, never written)")
    ap.add_argument("--estimator", action="append", required=True, help="an estimator file (repeatable)")
    ap.add_argument("--metric", default="time", choices=("time", "energy"))
    ap.add_argument("--unbiased", action="store_true", help="divide each estimator's whole-model bias out")
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/head-parts-*.md)")
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    for p in [args.campaign] + args.estimator:
        if not os.path.isfile(p):
            raise SystemExit(f"no such file: {p}")
    rows = heads(args.campaign, args.metric)
    if not rows:
        raise SystemExit(f"{args.campaign}: no head part is an output probe (no layer probe measured, or all swept)")
    command = "python bench/bench_head_parts.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"campaign": args.campaign, "heads": len(rows), "unbiased": args.unbiased,
              "estimators": [score(e, rows, args.unbiased) for e in args.estimator]}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, stamp), result, command, args.report, f"head-parts-host-{stamp}")


if __name__ == "__main__":
    main()
