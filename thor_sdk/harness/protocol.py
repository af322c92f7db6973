"""The measurement protocol shared by every device (spec: docs/protocol.md; vectors: tests/vectors/protocol_*.json).

A *trainer* is anything with ``step()`` (one full training step: forward, backward, optimizer
update) and ``close()``. ``measure_parts`` measures several trainers side by side: warm-up, then
rounds in which each part runs a window of steps (long enough for the clock or meter), repeated
until the spread of the campaign's metric is small or a cap is hit. The order of the parts
alternates every round (ABBA: A B, B A, A B, ...), so slow drift of the machine (thermal, other
load) hits every part alike and cancels in the per-round *differences* between parts -- what
THOR's subtraction needs. With a meter, the idle power comes from an ``IdleBaseline`` held for
the whole campaign: measured once, and again only when the device state changes (charging,
thermal status, low-power mode, battery temperature), never per probe.

Everything that takes time is injected (``clock``, ``wall``, ``sleep``, the trainers, the meter,
``state_fn``), so the conformance vectors run it on a scripted device; the Java and Swift harnesses
implement the same steps.
"""

import gc
import math
import statistics
import time
from dataclasses import dataclass, field

from thor_sdk.errors import MeasurementError, UsageError

#: a window spans at least this many of the meter's sample periods
WINDOW_SAMPLE_PERIODS = 20
#: device-state keys whose change makes the idle baseline stale (compared exactly; absent = None)
IDLE_STATE_KEYS = ("charging", "plugged", "screen_on", "thermal_status", "thermal_state", "low_power_mode")
#: a battery temperature move larger than this (degrees C) since the idle baseline makes it stale
IDLE_RECHECK_TEMP_C = 5.0
#: the canary workload's version (``harness.canary``): bump when the workload changes; readings of different
#: versions are never compared (2: the workload's second run of two back to back is timed, not the first)
CANARY_VERSION = 2


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
        """A window must span many sensor updates: at least ``WINDOW_SAMPLE_PERIODS`` (20) of the meter's
        sample periods, and at least ``min_window_s``."""
        period = getattr(meter, "sample_period_s", 0.0) if meter is not None else 0.0
        return max(self.min_window_s, WINDOW_SAMPLE_PERIODS * period)

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
    #: the campaign's idle power (W) in force after the last window, None without a meter
    idle_power_w: float = None
    #: device state recorded with every window (battery level, temperatures, clocks...): dicts
    states: list = field(default_factory=list)
    #: [start, end] of every window on the wall clock (time.time(): aligns a bench meter's log)
    window_times_s: list = field(default_factory=list)
    #: robust z-score above which a window is flagged (the settings' ``outlier_k``)
    outlier_k: float = 3.5
    #: per window, the idle power (W) its net energy was computed with (empty without an idle baseline)
    window_idle_power_w: list = field(default_factory=list)
    #: per window, the canary's seconds (``harness.canary``: the geometric mean of a reading right before and one
    #: right after the window; empty without a canary): the machine's speed while the window ran
    canary_s: list = field(default_factory=list)

    def values(self, metric):
        if metric == "net_energy":
            return self.net_energy_j
        return self.time_s if metric == "time" else self.energy_j

    def summary(self, metric="time"):
        v = self.values(metric)
        return robust_summary(v)

    def outliers(self, metric="time", k=None):
        """Indices of windows more than ``k`` (default: this part's ``outlier_k``) robust standard
        deviations from the median."""
        return flag_outliers(self.values(metric), self.outlier_k if k is None else k)

    def to_dict(self):
        d = {"part": self.part, "steps_per_window": self.steps_per_window, "time_s": list(self.time_s),
             "energy_j": list(self.energy_j), "net_energy_j": list(self.net_energy_j),
             "idle_power_w": self.idle_power_w, "states": list(self.states),
             "window_times_s": [list(w) for w in self.window_times_s],
             "window_idle_power_w": list(self.window_idle_power_w),
             "outliers": {m: self.outliers(m) for m in ("time", "energy", "net_energy") if self.values(m)}}
        if self.canary_s:  # only where a canary was read (the harnesses of other devices have none)
            d["canary_s"] = list(self.canary_s)
        return d


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


def part_order(parts, round_index):
    """The order the parts run in round ``round_index`` (0-based): as given on even rounds, reversed on
    odd ones (ABBA), so over each pair of rounds every part is measured as often early as late."""
    parts = list(parts)
    return parts if round_index % 2 == 0 else parts[::-1]


def idle_state_changed(before, after):
    """Whether the device state moved enough since ``before`` (the idle baseline's) to re-measure idle:
    any of ``IDLE_STATE_KEYS`` differs, or the battery temperature moved more than
    ``IDLE_RECHECK_TEMP_C``. Clocks, load and battery level alone do not count. No state, no change."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return False
    if any(before.get(k) != after.get(k) for k in IDLE_STATE_KEYS):
        return True
    a, b = before.get("battery_temp_c"), after.get("battery_temp_c")
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    return numbers and abs(b - a) > IDLE_RECHECK_TEMP_C


@dataclass
class IdleBaseline:
    """The idle power of one campaign on one device: measured by the first ``measure_parts`` that needs it,
    and again only after a window (or at a probe's start) whose device state ``idle_state_changed`` from
    the state it was measured in. Hold one per campaign and pass it to every probe's ``measure_parts``."""

    power_w: float = None
    #: the device state read when ``power_w`` was measured
    state: dict = None
    #: every idle measurement: {"power_w", "start_s", "end_s" (wall clock), "state"}
    measurements: list = field(default_factory=list)

    def stale(self, state):
        return self.power_w is None or idle_state_changed(self.state, state)

    @classmethod
    def carried(cls, doc):
        """A baseline seeded from a manifest's ``idle_baseline`` ({"power_w", "state"}: what an earlier
        bundle of the campaign measured); an empty one when ``doc`` is absent or not a usable power."""
        b = cls()
        if isinstance(doc, dict):
            w = doc.get("power_w")
            if isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and 0 <= w <= 1e4:
                b.power_w = float(w)
                b.state = doc.get("state") if isinstance(doc.get("state"), dict) else None
        return b

    def to_carry(self):
        """What a results document carries for the campaign's next bundle: the power, its state and the idle
        windows this baseline measured (a bundle's run starts from a carried one, so: in this run); None
        before any idle power is known."""
        if self.power_w is None:
            return None
        return {"power_w": self.power_w, "state": self.state, "measured": list(self.measurements)}

    def refresh(self, meter, window_s, state, sleep=time.sleep, wall=time.time):
        w0 = wall()
        power_w = measure_idle_w(meter, window_s, sleep)
        self.power_w, self.state = power_w, state
        self.measurements.append({"power_w": power_w, "start_s": w0, "end_s": wall(), "state": state})
        return power_w


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
                  stop=None, state_fn=None, sleep=time.sleep, wall=time.time, idle=None, order=part_order,
                  canary=None):
    """Measure ``trainers`` ({part: trainer}) side by side; returns {part: PartResult}.

    ``meter``: an energy ``Meter`` or None (time only). ``metric`` ("time" or "energy") is what the
    campaign measures and what the rounds stop on. ``on_round(round_index, {part: (time_s,
    energy_j)})`` is called after every round (the campaign store commits each window there).
    ``stop(results)`` may end the rounds early once ``min_rounds`` are done (default: every part's
    coefficient of variation of ``metric`` below ``cv_target``). ``order(parts, round_index)`` gives
    each round's part order (default ``part_order``: ABBA).

    With a meter (and ``settings.measure_idle``) each part keeps gross ``energy_j`` and ``net_energy_j``
    (the idle power over the window subtracted). The idle power comes from ``idle`` (an ``IdleBaseline``
    held for the campaign; a fresh one when None): measured here only if it has none yet or the device
    state changed since (checked at the start and after every window). ``state_fn()`` (optional) returns
    a dict of device state (battery level, temperatures, clocks) recorded with every window, with
    ``meter_source`` added where the meter's window says which reading gave it (``EnergyWindow.source``); ``wall()``
    timestamps each window (``window_times_s``) so a bench meter's log can be aligned to it. ``canary()``
    (optional, ``harness.canary.Canary``: seconds of a fixed workload) is read right before and right after every
    window, outside it, and their geometric mean kept per window (``canary_s``): the machine's speed then.
    """
    settings = settings or ProtocolSettings()
    if metric == "energy" and meter is None:
        raise MeasurementError("energy was asked for but no meter was given")
    window_s = settings.window_s_for(meter)
    baseline = None
    if meter is not None and settings.measure_idle:
        baseline = idle if idle is not None else IdleBaseline()
        state = state_fn() if state_fn is not None else None
        if baseline.stale(state):
            baseline.refresh(meter, window_s, state, sleep, wall)
    step_s = {p: _warm_up(t, settings.warmup_steps, clock) for p, t in trainers.items()}
    results = {p: PartResult(p, _steps_for_window(step_s[p], window_s, settings.max_steps_per_window),
                             outlier_k=settings.outlier_k)
               for p in trainers}
    if stop is None:
        def stop(res):
            return all(r.summary(metric)["cv"] <= settings.cv_target for r in res.values())
    gc_was_enabled = gc.isenabled()
    try:
        for rnd in range(settings.max_rounds):
            row = {}
            for part in order(list(trainers), rnd):
                trainer, r = trainers[part], results[part]
                # no collection inside the window (disabled there); a young-generation collection before it
                # keeps garbage from piling up without a full pass over a large heap before every window
                gc.collect(1)
                gc.disable()
                c0 = canary() if canary is not None else None
                if meter is not None:
                    meter.start()
                w0 = wall()
                t0 = clock()
                for _ in range(r.steps_per_window):
                    trainer.step()
                dt = clock() - t0
                r.window_times_s.append((w0, wall()))
                window = meter.stop() if meter is not None else None
                if canary is not None:
                    r.canary_s.append(math.sqrt(max(c0, 0.0) * max(canary(), 0.0)))
                if gc_was_enabled:
                    gc.enable()
                r.time_s.append(dt / r.steps_per_window)
                state = state_fn() if state_fn is not None else None
                source = getattr(window, "source", None)
                if source is not None:
                    # which reading of the meter gave this window (NVML: instant field, counter or averaged
                    # power) is kept with the window's state, so the campaign stores it per window
                    state = dict(state or {}, meter_source=source)
                if state_fn is not None or source is not None:
                    r.states.append(state)
                e = None
                if window is not None:
                    e = window.energy_j / r.steps_per_window
                    r.energy_j.append(e)
                    if baseline is not None:
                        # a window whose state differs from the baseline's: idle is re-measured in that
                        # state now, and this window's net energy already uses it
                        if baseline.stale(state):
                            baseline.refresh(meter, window_s, state, sleep, wall)
                        d = window.duration_s if window.duration_s > 0 else dt
                        r.window_idle_power_w.append(baseline.power_w)
                        r.net_energy_j.append(e - baseline.power_w * d / r.steps_per_window)
                row[part] = (r.time_s[-1], e)
            if on_round is not None:
                on_round(rnd, {p: row[p] for p in trainers})
            if rnd + 1 >= settings.min_rounds and stop(results):
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    if baseline is not None:
        for r in results.values():
            r.idle_power_w = baseline.power_w
    return results


def paired_difference(results, part, base="head", metric="time"):
    """Per-round differences ``part - base`` and their robust summary (THOR's subtraction)."""
    a, b = results[part].values(metric), results[base].values(metric)
    diffs = [x - y for x, y in zip(a, b)]
    s = robust_summary(diffs)
    s["diffs"] = diffs
    return s
