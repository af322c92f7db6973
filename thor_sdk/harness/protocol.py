"""The measurement protocol shared by every device.

A *trainer* is anything with ``step()`` (one full training step: forward, backward, optimizer
update) and ``close()``. ``measure_parts`` measures several trainers side by side: warm-up, then
rounds in which each part runs a window of steps (long enough for the clock or meter), repeated
until the spread is small or a cap is hit. Interleaving the parts round by round means slow drift
of the machine (thermal, other load) hits every part alike, so per-round *differences* between
parts -- what THOR's subtraction needs -- stay clean.
"""

import gc
import math
import statistics
import time
from dataclasses import dataclass, field

from thor_sdk.errors import MeasurementError


@dataclass
class ProtocolSettings:
    warmup_steps: int = 3
    min_window_s: float = 0.05
    min_rounds: int = 5
    max_rounds: int = 15
    cv_target: float = 0.03
    max_steps_per_window: int = 5000
    #: with a meter: measure the idle power (no work) for one window before and one after the rounds
    measure_idle: bool = True
    #: a window whose value is more than this many robust standard deviations from its part's median is flagged
    outlier_k: float = 3.5

    def __post_init__(self):
        """Bounds checked where the settings are made (options, manifests, stored campaigns), before any
        work: a NaN window or a one-round 'sample' with std 0 never reaches a campaign."""
        from thor_sdk.errors import UsageError

        def integer(name, lo, hi):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise UsageError(f"protocol setting {name} must be an integer in [{lo}, {hi}], got {v!r}")

        def number(name, lo, hi, lo_open=True):
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v <= hi \
                and (v > lo if lo_open else v >= lo)
            if not ok:
                raise UsageError(f"protocol setting {name} must be a finite number in {'(' if lo_open else '['}"
                                 f"{lo:g}, {hi:g}], got {v!r}")

        integer("warmup_steps", 0, 10_000)
        integer("min_rounds", 2, 10_000)
        integer("max_rounds", 2, 10_000)
        if self.max_rounds < self.min_rounds:
            raise UsageError(f"protocol setting max_rounds ({self.max_rounds}) is below min_rounds ({self.min_rounds})")
        integer("max_steps_per_window", 1, 10 ** 7)
        number("min_window_s", 0.0, 3600.0)
        number("cv_target", 0.0, 10.0)
        number("outlier_k", 0.0, 1000.0)
        if not isinstance(self.measure_idle, bool):
            raise UsageError(f"protocol setting measure_idle must be true or false, got {self.measure_idle!r}")

    def window_s_for(self, meter):
        """A window must span many sensor updates: at least 20 of the meter's sample periods."""
        period = getattr(meter, "sample_period_s", 0.0) if meter is not None else 0.0
        return max(self.min_window_s, 20.0 * period)

    def to_dict(self):
        return dict(self.__dict__)


@dataclass
class PartResult:
    """Per-round values of one part: ``time_s`` (and ``energy_j``) per training step."""

    part: str
    steps_per_window: int
    time_s: list = field(default_factory=list)
    energy_j: list = field(default_factory=list)  # empty without a meter; gross (idle included)
    #: per step, idle energy over the window subtracted (empty without an idle baseline)
    net_energy_j: list = field(default_factory=list)
    #: mean idle power measured around the rounds (W), None without a meter
    idle_power_w: float = None
    #: device state recorded with every window (battery level, temperatures, clocks...): dicts
    states: list = field(default_factory=list)
    #: [start, end] of every window on the wall clock (time.time(): aligns a bench meter's log)
    window_times_s: list = field(default_factory=list)

    def values(self, metric):
        if metric == "net_energy":
            return self.net_energy_j
        return self.time_s if metric == "time" else self.energy_j

    def summary(self, metric="time"):
        v = self.values(metric)
        return robust_summary(v)

    def outliers(self, metric="time", k=3.5):
        """Indices of windows more than ``k`` robust standard deviations from the median."""
        return flag_outliers(self.values(metric), k)

    def to_dict(self):
        return {"part": self.part, "steps_per_window": self.steps_per_window, "time_s": list(self.time_s),
                "energy_j": list(self.energy_j), "net_energy_j": list(self.net_energy_j),
                "idle_power_w": self.idle_power_w, "states": list(self.states),
                "window_times_s": [list(w) for w in self.window_times_s],
                "outliers": {m: self.outliers(m) for m in ("time", "energy", "net_energy") if self.values(m)}}


def robust_summary(values):
    """median, a robust std (1.4826 x MAD, falling back to stdev), n and the coefficient of variation."""
    n = len(values)
    if n == 0:
        return {"median": float("nan"), "std": float("nan"), "n": 0, "cv": float("nan")}
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    std = 1.4826 * mad if mad > 0 else (statistics.stdev(values) if n > 1 else 0.0)
    cv = std / abs(med) if med else float("inf")
    return {"median": med, "std": std, "n": n, "cv": cv}


def flag_outliers(values, k=3.5):
    """Indices of ``values`` whose robust z-score |v - median| / (1.4826 MAD) exceeds ``k``."""
    if len(values) < 3:
        return []
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    if mad == 0:  # at least half the values are identical: any other value stands out
        return [i for i, v in enumerate(values) if v != med]
    return [i for i, v in enumerate(values) if abs(v - med) / (1.4826 * mad) > k]


def measure_idle_w(meter, window_s, sleep=time.sleep):
    """Idle power (W): the meter over ``window_s`` seconds of no work, after a short settling pause
    (a quarter window, at most 2 s) so the tail of preceding work is not counted as idle."""
    sleep(min(0.25 * window_s, 2.0))
    meter.start()
    sleep(window_s)
    w = meter.stop()
    if w.duration_s <= 0:
        raise MeasurementError(f"{getattr(meter, 'name', 'meter')}: idle window of zero duration")
    return w.energy_j / w.duration_s


def _warm_up(trainer, steps, clock):
    """Run ``steps`` (at least 1) warm-up steps; the median step time calibrates the window."""
    times = []
    for _ in range(max(1, steps)):
        t0 = clock()
        trainer.step()
        times.append(clock() - t0)
    return max(statistics.median(times), 1e-7)


def _steps_for_window(step_s, window_s, cap):
    return max(1, min(cap, math.ceil(window_s / step_s)))


def measure_parts(trainers, settings=None, meter=None, metric="time", on_round=None, clock=time.perf_counter,
                  stop=None, state_fn=None, sleep=time.sleep, wall=time.time):
    """Measure ``trainers`` ({part: trainer}) side by side; returns {part: PartResult}.

    ``meter``: an energy ``Meter`` or None (time only). ``on_round(round_index, {part: (time_s,
    energy_j)})`` is called after every round (the campaign store commits each window there).
    ``stop(results)`` may end the rounds early once ``min_rounds`` are done (default: every part's
    coefficient of variation below ``cv_target``).

    With a meter (and ``settings.measure_idle``) the idle power is measured for one window before
    and one after the rounds; each part keeps gross ``energy_j`` and ``net_energy_j`` (idle energy
    over the window subtracted). ``state_fn()`` (optional) returns a dict of device state
    (battery level, temperatures, clocks) recorded with every window; ``wall()`` timestamps each
    window (``window_times_s``) so a bench meter's log can be aligned to it.
    """
    settings = settings or ProtocolSettings()
    if metric == "energy" and meter is None:
        raise MeasurementError("energy was asked for but no meter was given")
    window_s = settings.window_s_for(meter)
    idle = []
    if meter is not None and settings.measure_idle:
        idle.append(measure_idle_w(meter, window_s, sleep))
    step_s = {p: _warm_up(t, settings.warmup_steps, clock) for p, t in trainers.items()}
    results = {p: PartResult(p, _steps_for_window(step_s[p], window_s, settings.max_steps_per_window))
               for p in trainers}
    if stop is None:
        def stop(res):
            return all(r.summary(metric)["cv"] <= settings.cv_target for r in res.values())
    gc_was_enabled = gc.isenabled()
    durations = {}
    try:
        for rnd in range(settings.max_rounds):
            row = {}
            # ABBA order: alternate which part goes first, so linear drift within a pair of
            # rounds hits every part alike and cancels in the per-round differences
            order = list(trainers.items())
            for part, trainer in (order if rnd % 2 == 0 else order[::-1]):
                r = results[part]
                gc.collect()
                gc.disable()
                if meter is not None:
                    meter.start()
                w0 = wall()
                t0 = clock()
                for _ in range(r.steps_per_window):
                    trainer.step()
                dt = clock() - t0
                r.window_times_s.append((w0, wall()))
                window = meter.stop() if meter is not None else None
                if gc_was_enabled:
                    gc.enable()
                r.time_s.append(dt / r.steps_per_window)
                e = None
                if window is not None:
                    e = window.energy_j / r.steps_per_window
                    r.energy_j.append(e)
                    durations.setdefault(part, []).append(window.duration_s if window.duration_s > 0 else dt)
                if state_fn is not None:
                    r.states.append(state_fn())
                row[part] = (r.time_s[-1], e)
            if on_round is not None:
                on_round(rnd, {p: row[p] for p in trainers})
            if rnd + 1 >= settings.min_rounds and stop(results):
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    if idle:
        idle.append(measure_idle_w(meter, window_s, sleep))
        idle_w = sum(idle) / len(idle)
        for part, r in results.items():
            r.idle_power_w = idle_w
            r.net_energy_j = [e - idle_w * d / r.steps_per_window for e, d in zip(r.energy_j, durations.get(part, []))]
    return results


def paired_difference(results, part, base="head", metric="time"):
    """Per-round differences ``part - base`` and their robust summary (THOR's subtraction)."""
    a, b = results[part].values(metric), results[base].values(metric)
    diffs = [x - y for x, y in zip(a, b)]
    s = robust_summary(diffs)
    s["diffs"] = diffs
    return s
