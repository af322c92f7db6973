import click

from .common import emit_json, json_option, table


@click.command("fit")
@click.argument("campaign", required=False, type=click.Path(dir_okay=False))
@click.option("--samples", "samples_csv", type=click.Path(dir_okay=False),
              help="Per-layer samples measured elsewhere (CSV; see docs/samples-csv.md).")
@click.option("--metric", type=click.Choice(["time", "energy"]), help="Metric to fit (default: the campaign's).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Estimator JSON to write.")
@json_option
def cmd(campaign, samples_csv, metric, out, as_json):
    """Fit one Gaussian Process per layer kind from CAMPAIGN (and/or --samples) into a JSON estimator."""
    import os

    from thor_sdk.api import fit

    doc = fit(campaign, samples_csv=samples_csv, out=out, metric=metric)
    prov = doc.get("provenance", {})
    summary = {"estimator": out, "bytes": os.path.getsize(out), "metric": doc["metric"], "unit": doc["unit"],
               "kinds": prov.get("n_samples", {}), "flagged_excluded": prov.get("flagged_excluded", []),
               "unit_per_flop": doc["flops_baseline"].get("unit_per_flop")}
    if as_json:
        emit_json(summary)
        return
    click.echo(table([(k, n, doc["kinds"][k].get("target_transform", "")) for k, n in summary["kinds"].items()],
                     ["kind", "samples", "target"]))
    click.echo(f"\nwrote {out} ({summary['bytes']} bytes)")
    for f in summary["flagged_excluded"]:
        click.echo(f"excluded (flagged): {f['kind']}/{f['role']} {f['config']}: {f['reason']}")
