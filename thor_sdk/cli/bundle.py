"""``thor-sdk bundle``: a campaign's probes still to measure (or a new campaign planned for a model), exported into a bundle a device runs."""

import os

import click

from .common import Progress, emit_json, json_option, quiet_option, trainable_option, unknown_ops_option


def _nothing_left(campaign):
    """The one line for a campaign with no probe left to measure: what there is to do instead."""
    from thor_sdk.store import Campaign

    with Campaign.open(campaign) as c:
        meta, counts = c.meta, c.status_counts()
    targets = ", ".join(t["name"] for t in meta.get("targets") or []) or "?"
    sizes = ", ".join(str(b) for b in meta.get("batch_sizes") or []) or "?"
    return (f"{campaign}: every probe is measured ({counts.get('done', 0)} done), nothing to bundle; to measure the same "
            f"layers on another device plan a new campaign: thor-sdk bundle --model MODEL --batch-size B --out DIR "
            f"--campaign NEW.db (this one's targets: {targets}; batch sizes {sizes})")


@click.command("bundle")
@click.option("--campaign", type=click.Path(dir_okay=False),
              help="Campaign database: bundle its probes still to measure; with --model, the new campaign to plan "
                   "(default: OUT.db).")
@click.option("--model", "models", multiple=True,
              help="Plan a new campaign for these model(s) (any form `estimate` takes), nothing measured, and bundle "
                   "its probes: for a device thor-sdk cannot drive.")
@click.option("--batch-size", "batch_sizes", type=int, multiple=True, help="With --model: batch size(s) (default 32).")
@click.option("--metric", type=click.Choice(["time", "energy"]), default=None, help="With --model (default time).")
@click.option("--device-name", help="With --model: the device's name recorded in the campaign (default offline).")
@click.option("--input-shape", help="With --model: per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--min-rounds", type=int, default=None, help="With --model: rounds measured at least (default 5).")
@click.option("--max-rounds", type=int, default=None, help="With --model: rounds measured at most (default 15).")
@click.option("--window-s", type=float, default=None, help="With --model: minimum seconds per window (default 0.05).")
@click.option("--cv-target", type=float, default=None, help="With --model: stop repeating below this CV (0.03).")
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript"]), default="onnx", show_default=True)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="New bundle folder.")
@click.option("--zip", "make_zip", is_flag=True, help="Also write OUT.zip.")
@click.option("--all", "include_done", is_flag=True, help="Bundle every probe, not only those still to measure.")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd", show_default=True)
@unknown_ops_option
@trainable_option
@quiet_option
@json_option
def cmd(campaign, models, batch_sizes, metric, device_name, input_shape, min_rounds, max_rounds, window_s, cv_target,
        fmt, out, make_zip, include_done, optimizer, unknown_ops, trainable, quiet, as_json):
    """Export the probes a campaign still has to measure into a bundle a device harness runs; with --model,
    plan that campaign first (nothing measured)."""
    from thor_sdk.errors import UsageError
    from thor_sdk.exporters.bundle import bundle_campaign, check_bundle_out

    planning = bool(models)
    if not planning:
        given = [o for o, v in (("--batch-size", batch_sizes), ("--metric", metric), ("--device-name", device_name),
                                ("--input-shape", input_shape), ("--min-rounds", min_rounds),
                                ("--max-rounds", max_rounds), ("--window-s", window_s), ("--cv-target", cv_target),
                                ("--trainable", trainable))
                 if v not in (None, ())]
        if given:
            raise UsageError(f"{', '.join(given)} plan a new campaign: give --model too (a campaign's own settings "
                             "are used when bundling it)")
        if not campaign:
            raise UsageError("give --campaign C.db (bundle its probes still to measure) or --model X --batch-size B "
                             "(plan a new campaign and bundle it)")
    zip_path = out.rstrip("/\\") + ".zip" if make_zip else None
    planned = None
    if planning:
        from thor_sdk import __version__
        from thor_sdk.api import _check_batch_sizes
        from thor_sdk.campaign.targets import plan_campaign
        from thor_sdk.store.campaign import check_new

        from .probe import settings_from

        campaign = campaign or out.rstrip("/\\") + ".db"
        if os.path.lexists(campaign):
            raise UsageError(f"campaign {campaign} exists: bundle its remaining probes with `thor-sdk bundle --campaign "
                             f"{campaign} --out DIR` (no --model), or plan into another --campaign")
        check_new(campaign)
        check_bundle_out(out)  # before planning: a bad --out never leaves a campaign behind
        settings = settings_from(min_rounds, max_rounds, window_s, cv_target)
        device = {"name": device_name or "offline", "kind": "offline"}
        planned = plan_campaign(campaign, models, _check_batch_sizes(batch_sizes or (32,)), metric=metric or "time",
                                settings=settings, runtime="onnxruntime" if fmt == "onnx" else "torchscript",
                                device=device, input_shape=input_shape, unknown_ops=unknown_ops,
                                producer=f"thor-sdk {__version__}", trainable=trainable or None)
    bar = None
    state = {}

    def progress(done, total, label):
        nonlocal bar
        if bar is None:
            bar = Progress(total, "exporting probe parts", quiet=quiet or as_json)
        bar.update(1)
        state["last"] = label

    try:
        m = bundle_campaign(campaign, out, fmt=fmt, zip_path=zip_path, include_done=include_done,
                            optimizer=optimizer, progress=progress)
    except UsageError as e:
        if planned:  # the campaign planned above has no bundle: nothing is left half made
            os.unlink(campaign)
            raise
        if "no planned probes left" in str(e):
            raise UsageError(_nothing_left(campaign)) from None
        raise
    except BaseException:
        if planned:
            os.unlink(campaign)
        raise
    finally:
        if bar is not None:
            bar.close()
    summary = {"bundle": out, "zip": zip_path, "id": m["id"], "campaign": campaign, "planned": bool(planned),
               "probes": len(m["probes"]), "parts": sum(len(p["parts"]) for p in m["probes"]),
               "files": len(m["files"]), "bytes": sum(f["bytes"] for f in m["files"]), "format": fmt,
               "metric": m["metric"]}
    if as_json:
        emit_json(summary)
        return
    if planned:
        click.echo(f"planned {campaign}: {planned['probes']} probes, nothing measured")
    click.echo(f"wrote {out}: {summary['probes']} probes, {summary['parts']} parts in {summary['files']} files "
               f"({summary['bytes'] / 1e6:.1f} MB, {fmt})" + (f"; {zip_path}" if zip_path else ""))
    if include_done:
        from thor_sdk.store import Campaign

        with Campaign.open(campaign) as c:
            n_done = c.status_counts().get("done", 0)
        if n_done:
            click.echo(f"note: {n_done} of these probes are already measured in {campaign}; their results are not "
                       "stored there again (measured data is never overwritten)")
    click.echo(f"run it: thor-sdk harness run {out} --out results.json; then "
               f"thor-sdk harness ingest results.json --bundle {out} --campaign {campaign}")
