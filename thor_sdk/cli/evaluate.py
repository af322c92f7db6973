import click

from .common import emit_json, json_option, quiet_option, table
from .probe import protocol_options, settings_from


@click.command("evaluate")
@click.option("--device", default="host", show_default=True)
@click.option("--model", "models", multiple=True, help="Models to evaluate (default: all reference nets).")
@click.option("--batch-size", "batch_sizes", type=int, multiple=True, default=(32,), show_default=True,
              help="Batch size(s); the target-driven benchmark uses the first.")
@click.option("--unseen", is_flag=True,
              help="Generalization: estimate models the --estimator never saw (default: the held-out nets) and "
                   "measure them, with the 95%-interval coverage.")
@click.option("--estimator", type=click.Path(dir_okay=False), help="With --unseen: a device profile's estimator.")
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True)
@click.option("--out-dir", default="thor-evaluate", show_default=True, type=click.Path(file_okay=False),
              help="Campaigns and estimators are kept here.")
@click.option("--max-probes", type=int)
@click.option("--max-seconds", type=float)
@protocol_options
@quiet_option
@json_option
def cmd(device, models, batch_sizes, unseen, estimator, metric, runtime, out_dir, max_probes, max_seconds, min_rounds, max_rounds, window_s,
        cv_target, threads, quiet, as_json):
    """Accuracy benchmark: THOR and FLOPs-baseline estimates vs measured training steps."""
    import sys

    from thor_sdk.errors import UsageError
    from thor_sdk.evaluate import evaluate
    from thor_sdk.models import list_models

    if unseen:
        if not estimator:
            raise UsageError("--unseen needs --estimator (from `thor-sdk profile` and `thor-sdk fit`)")
        return _unseen(estimator, device, list(models) or list_models("heldout"), batch_sizes, metric, threads,
                       settings_from(min_rounds, max_rounds, window_s, cv_target), quiet, as_json)
    batch_size = batch_sizes[0]
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


def _unseen(estimator, device, models, batch_sizes, metric, threads, settings, quiet, as_json):
    import sys

    from thor_sdk.evaluate import evaluate_unseen

    def progress(event, name):
        if not quiet:
            click.echo(f"measuring {name} ...", err=True)

    r = evaluate_unseen(estimator, models, device=device, batch_sizes=batch_sizes, metric=metric, settings=settings,
                        threads=threads, progress=progress)
    r["command"] = "thor-sdk " + " ".join(sys.argv[1:])
    if as_json:
        emit_json(r)
        return
    click.echo(unseen_table(r))
    click.echo(f"command: {r['command']}")


def unseen_table(r):
    """The generalization report as text (also used by bench/bench_generalization.py)."""
    scale, unit = (1e3, "ms") if r["unit"] == "s" else (1.0, r["unit"])
    rows = [(x["model"], x["batch_size"], f"{x['measured'] * scale:.3f}", f"{x['thor'] * scale:.3f}",
             f"{x['thor_std'] * scale:.3f}", f"{x['thor_ape']:.1f}", f"{x['z']:+.2f}", "yes" if x["covered95"] else "NO",
             f"{x['flops'] * scale:.3f}" if x["flops"] is not None else "-",
             f"{x['flops_ape']:.1f}" if x["flops_ape"] is not None else "-") for x in r["rows"]]
    text = table(rows, ["model", "batch", f"measured {unit}", f"THOR {unit}", "std", "THOR APE %", "z", "in 95%",
                        f"FLOPs {unit}", "FLOPs APE %"])
    ref = r["reference"]
    text += (f"\n\nunseen models: THOR MAPE {r['thor_mape']:.1f}% (max {r['thor_max_ape']:.1f}%), FLOPs MAPE "
             f"{r['flops_mape']:.1f}% ({r['flops_over_thor']:.1f}x); 95% interval coverage "
             f"{100 * r['coverage95']:.0f}%, median |z| {r['median_abs_z']:.2f}; device {r['device']}, runtime "
             f"{r['runtime']}, {r['metric']}")
    if r.get("thor_level_adjusted_mape") is not None:
        text += (f"\ndiagnostic, the device's speed now vs during its profile (the profile's reference probe measured "
                 f"around each model, level {min(x['device_level'] for x in r['rows']):.2f}-"
                 f"{max(x['device_level'] for x in r['rows']):.2f}): THOR x level MAPE "
                 f"{r['thor_level_adjusted_mape']:.1f}%, coverage {100 * r['coverage95_level_adjusted']:.0f}%")
    if ref["spread"] is not None:
        text += (f"\nreference {ref['model']} b{ref['batch_size']} re-measured {len(ref['runs'])} times: "
                 f"max/min - 1 = {100 * ref['spread']:.1f}% (machine drift during the run)")
    return text
