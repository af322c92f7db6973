"""Energy meters, one file per source, all behind ``thor_sdk.meters.base.Meter``."""

from .base import EnergyWindow, Meter

__all__ = ["EnergyWindow", "Meter"]
