import click

from .common import emit_json, json_option, quiet_option, table
from .probe import protocol_options, settings_from


@click.command("evaluate")
@click.option("--device", default="host", show_default=True)
@click.option("--model", "models", multiple=True, help="Models to evaluate (default: all reference nets).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True)
@click.option("--out-dir", default="thor-evaluate", show_default=True, type=click.Path(file_okay=False),
              help="Campaigns and estimators are kept here.")
@click.option("--max-probes", type=int)
@click.option("--max-seconds", type=float)
@protocol_options
@quiet_option
@json_option
def cmd(device, models, batch_size, metric, runtime, out_dir, max_probes, max_seconds, min_rounds, max_rounds, window_s,
        cv_target, threads, quiet, as_json):
    """Accuracy benchmark: THOR and FLOPs-baseline estimates vs measured training steps."""
    import sys

    from thor_sdk.evaluate import evaluate
    from thor_sdk.models import list_models

    models = list(models) or list_models()

    def progress(event, name):
        if not quiet:
            click.echo(f"evaluating {name} ...", err=True)

    r = evaluate(models, device=device, batch_size=batch_size, metric=metric, out_dir=out_dir, runtime=runtime,
                 settings=settings_from(min_rounds, max_rounds, window_s, cv_target), max_probes=max_probes,
                 max_seconds=max_seconds, progress=progress, threads=threads)
    r["command"] = "thor-sdk " + " ".join(sys.argv[1:])
    if as_json:
        emit_json(r)
        return
    scale, unit = (1e3, "ms") if r["unit"] == "s" else (1.0, r["unit"])

    def f(v, nd=2):
        return "-" if v is None else f"{v * scale:.{nd}f}"

    click.echo(table([(x["model"], f(x["measured"]), f(x["thor"]), f(x["thor_std"]), f"{x['thor_ape']:.1f}",
                       f(x["flops"]), "-" if x["flops_ape"] is None else f"{x['flops_ape']:.1f}", x["probes"],
                       f"{x['probe_seconds']:.0f}", x["flagged"]) for x in r["rows"]],
                     ["model", f"measured {unit}", f"THOR {unit}", "THOR std", "THOR APE %", f"FLOPs {unit}",
                      "FLOPs APE %", "probes", "probe s", "flagged"]))
    click.echo(f"\nTHOR MAPE {r['thor_mape']:.1f}% (max {r['thor_max_ape']:.1f}%), FLOPs MAPE "
               f"{r['flops_mape']:.1f}%, ratio {r['flops_over_thor']:.1f}x; device {r['device']}, runtime {runtime}, "
               f"batch {batch_size}, {metric}")
    click.echo(f"command: {r['command']}")
