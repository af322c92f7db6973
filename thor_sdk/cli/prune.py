"""``thor-sdk prune-plan``: width cuts that bring a model's estimated training cost down by a target fraction."""

import click

from .common import emit_json, json_option, quiet_option, table, unknown_ops_option, warn_measurement
from .probe import protocol_options, settings_from


def _fmt(v, unit):
    return f"{v * 1e3:.3f} ms" if unit == "s" else f"{v:.4g} {unit}"


@click.command("prune-plan")
@click.option("--estimator", required=True, help="Estimator JSON from `thor-sdk fit`.")
@click.option("--model", required=True, help="Name, file.py:Class, .onnx or layer-list .json.")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--target-saving", type=float, default=0.5, show_default=True,
              help="Fraction of the estimated cost to save, in (0, 1).")
@click.option("--out",
              help="Write the pruned layer list here (.json) and a PyTorch module beside it (.py).")
@click.option("--capacity", type=click.Choice(["params", "units"]), default="params", show_default=True,
              help="What a cut costs the network, for ranking: parameters removed, or the fraction of a layer's "
                   "units removed.")
@click.option("--step-fraction", type=float, default=0.125, show_default=True,
              help="Units cut per step, as a fraction of the layer's original units (at least 1).")
@click.option("--min-fraction", type=float, default=0.25, show_default=True,
              help="No layer keeps fewer than this fraction of its original units (at least 1).")
@click.option("--class-name", default="PrunedModel", show_default=True, help="Class name in the written module.")
@click.option("--measure", "do_measure", is_flag=True,
              help="Also time the original and the pruned network on --device (interleaved, --repeats each).")
@click.option("--device", default="host", show_default=True, help="Device for --measure.")
@click.option("--repeats", type=int, default=2, show_default=True, help="Measurements of each network with --measure.")
@protocol_options
@unknown_ops_option
@quiet_option
@json_option
def cmd(estimator, model, input_shape, batch_size, target_saving, out, capacity, step_fraction, min_fraction,
        class_name, do_measure, device, repeats, min_rounds, max_rounds, window_s, cv_target, threads, unknown_ops,
        quiet, as_json):
    """Plan channel/width cuts of MODEL, ranked by estimated saving per capacity removed, until its estimated
    training-step cost falls by --target-saving. Accuracy after pruning is out of scope: retrain or
    fine-tune the pruned network and check its accuracy yourself."""
    from thor_sdk.prune import prune_plan

    settings = settings_from(min_rounds, max_rounds, window_s, cv_target)
    progress = None if quiet else (lambda msg: click.echo(msg, err=True))
    r = prune_plan(estimator, model, target_saving=target_saving, batch_size=batch_size, out=out,
                   input_shape=input_shape, unknown_ops=unknown_ops, step_fraction=step_fraction,
                   min_fraction=min_fraction, capacity=capacity, class_name=class_name, measure=do_measure,
                   device=device, threads=threads, settings=settings, repeats=repeats, progress=progress)
    warn_measurement(r)
    if as_json:
        emit_json(r)
        return
    u = r["unit"]
    rows = [(c["layer"], c["kind"], c["feature"], f"{c['from']:g}", f"{c['to']:g}", _fmt(c["estimated_saving"], u),
             c["params_removed"],
             ", ".join(f"{f['layer']}.{f['feature']} {f['from']:g}->{f['to']:g}" for f in c["follow"]))
            for c in r["changes"]]
    if rows:
        click.echo(table(rows, ["layer", "kind", "feature", "from", "to", "est. saving", "params removed",
                                "follows"]))
        click.echo("")
    click.echo(f"{r['model']} batch {r['batch_size']} ({r['metric']} on {r['device']} / {r['runtime']}): estimated "
               f"{_fmt(r['estimated_before'], u)} -> {_fmt(r['estimated_after'], u)} per training step "
               f"({r['estimated_saving']:.1%} less; target {r['target_saving']:.0%}"
               f"{'' if r['target_met'] else ', NOT reached'}); {len(r['steps'])} step(s), parameters "
               f"{r['params_before']} -> {r['params_after']}")
    m = r.get("measured")
    if m:
        click.echo(f"measured on {m['device']} ({m['threads']} thread(s), {m['order'].strip()}): median "
                   f"{m['before_median_s'] * 1e3:.3f} ms -> {m['after_median_s'] * 1e3:.3f} ms per training step "
                   f"({m['saving']:.1%} less)")
    if r.get("out"):
        click.echo(f"wrote {r['out']} (layer list) and {r['module']} (class {r['class']}); measure it: "
                   f"{r['measure_with']}")
    click.echo(f"Note: {r['note']}.")
