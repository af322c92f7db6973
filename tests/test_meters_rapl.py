"""RAPL meter on a fake powercap tree: wrap-around (once and many times), zones, permission errors."""

import builtins
import os

import pytest

from fixtures.sysfs import FakeClock, drive, plant, trapezoid, wave, write
from thor_sdk.errors import MeasurementError, NoMeterError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.rapl import RaplMeter

PKG = "sys/class/powercap/intel-rapl:0"
DRAM = "sys/class/powercap/intel-rapl:0:2"


def _cumulative(samples):
    out, e = [], 0.0
    for k, (t, p) in enumerate(samples):
        if k:
            e += (t - samples[k - 1][0]) * (p + samples[k - 1][1]) / 2
        out.append(e)
    return out


def test_default_zone_is_the_package_not_psys_or_subzones(tmp_path):
    plant(tmp_path, "rapl_host")
    m = RaplMeter(tmp_path)
    assert m.is_available(), m.why_unavailable()
    assert [n for _, n in m.selected()] == ["package-0"]
    assert {n for _, n in m.zones()} == {"package-0", "core", "uncore", "dram", "psys"}
    assert [n for _, n in RaplMeter(tmp_path, domains=["package-0", "dram"]).selected()] == ["package-0", "dram"]
    assert "no RAPL zone named gpu" in RaplMeter(tmp_path, domains=["gpu"]).why_unavailable()


@pytest.mark.parametrize("poll", [True, False])
def test_energy_across_wraparound(tmp_path, poll):
    """Counter wraps at max_energy_range_uj; polled: many wraps; unpolled (start/stop only): one wrap."""
    plant(tmp_path, "rapl_host")
    samples = wave(n=41, duration_s=4.0, base_w=40.0, amp_w=15.0)
    total = trapezoid(samples)
    wrap_uj = int(total * 1e6 / 7) if poll else int(total * 1e6 * 1.5)  # ~7 wraps, or exactly one
    write(tmp_path, f"{PKG}/max_energy_range_uj", wrap_uj)
    start_uj = wrap_uj - 1234567
    cum = _cumulative(samples)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = RaplMeter(tmp_path, sampler=sampler)

    def setter(k, t, p):
        write(tmp_path, f"{PKG}/energy_uj", int(round(start_uj + cum[k] * 1e6)) % wrap_uj)

    if poll:
        w = drive(m, sampler, clock, samples, setter)
    else:
        w = drive(m, sampler, clock, [samples[0], samples[-1]],
                  lambda k, t, p: setter(0 if k == 0 else len(samples) - 1, t, p))
    assert w.energy_j == pytest.approx(total, rel=0.005)
    assert w.duration_s == pytest.approx(4.0)


def test_two_zones_summed(tmp_path):
    plant(tmp_path, "rapl_host")
    samples = wave()
    cum = _cumulative(samples)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = RaplMeter(tmp_path, domains=["package-0", "dram"], sampler=sampler)

    def setter(k, t, p):
        write(tmp_path, f"{PKG}/energy_uj", 10**9 + int(cum[k] * 1e6))
        write(tmp_path, f"{DRAM}/energy_uj", 5 * 10**8 + int(cum[k] * 0.1e6))

    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(1.1 * trapezoid(samples), rel=0.005)


def test_permission_denied_is_explained(tmp_path, monkeypatch):
    """energy_uj root-only since Linux 5.10: simulated by the OS refusing the open()."""
    plant(tmp_path, "rapl_host")
    real_open = builtins.open

    def guarded_open(file, *a, **kw):
        if os.fspath(file).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", os.fspath(file))
        return real_open(file, *a, **kw)

    monkeypatch.setattr(builtins, "open", guarded_open)
    m = RaplMeter(tmp_path)
    assert not m.is_available()
    why = m.why_unavailable()
    assert "permission denied" in why and "5.10" in why and "root" in why
    with pytest.raises(NoMeterError, match="5.10"):
        m.start()
    with pytest.raises(MeasurementError, match="root"):
        m.read_counters()


def test_no_powercap(tmp_path):
    m = RaplMeter(tmp_path)
    assert not m.is_available()
    assert "powercap" in m.why_unavailable()


def test_counter_backwards_without_wrap_is_an_error():
    from thor_sdk.meters.base import CounterMeter

    with pytest.raises(MeasurementError, match="backwards"):
        CounterMeter.increment(10.0, 5.0, None)
    assert CounterMeter.increment(9.0, 1.0, 10.0) == pytest.approx(2.0)
