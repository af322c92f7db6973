"""Energy-aware pruning plans (``thor-sdk prune-plan``): width cuts ranked by estimated saving per capacity.

``prune_plan`` plans, writes and optionally measures; ``plan_cuts`` is the search alone on a layer list;
``thor_sdk.prune.groups`` finds the layers whose width can be cut; ``thor_sdk.prune.module`` writes the
pruned network as PyTorch source. Accuracy after pruning is out of scope: see ``docs/prune.md``.
"""

from .plan import ACCURACY_NOTE, plan_cuts, prune_plan

__all__ = ["prune_plan", "plan_cuts", "ACCURACY_NOTE"]
