"""``thor-sdk estimate``: a model's training-step cost per layer and in total from an estimator."""

import json

import click

from .common import emit_json, json_option, table, unknown_ops_option, warn_measurement


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
@unknown_ops_option
@json_option
def cmd(estimator, model, input_shape, batch_size, unknown_ops, as_json):
    """Estimate MODEL's training-step cost per layer and in total, with the FLOPs baseline beside it."""
    from thor_sdk.api import estimate

    r = estimate(estimator, model, batch_size=batch_size, input_shape=input_shape, unknown_ops=unknown_ops)
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
