"""Compute ``thor-sdk check`` results: per model and budget, the training run's estimate, upper bound and verdict.

Everything is validated and estimated before anything is returned: a malformed estimator, budgets file
or model raises (a ``ThorError``) and no result exists. A model's layers are read once; for a layer-list
JSON nothing imports torch.
"""

import math
from dataclasses import dataclass, field

from thor_sdk.errors import UsageError

from .budgets import METRIC_UNITS, model_check, read_budgets
from .estimators import device_name, load_estimators
from .explain import MemoEstimator, explain
from .report import result_lines

CHECK_FORMAT = "thor-sdk/check"
CHECK_VERSION = 1


@dataclass
class CheckResult:
    """One model's training-run cost in one metric against its budget (``budget`` None and status ``info``:
    the metric was estimated, with no budget to check). ``step``, ``epoch``, ``run``: ``{"mean", "std",
    "upper"}`` in ``unit`` (``upper`` at ``confidence``); ``per`` says which one the budget bounds."""

    model: str  # label: the budget entry's name, else the model's own name
    source: str  # the model as given
    device: str
    runtime: str
    metric: str  # "energy" or "time"
    unit: str  # "J" or "s"
    per: str  # "step", "epoch" or "run"
    budget: object  # float in ``unit``, or None
    status: str  # "pass", "fail" or "info"
    confidence: float
    batch_size: int
    samples: int
    epochs: int
    steps_per_epoch: int
    last_batch: int
    steps: int
    step: dict
    epoch: dict
    run: dict
    explanation: object = None  # an Explanation when over budget
    approximated: list = field(default_factory=list)

    @property
    def passed(self):
        """True within budget, False over it, None without a budget."""
        return None if self.status == "info" else self.status == "pass"

    @property
    def period(self):
        """``{"mean", "std", "upper"}`` of what the budget bounds (one step, one epoch or the run)."""
        return {"step": self.step, "epoch": self.epoch, "run": self.run}[self.per]

    @property
    def mean(self):
        return self.period["mean"]

    @property
    def upper(self):
        return self.period["upper"]

    def lines(self):
        """The human line (and, over budget, the explanation's indented lines)."""
        return result_lines(self)

    def to_dict(self):
        d = {"model": self.model, "source": self.source, "status": self.status, "passed": self.passed,
             "device": self.device, "runtime": self.runtime, "metric": self.metric, "unit": self.unit,
             "per": self.per, "budget": self.budget, "mean": self.mean, "upper": self.upper,
             "confidence": self.confidence, "batch_size": self.batch_size, "samples": self.samples,
             "epochs": self.epochs, "steps_per_epoch": self.steps_per_epoch, "last_batch": self.last_batch,
             "steps": self.steps, "step": dict(self.step), "epoch": dict(self.epoch), "run": dict(self.run),
             "approximated": self.approximated, "line": self.lines()[0]}
        if self.explanation is not None:
            d["explanation"] = self.explanation.to_dict()
        return d


@dataclass
class CheckReport:
    """Every result of one check, with the estimators used and warnings (noisy kinds, approximated layers)."""

    results: list
    device: str
    runtime: str
    estimators: dict  # metric -> where it came from
    warnings: list = field(default_factory=list)

    @property
    def budgeted(self):
        return [r for r in self.results if r.status != "info"]

    @property
    def failures(self):
        return [r for r in self.results if r.status == "fail"]

    @property
    def passed(self):
        """True when every budget is kept."""
        return not self.failures

    @property
    def exit_code(self):
        """0 when every budget is kept, 1 when one is not (2, input errors, is never a report: it raises)."""
        return 0 if self.passed else 1

    def lines(self):
        return [line for r in self.results for line in r.lines()]

    def to_dict(self):
        return {"format": CHECK_FORMAT, "version": CHECK_VERSION, "passed": self.passed, "exit_code": self.exit_code,
                "device": self.device, "runtime": self.runtime, "estimators": dict(self.estimators),
                "results": [r.to_dict() for r in self.results], "warnings": list(self.warnings)}


def _label(spec, ml):
    if spec.name:
        return spec.name
    name = str(ml.name)
    from thor_sdk.layers.trainable import label

    return label(name.rpartition(":")[2] if ".py:" in name else name, spec.trainable)


def _source(model):
    return model if isinstance(model, str) else type(model).__name__


def _warnings(est, layers, step, label):
    out = []
    noisy = (getattr(est, "provenance", None) or {}).get("noisy_samples") or {}
    for kind in sorted({layer["kind"] for layer in layers} & set(noisy)):
        d = noisy[kind] if isinstance(noisy[kind], dict) else {}
        out.append(f"{label}: kind {kind} rests on {d.get('noisy')} noisy sample(s) of {d.get('samples')} in the "
                   f"{est.metric} estimator: its estimate is less reliable")
    if step.get("approximated"):
        from thor_sdk.layers import approximation_warnings

        out += [f"{label}: {w}" for w in approximation_warnings(step["approximated"], f" in the {est.metric} estimate")]
    return out


def check_models(specs, estimators):
    """A ``CheckReport`` for ``ModelCheck`` specs with ``{metric: (Estimator, label)}`` estimators: per model,
    a result per metric estimated (budget or not), budgets first. A budget of a metric no estimator has is a
    UsageError, raised before anything is estimated."""
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime.training import training_run

    for spec in specs:
        for b in spec.budgets:
            if b.metric not in estimators:
                flag = "--budget-j, joules" if b.metric == "energy" else "--budget-s, seconds"
                have = ", ".join(sorted(estimators)) or "none"
                a = "an" if b.metric == "energy" else "a"
                raise UsageError(f"{a} {b.metric} budget ({flag}) needs {a} {b.metric} estimator, and the estimators "
                                 f"given have metric {have}: add --estimator with {a} {b.metric} estimator "
                                 f"(`thor-sdk fit` of a campaign measured with --metric {b.metric})")
    first = next(iter(estimators.values()))[0]
    results, warnings = [], []
    for spec in specs:
        ml = layers_of(spec.model, input_shape=spec.input_shape, unknown_ops=spec.unknown_ops,
                       trainable=spec.trainable)
        label = _label(spec, ml)
        budgets = {b.metric: b for b in spec.budgets}
        order = [m for m in ("energy", "time") if m in budgets] + \
                [m for m in ("energy", "time") if m in estimators and m not in budgets]
        for metric in order:
            est = MemoEstimator(estimators[metric][0], ml.layers)
            run = training_run(est, ml.layers, spec.batch_size, spec.samples, spec.epochs, spec.confidence,
                               spec.unknown_ops)
            budget = budgets.get(metric)
            period = run[spec.per]
            if not all(math.isfinite(period[k]) for k in ("mean", "std", "upper")):
                raise UsageError(f"{label}: the {metric} estimate is too large to represent")
            status = "info" if budget is None else "pass" if period["upper"] <= budget.limit else "fail"
            step = est.estimate(ml.layers, spec.batch_size, unknown=spec.unknown_ops)
            warnings += [w for w in _warnings(estimators[metric][0], ml.layers, step, label) if w not in warnings]
            results.append(CheckResult(
                model=label, source=_source(spec.model), device=device_name(estimators[metric][0]),
                runtime=run["runtime"], metric=metric, unit=METRIC_UNITS[metric], per=spec.per,
                budget=None if budget is None else budget.limit, status=status, confidence=run["confidence"],
                batch_size=run["batch_size"], samples=run["samples"], epochs=run["epochs"],
                steps_per_epoch=run["steps_per_epoch"], last_batch=run["last_batch"], steps=run["steps"],
                step=run["step"], epoch=run["epoch"], run=run["run"],
                explanation=explain(est, ml.layers, run, budget, spec.unknown_ops) if status == "fail" else None,
                approximated=run.get("approximated", [])))
    return CheckReport(results, device_name(first), first.runtime,
                       {metric: label for metric, (_, label) in estimators.items()}, warnings)


def check(model=None, estimator=None, *, batch_size=None, samples=None, epochs=None, budget_j=None, budget_s=None,
          per=None, confidence=None, input_shape=None, unknown_ops=None, name=None, budgets=None, trainable=None):
    """Check the estimated cost of training ``model`` on the estimator's device against budgets.

    One model: ``thor_sdk.check("model.json", "pixel8-energy.json", batch_size=16, samples=5000, epochs=3,
    budget_j=900)`` (``per`` ``"run"`` by default, else ``"step"`` or ``"epoch"``; ``confidence`` 0.95 by
    default; ``epochs`` 1; ``samples`` one batch). Many: ``thor_sdk.check(budgets="energy-budgets.toml")``
    (format: ``docs/check.md``); an ``estimator`` given then replaces the file's ``estimators``.

    ``model``: any form ``thor_sdk.estimate`` takes (a network name, ``file.py:Class`` with
    ``input_shape``, an ONNX file, a layer-list JSON, a ``torch.nn.Module``). ``estimator``: a path, a
    parsed document or a loaded estimator, or a list of at most two (one time, one energy) of one device
    and runtime. A joule budget needs an energy estimator, a second budget a time one; every metric an
    estimator has is estimated. ``trainable``: name patterns of the only parameters that train (a fine-tune;
    a budgets file's ``trainable`` per model). Returns a ``CheckReport`` (``.results``: a ``CheckResult`` per model and
    metric; ``.passed``; ``.exit_code``); input errors raise ``ThorError`` subclasses before any estimate.
    """
    if budgets is not None:
        given = [k for k, v in (("model", model), ("batch_size", batch_size), ("samples", samples),
                                ("epochs", epochs), ("budget_j", budget_j), ("budget_s", budget_s), ("per", per),
                                ("confidence", confidence), ("input_shape", input_shape),
                                ("unknown_ops", unknown_ops), ("name", name), ("trainable", trainable or None))
                 if v is not None]
        if given:
            given = [f"{k} (--{k.replace('_', '-')})" for k in given]
            raise UsageError(f"a budgets file says everything per model: drop {', '.join(given)} "
                             "(only the estimator may be given beside it)")
        bf = read_budgets(budgets)
        specs = list(bf.models)
        if estimator is None:
            estimator = list(bf.estimators)
    else:
        if batch_size is None:
            raise UsageError("give the batch size (--batch-size)")
        specs = [model_check(model, batch_size, samples=samples, epochs=epochs, budget_j=budget_j,
                             budget_s=budget_s, per=per, confidence=confidence, input_shape=input_shape,
                             unknown_ops=unknown_ops, name=name, trainable=trainable)]
    return check_models(specs, load_estimators(estimator))
