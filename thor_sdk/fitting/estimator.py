"""The estimator file: one cost model per layer kind for one device, runtime and metric, as plain versioned JSON.

Format and prediction math: ``docs/estimator-format.md``; schema:
``thor_sdk/schemas/estimator.schema.json``. Readers: ``thor_sdk.runtime.load_estimator`` (Python
stdlib), ``android_harness/runtime`` (Java), ``ios_harness/Runtime`` (Swift).
"""

import datetime
import json
import math

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.runtime.estimator import ESTIMATOR_FORMAT, ESTIMATOR_VERSION, METRIC_UNITS  # the format's one definition


def _producer():
    from thor_sdk import __version__

    return f"thor-sdk {__version__}"


def _finite_floats(d, what):
    out = {}
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            out[k] = v
            continue
        if not math.isfinite(v):
            raise UsageError(f"{what}[{k!r}] is not a finite number: {v!r}")
        out[k] = float(v) if isinstance(v, float) else v
    return out


def _check_baseline_numbers(entry, where):
    for k in ("unit_per_flop", "overhead", "n_samples", "n_floored"):
        v = entry.get(k, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise UsageError(f"{where}[{k!r}] must be a finite number >= 0, got {v!r}")


def _flops_baseline(fb):
    """A copy of ``fb`` once its numbers (top level and each ``per_kind`` entry) are finite and >= 0."""
    fb = dict(fb)
    _check_baseline_numbers(fb, "flops_baseline")
    per_kind = fb.get("per_kind", {})
    if not isinstance(per_kind, dict):
        raise UsageError("flops_baseline['per_kind'] must be a dict {kind: {unit_per_flop, overhead, n_samples}}")
    for kind, entry in per_kind.items():
        if not isinstance(entry, dict) or not {"unit_per_flop", "overhead"} <= set(entry):
            raise UsageError(f"flops_baseline['per_kind'][{kind!r}] must be a dict with 'unit_per_flop' and 'overhead'")
        _check_baseline_numbers(entry, f"flops_baseline['per_kind'][{kind!r}]")
    if "per_kind" in fb:
        fb["per_kind"] = {str(k): dict(v) for k, v in sorted(per_kind.items())}
    return fb


def build_estimator(kind_gps, *, device, metric, unit, flops_baseline, provenance, runtime="torch",
                    whole_model=None):
    """The estimator document (a dict) for fitted ``KindGP``s keyed by layer kind.

    ``runtime``: what ran the training steps (``torch``, ``onnxruntime``, ...): costs differ many-fold
    between runtimes, so it is part of the estimator's key. ``whole_model``: ``{"rel_std": s, ...}``,
    the relative error of whole models beyond the layers' own uncertainty (composition, drift),
    added to every total's variance as ``(s * total)^2``.

    ``device``: what identifies the device (e.g. ``{"name", "platform", ...}``); ``metric``: ``"time"``
    or ``"energy"``; ``unit``: ``"s"`` or ``"J"`` (must match the metric); ``flops_baseline``: at least
    ``{"unit_per_flop": float}`` (cost per training FLOP of the FLOPs baseline, same unit), as
    ``thor_sdk.baselines.flops.fit_unit_per_flop`` writes it: ``overhead``, ``per_kind`` (every number >= 0);
    ``provenance``: free-form JSON-able dict (campaign, probe counts, software versions...).
    """
    if metric not in METRIC_UNITS:
        raise UsageError(f"metric must be one of {', '.join(METRIC_UNITS)}, got {metric!r}")
    if unit != METRIC_UNITS[metric]:
        raise UsageError(f"metric {metric!r} is measured in {METRIC_UNITS[metric]!r}, got unit {unit!r}")
    if not kind_gps:
        raise UsageError("an estimator needs at least one fitted kind")
    if not isinstance(flops_baseline, dict) or "unit_per_flop" not in flops_baseline:
        raise UsageError("flops_baseline must be a dict with 'unit_per_flop'")
    upf = flops_baseline["unit_per_flop"]
    if isinstance(upf, bool) or not isinstance(upf, (int, float)) or not math.isfinite(upf):
        raise UsageError(f"flops_baseline['unit_per_flop'] must be a finite number, got {upf!r}")
    flops_baseline = _flops_baseline(flops_baseline)  # every number >= 0
    if not isinstance(runtime, str) or not runtime:
        raise UsageError(f"runtime must be a non-empty string, got {runtime!r}")
    whole_model = dict(whole_model or {"rel_std": 0.0})
    from thor_sdk.layers.kinds import DEFAULT_FEATURES, base_kind

    kinds = {}
    for name in sorted(kind_gps):
        entry = kind_gps[name].to_dict()
        # features a layer may leave out (a conv's dilation, which came after layer lists were written): read as
        # their default by every runtime (docs/estimator-format.md)
        defaults = {f: v for f, v in DEFAULT_FEATURES.get(base_kind(str(name)), {}).items() if f in entry["features"]}
        if defaults:
            entry["defaults"] = defaults
        kinds[str(name)] = entry
    doc = {
        "format": ESTIMATOR_FORMAT,
        # 5: its kinds were fitted with a forward-only convolution or dense layer at a share of one launch
        # (``runtime.terms.FORWARD_ONLY_SHARED``), which runtimes reading version 4 or less would count as one
        "version": ESTIMATOR_VERSION,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "producer": _producer(),
        "device": dict(device),
        "runtime": runtime,
        "metric": metric,
        "unit": unit,
        "kinds": kinds,
        "flops_baseline": _finite_floats(dict(flops_baseline, unit_per_flop=float(upf)), "flops_baseline"),
        "whole_model": _finite_floats(whole_model, "whole_model"),
        "provenance": dict(provenance),
    }
    validate_estimator(doc)
    return doc


def validate_estimator(doc, what="estimator"):
    """Check ``doc`` against ``estimator.schema.json`` (jsonschema) and the stdlib runtime's own
    consistency checks (array shapes, finite numbers); FormatError on the first problem."""
    from thor_sdk.store.files import validate_schema
    from thor_sdk.runtime import load_estimator

    validate_schema(doc, "estimator.schema.json", what)
    load_estimator(doc)


def dumps_estimator(doc):
    """Compact JSON text of an estimator (one kind per line, so diffs stay readable)."""
    head = {k: v for k, v in doc.items() if k != "kinds"}
    lines = ["{" + json.dumps(head, separators=(",", ":"), allow_nan=False)[1:-1] + ',"kinds":{']
    names = list(doc["kinds"])
    for i, name in enumerate(names):
        sep = "," if i < len(names) - 1 else ""
        lines.append(json.dumps(name) + ":" + json.dumps(doc["kinds"][name], separators=(",", ":"),
                                                         allow_nan=False) + sep)
    lines.append("}}")
    return "\n".join(lines) + "\n"


def write_estimator(doc, path):
    """Validate ``doc`` and write it to ``path`` (atomically: a temporary file then a rename)."""
    validate_estimator(doc, f"estimator for {path}")
    try:
        text = dumps_estimator(doc)
    except ValueError as e:  # NaN / infinity
        raise FormatError(f"estimator cannot be written as JSON: {e}") from None
    from thor_sdk.store.files import write_text

    return write_text(path, text, "estimator")
