"""Read and validate what ``thor-sdk check`` checks: a budgets TOML file, or one model's budgets given as arguments.

Standard library only (``tomllib``) plus ``jsonschema`` for ``thor_sdk/schemas/budgets.schema.json``; no torch.
The schema says what is allowed; the checks here add what JSON Schema cannot say about TOML values (a
budget that is NaN, an integer written as ``16.0``). Every problem is a ``FormatError`` naming the file
and the entry (a budgets file) or a ``UsageError`` (arguments), raised before anything is estimated.
"""

import math
import os
from dataclasses import dataclass

from thor_sdk.errors import FormatError, NotFoundError, UsageError
from thor_sdk.runtime.estimator import METRIC_UNITS  # the one metric -> unit map
BUDGET_ARGS = {"energy": "budget_j", "time": "budget_s"}
PERS = ("step", "epoch", "run")
UNKNOWN_OPS = ("error", "approx")
#: a budget above this (joules or seconds) is taken for a typo, not a budget
MAX_BUDGET = 1e15
#: a budgets file larger than this is refused unread (10,000 models take about 2 MB)
MAX_BUDGETS_BYTES = 8 * 1024 * 1024
MAX_BATCH_SIZE = 10 ** 9
DEFAULT_CONFIDENCE = 0.95
DEFAULT_PER = "run"
MODEL_KEYS = {"model", "name", "input_shape", "batch_size", "samples", "epochs", "budget_j", "budget_s", "per",
              "confidence", "unknown_ops", "trainable"}


@dataclass(frozen=True)
class Budget:
    """A limit on one metric's cost of one step, one epoch or the whole run, in the metric's unit."""

    metric: str  # "energy" or "time"
    limit: float  # joules (energy) or seconds (time)
    per: str  # "step", "epoch" or "run"

    @property
    def unit(self):
        return METRIC_UNITS[self.metric]

    def to_dict(self):
        return {"metric": self.metric, BUDGET_ARGS[self.metric]: self.limit, "unit": self.unit, "per": self.per}


@dataclass(frozen=True)
class ModelCheck:
    """One model's training run (batch size, samples per epoch, epochs) and the budgets it must keep."""

    model: object  # any form ``thor_sdk.layers.layers_of`` takes (a name, a path, a torch.nn.Module)
    batch_size: int
    samples: object  # int, or None: one batch per epoch
    epochs: int
    budgets: tuple  # of Budget, at most one per metric, all with one ``per``
    per: str
    confidence: float
    input_shape: object = None
    unknown_ops: str = "error"
    name: object = None  # label in the output (default: the model's own name)
    trainable: tuple = None  # name patterns of the only parameters that train (a fine-tune), None: as the model says


@dataclass(frozen=True)
class BudgetFile:
    """A parsed budgets file: its estimators (paths resolved) and its models' checks."""

    path: str
    estimators: tuple
    models: tuple


def _integer(v, name, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise UsageError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _budget(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise UsageError(f"{name} must be a number, got {v!r}")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not (math.isfinite(f) and 0.0 < f <= MAX_BUDGET):
        raise UsageError(f"{name} must be a finite number > 0 and at most {MAX_BUDGET:g}, got {v!r}")
    return f


def _confidence(v):
    from thor_sdk.runtime.training import CONFIDENCE_RANGE

    lo, hi = CONFIDENCE_RANGE
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and lo <= v <= hi):
        raise UsageError(f"confidence must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)


def model_check(model, batch_size, samples=None, epochs=None, budget_j=None, budget_s=None, per=None,
                confidence=None, input_shape=None, unknown_ops=None, name=None, trainable=None):
    """A validated ``ModelCheck`` (UsageError naming the first bad value). Defaults: ``epochs`` 1, ``per``
    ``run``, ``confidence`` 0.95, ``unknown_ops`` ``error``; at least one of ``budget_j``, ``budget_s``.
    ``trainable``: name patterns of the only parameters that train (``thor_sdk.layers.trainable``)."""
    from thor_sdk.layers.trainable import check_patterns
    from thor_sdk.runtime.training import MAX_EPOCHS, MAX_SAMPLES

    if model is None or (isinstance(model, str) and not model.strip()):
        raise UsageError("give the model to check (--model)")
    batch_size = _integer(batch_size, "batch size", 1, MAX_BATCH_SIZE)
    samples = None if samples is None else _integer(samples, "samples", 1, MAX_SAMPLES)
    epochs = 1 if epochs is None else _integer(epochs, "epochs", 1, MAX_EPOCHS)
    per = DEFAULT_PER if per is None else per
    if per not in PERS:
        raise UsageError(f"per must be one of {', '.join(PERS)}, got {per!r}")
    confidence = _confidence(DEFAULT_CONFIDENCE if confidence is None else confidence)
    unknown_ops = "error" if unknown_ops is None else unknown_ops
    if unknown_ops not in UNKNOWN_OPS:
        raise UsageError(f"unknown_ops must be one of {', '.join(UNKNOWN_OPS)}, got {unknown_ops!r}")
    if input_shape is not None:
        from thor_sdk.layers import parse_input_shape

        if isinstance(input_shape, str):
            input_shape = parse_input_shape(input_shape)
        elif isinstance(input_shape, (list, tuple)) and input_shape and all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in input_shape):
            input_shape = list(input_shape)
        else:
            raise UsageError(f"input shape must be positive integers, got {input_shape!r}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise UsageError(f"name must be a non-empty string, got {name!r}")
    budgets = []
    for metric, arg, value in (("energy", "budget_j", budget_j), ("time", "budget_s", budget_s)):
        if value is not None:
            budgets.append(Budget(metric, _budget(value, arg), per))
    if not budgets:
        raise UsageError("give a budget: --budget-j (joules) and/or --budget-s (seconds)")
    return ModelCheck(model, batch_size, samples, epochs, tuple(budgets), per, confidence, input_shape,
                      unknown_ops, name, check_patterns(trainable))


def _resolve(path, base):
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def resolve_model(model, base):
    """A model given in a budgets file, its path (if it is one) taken relative to the file's folder ``base``;
    network names are left as they are."""
    from thor_sdk.models import SPECS

    if model in SPECS:
        return model
    if ".py:" in model:
        path, _, cls = model.rpartition(":")
        return f"{_resolve(path, base)}:{cls}"
    if model.endswith((".json", ".onnx")) or "/" in model or os.sep in model:
        return _resolve(model, base)
    return model


def read_budgets(path):
    """The ``BudgetFile`` of a budgets TOML file (format: ``docs/check.md``); FormatError naming the file
    and the entry for anything malformed, NotFoundError when it does not exist."""
    import tomllib

    from thor_sdk.store.files import read_text

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise NotFoundError(f"no such budgets file: {path}")
    # size cap, UTF-8 (UTF-16 and NUL bytes named) as every input; then TOML
    text = read_text(path, "budgets file", max_bytes=MAX_BUDGETS_BYTES)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise FormatError(f"budgets file {path} is not valid TOML: {e}") from None
    except (ValueError, RecursionError) as e:  # e.g. an integer beyond Python's digit limit, nesting too deep
        raise FormatError(f"budgets file {path} is not a readable budgets file: {type(e).__name__}: {e}") from None
    return parse_budgets(doc, os.path.dirname(os.path.abspath(path)), path)


def parse_budgets(doc, base, what="budgets file"):
    """A ``BudgetFile`` from a parsed budgets document; relative paths are taken against the folder ``base``."""
    from thor_sdk.store.files import validate_schema

    for i, entry in enumerate(doc.get("models") if isinstance(doc.get("models"), list) else ()):
        if isinstance(entry, dict) and "budget_j" not in entry and "budget_s" not in entry \
                and set(entry) <= MODEL_KEYS:  # say it plainly (an unknown key: the schema names it)
            raise FormatError(f"budgets file {what}: models[{i}] ({entry.get('model')}) has no budget: give "
                              "budget_j (joules) and/or budget_s (seconds)")
    validate_schema(doc, "budgets.schema.json", f"budgets file {what}")
    est = doc.get("estimators", ())
    est = [est] if isinstance(est, str) else list(est)
    models = []
    for i, entry in enumerate(doc["models"]):
        try:
            models.append(model_check(
                resolve_model(entry["model"], base), entry["batch_size"], samples=entry.get("samples"),
                epochs=entry.get("epochs"), budget_j=entry.get("budget_j"), budget_s=entry.get("budget_s"),
                per=entry.get("per", doc.get("per")), confidence=entry.get("confidence", doc.get("confidence")),
                input_shape=entry.get("input_shape"), unknown_ops=entry.get("unknown_ops", doc.get("unknown_ops")),
                name=entry.get("name"), trainable=entry.get("trainable")))
        except UsageError as e:
            raise FormatError(f"budgets file {what}: models[{i}] ({entry['model']}): {e}") from None
    return BudgetFile(str(what), tuple(_resolve(p, base) for p in est), tuple(models))
