"""Baselines to compare THOR against (FLOPs: a per-kind cost per FLOP plus a per-step overhead)."""
