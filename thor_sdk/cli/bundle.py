"""``thor-sdk bundle``: the probes a campaign still has to measure, exported into a bundle a device runs."""

import click

from .common import Progress, emit_json, json_option, quiet_option


@click.command("bundle")
@click.option("--campaign", required=True, type=click.Path(dir_okay=False), help="Campaign database (thor-sdk probe).")
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), default="onnx", show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New bundle folder.")
@click.option("--zip", "make_zip", is_flag=True, help="Also write OUT.zip.")
@click.option("--all", "include_done", is_flag=True, help="Bundle every probe, not only those still to measure.")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd", show_default=True)
@quiet_option
@json_option
def cmd(campaign, fmt, out, make_zip, include_done, optimizer, quiet, as_json):
    """Export the probes a campaign still has to measure into a bundle a device harness runs."""
    from thor_sdk.exporters.bundle import bundle_campaign

    bar = None
    state = {}

    def progress(done, total, label):
        nonlocal bar
        if bar is None:
            bar = Progress(total, "exporting probe parts", quiet=quiet or as_json)
        bar.update(1)
        state["last"] = label

    zip_path = out.rstrip("/\\") + ".zip" if make_zip else None
    try:
        m = bundle_campaign(campaign, out, fmt=fmt, zip_path=zip_path, include_done=include_done,
                            optimizer=optimizer, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    summary = {"bundle": out, "zip": zip_path, "id": m["id"], "probes": len(m["probes"]),
               "parts": sum(len(p["parts"]) for p in m["probes"]), "files": len(m["files"]),
               "bytes": sum(f["bytes"] for f in m["files"]), "format": fmt, "metric": m["metric"]}
    if as_json:
        emit_json(summary)
        return
    click.echo(f"wrote {out}: {summary['probes']} probes, {summary['parts']} parts in {summary['files']} files "
               f"({summary['bytes'] / 1e6:.1f} MB, {fmt})" + (f"; {zip_path}" if zip_path else ""))
    click.echo(f"run it: thor-sdk harness run {out} --out results.json; then "
               f"thor-sdk harness ingest results.json --bundle {out} --campaign {campaign}")
