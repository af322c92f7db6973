"""Build-time budgets (``thor-sdk check``): is a model's on-device training within its energy and time budgets?

>>> import thor_sdk
>>> report = thor_sdk.check("model.json", "pixel8-energy.json", batch_size=16, samples=5000, epochs=3,
...                         budget_j=900)                                      # doctest: +SKIP
>>> report.passed, report.results[0].upper                                     # doctest: +SKIP
>>> thor_sdk.check(budgets="energy-budgets.toml").exit_code                    # doctest: +SKIP

One concern per module: ``budgets`` (the budgets TOML and its schema), ``estimators`` (one per metric, one
device and runtime), ``core`` (the results), ``explain`` (why over budget, what would fit), ``report``
(human lines), ``junit`` (the JUnit XML report, written atomically). Standard library, ``jsonschema`` and
``thor_sdk.runtime`` only: no torch unless the model itself is a torch model.

This package is itself callable (``thor_sdk.check(...)`` is ``thor_sdk.check.check(...)``), since the
package and the function share the name ``thor_sdk.check``.
"""

import sys
import types

from .budgets import Budget, BudgetFile, ModelCheck, model_check, read_budgets
from .core import CheckReport, CheckResult, check, check_models
from .explain import Explanation
from .junit import junit_xml, write_junit

__all__ = ["Budget", "BudgetFile", "CheckReport", "CheckResult", "Explanation", "ModelCheck", "check",
           "check_models", "junit_xml", "model_check", "read_budgets", "write_junit"]


class _CallablePackage(types.ModuleType):
    """``thor_sdk.check`` names both this package and its function: calling the package calls ``check``."""

    def __call__(self, *args, **kwargs):
        return check(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
