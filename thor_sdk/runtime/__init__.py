"""Dependency-free estimator runtime: load an estimator JSON and predict costs with the stdlib only.

>>> from thor_sdk.runtime import load_estimator
>>> est = load_estimator("host-time.json")                       # doctest: +SKIP
>>> est.estimate(layers, batch_size=32)["total"]                  # doctest: +SKIP
{'mean': 0.0123, 'std': 0.0011}

Only ``thor_sdk.errors`` and the Python standard library are imported (no numpy, scikit-learn or
torch), so this package can be copied into an app as it is. Format: ``docs/estimator-format.md``.
"""

from .estimator import ESTIMATOR_FORMAT, ESTIMATOR_VERSION, Estimator, KindModel, at_level, device_level, load_estimator
from .training import training_run

__all__ = ["ESTIMATOR_FORMAT", "ESTIMATOR_VERSION", "Estimator", "KindModel", "at_level", "device_level", "load_estimator",
           "training_run"]
