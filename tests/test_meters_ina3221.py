"""Jetson INA3221 meter on fake Nano / TX2 / Orin trees (JetPack 4 iio and JetPack 5-6 hwmon layouts)."""

import pytest

from fixtures.sysfs import FakeClock, drive, plant, trapezoid, wave, write
from thor_sdk.errors import NoMeterError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.ina3221 import Ina3221Meter

NANO = "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
TX2_IN = "sys/bus/i2c/drivers/ina3221x/0-0041/iio:device1"
TX2_GPU = "sys/bus/i2c/drivers/ina3221x/0-0040/iio:device0"
ORIN_A = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
ORIN_B = "sys/bus/i2c/drivers/ina3221/1-0041/hwmon/hwmon4"


def _meter(root, **kw):
    clock = FakeClock()
    sampler = ManualSampler(clock)
    return Ina3221Meter(root, sampler=sampler, **kw), sampler, clock


def test_nano_input_rail_direct_power_mw(tmp_path):
    plant(tmp_path, "nano")
    m, sampler, clock = _meter(tmp_path)
    assert m.is_available(), m.why_unavailable()
    assert [r.name for r in m.selected_rails()] == ["POM_5V_IN"]
    samples = wave()

    def setter(k, t, p):
        write(tmp_path, f"{NANO}/in_power0_input", round(p * 1000))        # mW
        write(tmp_path, f"{NANO}/in_power1_input", 999999)                # GPU rail: not selected
        write(tmp_path, f"{NANO}/in_current0_input", 1)                   # ignored: power node exists
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert w.duration_s == pytest.approx(samples[-1][0])
    assert len(w.samples) == len(samples)


def test_tx2_picks_vdd_in_on_second_chip_and_rail_selection(tmp_path):
    plant(tmp_path, "tx2")
    m, sampler, clock = _meter(tmp_path)
    assert [r.name for r in m.selected_rails()] == ["VDD_IN"]
    samples = wave(base_w=6.0)

    def setter(k, t, p):
        write(tmp_path, f"{TX2_IN}/in_power0_input", round(p * 1000))
        write(tmp_path, f"{TX2_GPU}/in_power0_input", round(p * 250))
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)

    g, gs, gc = _meter(tmp_path, rails=["VDD_SYS_GPU"])
    w = drive(g, gs, gc, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples) / 4, rel=0.005)


def test_orin_hwmon_voltage_times_current_sums_connected_rails(tmp_path):
    plant(tmp_path, "orin")
    m, sampler, clock = _meter(tmp_path)
    names = sorted(r.name for r in m.selected_rails())
    assert names == ["VDDQ_VDD2_1V8AO", "VDD_CPU_CV", "VDD_GPU_SOC", "VIN_SYS_5V0"]  # NC skipped, no in7
    assert all(r.to_dict()["form"] == "voltage x current" for r in m.selected_rails())
    samples = wave(base_w=12.0, amp_w=5.0)
    share = {"VDD_GPU_SOC": (ORIN_A, 1, 0.5), "VDD_CPU_CV": (ORIN_A, 2, 0.2), "VIN_SYS_5V0": (ORIN_A, 3, 0.25),
             "VDDQ_VDD2_1V8AO": (ORIN_B, 2, 0.05)}
    mv = {1: 5080, 2: 4990, 3: 5010}

    def setter(k, t, p):
        for d, c, frac in share.values():
            write(tmp_path, f"{d}/in{c}_input", mv[c])                           # mV
            write(tmp_path, f"{d}/curr{c}_input", round(p * frac / (mv[c] / 1000) * 1000))  # mA
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    # power_w() is the instantaneous total (the simulated-Jetson helper reads this)
    assert m.power_w() == pytest.approx(samples[-1][1], rel=0.005)
    assert set(m.rail_powers_w()) == set(share)


def test_named_rail_missing_and_no_driver(tmp_path):
    plant(tmp_path, "orin")
    m = Ina3221Meter(tmp_path, rails=["VDD_IN"])
    assert not m.is_available()
    assert "VDD_IN" in m.why_unavailable() and "VDD_GPU_SOC" in m.why_unavailable()
    empty = Ina3221Meter(tmp_path / "nothing")
    assert "no INA3221 driver" in empty.why_unavailable()
    with pytest.raises(NoMeterError):
        empty.start()


def test_garbled_value_is_a_measurement_error(tmp_path):
    from thor_sdk.errors import MeasurementError

    plant(tmp_path, "nano")
    write(tmp_path, f"{NANO}/in_power0_input", "n/a")
    with pytest.raises(MeasurementError, match="not a number"):
        Ina3221Meter(tmp_path).power_w()


def test_thread_sampler_real_thread(tmp_path):
    """The default background sampler really samples between start and stop."""
    import time

    plant(tmp_path, "nano")
    write(tmp_path, f"{NANO}/in_power0_input", 2000)
    m = Ina3221Meter(tmp_path, sample_period_s=0.01)
    m.start()
    time.sleep(0.12)
    w = m.stop()
    assert len(w.samples) >= 4
    assert w.energy_j == pytest.approx(2.0 * w.duration_s, rel=1e-6)
