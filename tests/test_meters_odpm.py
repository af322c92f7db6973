"""ODPM rails (Pixel iio energy_value) and the power-stats HAL dump."""

import pytest

from fixtures.sysfs import FakeClock, drive, layout, plant, trapezoid, wave, write
from thor_sdk.errors import FormatError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.odpm import (OdpmMeter, PowerStatsDumpMeter, parse_energy_value, parse_power_stats_dump)

DEV0 = "sys/bus/iio/devices/iio:device0"
DEV1 = "sys/bus/iio/devices/iio:device1"

# the energy-meter section of `dumpsys android.hardware.power.stats.IPowerStats/default` (AIDL HAL 2.0)
DUMP = """
============= PowerStats HAL 2.0 state residencies ==============
            Entity                State         Total time     Total entries   Last entry tstamp
========== End of PowerStats HAL 2.0 state residencies ==========

============= PowerStats HAL 2.0 energy meter ==============
                           Channel    Cumulative Energy
          [S4M_VDD_CPUCL0]:CPU(LITTLE)        {little:14.2f} mWs
             [S2M_VDD_CPUCL2]:CPU(BIG)        {big:14.2f} mWs
                [S2S_VDD_G3D]:GPU        {gpu:14.2f} mWs
========== End of PowerStats HAL 2.0 energy meter ==========
"""


def _rails(name):
    out = {}
    for dev in (DEV0, DEV1):
        text = layout(name)["files"][f"{dev}/energy_value"]
        out[dev] = list(parse_energy_value(text)[1])
    return out


def _energy_text(t_ms, rails, values):
    return f"t={t_ms}\n" + "".join(f"CH{i}(T={t_ms})[{r}], {values.get(r, 0)}\n" for i, r in enumerate(rails))


def _cum(samples):
    out, e = [], 0.0
    for k, (t, p) in enumerate(samples):
        if k:
            e += (t - samples[k - 1][0]) * (p + samples[k - 1][1]) / 2
        out.append(e)
    return out


def test_parse_energy_value_and_enabled_rails(tmp_path):
    t, rails = parse_energy_value("t=4242\nCH0(T=4000)[S10M_VDD_TPU], 123\nCH1(T=4000)[VSYS_PWR_MODEM], 9\n")
    assert t == 4242 and rails == {"S10M_VDD_TPU": 123, "VSYS_PWR_MODEM": 9}
    with pytest.raises(FormatError):
        parse_energy_value("garbage\n")


def test_all_rails_energy_over_window(tmp_path):
    plant(tmp_path, "pixel6")
    rails = _rails("pixel6")
    samples = wave(n=21, duration_s=10.0, base_w=2.5, amp_w=1.0)
    cum = _cum(samples)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = OdpmMeter(tmp_path, sampler=sampler)
    assert m.is_available(), m.why_unavailable()
    assert m.sample_period_s == pytest.approx(0.02)  # 20 samples at 1 kHz

    def setter(k, t, p):
        # split the planted power over four rails on two PMICs (uWs counters, large offsets)
        e_uws = cum[k] * 1e6
        write(tmp_path, f"{DEV0}/energy_value", _energy_text(
            1000 + int(t * 1000), rails[DEV0],
            {"S4M_VDD_CPUCL0": 7 * 10**9 + round(0.4 * e_uws), "S2M_VDD_CPUCL2": 10**9 + round(0.3 * e_uws)}))
        write(tmp_path, f"{DEV1}/energy_value", _energy_text(
            1000 + int(t * 1000), rails[DEV1], {"S2S_VDD_G3D": 3 * 10**10 + round(0.3 * e_uws)}))
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)

    # rails chosen by subsystem name (device-specific names are accepted too)
    clock2 = FakeClock()
    s2 = ManualSampler(clock2)
    cpu = OdpmMeter(tmp_path, rails=["CPU(LITTLE)", "S2M_VDD_CPUCL2"], sampler=s2)
    w = drive(cpu, s2, clock2, samples, setter)
    assert w.energy_j == pytest.approx(0.7 * trapezoid(samples), rel=0.005)


def test_unknown_rail_and_no_odpm(tmp_path):
    plant(tmp_path, "pixel6")
    assert "S4M_VDD_CPUCL0" in OdpmMeter(tmp_path, rails=["NOPE"]).why_unavailable()
    assert "no ODPM" in OdpmMeter(tmp_path / "x").why_unavailable()


def test_power_stats_dump_meter(tmp_path):
    samples = wave(n=11, duration_s=20.0, base_w=1.5, amp_w=0.5)
    cum = _cum(samples)
    state = {"k": 0}

    def dump():
        e_mws = cum[state["k"]] * 1000
        return DUMP.format(little=123456.78 + 0.5 * e_mws, big=50.0 + 0.25 * e_mws, gpu=9.5 + 0.25 * e_mws)

    rows = parse_power_stats_dump(dump())
    assert set(rows) == {"S4M_VDD_CPUCL0", "S2M_VDD_CPUCL2", "S2S_VDD_G3D"}
    assert rows["S4M_VDD_CPUCL0"] == pytest.approx(123.45678)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = PowerStatsDumpMeter(dump, sampler=sampler)
    assert m.is_available(), m.why_unavailable()
    w = drive(m, sampler, clock, samples, lambda k, t, p: state.update(k=k))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert "no 'PowerStats HAL" in PowerStatsDumpMeter(lambda: "Can't find service").why_unavailable()
