"""Load the estimators a check uses: at most one per metric (time, energy), all of one device and runtime."""

import os

from thor_sdk.errors import UsageError

#: what identifies a device in an estimator's ``device`` object (compared where both estimators record it)
DEVICE_KEYS = ("kind", "name", "hostname", "machine", "serial", "torch_threads")


def _label(source):
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return "an estimator object" if hasattr(source, "estimate") else "an estimator document"


def device_name(est):
    """The estimator's device name as outputs show it."""
    return str(est.device.get("name") or "unknown device")


def load_estimators(sources):
    """``{metric: (Estimator, source label)}`` from estimator paths, parsed documents or loaded estimators.

    One estimator per metric: two time (or two energy) estimators are refused, as are estimators of
    different devices or runtimes (a check compares one device and runtime's costs with the budgets)."""
    from thor_sdk.runtime import load_estimator

    if sources is None or isinstance(sources, (str, os.PathLike, dict)) or hasattr(sources, "estimate"):
        sources = [] if sources is None else [sources]
    sources = list(sources)
    if not sources:
        raise UsageError("give an estimator (--estimator E.json, or `estimators` in the budgets file)")
    if len(sources) > 2:
        raise UsageError(f"give at most two estimators (one time, one energy), got {len(sources)}")
    out = {}
    for source in sources:
        est = source if hasattr(source, "estimate") else load_estimator(source)
        label = _label(source)
        if est.metric in out:
            raise UsageError(f"two {est.metric} estimators ({out[est.metric][1]} and {label}): give at most one "
                             "per metric (one time, one energy)")
        for other, other_label in out.values():
            if other.runtime != est.runtime:
                raise UsageError(f"estimators of different runtimes: {other_label} is {other.runtime}, {label} is "
                                 f"{est.runtime}; check one device and runtime at a time")
            a, b = other.device, est.device
            differ = [k for k in DEVICE_KEYS if (k == "name" or (k in a and k in b)) and a.get(k) != b.get(k)]
            if differ:
                raise UsageError(f"estimators of different devices: {other_label} is {device_name(other)}, {label} "
                                 f"is {device_name(est)} (they differ in {', '.join(differ)}); check one device "
                                 "and runtime at a time")
        out[est.metric] = (est, label)
    return out
