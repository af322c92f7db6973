"""Which reading of a meter gave each window (``EnergyWindow.source``: NVML's instant field, counter or averaged
power) is stored with that window in the campaign, through the real protocol, campaign loop and store."""

from thor_sdk.api import probe
from thor_sdk.devices.base import Device
from thor_sdk.harness.protocol import ProtocolSettings, measure_parts
from fake_device import ConstantPowerMeter
from thor_sdk.store import Campaign


class _ScriptedClock:
    def __init__(self):
        self.t = 100.0

    def now(self):
        return self.t

    def wall(self):
        return 1.7e9 + self.t

    def sleep(self, s):
        self.t += s


def _source_meter(clock, switch_after=None):
    """A meter whose windows say which reading gave them; the source changes after ``switch_after`` windows
    (NVML falls back from the instant field to the counter when a driver stops answering the field)."""
    return ConstantPowerMeter(12.0, clock.now, name="fake-nvml", source=lambda n: "total-energy"
                              if switch_after is not None and n > switch_after else "power-instant")


class _Trainer:
    def __init__(self, clock, step_s):
        self.clock, self.step_s = clock, step_s

    def step(self):
        self.clock.t += self.step_s


class _SourceDevice(Device):
    name = "fake-source"

    def __init__(self, with_state):
        self.with_state = with_state
        self.clock = _ScriptedClock()
        self.meter = _source_meter(self.clock)

    def meters(self):
        return [self.meter]

    def info(self):
        return {"name": self.name, "kind": "fake (a meter with a source per window)"}

    def measure_probe(self, probe, metric="time", settings=None, runtime="torch", on_round=None):
        clock = self.clock
        trainers = {p: _Trainer(clock, 0.001 * (i + 1)) for i, p in enumerate(probe.parts())}
        state_fn = (lambda: {"gpu_mhz": 900}) if self.with_state else None
        return measure_parts(trainers, settings, meter=self.require_meter(metric), metric=metric, on_round=on_round,
                             clock=clock.now, state_fn=state_fn, sleep=clock.sleep, wall=clock.wall)


def test_measure_parts_keeps_each_windows_meter_source_in_its_state():
    clock = _ScriptedClock()
    meter = _source_meter(clock, switch_after=5)  # idle, then 4 part windows on the field, then the counter
    settings = ProtocolSettings(min_rounds=3, max_rounds=3, min_window_s=0.01)
    res = measure_parts({"head": _Trainer(clock, 0.001), "hidden": _Trainer(clock, 0.002)}, settings,
                        meter=meter, metric="energy", clock=clock.now, sleep=clock.sleep, wall=clock.wall,
                        state_fn=lambda: {"gpu_mhz": 900})
    for r in res.values():
        assert len(r.states) == len(r.time_s) == 3
        assert all(s["gpu_mhz"] == 900 for s in r.states)  # the device's own state is kept beside it
    # meter windows: idle, then ABBA: round 0 head, hidden; round 1 hidden, head; round 2 head, hidden
    assert [s["meter_source"] for s in res["head"].states] == ["power-instant", "power-instant", "total-energy"]
    assert [s["meter_source"] for s in res["hidden"].states] == ["power-instant", "power-instant", "total-energy"]
    # a meter without sources adds nothing, and without a state source nothing is recorded, as before
    plain = ConstantPowerMeter(12.0, clock.now, name="fake-nvml")
    res = measure_parts({"head": _Trainer(clock, 0.001)}, settings, meter=plain, metric="energy",
                        clock=clock.now, sleep=clock.sleep, wall=clock.wall)
    assert res["head"].states == []


def test_the_campaign_stores_the_meter_source_with_every_window(tmp_path):
    for with_state in (True, False):
        db = str(tmp_path / f"c{with_state}.db")
        settings = ProtocolSettings(min_rounds=3, max_rounds=3, min_window_s=0.01, cv_target=1.0)
        probe(["har"], device=_SourceDevice(with_state), out=db, metric="energy", settings=settings,
              batch_sizes=[16], max_probes=2)
        with Campaign.open(db) as c:
            ids = [s["probe_id"] for s in c.samples("energy")]
            assert ids
            windows = [w for pid in ids for w in c.windows(pid, detail=True)]
        assert windows and all(w["state"]["meter_source"] == "power-instant" for w in windows)
        assert all(("gpu_mhz" in w["state"]) == with_state for w in windows)
        assert all(w["net_energy_j"] is not None for w in windows)
