"""The FLOPs baseline behind the shared baseline interface: a thin adapter over ``baselines.flops``.

``FlopsBaseline(metric).fit(samples)`` fits ``fit_unit_per_flop`` on probe samples (per kind, a cost
per training FLOP and a per-step overhead, both >= 0); ``FlopsBaseline.from_estimator(est)`` takes the
``flops_baseline`` an estimator already carries (what ``thor-sdk estimate`` shows). ``estimate`` is
``flops_estimate`` unchanged, answered in the shared result shape.
"""

from .base import Baseline, check_batch_size, check_metric, model_layers
from .flops import METHOD, fit_unit_per_flop, flops_estimate


class FlopsBaseline(Baseline):
    """Per layer kind: cost = cost per training FLOP x FLOPs + overhead (fitted >= 0 on probe samples)."""

    name = "flops"
    _fitted = ("baseline_",)

    def __init__(self, metric="time"):
        self.metric = check_metric(metric)

    @property
    def assumptions(self):
        return ("cost grows linearly with a layer's training FLOPs, at its kind's fitted cost per FLOP plus a "
                "per-step overhead; memory traffic, fusion and runtime effects beyond that are ignored. " + METHOD)

    def fit(self, samples):
        """Fit on probe samples of this metric (dicts with kind, role, batch_size, config, value, std)."""
        samples = [s for s in samples if s.get("metric", self.metric) == self.metric and not s.get("flagged")]
        self.baseline_ = fit_unit_per_flop(samples)
        return self

    @classmethod
    def from_estimator(cls, est):
        """The baseline an estimator (a loaded runtime estimator or its JSON document) carries."""
        doc = est if isinstance(est, dict) else None
        metric = (doc or {}).get("metric") if doc else getattr(est, "metric", "time")
        fb = doc.get("flops_baseline") if doc else getattr(est, "flops_baseline", None)
        self = cls(metric if metric in ("time", "energy") else "time")
        if fb is not None:
            self.baseline_ = fb
        return self

    def estimate(self, model, batch_size, input_shape=None):
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        name, layers, _ = model_layers(model, input_shape)
        fb = flops_estimate(layers, batch_size, self.baseline_)
        extra = {} if fb["total"] is not None else {"reason": "no fitted FLOPs baseline"}
        return self._result(fb["total"], model=name, batch_size=batch_size, train_flops=fb["flops"],
                            layers=fb["layers"], **extra)
