"""Is a profile's estimate of a layer what that layer's own probe measures? Per net and per kind, no whole nets.

    thor-sdk probe --device host --model vgg_small --model gru_small ... --batch-size 16 --out exact.db
    python bench/bench_gp_vs_probes.py --estimator host-torch.json --campaign exact.db \
        --model vgg_small --model gru_small ... --batch-size 16
    python bench/bench_gp_vs_probes.py ... --campaign exact.db --campaign exact2.db   # each probe's median over both
    python bench/bench_gp_vs_probes.py ... --model bench/user_nets.py:ConvAE=1,28,28   # a file's net, its input shape

A device profile estimates a net never probed as the sum of its layers' GP estimates. When that sum
misses the net measured whole, either the GP misses the layers' own probes (interpolation, sampling,
the prior) or the probes miss the layers inside the net (composition: ``bench_composition.py``). This
benchmark separates the first: every layer of each net that the target-driven campaign ``--campaign``
probed exactly is estimated with ``--estimator`` and compared with its probe. Per net: the probes'
sum, the estimates' sum and their ratio, with the three layers furthest off (and their z); per kind and
role: the median estimate over probe and the share of layers whose 95% interval holds the probe.
The estimate includes the profile's whole-model bias (folded into every kind), so a common ratio near
exp(bias) is that bias, not a fault of the GP. Probes are measured when ``--campaign`` was, the profile
when it was: where the estimator records its canary level (``whole_model.canary``) and a probe read the
canary, the probe is put at that level (its value times the estimator's reading over its own, as ``fit`` puts
a profile's samples), so the machine's speed states between the two leave the ratios; ``--as-measured``
compares the raw probes. With ``--campaign`` given more than once, each layer's probe is the median over the
campaigns that probed it (one probe's subtraction on a noisy machine moves 10-25%).
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def exact_probes(estimator, campaigns, level=True):
    """``({probe key: probe value}, {"probes", "levelled"})``: each layer's median over ``campaigns`` (one value per
    campaign that probed it), each put at ``estimator``'s canary level where ``level`` and both it and the
    sample read the canary (see the module docstring)."""
    from thor_sdk.fitting.pipeline import at_campaign_level
    from thor_sdk.harness.protocol import CANARY_VERSION
    from thor_sdk.probes import Probe

    canary = getattr(estimator, "canary", None) if level else None
    at = (canary["canary_s"] if canary and canary.get("version") == CANARY_VERSION and estimator.metric == "time"
          else None)
    values, n, levelled = {}, 0, 0
    for campaign in campaigns:
        samples = campaign.samples(metric=estimator.metric, include_flagged=False)
        if at is not None:  # as ``fit`` puts a profile's samples at its canary level (no reference series here)
            samples, summary = at_campaign_level(samples, (), estimator.metric, at)
            levelled += summary["samples_by_canary"]
        for s in samples:
            values.setdefault(Probe(s["kind"], s["config"], s["batch_size"], s["role"]).key, []).append(s["value"])
        n += len(samples)
    return {k: statistics.median(v) for k, v in values.items()}, {"probes": n, "levelled": levelled}


def _sums(rows):
    """``{"probes_s", "estimates_s", "ratio"}`` of compared layer rows: their probes' and estimates' sums and the
    estimates' over the probes' (None where the probes sum to nothing), per net and per kind alike."""
    probes, ests = sum(r["probe"] for r in rows), sum(r["estimate"] for r in rows)
    return {"probes_s": probes, "estimates_s": ests, "ratio": ests / probes if probes > 0 else None}


def compare(estimator, campaign, models, batch_size, level=True):
    """``{"nets": [...], "kinds": [...], "probes", "levelled"}`` (see the module docstring); ``campaign``: one
    campaign or a list of them; layers without an exact probe are counted in ``unprobed`` and left out of both
    sums."""
    from thor_sdk.evaluate.unseen import Z95
    from thor_sdk.layers import layers_of
    from thor_sdk.probes import Probe

    exact, counts = exact_probes(estimator, campaign if isinstance(campaign, (list, tuple)) else [campaign], level)
    nets, kinds = [], {}
    for m in models:
        rows, unprobed = [], 0
        ref, _, shape = m.partition("=")
        shape = [int(s) for s in shape.split(",")] if shape else None
        for layer in layers_of(ref, input_shape=shape).layers:
            key = Probe(layer["kind"], layer["config"], batch_size, layer["role"]).key
            if key not in exact:
                unprobed += 1
                continue
            est = estimator.estimate([layer], batch_size)["layers"][0]
            row = {"layer": layer["name"], "kind": layer["kind"], "role": layer["role"], "probe": exact[key],
                   "estimate": est["mean"], "std": est["std"],
                   "z": (est["mean"] - exact[key]) / est["std"] if est["std"] > 0 else None}
            rows.append(row)
            kinds.setdefault((layer["kind"], layer["role"]), []).append(row)
        worst = sorted(rows, key=lambda r: -abs(r["estimate"] - r["probe"]))[:3]
        nets.append({"model": m, "layers": len(rows), "unprobed": unprobed, **_sums(rows), "worst": worst})
    by_kind = []
    for (kind, role), rows in sorted(kinds.items()):
        ratios = [r["estimate"] / r["probe"] for r in rows if r["probe"] > 0]
        by_kind.append({"kind": kind, "role": role, "n": len(rows),
                        "median_ratio": statistics.median(ratios) if ratios else None, **_sums(rows),
                        "covered95": sum(abs(r["estimate"] - r["probe"]) <= Z95 * r["std"] for r in rows) / len(rows)})
    return dict({"nets": nets, "kinds": by_kind}, **counts)


def _or_dash(value, spec):
    return "-" if value is None else format(value, spec)


def report(result, command, unit_scale=1e3, unit="ms"):
    where = (f"{result['levelled']} of {result['probes']} probe(s) put at the estimator's canary level"
             if result.get("levelled") else "probes as measured (no canary level applied)")
    lines = ["# A profile's layer estimates vs the same layers' exact probes", "", f"Command: `{command}`", "", where,
             "", "| net | layers probed (not) | probes' sum | estimates' sum | estimate / probes |", "|---|---|---|---|---|"]
    for n in result["nets"]:
        lines.append(f"| {n['model']} | {n['layers']} ({n['unprobed']}) | {n['probes_s'] * unit_scale:.3f} {unit} | "
                     f"{n['estimates_s'] * unit_scale:.3f} {unit} | {_or_dash(n['ratio'], '.2f')} |")
    lines += ["", "Furthest off per net:", ""]
    for n in result["nets"]:
        for r in n["worst"]:
            lines.append(f"- {n['model']} {r['layer']} ({r['kind']}, {r['role']}): probe {r['probe'] * unit_scale:.3f}, "
                         f"estimate {r['estimate'] * unit_scale:.3f} +- {r['std'] * unit_scale:.3f} {unit}, "
                         f"z {_or_dash(r['z'], '+.2f')}")
    lines += ["", "| kind | role | layers | median estimate / probe | probes' sum | estimates' sum | sum over sum | "
              "in the 95% interval |", "|---|---|---|---|---|---|---|---|"]
    for k in result["kinds"]:
        lines.append(f"| {k['kind']} | {k['role']} | {k['n']} | {_or_dash(k['median_ratio'], '.2f')} | "
                     f"{k['probes_s'] * unit_scale:.3f} {unit} | {k['estimates_s'] * unit_scale:.3f} {unit} | "
                     f"{_or_dash(k['ratio'], '.2f')} | {k['covered95']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.campaign import Campaign
    from thor_sdk.store.files import read_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", required=True, help="a device profile's estimator (thor-sdk fit)")
    ap.add_argument("--campaign", action="append", required=True,
                    help="a target-driven campaign of the nets (thor-sdk probe --model); repeatable: each probe's median")
    ap.add_argument("--as-measured", action="store_true", help="compare the probes as measured, not at the canary level")
    ap.add_argument("--model", action="append", required=True,
                    help="a net the campaign probed (repeatable); file.py:Class=3,32,32 with its input shape")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--report", default=None, help="also write the Markdown here")
    args = ap.parse_args(argv)
    if not 1 <= args.batch_size <= 1024:
        raise SystemExit("--batch-size 1..1024")
    est = load_estimator(read_json(args.estimator, "estimator"))
    campaigns = [Campaign.open(path) for path in args.campaign]
    try:
        result = compare(est, campaigns, args.model, args.batch_size, level=not args.as_measured)
    finally:
        for c in campaigns:
            c.close()
    command = "python bench/bench_gp_vs_probes.py " + " ".join(argv if argv is not None else sys.argv[1:])
    scale, unit = (1e3, "ms") if est.metric == "time" else (1.0, "J")
    text = report(result, command, scale, unit)
    print(text)
    if args.report:
        from thor_sdk.store.files import write_text

        write_text(args.report, text)
        write_text(args.report[:-3] + ".json" if args.report.endswith(".md") else args.report + ".json",
                   json.dumps(dict(result, command=command), indent=1) + "\n")


if __name__ == "__main__":
    main()
