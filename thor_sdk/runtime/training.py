"""Training-run estimates from an estimator: one step, one epoch, one run, each with an upper bound.

Standard library only, like the rest of ``thor_sdk.runtime``; the Java (``TrainingRun.java``) and Swift
(``TrainingRun.swift``) runtimes implement the same arithmetic and pass the same vectors
(``tests/vectors/training_*.json``). Math, with ``B`` the batch size and ``S`` the samples per epoch:

- an epoch is ``floor(S / B)`` full steps plus, when ``S mod B = r > 0``, one last step at batch ``r``;
- ``mean_epoch = n_full * mean(B) + mean(r)``; a run is ``epochs`` epochs: ``mean_run = epochs * mean_epoch``;
- how the uncertainty scales: the estimator's std is *model* error (what the probes, the fit and the
  calibration nets leave unknown about this device), and the same error is made at every step, so stds
  add linearly: ``std_epoch = n_full * std(B) + std(r)``, ``std_run = epochs * std_epoch``. Step-to-step
  measurement noise is independent between steps; it averages out (it grows as sqrt(steps) against the
  model error's steps) and is not added;
- upper bound at one-sided confidence ``c``: ``mean + z_c * std`` with ``z_c`` the standard normal
  quantile (``statistics.NormalDist().inv_cdf(c)``, Wichura's AS241 algorithm); ``c`` in [0.5, 0.9999].
"""

import math
from statistics import NormalDist

from thor_sdk.errors import UsageError

MAX_SAMPLES = 10 ** 12
MAX_EPOCHS = 10 ** 6
CONFIDENCE_RANGE = (0.5, 0.9999)


def _int(v, name, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise UsageError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def quantile(confidence):
    """The standard normal quantile ``z`` of a one-sided ``confidence`` (e.g. 0.95 -> 1.6449)."""
    lo, hi = CONFIDENCE_RANGE
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not lo <= confidence <= hi:
        raise UsageError(f"confidence must be a number in [{lo}, {hi}], got {confidence!r}")
    return NormalDist().inv_cdf(float(confidence))


def steps_per_epoch(samples, batch_size):
    """``(full_steps, last_batch)``: full steps of ``batch_size`` and the size of the last partial one (0: none)."""
    samples = _int(samples, "samples", 1, MAX_SAMPLES)
    batch_size = _int(batch_size, "batch size", 1, 10 ** 9)
    return samples // batch_size, samples % batch_size


def _bounded(mean, std, z):
    return {"mean": mean, "std": std, "upper": mean + z * std}


def training_run(estimator, layers, batch_size, samples=None, epochs=1, confidence=0.95, unknown="error"):
    """Cost of one step, one epoch and one run of training ``layers`` at ``batch_size`` on the estimator's
    device, runtime and metric, each ``{"mean", "std", "upper"}`` (``upper`` at ``confidence``).

    ``samples``: training samples per epoch (default: one batch, so an epoch is one step). Returns also
    ``steps_per_epoch``, ``last_batch`` (0 when the samples divide evenly), ``steps`` (of the run),
    ``epochs``, ``confidence``, ``z``, and the estimator's ``metric``, ``unit``, ``device`` and ``runtime``.
    """
    batch_size = _int(batch_size, "batch size", 1, 10 ** 9)
    samples = batch_size if samples is None else samples
    full, rest = steps_per_epoch(samples, batch_size)
    epochs = _int(epochs, "epochs", 1, MAX_EPOCHS)
    z = quantile(confidence)
    step = estimator.estimate(layers, batch_size, unknown=unknown)
    m, s = step["total"]["mean"], step["total"]["std"]
    em, es = full * m, full * s
    if rest:
        last = estimator.estimate(layers, rest, unknown=unknown)["total"]
        em, es = em + last["mean"], es + last["std"]
    rm, rs = epochs * em, epochs * es
    if not all(math.isfinite(x) for x in (em, es, rm, rs)):
        raise UsageError("the run's estimate is too large to represent")
    return {"metric": step["metric"], "unit": step["unit"], "device": step.get("device"),
            "runtime": step.get("runtime"), "batch_size": batch_size, "samples": samples, "epochs": epochs,
            "steps_per_epoch": full + (1 if rest else 0), "last_batch": rest,
            "steps": epochs * (full + (1 if rest else 0)), "confidence": float(confidence), "z": z,
            "step": _bounded(m, s, z), "epoch": _bounded(em, es, z), "run": _bounded(rm, rs, z),
            "approximated": step.get("approximated", [])}
