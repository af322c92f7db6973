"""Board power for the power cap, through the project's INA3221 meter (``thor_sdk.meters.ina3221``).

The cap applies to the rails the meter selects by default: the module input rail (``VDD_IN`` /
``POM_5V_IN``) when the board has one, else the sum of all rails. ``PowerWindow`` wraps one meter
window and adds the peak: the highest power sample seen in it (the meter samples every
``poll_period_s``; a peak shorter than that can be missed -- say so where it matters).
"""

from thor_sdk.errors import NoMeterError


def ina3221_meter(root="/", poll_period_s=0.02):
    """The INA3221 meter reading under ``root`` (``/`` on a Jetson, a fake tree in tests)."""
    from thor_sdk.meters.ina3221 import Ina3221Meter

    return Ina3221Meter(root=root, poll_period_s=poll_period_s)


def meter_status(root="/"):
    """``(available, why_unavailable, rail names)`` for the INA3221 meter under ``root``."""
    m = ina3221_meter(root)
    why = m.why_unavailable()
    rails = [r.name for r in m.selected_rails()] if not why else []
    return (not why), why, rails


def read_power_w(root="/"):
    """Instantaneous power of the default rails, W (``NoMeterError`` when none is readable)."""
    m = ina3221_meter(root)
    if not m.is_available():
        raise NoMeterError(f"ina3221: {m.why_unavailable()}")
    return m.power_w()


class PowerWindow:
    """One energy window with its peak: ``start()``, run the work, ``stop()`` -> dict.

    ``stop()`` returns ``{"energy_j", "duration_s", "mean_power_w", "peak_power_w", "n_samples",
    "rails"}``; energy is the meter's trapezoid integral of measured samples.
    """

    def __init__(self, root="/", poll_period_s=0.02, meter=None):
        self.meter = meter or ina3221_meter(root, poll_period_s)

    def start(self):
        self.meter.start()
        return self

    def stop(self):
        w = self.meter.stop()
        ps = [p for _, p in w.samples]
        if not ps:
            raise NoMeterError("the meter window has no power samples")
        return {"energy_j": w.energy_j, "duration_s": w.duration_s, "mean_power_w": w.mean_power_w,
                "peak_power_w": max(ps), "n_samples": len(ps),
                "rails": [r.name for r in self.meter.selected_rails()]}
