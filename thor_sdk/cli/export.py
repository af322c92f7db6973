"""``thor-sdk export``: one reference network's training step as ONNX, TorchScript or Core ML."""

import click

from .common import emit_json, json_option, trainable_option


@click.command("export")
@click.option("--model", required=True, help="Reference network name (see `thor-sdk models`).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript", "coreml"]), required=True)
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd", show_default=True)
@click.option("--loss", type=click.Choice(["ce", "mse"]), default="ce", show_default=True,
              help="Cross-entropy on class labels, or mean squared error on one-hot targets.")
@click.option("--lr", type=float, default=0.01, show_default=True, help="Learning rate stored in the file.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="File to write.")
@trainable_option
@json_option
def cmd(model, batch_size, fmt, optimizer, loss, lr, out, trainable, as_json):
    """Export MODEL's training step (forward, loss, backward, optimizer update) as ONNX, TorchScript
    or an updatable Core ML model."""
    from thor_sdk.exporters.export import export_model

    r = export_model(model, batch_size, fmt, out, optimizer=optimizer, loss=loss, lr=lr, trainable=trainable)
    if as_json:
        emit_json(r)
        return
    click.echo(f"wrote {r['path']} ({r['bytes'] / 1e6:.1f} MB, {fmt}, {optimizer}, {loss}) in {r['seconds']:.1f} s")
    if r.get("trainable"):
        click.echo(f"  fine-tune: {len(r['trained_parameters'])} of {r['parameters']} parameter tensors trained "
                   f"({', '.join(r['trainable'])}), the rest frozen")
    d = r["detail"]
    if fmt == "onnx":
        click.echo(f"  {d['inputs']} inputs, {d['outputs']} outputs; feed each '<name>.new' output back as '<name>' "
                   f"({d['state_tensors']} state tensors); metadata key {d['metadata_key']}")
    elif fmt == "torchscript":
        click.echo("  torch.jit.load(path).train_step(x, y) -> loss; example batch in example_x / example_y")
    else:
        click.echo(f"  updatable ({len(d['updatable'])}): {', '.join(d['updatable'])}")
        if d["frozen"]:
            click.echo(f"  frozen ({len(d['frozen'])}):")
            for f in d["frozen"]:
                click.echo(f"    {f['layer']} ({f['type']}): {f['reason']}")
        for f in d["removed"]:
            click.echo(f"  removed {f['layer']} ({f['type']}): {f['reason']}")
        click.echo("  loss: softmax -> categorical cross-entropy (label input 'probs_true')" if loss == "ce"
                   else "  loss: mean squared error on 'logits' (target 'logits_true')")
        click.echo("  validated structurally here; updates run only on macOS/iOS (MLUpdateTask)")
