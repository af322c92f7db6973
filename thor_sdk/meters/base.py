"""Energy meter base class.

A meter reads one energy source (a RAPL package counter, an NVML GPU, an INA3221 rail, the
Android battery, a bench meter's log) over a *window*: ``start()``, run the work, ``stop()`` returns
an ``EnergyWindow`` with joules and the samples behind them. Meters read from a ``root`` path
(``/`` on a real device) so tests run the real code on fake sysfs trees under ``tmp_path``.
"""

from dataclasses import dataclass, field


@dataclass
class EnergyWindow:
    """Energy over one measurement window.

    ``energy_j`` is gross energy over the window; ``idle_power_w`` (when the protocol measured an
    idle baseline) gives ``net_energy_j = energy_j - idle_power_w * duration_s``. ``samples`` are
    ``(t_s, power_w)`` pairs relative to the window start (empty for pure counters).
    """

    energy_j: float
    duration_s: float
    meter: str
    samples: list = field(default_factory=list)
    idle_power_w: float = None

    @property
    def net_energy_j(self):
        if self.idle_power_w is None:
            return None
        return self.energy_j - self.idle_power_w * self.duration_s

    @property
    def mean_power_w(self):
        return self.energy_j / self.duration_s if self.duration_s > 0 else float("nan")

    def to_dict(self):
        return {"energy_j": self.energy_j, "net_energy_j": self.net_energy_j, "duration_s": self.duration_s,
                "meter": self.meter, "idle_power_w": self.idle_power_w, "n_samples": len(self.samples)}


class Meter:
    """Base class: one file per vendor subclasses it."""

    name = "meter"
    #: seconds between the sensor's updates; windows should be many times longer
    sample_period_s = 0.0

    def is_available(self):
        """True when this meter can be read here (files present and readable)."""
        return False

    def why_unavailable(self):
        """One sentence saying why ``is_available()`` is False (empty when available)."""
        return ""

    def start(self):
        raise NotImplementedError

    def stop(self):
        """End the window started by ``start()`` and return its ``EnergyWindow``."""
        raise NotImplementedError

    def describe(self):
        return {"name": self.name, "available": self.is_available(), "why_unavailable": self.why_unavailable(),
                "sample_period_s": self.sample_period_s}
