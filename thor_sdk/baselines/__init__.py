"""Baselines to compare THOR against (FLOPs-proportional cost)."""
