"""Android battery meter on a fake Pixel tree: vendor units (uA/mA, uV/mV), sign conventions, charging."""

import pytest

from fixtures.sysfs import FakeClock, drive, plant, trapezoid, wave, write
from thor_sdk.errors import MeasurementError, NoMeterError
from thor_sdk.meters.android_battery import AndroidBatteryMeter
from thor_sdk.meters.base import ManualSampler

B = "sys/class/power_supply/battery"


def _run(tmp_path, samples, cur_scale, sign, volt_scale, volts=(3.85, 4.05), **kw):
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = AndroidBatteryMeter(tmp_path, sampler=sampler, **kw)
    assert m.is_available(), m.why_unavailable()

    def setter(k, t, p):
        v = volts[0] + (volts[1] - volts[0]) * k / (len(samples) - 1)   # voltage sags/rises over time
        write(tmp_path, f"{B}/voltage_now", round(v * volt_scale))
        write(tmp_path, f"{B}/current_now", round(sign * p / v * cur_scale))
    return m, drive(m, sampler, clock, samples, setter)


@pytest.mark.parametrize("cur_scale,sign,volt_scale,unit", [
    (1e6, -1, 1e6, "uA"),   # kernel ABI: uA, negative while discharging (Pixel)
    (1e6, +1, 1e6, "uA"),   # inverted-sign vendor driver
    (1e3, +1, 1e6, "mA"),   # milliamp vendor driver
    (1e3, -1, 1e3, "mA"),   # milliamps and millivolts
])
def test_energy_units_and_signs(tmp_path, cur_scale, sign, volt_scale, unit):
    plant(tmp_path, "pixel6")
    samples = wave(n=31, duration_s=30.0, base_w=3.0, amp_w=1.2)
    m, w = _run(tmp_path, samples, cur_scale, sign, volt_scale)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert m.last_window_info["current_unit"] == unit
    assert m.last_window_info["discharge_sign"] == sign


def test_explicit_units_override_detection(tmp_path):
    plant(tmp_path, "pixel6")
    # a phone idling at 8 mA that reports uA would look like milliamps to the magnitude rule
    samples = [(t, 0.031) for t in (0.0, 1.0, 2.0, 3.0)]
    _, w = _run(tmp_path, samples, 1e6, -1, 1e6, volts=(3.9, 3.9), current_unit="uA")
    assert w.energy_j == pytest.approx(0.031 * 3.0, rel=0.005)


def test_refuses_while_charging_unless_allowed(tmp_path):
    plant(tmp_path, "pixel6")
    write(tmp_path, f"{B}/status", "Charging")
    write(tmp_path, "sys/class/power_supply/usb/online", "1")
    m = AndroidBatteryMeter(tmp_path)
    assert not m.is_available()
    assert "Charging" in m.why_unavailable() and "usb power is online" in m.why_unavailable()
    with pytest.raises(NoMeterError, match="USB power hides the draw"):
        m.start()
    clock = FakeClock()
    allowed = AndroidBatteryMeter(tmp_path, allow_charging=True, sampler=ManualSampler(clock))
    assert allowed.is_available()
    allowed.start()
    clock.t += 1
    w = allowed.stop()
    assert allowed.last_window_info["external_power"]
    assert w.duration_s == pytest.approx(1.0)


def test_plugged_in_mid_window_is_an_error(tmp_path):
    plant(tmp_path, "pixel6")
    clock = FakeClock()
    m = AndroidBatteryMeter(tmp_path, sampler=ManualSampler(clock))
    m.start()
    write(tmp_path, f"{B}/status", "Charging")
    clock.t += 2
    with pytest.raises(MeasurementError, match="external power during the window"):
        m.stop()


def test_state_records_level_and_temperature(tmp_path):
    plant(tmp_path, "pixel6")
    s = AndroidBatteryMeter(tmp_path).state()
    assert s["battery_pct"] == 77 and s["battery_temp_c"] == pytest.approx(31.2)
    assert s["battery_status"] == "Discharging"


def test_no_battery(tmp_path):
    m = AndroidBatteryMeter(tmp_path)
    assert "no battery" in m.why_unavailable()
