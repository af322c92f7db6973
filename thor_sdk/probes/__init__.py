"""THOR probes: which configs to measure and the 1/2/3-layer models that measure them."""

from .build import PARTS, Probe, canonical_config

__all__ = ["PARTS", "Probe", "canonical_config"]
