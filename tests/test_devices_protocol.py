"""Measurement protocol, device-side parts: idle baseline (gross and net kept), device state per window,
window length from the meter's sensor period, outliers flagged. Real INA3221 meter on a fake Nano tree,
a fake clock advanced by fake trainers."""

import pytest

from fixtures.sysfs import FakeClock, plant, write
from thor_sdk.harness.protocol import ProtocolSettings, flag_outliers, measure_parts
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.ina3221 import Ina3221Meter

RAIL = "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/in_power0_input"
IDLE_W = 2.0


class Board:
    """The fake board: a clock, the rail file, and the sampler ticking as time passes."""

    def __init__(self, root):
        self.root = root
        self.clock = FakeClock(50.0)
        self.sampler = ManualSampler(self.clock)
        self.meter = Ina3221Meter(root, sample_period_s=0.01, sampler=self.sampler)
        self.sampling = False
        self.set_power(IDLE_W)

    def set_power(self, w):
        write(self.root, RAIL, round(w * 1000))

    def advance(self, dt, power_w, ticks=4):
        for _ in range(ticks):
            self.set_power(power_w)
            self.clock.t += dt / ticks
            if self.meter._active is not None:
                self.sampler.tick()

    def sleep(self, s):
        self.advance(s, IDLE_W)


class Trainer:
    def __init__(self, board, step_s, extra_w, slow_step=None):
        self.board, self.step_s, self.extra_w = board, step_s, extra_w
        self.n = 0
        self.slow_step = slow_step

    def step(self):
        self.n += 1
        dt = self.step_s * (5 if self.n == self.slow_step else 1)
        self.board.advance(dt, IDLE_W + self.extra_w, ticks=1)

    def close(self):
        pass


def test_idle_baseline_gross_net_and_state(tmp_path):
    plant(tmp_path, "nano")
    b = Board(tmp_path)
    trainers = {"head": Trainer(b, 0.002, 1.0), "hidden": Trainer(b, 0.005, 3.0)}
    settings = ProtocolSettings(warmup_steps=1, min_rounds=4, max_rounds=4, min_window_s=0.1)
    states = iter(range(1000))
    res = measure_parts(trainers, settings, meter=b.meter, metric="energy", clock=b.clock, sleep=b.sleep,
                        state_fn=lambda: {"battery_pct": 80, "seq": next(states)})
    assert settings.window_s_for(b.meter) == pytest.approx(0.2)  # 20 sensor periods of 10 ms
    for part, extra in (("head", 1.0), ("hidden", 3.0)):
        r = res[part]
        step_s = trainers[part].step_s
        assert r.idle_power_w == pytest.approx(IDLE_W, rel=1e-3)
        assert len(r.energy_j) == len(r.net_energy_j) == len(r.states) == 4
        for gross, net in zip(r.energy_j, r.net_energy_j):
            assert gross == pytest.approx((IDLE_W + extra) * step_s, rel=0.02)
            assert net == pytest.approx(extra * step_s, rel=0.02)   # the idle draw is removed
        assert r.states[0]["battery_pct"] == 80
    seqs = [s["seq"] for r in res.values() for s in r.states]
    assert sorted(seqs) == list(range(1, 9))   # read 0 was the idle baseline's state, before the rounds
    d = res["hidden"].to_dict()
    assert d["idle_power_w"] == pytest.approx(IDLE_W, rel=1e-3) and d["outliers"]["time"] == []


def test_no_idle_when_disabled_and_time_only(tmp_path):
    plant(tmp_path, "nano")
    b = Board(tmp_path)
    res = measure_parts({"head": Trainer(b, 0.01, 1.0)}, ProtocolSettings(min_rounds=2, max_rounds=2),
                        clock=b.clock, sleep=b.sleep)
    assert res["head"].idle_power_w is None and res["head"].net_energy_j == [] and res["head"].energy_j == []
    res = measure_parts({"head": Trainer(b, 0.01, 1.0)},
                        ProtocolSettings(min_rounds=2, max_rounds=2, measure_idle=False),
                        meter=b.meter, metric="energy", clock=b.clock, sleep=b.sleep)
    assert res["head"].idle_power_w is None and len(res["head"].energy_j) == 2


def test_outliers_flagged(tmp_path):
    assert flag_outliers([1.0, 1.01, 0.99, 1.0, 5.0, 1.02]) == [4]
    assert flag_outliers([1.0, 1.0, 1.0, 1.3]) == [3]
    assert flag_outliers([1.0, 2.0]) == []
    plant(tmp_path, "nano")
    b = Board(tmp_path)
    # the 40th step (inside a measured window) is 5x slower: that window is an outlier
    t = Trainer(b, 0.01, 1.0, slow_step=40)
    res = measure_parts({"head": t}, ProtocolSettings(warmup_steps=1, min_rounds=6, max_rounds=6, min_window_s=0.1,
                                                      measure_idle=False), clock=b.clock, sleep=b.sleep)
    assert len(res["head"].outliers("time")) == 1


def test_sysfs_state_on_fake_trees(tmp_path):
    from thor_sdk.devices.state import sysfs_state

    plant(tmp_path, "pixel6")
    write(tmp_path, "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", 1803000)
    write(tmp_path, "sys/devices/system/cpu/cpu10/cpufreq/scaling_cur_freq", 2802000)
    write(tmp_path, "sys/devices/system/cpu/cpu2/cpufreq/scaling_cur_freq", 300000)
    write(tmp_path, "sys/class/thermal/thermal_zone0/temp", 41500)
    write(tmp_path, "sys/class/thermal/thermal_zone0/type", "BIG")
    write(tmp_path, "sys/class/thermal/thermal_zone1/temp", 38000)
    write(tmp_path, "sys/class/devfreq/17000000.gpu/cur_freq", 921600000)
    s = sysfs_state(tmp_path)
    assert list(s["cpu_khz"]) == ["cpu0", "cpu2", "cpu10"] and s["cpu_khz"]["cpu10"] == 2802000
    assert s["temps_c"] == {"BIG": 41.5, "thermal_zone1": 38.0}
    assert s["gpu_hz"] == {"17000000.gpu": 921600000}
    assert s["battery_pct"] == 77 and s["battery_temp_c"] == pytest.approx(31.2)
    assert sysfs_state(tmp_path / "empty") == {}


def test_window_wall_times_align_a_bench_log(tmp_path):
    """Windows carry wall-clock times; an external meter's log integrated over them gives the energy."""
    from thor_sdk.meters.external import ExternalLogMeter

    plant(tmp_path, "nano")
    b = Board(tmp_path)
    wall = FakeClock(1_700_000_000.0)

    class Step(Trainer):
        def step(self):
            super().step()
            wall.t = 1_700_000_000.0 + b.clock.t   # the wall clock runs with the board clock

    res = measure_parts({"head": Step(b, 0.01, 1.0)}, ProtocolSettings(min_rounds=3, max_rounds=3, warmup_steps=1),
                        clock=b.clock, sleep=b.sleep, wall=wall)
    r = res["head"]
    assert len(r.window_times_s) == 3 and all(t1 > t0 for t0, t1 in r.window_times_s)
    log = tmp_path / "bench.csv"
    rows = ["time_s,power_w"] + [f"{1_700_000_000.0 + k * 0.01:.3f},4.0" for k in range(int(b.clock.t * 100) + 10)]
    log.write_text("\n".join(rows) + "\n")
    m = ExternalLogMeter(log)
    for (t0, t1), dt in zip(r.window_times_s, r.time_s):
        w = m.energy_between(t0, t1)
        assert w.energy_j == pytest.approx(4.0 * dt * r.steps_per_window, rel=1e-4)  # epoch floats: ~1e-6 s
