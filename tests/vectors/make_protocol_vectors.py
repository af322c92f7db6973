"""Generate the measurement-protocol conformance vectors tests/vectors/protocol_*.json (spec: docs/protocol.md).

    python tests/vectors/make_protocol_vectors.py          # rewrite every protocol_*.json

Each vector is one campaign on a SCRIPTED device (made-up numbers, no real timing): a clock that only moves
when a step runs or the protocol sleeps, per-part step times (with a repeating jitter pattern, drift, slow
steps), an energy counter (each step adds its scripted energy, or its time x power) read by a meter with a
sample period, and a device state that changes at scripted times (each with its idle power). The campaign
runs its probes in turn through ``thor_sdk.harness.protocol.measure_parts`` with one ``IdleBaseline``, and
the vector keeps what must come out: per probe the window length, the rounds run, every idle measurement and
window in time order (part, round, steps, wall-clock start/end) and per part the steps per window, warm-up
steps, per-window time, gross and net energy, the idle power each window used, and the outlier flags.

The scripted device below is the reference: ``ProtocolVectorsTest.java`` (android_harness) and
``ProtocolVectorTests.swift`` (ios_harness) implement it step for step, so every implementation of the
protocol meets the same clock and meter and must produce the same windows and numbers (floats to 1e-9
relative). ``tests/test_protocol_vectors.py`` checks the committed files are exactly what this makes now.

Vectors:
- ``time``: a time campaign with a meter whose energy is noisy; hidden settles over its first rounds, so it
  stops on the time CV after round 7 (of 4..12), where a rule on the energy CV would run to the cap.
- ``energy``: an energy campaign whose step times are noisy but energy per step steady: it stops on the
  energy CV at the minimum rounds, where the time CV would run longer.
- ``drift``: three parts, every step slower by a fixed amount per second: only the alternating order
  (ABBA) makes the mean per-round difference the true one; a fixed order adds the drift of one window.
- ``outlier``: one slow step makes one window of ``hidden`` stand out (robust z > outlier_k = 3.0).
- ``slow_meter``: a meter with a 0.25 s period: windows of 20 periods (5 s), not min_window_s.
- ``idle_campaign``: three probes on one idle baseline: idle measured once at the start, not again for a
  battery-level or +2 C change, again after the window where charging starts, and again at the start of
  the third probe after the battery warmed by more than 5 C.
"""

import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from thor_sdk.harness.protocol import IdleBaseline, ProtocolSettings, measure_parts, part_order  # noqa: E402

FORMAT = "thor-sdk/protocol-vector"
NAMES = ("time", "energy", "drift", "outlier", "slow_meter", "idle_campaign")


class ScriptedWindow:
    def __init__(self, energy_j, duration_s):
        self.energy_j, self.duration_s = energy_j, duration_s


class ScriptedDevice:
    """The vector's device: clock, wall clock, sleep, state, and a meter over its energy counter."""

    def __init__(self, spec):
        self.spec = spec
        self.t = spec["t0_s"]
        self.energy = 0.0
        self.sample_period_s = spec["meter"]["sample_period_s"] if spec["meter"] else 0.0
        self.meter_log = []  # per meter window: (start wall, end wall, energy, duration, steps inside)
        self.steps = 0
        self._start = None

    def clock(self):
        return self.t

    def wall(self):
        return self.t + self.spec["wall_offset_s"]

    def _entry(self):
        """The state entry in force now: the last one whose from_s <= t (the first before any)."""
        cur = self.spec["states"][0]
        for e in self.spec["states"]:
            if e["from_s"] <= self.t:
                cur = e
        return cur

    def state(self):
        return dict(self._entry()["state"])

    def sleep(self, s):
        self.energy += s * self._entry()["idle_power_w"]
        self.t += s

    def step(self, part, k):
        """Step ``k`` (0-based, warm-up included) of ``part`` (its scripted spec)."""
        dt = part["step_s"] * _cyc(part["jitter"], k) + self.spec["drift_s_per_s"] * (self.t - self.spec["t0_s"])
        for a, b, factor in part["slow_steps"]:
            if a <= k < b:
                dt = dt * factor
        if part["step_energy_j"] is not None:
            e = part["step_energy_j"] * _cyc(part["energy_jitter"], k)
        else:
            e = dt * (self._entry()["idle_power_w"] + part["active_power_w"])
        self.energy += e
        self.t += dt
        self.steps += 1

    # the meter (Protocol's meter interface)
    def start(self):
        self._start = (self.t, self.energy, self.steps)

    def stop(self):
        t0, e0, n0 = self._start
        w = ScriptedWindow(self.energy - e0, self.t - t0)
        self.meter_log.append((t0 + self.spec["wall_offset_s"], self.wall(), w.energy_j, w.duration_s,
                               self.steps - n0))
        return w


def _cyc(pattern, k):
    return pattern[k % len(pattern)] if pattern else 1.0


class ScriptedTrainer:
    def __init__(self, device, part):
        self.device, self.part, self.k = device, part, 0

    def step(self):
        self.device.step(self.part, self.k)
        self.k += 1

    def close(self):
        pass


def run_vector(vec, order=part_order, stop_metric=None, idle_per_probe=False):
    """Run ``vec``'s campaign through ``measure_parts``; returns what the vector's ``expected`` holds.
    ``order``, ``stop_metric`` (stop on this metric's CV instead of the campaign's) and ``idle_per_probe``
    (a fresh idle baseline per probe) make the non-conforming variants the tests show failing."""
    dev = ScriptedDevice(vec["device"])
    settings = ProtocolSettings(**vec["settings"])
    meter = dev if vec["device"]["meter"] else None
    baseline = IdleBaseline()
    stop = None
    if stop_metric is not None:
        def stop(res):
            return all(r.summary(stop_metric)["cv"] <= settings.cv_target for r in res.values())
    out = []
    for i, probe in enumerate(vec["probes"]):
        if i:
            dev.sleep(vec["device"]["probe_gap_s"])
        trainers = {p["name"]: ScriptedTrainer(dev, p) for p in probe["parts"]}
        mark = len(dev.meter_log)
        res = measure_parts(trainers, settings, meter=meter, metric=vec["metric"], clock=dev.clock,
                            wall=dev.wall, sleep=dev.sleep, state_fn=dev.state if vec["device"]["record_state"]
                            else None, idle=IdleBaseline() if idle_per_probe else baseline, order=order, stop=stop)
        out.append(observe(settings.window_s_for(meter), res, trainers, dev.meter_log[mark:]))
    return out


def observe(window_s, res, trainers, meter_log):
    """The vector's view of one probe: windows and idle measurements in time order, per-part values."""
    events = [{"event": "idle", "start_s": w0, "end_s": w1, "power_w": e / d}
              for (w0, w1, e, d, n) in meter_log if n == 0]
    parts = {}
    for name, r in res.items():
        for i, (w0, w1) in enumerate(r.window_times_s):
            events.append({"event": "window", "part": name, "round": i, "steps": r.steps_per_window,
                           "start_s": w0, "end_s": w1})
        outliers = {"time": r.outliers("time")}
        for m in ("energy", "net_energy"):
            if r.values(m):
                outliers[m] = r.outliers(m)
        parts[name] = {"steps_per_window": r.steps_per_window,
                       "warmup_steps": trainers[name].k - r.steps_per_window * len(r.time_s),
                       "time_s": list(r.time_s), "energy_j": list(r.energy_j), "net_energy_j": list(r.net_energy_j),
                       "window_idle_power_w": list(r.window_idle_power_w), "idle_power_w": r.idle_power_w,
                       "outliers": outliers}
    events.sort(key=lambda e: e["start_s"])
    rounds = {len(r.time_s) for r in res.values()}
    assert len(rounds) == 1
    return {"window_s": window_s, "rounds": rounds.pop(),
            "idle_measurements": sum(e["event"] == "idle" for e in events), "events": events, "parts": parts}


# --- the vectors' inputs -------------------------------------------------------------------------------------

def _pattern(seed, n, spread):
    rng = random.Random(seed)
    return [round(1.0 + rng.uniform(-spread, spread), 4) for _ in range(n)]


def _part(name, step_s, active_power_w=0.0, jitter=(), step_energy_j=None, energy_jitter=(), slow_steps=()):
    """One part's scripted steps; ``slow_steps``: [from, to, factor]: steps from..to-1 take factor x as long."""
    return {"name": name, "step_s": step_s, "jitter": list(jitter), "active_power_w": active_power_w,
            "step_energy_j": step_energy_j, "energy_jitter": list(energy_jitter),
            "slow_steps": [list(r) for r in slow_steps]}


def _steps_per_window(vec, probe, part):
    """What the protocol will choose for ``part`` (a dry run; slow ranges start after the warm-up)."""
    return run_vector(vec)[probe]["parts"][part]["steps_per_window"]


def _settling(vec, part_name, amplitude, ratio):
    """``part_name`` (probe 0) settles after its warm-up: round r's steps take 1 + amplitude x ratio^r as long
    (a cache or clock that settles), for every round the settings allow."""
    n = _steps_per_window(vec, 0, part_name)
    w = vec["settings"]["warmup_steps"]
    for p in vec["probes"][0]["parts"]:
        if p["name"] == part_name:
            p["slow_steps"] = [[w + r * n, w + (r + 1) * n, 1.0 + round(amplitude * ratio ** r, 4)]
                               for r in range(vec["settings"]["max_rounds"])]


def _device(meter_period_s=None, drift_s_per_s=0.0, states=None, record_state=True, idle_power_w=0.8):
    return {"t0_s": 100.0, "wall_offset_s": 1000.0, "drift_s_per_s": drift_s_per_s,
            "meter": None if meter_period_s is None else {"sample_period_s": meter_period_s},
            "states": states or [{"from_s": 0.0, "idle_power_w": idle_power_w,
                                  "state": {"charging": False, "battery_pct": 80, "battery_temp_c": 30.0}}],
            "record_state": record_state, "probe_gap_s": 0.5}


def _settings(**kw):
    return ProtocolSettings(**kw).to_dict()


def _vector(name, description, metric, settings, device, probes, checks=None):
    vec = {"format": FORMAT, "version": 1, "name": name, "note": "SYNTHETIC scripted device, not a measurement",
           "generator": "tests/vectors/make_protocol_vectors.py", "description": description, "metric": metric,
           "settings": settings, "device": device, "probes": [{"parts": p} for p in probes]}
    if checks:
        vec["checks"] = checks
    return vec


def vector_inputs():
    """Every vector without its ``expected`` (the scripted device, the settings, the probes)."""
    vecs = {}
    vecs["time"] = _vector(
        "time", "time campaign with a meter: hidden settles (round r 1 + 0.16 x 0.5^r slower), so the robust time "
        "CV reaches the target after round 7; the energy per step is noisy, so a stop on the energy CV would run "
        "to the cap",
        "time", _settings(min_window_s=0.05, min_rounds=4, max_rounds=12, cv_target=0.03),
        _device(meter_period_s=0.001),
        [[_part("head", 0.00137, jitter=_pattern(1, 5, 0.02), step_energy_j=0.004,
                energy_jitter=_pattern(2, 211, 0.9)),
          _part("hidden", 0.00411, jitter=_pattern(3, 7, 0.02), step_energy_j=0.011,
                energy_jitter=_pattern(4, 199, 0.9))]])
    _settling(vecs["time"], "hidden", 0.16, 0.5)
    vecs["energy"] = _vector(
        "energy", "energy campaign: stops on the energy CV at min_rounds although the time CV stays high",
        "energy", _settings(min_window_s=0.05, min_rounds=4, max_rounds=12, cv_target=0.03),
        _device(meter_period_s=0.004),
        [[_part("head", 0.00137, jitter=_pattern(5, 211, 0.9), step_energy_j=0.0031,
                energy_jitter=_pattern(6, 7, 0.002)),
          _part("hidden", 0.00413, jitter=_pattern(7, 199, 0.9), step_energy_j=0.0093,
                energy_jitter=_pattern(8, 5, 0.002))]])
    vecs["drift"] = _vector(
        "drift", "three parts, every step slower by drift_s_per_s per second: ABBA cancels it in the differences",
        "time", _settings(min_window_s=0.1, min_rounds=6, max_rounds=6, cv_target=0.03), _device(drift_s_per_s=0.0016),
        [[_part("head", 0.0173), _part("input", 0.0191), _part("hidden", 0.0213)]],
        checks={"true_difference_s": {"part": "hidden", "base": "head", "value": 0.0213 - 0.0173}})
    vecs["outlier"] = _vector(
        "outlier", "one slow step (x40) in round 3 of hidden: that window is flagged (outlier_k 3.0)",
        "time", _settings(min_window_s=0.1, min_rounds=9, max_rounds=9, cv_target=0.03, outlier_k=3.0,
                          warmup_steps=3),
        _device(),
        [[_part("head", 0.00171, jitter=_pattern(9, 13, 0.1)),
          _part("hidden", 0.00329, jitter=_pattern(11, 11, 0.1))]])
    n = _steps_per_window(vecs["outlier"], 0, "hidden")
    vecs["outlier"]["probes"][0]["parts"][1]["slow_steps"] = [[3 + 3 * n + 7, 3 + 3 * n + 8, 40.0]]
    vecs["slow_meter"] = _vector(
        "slow_meter", "a meter with a 0.25 s sample period: every window spans 20 periods (5 s)",
        "energy", _settings(min_window_s=0.05, min_rounds=3, max_rounds=3, cv_target=0.03),
        _device(meter_period_s=0.25),
        [[_part("head", 0.0123, active_power_w=1.7, jitter=_pattern(11, 17, 0.05)),
          _part("hidden", 0.0291, active_power_w=2.9, jitter=_pattern(12, 13, 0.05))]])
    vecs["idle_campaign"] = _idle_campaign()
    return vecs


def _idle_campaign():
    """Three probes; the state changes are placed on the timeline of the run itself (so each lands where
    the description says): battery -1 % and +2 C mid probe 0, charging mid probe 1, +5.5 C between 1 and 2."""
    s0 = {"charging": False, "battery_pct": 80, "battery_temp_c": 30.0, "thermal_status": 0}
    states = [{"from_s": 0.0, "idle_power_w": 0.9, "state": s0}]
    probes = [[_part("head", 0.00173, active_power_w=1.1, jitter=_pattern(20 + i, 7, 0.05)),
               _part("hidden", 0.00389, active_power_w=2.3, jitter=_pattern(30 + i, 5, 0.05))] for i in range(3)]
    vec = _vector("idle_campaign", "one idle baseline for three probes, re-measured only when the device state "
                  "changes: charging starts (mid probe 1), battery +5.5 C (before probe 2); not for -1 % and +2 C",
                  "energy", _settings(min_window_s=0.05, min_rounds=5, max_rounds=5, cv_target=0.03),
                  _device(meter_period_s=0.002, states=states), probes)

    def spans():
        got = run_vector(vec)
        return [(p["events"][0]["start_s"] - 1000.0, p["events"][-1]["end_s"] - 1000.0) for p in got]

    (a0, b0), _, _ = spans()
    states.append({"from_s": a0 + 0.5 * (b0 - a0), "idle_power_w": 0.9,
                   "state": dict(s0, battery_pct=79, battery_temp_c=32.0)})
    _, (a1, b1), _ = spans()
    states.append({"from_s": a1 + 0.5 * (b1 - a1), "idle_power_w": 1.45,
                   "state": dict(s0, charging=True, battery_pct=79, battery_temp_c=33.0)})
    _, (_, b1), _ = spans()
    states.append({"from_s": b1 + 0.5 * vec["device"]["probe_gap_s"], "idle_power_w": 1.6,
                   "state": dict(s0, charging=True, battery_pct=80, battery_temp_c=38.5)})
    return vec


# --- self-checks: each vector shows what it claims --------------------------------------------------------------

def _check(name, vec, got):
    s = vec["settings"]
    for probe, exp in zip(vec["probes"], got):
        names = [p["name"] for p in probe["parts"]]
        windows = [e for e in exp["events"] if e["event"] == "window"]
        # ABBA: round r runs the parts in their order when r is even, reversed when odd
        want = [n for r in range(exp["rounds"]) for n in (names if r % 2 == 0 else names[::-1])]
        assert [w["part"] for w in windows] == want, name
        assert s["min_rounds"] <= exp["rounds"] <= s["max_rounds"], name
    if name == "time":
        assert got[0]["rounds"] == 7, got[0]["rounds"]
        assert run_vector(vec, stop_metric="energy")[0]["rounds"] == 12
    if name == "energy":
        assert got[0]["rounds"] == 4
        assert run_vector(vec, stop_metric="time")[0]["rounds"] > 4
    if name == "drift":
        c = vec["checks"]["true_difference_s"]
        for order, ok in ((part_order, True), (lambda parts, r: list(parts), False)):
            p = run_vector(vec, order=order)[0]["parts"]
            diffs = [a - b for a, b in zip(p[c["part"]]["time_s"], p[c["base"]]["time_s"])]
            err = abs(sum(diffs) / len(diffs) - c["value"]) / c["value"]
            assert (err < 0.005) if ok else (err > 0.05), (order, err)
    if name == "outlier":
        assert got[0]["parts"]["hidden"]["outliers"]["time"] == [3]
        assert got[0]["parts"]["head"]["outliers"]["time"] == []
    if name == "slow_meter":
        assert got[0]["window_s"] == 20 * 0.25
        for w in got[0]["events"]:
            assert w["end_s"] - w["start_s"] >= 0.95 * 5.0, w
    if name == "idle_campaign":
        assert [p["idle_measurements"] for p in got] == [1, 1, 1], [p["idle_measurements"] for p in got]
        assert got[1]["events"][0]["event"] == "window" and got[2]["events"][0]["event"] == "idle"
        assert [p["idle_measurements"] for p in run_vector(vec, idle_per_probe=True)] == [1, 2, 1]


def vectors():
    out = {}
    for name, vec in vector_inputs().items():
        got = run_vector(vec)
        _check(name, vec, got)
        out[name] = dict(vec, expected=got)
    return out


def text(vec):
    return json.dumps(vec, indent=1, sort_keys=False, allow_nan=False) + "\n"


def main():
    for name, vec in vectors().items():
        assert all(math.isfinite(v) for v in _numbers(vec))
        (HERE / f"protocol_{name}.json").write_text(text(vec))
        print(f"protocol_{name}.json: " + ", ".join(f"{p['rounds']} rounds, {p['idle_measurements']} idle"
                                                      for p in vec["expected"]))


def _numbers(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from _numbers(v)
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v)
    elif isinstance(x, float):
        yield x


if __name__ == "__main__":
    main()
