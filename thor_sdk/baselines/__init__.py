"""Baselines to compare THOR against, one interface each (``base.Baseline``): FLOPs, TDP, STEP and PRE.

- ``FlopsBaseline`` (``flops_adapter``; the math in ``flops``): a per-kind cost per training FLOP plus overhead.
- ``TdpBaseline`` (``tdp``): TDP x utilisation x time, time from a FLOPs throughput (Green Algorithms, CodeCarbon).
- ``StepBaseline`` (``step``): a run's per-epoch cost once stable, projected to the whole training (del Rey et al.).
- ``PreBaseline`` (``pre``): regression from model and device features to step cost (del Rey et al.).

See docs/baselines.md.
"""

from .base import Baseline, NotFittedError
from .flops_adapter import FlopsBaseline
from .pre import PreBaseline
from .step import StepBaseline
from .tdp import TdpBaseline

__all__ = ["Baseline", "NotFittedError", "FlopsBaseline", "TdpBaseline", "StepBaseline", "PreBaseline"]
