"""A layer's cost terms (training FLOPs, bytes moved, sequential launches) for the estimator's mean function.

FLOPs and bytes are affine in the batch size ``b``: ``flops(b) = flops_per_sample * b + flops_fixed``
(the optimizer update is per step, not per sample), likewise bytes. ``launches`` is how many times the
layer's work is issued one after the other in a step: ``seq_len * num_layers`` for recurrent kinds (each
time step waits for the previous one), ``steps`` for a cell's calls, 1 for every other kind; the mean
function's overhead is paid per launch. A recurrent layer whose backward never runs (frozen, reading the data:
``Kind.backward_runs``) issues its steps once, without autograd, where a training step issues them forward
and backward: it counts ``FORWARD_ONLY_LAUNCH_SHARE`` of them (at least 1). So does a convolution or dense layer
whose backward never runs (``FORWARD_ONLY_SHARED``): one kernel where a training step issues four (the forward,
the input's and the weights' gradients, the update), so ``FORWARD_ONLY_LAUNCH_SHARE`` of a launch. A layer list
may carry the terms as ``layer["cost"] = {"flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed"[, "launches"]}`` (what
the Java and Swift runtimes read; launches defaults to 1); the Python runtime computes them from
``thor_sdk.layers.kinds`` (plain Python, no torch) when they are absent. Standard library only.
"""

import math

from thor_sdk.errors import UsageError

TERM_KEYS = ("flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed")
RECURRENT = ("lstm", "gru")
#: a cell called once per time step: ``steps`` launches
CELLS = ("lstm_cell", "gru_cell")
#: a recurrent layer's launches when its backward never runs, as a share of a training one's: over 10 host
#: profiles (p64-p73), the mean function's 10-fold ln error fell from 0.29-0.61 to 0.15-0.39 for gru at 1/4, from
#: 0.29-0.48 to 0.09-0.30 for lstm_cell and from 0.17-0.41 to 0.11-0.29 for gru_cell, against every launch counted
#: alike (lstm, whose per-step overhead is small, within 0.03 either way); the best share lay at 0.15-0.5
#: (``bench/bench_launch_share.py``, ``bench/results/launch-share-host-20261130.md``)
FORWARD_ONLY_LAUNCH_SHARE = 0.25
#: kinds of one launch a step that count ``FORWARD_ONLY_LAUNCH_SHARE`` of it where their backward never runs (a
#: fine-tune's frozen backbone): counted as one launch, the mean function read them at the fixed cost of a training
#: layer (profile 79's conv2d entry: 0.49 ms), and a frozen MobileNetV3-small's 52 convs at 1.2-4.4x their exact
#: probes (1.52x summed). Over the 16 host profiles p64-p79, with every variant fitted apart, the law's 10-fold ln
#: error on these kinds' forward-only samples fell at this share from 0.756 to 0.201 (conv2d), 0.701 to 0.487
#: (conv2d:gemm), 0.795 to 0.564 (conv2d:grouped), 0.392 to 0.281 (conv1d) and 0.419 to 0.368 (linear), and on all
#: their samples from 0.475 to 0.456, 0.315 to 0.276, 0.629 to 0.602, 0.201 to 0.177 and 0.209 to 0.185
#: (``bench/bench_launch_share.py --weighted``, ``bench/results/launch-share-host-20261201-0409-weighted-p64-p79.md``;
#: linear's forward-only samples read lowest at 0.5, 0.312). Estimators fitted before (version 4 or less) count every
#: layer at least one launch, as they were fitted (``at_least_one_launch``)
FORWARD_ONLY_SHARED = ("conv1d", "conv2d", "linear")
#: the first estimator version whose kinds were fitted with launches below 1
SHARED_LAUNCH_VERSION = 5


def cost_terms(kind, config, role):
    """``{"flops_per_sample", "flops_fixed", "bytes_per_sample", "bytes_fixed", "launches"}`` of one layer."""
    from thor_sdk.layers.kinds import get_kind

    spec = get_kind(kind)
    out = {key: max(float(v), 0.0) for key, v in zip(TERM_KEYS, spec.train_terms(config, role))}
    n = (float(config["seq_len"] * config["num_layers"]) if kind in RECURRENT
         else float(config["steps"]) if kind in CELLS else 1.0)
    if not spec.backward_runs(role, config):
        if n > 1.0:
            n = max(1.0, n * FORWARD_ONLY_LAUNCH_SHARE)
        elif kind in FORWARD_ONLY_SHARED:
            n = FORWARD_ONLY_LAUNCH_SHARE
    out["launches"] = n
    return out


def at_least_one_launch(terms, version):
    """``terms`` as an estimator of ``version`` reads them: before ``SHARED_LAUNCH_VERSION`` every layer counted at
    least one launch (its kinds were fitted so), from it a forward-only convolution or dense layer counts a share."""
    if version >= SHARED_LAUNCH_VERSION or terms.get("launches", 1.0) >= 1.0:
        return terms
    return dict(terms, launches=1.0)


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
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not math.isfinite(n) or not n > 0:
        raise UsageError(f"{where}: cost.launches must be a finite number > 0, got {n!r}")
    out["launches"] = float(n)
    return out


def at_batch(terms, batch_size):
    """(training FLOPs, bytes moved, launches, bytes moved once per step) of one step at ``batch_size``: the last
    is ``bytes_fixed`` (parameters read, their gradients written, the optimizer's update), part of the bytes moved;
    a mean function may charge it at a rate of its own (``per_step_byte``)."""
    return (terms["flops_per_sample"] * batch_size + terms["flops_fixed"],
            terms["bytes_per_sample"] * batch_size + terms["bytes_fixed"], terms.get("launches", 1.0),
            terms["bytes_fixed"])
