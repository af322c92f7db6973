"""Bench-meter CSV logs aligned to windows by a clock offset."""

import pytest

from fixtures.sysfs import FakeClock, trapezoid, wave
from thor_sdk.errors import FormatError, MeasurementError, NoMeterError, UsageError
from thor_sdk.meters.external import ExternalLogMeter, parse_meter_spec, read_power_log


def _write(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))


def test_window_aligned_by_offset(tmp_path):
    # the bench meter's clock runs 3600.5 s ahead of this machine's
    samples = wave(n=401, duration_s=40.0, base_w=2.0, amp_w=0.7)
    log0 = 1_700_000_000.0
    path = tmp_path / "monsoon.csv"
    _write(path, ["time_s", "power_w", "note"], [(f"{log0 + t:.4f}", f"{p:.6f}", "x") for t, p in samples])
    clock = FakeClock(log0 - 3600.5 + 10.05)  # window starts 10.05 s into the log (between samples)
    m = ExternalLogMeter(path, clock_offset_s=3600.5, clock=clock)
    assert m.is_available()
    assert m.sample_period_s == pytest.approx(0.1)
    m.start()
    clock.t += 20.0
    w = m.stop()
    # reference: the planted samples inside the window, plus its ends linearly interpolated
    def at(x):
        (t0, p0), (t1, p1) = next((a, b) for a, b in zip(samples, samples[1:]) if a[0] <= x <= b[0])
        return p0 + (p1 - p0) * (x - t0) / (t1 - t0)
    inside = [(10.05, at(10.05))] + [(t, p) for t, p in samples if 10.05 < t < 30.05] + [(30.05, at(30.05))]
    expect = trapezoid(inside)
    assert w.energy_j == pytest.approx(expect, rel=0.005)
    assert w.duration_s == pytest.approx(20.0)


def test_current_voltage_columns_in_ms(tmp_path):
    path = tmp_path / "log.csv"
    rows = [(k * 200, 500 + 10 * k, 4.0) for k in range(51)]  # Time(ms), Main(mA), Main Voltage(V)
    _write(path, ["Time(ms)", "Main(mA)", "Main Voltage(V)"], rows)
    s = read_power_log(path)
    assert s[1] == pytest.approx((0.2, 0.51 * 4.0))
    m = ExternalLogMeter(path)
    w = m.energy_between(1.0, 9.0)
    assert w.energy_j == pytest.approx(trapezoid([(t, p) for t, p in s if 1.0 <= t <= 9.0]), rel=1e-9)


def test_log_not_covering_the_window(tmp_path):
    path = tmp_path / "log.csv"
    _write(path, ["t", "power_mw"], [(k, 1000) for k in range(10)])
    naps = []
    m = ExternalLogMeter(path, wait_s=1.0, sleep=naps.append)
    with pytest.raises(MeasurementError, match="before the window's end"):
        m.energy_between(2.0, 20.0)
    assert sum(naps) == pytest.approx(1.0)  # it waited for the log to grow, then gave up
    with pytest.raises(MeasurementError, match="after the window's start"):
        m.energy_between(-5.0, 5.0)
    assert m.energy_between(2.0, 8.0).energy_j == pytest.approx(6.0)


def test_gap_and_bad_rows(tmp_path):
    path = tmp_path / "gap.csv"
    _write(path, ["t", "power_w"], [(0, 1), (1, 1), (2, 1), (30, 1), (31, 1)])
    with pytest.raises(MeasurementError, match="gap"):
        ExternalLogMeter(path).energy_between(0.5, 30.5)
    bad = tmp_path / "bad.csv"
    _write(bad, ["t", "power_w"], [(0, 1), ("x", 1), (2, 1), (3, "partial")])
    with pytest.raises(FormatError, match="line"):
        read_power_log(bad)
    ok = tmp_path / "growing.csv"
    _write(ok, ["t", "power_w"], [(0, 1), (1, 1), (2, "")])  # last line still being written
    assert len(read_power_log(ok)) == 2
    nocol = tmp_path / "nocol.csv"
    _write(nocol, ["when", "what"], [(0, 1)])
    m = ExternalLogMeter(nocol)
    assert "no time column" in m.why_unavailable()
    with pytest.raises(NoMeterError):
        m.start()


def test_meter_spec(tmp_path):
    path = tmp_path / "a b;c.csv"
    _write(path, ["t", "power_w"], [(0, 1), (1, 1)])
    m = parse_meter_spec(f"external:{path},offset=-2.5")
    assert m.path == str(path) and m.clock_offset_s == -2.5
    assert parse_meter_spec(f"external:{path}").clock_offset_s == 0.0
    with pytest.raises(UsageError):
        parse_meter_spec("monsoon:x")
