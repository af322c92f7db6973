"""``thor-sdk harness run`` (a bundle measured on this machine) and ``harness ingest`` (results into a campaign)."""

import click

from .common import Progress, emit_json, json_option, quiet_option


@click.group("harness")
def cmd():
    """Run a probe bundle here (the reference harness) and ingest a harness's results."""


@cmd.command("run")
@click.argument("bundle", type=click.Path(exists=True))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Results JSON to write.")
@click.option("--threads", type=int, default=None, help="Intra-op threads for onnxruntime (default: its own).")
@quiet_option
@json_option
def run_cmd(bundle, out, threads, quiet, as_json):
    """Measure every probe of BUNDLE (folder or zip) with the shared protocol; sha256 checked first."""
    from thor_sdk.devices.local_harness import run_harness

    bar = None

    def on_probe(i, total, uid):
        nonlocal bar
        if bar is None:
            bar = Progress(total, "measuring probes", quiet=quiet or as_json)
        elif i:
            bar.update(1, label=uid)

    try:
        doc = run_harness(bundle, out, threads=threads, on_probe=on_probe)
    finally:
        if bar is not None:
            bar.update(1)
            bar.close()
    units = doc.get("probes") or {doc.get("bundle"): {"parts": doc["parts"]}}
    if as_json:
        emit_json({"results": out, "bundle": doc["bundle"], "probes": len(units), "metric": doc["metric"]})
        return
    click.echo(f"wrote {out}: {len(units)} probe(s) measured ({doc['metric']})")


@cmd.command("ingest")
@click.argument("results", type=click.Path(dir_okay=False))
@click.option("--bundle", "bundle_path", required=True, type=click.Path(exists=True), help="The bundle that was run.")
@click.option("--campaign", required=True, type=click.Path(dir_okay=False), help="Campaign database to store into.")
@json_option
def ingest_cmd(results, bundle_path, campaign, as_json):
    """Validate RESULTS against the bundle and store each probe's windows and per-layer samples."""
    from thor_sdk.campaign.ingest import ingest_file

    r = ingest_file(results, bundle_path, campaign)
    if as_json:
        emit_json(r)
        return
    if r.get("message"):
        click.echo(r["message"])
        return
    click.echo(f"stored {len(r['probes'])} probe(s), {r['windows']} windows, {r['samples']} samples in {campaign}")
    if r.get("failed"):
        click.echo(f"{len(r['failed'])} probe(s) failed on the device, stored failed with the reason: "
                   f"{', '.join(r['failed'])}; the next `thor-sdk bundle --campaign {campaign}` bundles them again")
