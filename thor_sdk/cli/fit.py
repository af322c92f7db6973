"""``thor-sdk fit``: campaigns and/or a samples CSV of one device and runtime -> one estimator JSON."""

import click

from .common import emit_json, json_option, table


@click.command("fit")
@click.argument("campaigns", nargs=-1, type=click.Path(dir_okay=False))
@click.option("--samples", "samples_csv", type=click.Path(dir_okay=False),
              help="Per-layer samples measured elsewhere (CSV; see docs/samples-csv.md).")
@click.option("--metric", type=click.Choice(["time", "energy"]), help="Metric to fit (default: the campaign's).")
@click.option("--runtime", help="What ran the steps of a samples CSV (default torch; campaigns record their own).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Estimator JSON to write.")
@click.option("--cv", "cv_folds", type=click.IntRange(2, 20), default=None,
              help="Also cross-validate each kind on this many folds: how it reads configs it never saw (MAPE, "
                   "95%% coverage; about that many more fits per kind), kept in the estimator's provenance.")
@json_option
def cmd(campaigns, samples_csv, metric, runtime, out, cv_folds, as_json):
    """Fit one cost model per layer kind from CAMPAIGNS (of one device and runtime) and/or --samples."""
    import os

    from thor_sdk.api import fit

    doc = fit(list(campaigns) or None, samples_csv=samples_csv, out=out, metric=metric, runtime=runtime,
              cv_folds=cv_folds)
    prov = doc.get("provenance", {})
    wm = doc.get("whole_model", {})
    summary = {"estimator": out, "bytes": os.path.getsize(out), "device": doc["device"].get("name"),
               "runtime": doc["runtime"], "metric": doc["metric"], "unit": doc["unit"],
               "kinds": prov.get("n_samples", {}), "flagged_excluded": prov.get("flagged_excluded", []),
               "floored": {k: v["fit"]["floored_samples"] for k, v in doc["kinds"].items()
                           if v.get("fit", {}).get("floored_samples")},
               "noisy_samples": prov.get("noisy_samples", {}),
               "warm_forward_only_samples": prov.get("warm_forward_only_samples", 0),
               "head_part_samples": prov.get("head_part_samples", 0),
               "sample_levels": prov.get("sample_levels"),
               "whole_model_rel_std": wm.get("rel_std"), "whole_model_source": wm.get("source"),
               "unit_per_flop": doc["flops_baseline"].get("unit_per_flop")}
    cv = prov.get("cross_validation")
    if cv:
        summary["cross_validation"] = cv
    if as_json:
        emit_json(summary)
        return
    rows, head = [], ["kind", "samples", "mean-fn error", "inducing", "floored"]
    for k, n in summary["kinds"].items():
        rows.append([k, n, f"{100 * doc['kinds'][k]['fit'].get('mean_function_mape', 0):.0f}%",
                     len(doc["kinds"][k]["inducing"]), doc["kinds"][k]["fit"].get("floored_samples", 0)])
        if cv:
            c = cv["kinds"].get(k)
            rows[-1] += ["-", "-"] if c is None else [f"{c['mape']:.1f}% ({c['median_ape']:.1f}%)",
                                                      f"{c['covered95']:.0%}"]
    if cv:
        head += [f"{cv['folds']}-fold CV MAPE (median)", "CV in 95%"]
    click.echo(table(rows, head))
    if cv and cv["pooled"]:
        p = cv["pooled"]
        click.echo(f"\ncross-validated over {p['heldout']} held-out samples: MAPE {p['mape']:.1f}% (median APE "
                   f"{p['median_ape']:.1f}%), {p['covered95']:.0%} inside their 95% intervals")
    click.echo(f"\nwrote {out} ({summary['bytes']} bytes): {summary['device']} / {summary['runtime']}, "
               f"{summary['metric']}; whole-model rel std {100 * (wm.get('rel_std') or 0):.1f}% ({wm.get('source')})")
    if summary["head_part_samples"]:
        click.echo(f"output: {summary['head_part_samples']} of its samples are the layer probes' 1-layer parts "
                   "(each the head an output probe measures)")
    for f in summary["flagged_excluded"]:
        click.echo(f"excluded (flagged): {f['kind']}/{f['role']} {f['config']}: {f['reason']}")
    for k, n in summary["floored"].items():
        click.echo(f"{k}: {n} sample(s) at or below their noise were floored (a layer cannot cost less than nothing)")
    if summary["warm_forward_only_samples"]:
        click.echo(f"{summary['warm_forward_only_samples']} forward-only sample(s) were measured warm, before probes "
                   "swept the caches: fine-tunes (frozen layers) estimated from them read high; profile again to "
                   "sweep them", err=True)
    for k, d in summary["noisy_samples"].items():
        click.echo(f"{k}: rests on {d['noisy']} noisy sample(s) of {d['samples']} "
                   f"({'; '.join(d['reasons'][:1])}): its estimates are less reliable", err=True)
