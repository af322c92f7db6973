"""``thor-sdk layers``: a model's THOR layer list, shown or saved as JSON."""

import json

import click

from .common import emit_json, json_option, table, trainable_option, unknown_ops_option


@click.command("layers")
@click.argument("model")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the layer list JSON here.")
@unknown_ops_option
@trainable_option
@json_option
def cmd(model, input_shape, out, unknown_ops, trainable, as_json):
    """Show MODEL's THOR layer list (a name, file.py:Class, .onnx or layer-list .json)."""
    from thor_sdk.layers import layers_of

    if out:
        from thor_sdk.store.files import check_output

        check_output(out, "layer list")  # before the model is built
    ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops, trainable=trainable)
    if out:
        from thor_sdk.store.files import write_text

        write_text(out, json.dumps(ml.to_dict(), indent=1, allow_nan=False) + "\n", "layer list")
    if as_json:
        emit_json(ml.to_dict())
        return
    click.echo(table([(i, l["name"], l.get("op", ""), l["kind"] + (" (approx)" if l.get("approx") else ""), l["role"],
                       json.dumps(l["config"], separators=(",", ":")))
                      for i, l in enumerate(ml.layers)], ["#", "name", "op", "kind", "role", "config"]))
