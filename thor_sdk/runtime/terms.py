"""A layer's cost terms (training FLOPs, bytes moved, sequential launches) for the estimator's mean function.

FLOPs and bytes are affine in the batch size ``b``: ``flops(b) = flops_per_sample * b + flops_fixed``
(the optimizer update is per step, not per sample), likewise bytes. ``launches`` is how many times the
layer's work is issued one after the other in a step: ``seq_len * num_layers`` for recurrent kinds (each
time step waits for the previous one), ``steps`` for a cell's calls, 1 for every other kind; the mean
function's overhead is paid per launch. A layer list may carry them as ``layer["cost"] =
{"flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed"[, "launches"]}`` (what the Java
and Swift runtimes read; launches defaults to 1); the Python runtime computes them from
``thor_sdk.layers.kinds`` (plain Python, no torch) when they are absent. Standard library only.
"""

import math

from thor_sdk.errors import UsageError

TERM_KEYS = ("flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed")
RECURRENT = ("lstm", "gru")
#: a cell called once per time step: ``steps`` launches
CELLS = ("lstm_cell", "gru_cell")


def cost_terms(kind, config, role):
    """``{"flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed"}`` of one layer."""
    from thor_sdk.layers.kinds import get_kind

    out = {key: max(float(v), 0.0) for key, v in zip(TERM_KEYS, get_kind(kind).train_terms(config, role))}
    out["launches"] = (float(config["seq_len"] * config["num_layers"]) if kind in RECURRENT
                       else float(config["steps"]) if kind in CELLS else 1.0)
    return out


def layer_terms(layer, where="layer"):
    """The four cost terms of a layer dict: its ``cost`` entry when present (checked), else computed."""
    given = layer.get("cost") if isinstance(layer, dict) else None
    if given is None:
        return cost_terms(layer["kind"], layer["config"], layer.get("role", "hidden"))
    if not isinstance(given, dict):
        raise UsageError(f"{where}: cost must be an object with {', '.join(TERM_KEYS)}")
    out = {}
    for key in TERM_KEYS:
        v = given.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise UsageError(f"{where}: cost.{key} must be a finite number >= 0, got {v!r}")
        out[key] = float(v)
    n = given.get("launches", 1.0)
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or n < 1:
        raise UsageError(f"{where}: cost.launches must be a finite number >= 1, got {n!r}")
    out["launches"] = float(n)
    return out


def at_batch(terms, batch_size):
    """(training FLOPs, bytes moved, launches, bytes moved once per step) of one step at ``batch_size``: the last
    is ``bytes_fixed`` (parameters read, their gradients written, the optimizer's update), part of the bytes moved;
    a mean function may charge it at a rate of its own (``per_step_byte``)."""
    return (terms["flops_per_sample"] * batch_size + terms["flops_fixed"],
            terms["bytes_per_sample"] * batch_size + terms["bytes_fixed"], terms.get("launches", 1.0),
            terms["bytes_fixed"])
