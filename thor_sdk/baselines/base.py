"""The small interface every baseline shares (fit, estimate, assumptions) and the helpers they have in common.

A baseline is a class in scikit-learn's manner: constructor arguments are settings only; ``fit(...)``
learns from what that baseline needs and returns ``self``; what it learned lives in attributes ending
in ``_``; ``estimate(model, batch_size)`` answers one model at one batch size with a plain dict::

    {"baseline": "tdp", "metric": "energy", "value": 0.42, "unit": "J", "per": "step",
     "measured": False, "assumptions": "...", ...}

``value`` is None where the baseline cannot answer (no stable epochs, nothing fitted for a kind) and
``reason`` then says why. ``assumptions`` (also an attribute) is one short text naming what the
baseline assumed, so a report can print it beside the number. ``measured`` is always False: a baseline
is an estimate, never a measurement.

``model`` is a layer list (layer dicts with ``kind``, ``config``, ``role``), a ``ModelLayers``
(``thor_sdk.layers``) or any model form ``thor-sdk estimate`` takes (a reference or zoo name, a
layer-list JSON, ``file.py:Class``: built through ``thor_sdk.layers.layers_of``, which may import torch).
"""

import math
import numbers

from thor_sdk.errors import NotFittedError, UsageError  # noqa: F401  (NotFittedError: importable here too)
from thor_sdk.runtime.estimator import METRIC_UNITS as UNITS  # the one metric -> unit map


def check_metric(metric):
    if metric not in UNITS:
        raise UsageError(f"unknown metric {metric!r} (time or energy)")
    return metric


def check_batch_size(batch_size):
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise UsageError(f"batch size must be an integer >= 1, got {batch_size!r}")
    return int(batch_size)


def check_positive(name, x, allow_none=False):
    """``x`` as a float when it is a finite number > 0 (None passes where ``allow_none``), else UsageError."""
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x) or x <= 0:
        raise UsageError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def model_layers(model, input_shape=None):
    """``(name, layers, input_shape)`` of ``model`` in any form the baselines take (see the module text)."""
    if isinstance(model, (list, tuple)):
        if not all(isinstance(l, dict) and "kind" in l and "config" in l for l in model):
            raise UsageError("a layer list is a list of layer dicts with kind and config")
        return None, list(model), list(input_shape) if input_shape else None
    if hasattr(model, "layers") and hasattr(model, "input_shape"):
        return getattr(model, "name", None), list(model.layers), list(model.input_shape)
    from thor_sdk.layers import layers_of

    ml = layers_of(model, input_shape=input_shape)
    return ml.name, list(ml.layers), list(ml.input_shape)


def train_flops(layers, batch_size):
    """Training FLOPs (forward, backward, update) of one step of ``layers`` at ``batch_size``."""
    from thor_sdk.baselines.flops import layer_train_flops

    return float(sum(layer_train_flops(l, batch_size) for l in layers))


class Baseline:
    """Base class: ``name``, ``assumptions``, ``fit(...) -> self``, ``estimate(model, batch_size) -> dict``.

    Subclasses set ``name`` and ``metric``, implement ``fit`` and ``estimate`` and build their answers
    with ``_result``; ``_check_fitted`` raises ``NotFittedError`` until the attributes named in
    ``_fitted`` exist."""

    name = "baseline"
    _fitted = ()

    @property
    def assumptions(self):
        raise NotImplementedError

    def fit(self, *args, **kwargs):  # pragma: no cover - the interface
        raise NotImplementedError

    def estimate(self, model, batch_size=None, **kwargs):  # pragma: no cover - the interface
        raise NotImplementedError

    def is_fitted(self):
        return all(hasattr(self, a) for a in self._fitted)

    def _check_fitted(self):
        if not self.is_fitted():
            raise NotFittedError(f"the {self.name} baseline is not fitted: call fit(...) first")

    def _result(self, value, per="step", **extra):
        metric = getattr(self, "metric_", None) or self.metric
        out = {"baseline": self.name, "metric": metric, "value": value, "unit": UNITS[metric],
               "per": per, "measured": False, "assumptions": self.assumptions}
        out.update(extra)
        return out
