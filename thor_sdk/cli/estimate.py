"""``thor-sdk estimate``: a model's training-step cost per layer and in total from an estimator."""

import json

import click

from .common import emit_json, json_option, table, trainable_option, unknown_ops_option, warn_measurement


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1e3:.3f} ms"
    return f"{v:.4g} {unit}"


@click.command("estimate")
@click.option("--estimator", required=True, type=click.Path(dir_okay=False), help="Estimator JSON from `thor-sdk fit`.")
@click.option("--model", required=True, help="Name, file.py:Class, .onnx or layer-list .json.")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--relevel", is_flag=True,
              help="Measure the device's level now (the profile's reference probe on --device) and scale the "
                   "estimates by it; without it, they are for the device as it was profiled.")
@click.option("--device", default="host", show_default=True, help="With --relevel: where to measure the level.")
@click.option("--level-readings", type=int, default=5, show_default=True,
              help="With --relevel: measurements of the reference probe (1-100).")
@click.option("--level", "given_level", type=float,
              help="The device's level measured elsewhere (the reference probe now over its profile median, "
                   "e.g. by an app): scale the estimates by it.")
@unknown_ops_option
@trainable_option
@json_option
def cmd(estimator, model, input_shape, batch_size, relevel, device, level_readings, given_level, unknown_ops, trainable,
        as_json):
    """Estimate MODEL's training-step cost per layer and in total, with the FLOPs baseline beside it."""
    from thor_sdk.api import estimate, level_disagreement, measure_level
    from thor_sdk.errors import UsageError
    from thor_sdk.layers.trainable import check_patterns
    from thor_sdk.runtime import load_estimator

    if relevel and given_level is not None:
        raise UsageError("give --relevel or --level, not both")
    trainable = check_patterns(trainable)  # before the level is measured
    est = load_estimator(estimator)
    level = given_level  # checked by estimate before the model is traced
    if relevel:
        measured = measure_level(est, device=device, readings=level_readings)
        level = measured if measured["applied"] else None  # within the profile's drift: the std covers it
    r = estimate(est, model, batch_size=batch_size, input_shape=input_shape, unknown_ops=unknown_ops, level=level,
                 trainable=trainable)
    if relevel:
        r["level"] = measured  # with its readings, probe, time and whether it was applied
        if measured.get("device_changes"):
            r.setdefault("warnings", []).append(
                f"the estimator was profiled on another machine than {measured['device']} "
                f"({'; '.join(measured['device_changes'])}): its estimates, and this level, describe that one")
    warn_measurement(r)
    if as_json:
        emit_json(r)
        return
    u = r["unit"]
    rows = [(i, l.get("name", ""), l.get("op", ""), l["kind"] + (" (approx)" if l.get("approx") else ""), l["role"],
             _fmt(l["mean"], u), _fmt(l["std"], u), _fmt(l.get("flops_baseline"), u),
             json.dumps(l["config"], separators=(",", ":")))
            for i, l in enumerate(r["layers"])]
    click.echo(table(rows, ["#", "name", "op", "kind", "role", "THOR", "std", "FLOPs", "config"]))
    t = r["total"]
    click.echo(f"\n{r['model']} batch {r['batch_size']}: THOR {_fmt(t['mean'], u)} +- {_fmt(t['std'], u)} per "
               f"training step ({r['metric']}) on {r.get('device')} / {r.get('runtime')}; "
               f"FLOPs baseline {_fmt(r['flops_baseline']['total'], u)}")
    lv = r.get("level")
    if lv:
        how = (f"measured now on {lv['device']} ({lv['readings']} readings of reference probe {lv['probe']})"
               if "device" in lv else "given")
        what = ("THOR and FLOPs scaled by it" if lv.get("applied", True) else
                "within the profile's own drift, which the std already covers: estimates not scaled"
                if not lv.get("beyond_drift") else level_disagreement(lv) + ": estimates not scaled")
        click.echo(f"the device's level {lv['level']:.3f} (ln-std {lv['log_std']:.3f}) of its profile, {how}; {what}")
