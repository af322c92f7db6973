"""Accuracy evaluation: THOR and the baselines against direct measurement, and the report that shows it."""

from thor_sdk.evaluate.campaigns import evaluate
from thor_sdk.evaluate.unseen import evaluate_unseen

__all__ = ["evaluate", "evaluate_unseen"]
