"""``thor-sdk measure``: a whole model's training step measured on a device (the ground truth)."""

import click

from .common import emit_json, json_option, trainable_option, warn_measurement
from .probe import protocol_options, settings_from


@click.command("measure")
@click.option("--device", default="host", show_default=True)
@click.option("--model", required=True,
              help="Name, file.py:Class (with --input-shape), .onnx or layer-list .json (rebuilt from its kinds).")
@click.option("--input-shape",
              help="Per-sample input shape for file.py:Class models (or dynamic ONNX axes), e.g. 3,32,32.")
@click.option("--input-dtype", type=click.Choice(["float32", "int64"]), default=None,
              help="Input dtype for file.py:Class models (default float32; int64 = token ids).")
@click.option("--vocab", type=int, default=None,
              help="Token ids are drawn below this (int64 inputs; default: the model's first nn.Embedding).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--meter", help="Energy meter overriding the device's own, e.g. external:monsoon.csv[,offset=S].")
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), help="Also record the run in this campaign database.")
@trainable_option
@protocol_options
@json_option
def cmd(device, meter, model, input_shape, input_dtype, vocab, batch_size, metric, runtime, out, trainable, min_rounds,
        max_rounds, window_s, cv_target, threads, as_json):
    """Measure MODEL's whole training step on DEVICE: the ground truth estimates are checked against."""
    from thor_sdk.api import measure

    r = measure(model, device=device, batch_size=batch_size, metric=metric, runtime=runtime,
                settings=settings_from(min_rounds, max_rounds, window_s, cv_target), out=out, threads=threads,
                meter=meter, input_shape=input_shape, input_dtype=input_dtype, vocab=vocab, trainable=trainable)
    warn_measurement(r)
    if as_json:
        emit_json(r)
        return
    scale, unit = (1e3, "ms") if r["unit"] == "s" else (1.0, r["unit"])
    click.echo(f"{r['model']} batch {batch_size} on {r['device']} ({runtime}): {r['metric']} per training step "
               f"mean {r['mean'] * scale:.3f} {unit}, median {r['median'] * scale:.3f} {unit}, "
               f"std {r['std'] * scale:.3f} {unit}, n={r['n']} windows of {r['steps_per_window']} steps"
               + (f", {r['threads']} thread(s)" if r.get("threads") else ""))
