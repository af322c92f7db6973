"""``export_model``: one reference network's training step in one format (what ``thor-sdk export`` runs)."""

import os
import time

from thor_sdk.errors import UsageError

FORMATS = ("onnx", "torchscript", "coreml")


def export_model(model, batch_size, fmt, out, *, optimizer="sgd", loss="ce", lr=0.01, epochs=1, trainable=None):
    """Export ``model`` (a reference network name) at ``batch_size`` to ``out`` in ``fmt``.

    ``trainable``: name patterns of the only parameters the step trains (a fine-tune,
    ``thor_sdk.layers.trainable``): the others are read, never updated (ONNX: ``frozen`` inputs without a
    ``.new`` output or optimizer state; TorchScript: not updated; Core ML: their layers not updatable).

    Returns a summary dict: format, path, bytes, seconds, and the format's own description (ONNX:
    inputs/outputs/state pairs; TorchScript: shapes; Core ML: updatable and frozen layers).
    """
    from thor_sdk.layers.trainable import apply_trainable, check_patterns
    from thor_sdk.models import build_model, model_spec

    from .bundle import sha256_file
    from .onnx_train import LOSSES, OPTIMIZERS, example_batch

    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} (known: {', '.join(OPTIMIZERS)})")
    if loss not in LOSSES:
        raise UsageError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")
    from thor_sdk.bounds import MAX_LR, MAX_RUN_BATCH_SIZE, number

    batch_size = number("batch size", batch_size, low=1, high=MAX_RUN_BATCH_SIZE, integer=True)
    lr = number("learning rate", lr, low=0, low_open=True, high=MAX_LR)  # stored in the file a phone runs
    epochs = number("epochs", epochs, low=1, high=1000000, integer=True)
    trainable = check_patterns(trainable)
    from thor_sdk.store.files import check_output

    check_output(out, f"{fmt} file")  # before any model is built or exported
    spec = model_spec(model)
    if loss == "mse" and spec.label_shape:
        raise UsageError(f"--loss mse needs one label per sample; {model} predicts a sequence (use ce)")
    module = build_model(model)
    tuned = apply_trainable(module, trainable, model)
    t0 = time.perf_counter()
    if fmt == "coreml":
        from .coreml_train import export_coreml, validate_updatable

        detail = export_coreml(module, spec.input_shape, spec.num_classes, out, optimizer=optimizer, lr=lr,
                               batch_size=batch_size, epochs=epochs, loss=loss)
        detail["validated"] = validate_updatable(out)
    else:
        x, y = example_batch(model, batch_size, loss)
        if fmt == "onnx":
            from .onnx_train import export_training_step

            d = export_training_step(module, x, y, out, loss=loss, optimizer=optimizer, lr=lr)
            detail = {"format": d["format"], "inputs": len(d["inputs"]), "outputs": len(d["outputs"]),
                      "state_tensors": len(d["state_pairs"]), "metadata_key": "thor_sdk.training_step"}
        else:
            from .torchscript_train import export_torchscript

            detail = export_torchscript(module, x, y, out, loss=loss, optimizer=optimizer, lr=lr)
    seconds = time.perf_counter() - t0
    return {"model": model, "batch_size": int(batch_size), "format": fmt, "path": os.fspath(out),
            "bytes": os.path.getsize(out), "sha256": sha256_file(out), "seconds": round(seconds, 3),
            "optimizer": optimizer, "loss": loss, "lr": float(lr), "detail": detail,
            **({"trainable": list(trainable), "trained_parameters": tuned["trained"],
                "parameters": tuned["parameters"]} if tuned else {})}
