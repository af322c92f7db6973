"""One meter window with its peak power: what a power cap is checked against.

``PowerWindow(meter)`` wraps one window of any project meter (INA3221 rails on a Jetson, a host
meter) and adds the peak: the highest power sample seen in it. A sampling meter samples every
``poll_period_s``; a peak shorter than that can be missed (said where it matters). ``stop()`` returns
``{"energy_j", "duration_s", "mean_power_w", "peak_power_w", "n_samples", "rails"}``; energy is the
meter's own integral of measured samples. With ``require_peak`` a window without samples is a
``NoMeterError``; otherwise its peak is None.
"""

from thor_sdk.errors import NoMeterError


class PowerWindow:
    def __init__(self, meter, require_peak=False):
        self.meter = meter
        self.require_peak = require_peak

    def start(self):
        self.meter.start()
        return self

    def stop(self):
        w = self.meter.stop()
        ps = [p for _, p in w.samples]
        if not ps and self.require_peak:
            raise NoMeterError("the meter window has no power samples")
        rails = self.meter.selected_rails() if hasattr(self.meter, "selected_rails") else None
        return {"energy_j": w.energy_j, "duration_s": w.duration_s, "mean_power_w": w.mean_power_w,
                "peak_power_w": max(ps) if ps else None, "n_samples": len(ps),
                "rails": [r.name for r in rails] if rails is not None else [w.meter]}
