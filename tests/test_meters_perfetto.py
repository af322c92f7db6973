"""Perfetto-trace meter: fake ``android.power`` traces encoded here from planted samples, parsed by the real reader."""

import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.sysfs import trapezoid, wave
from thor_sdk.errors import FormatError, MeasurementError, NoMeterError
from thor_sdk.meters.external import integrate_between
from thor_sdk.meters.perfetto_trace import PerfettoTraceMeter, android_power_config, parse_trace, read_trace

BOOT0_S = 5000.0            # CLOCK_BOOTTIME at the first sample
REALTIME_MINUS_BOOT_S = 1.7e9  # the phone's wall clock minus its boot time


# -- a tiny protobuf encoder (the writer side of the wire format the meter reads) ----------------------------
def varint(n):
    n &= (1 << 64) - 1  # negative int64: two's complement, 10 bytes
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def vint(fno, n):
    return varint(fno << 3) + varint(n)


def ld(fno, payload):
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(fno << 3 | 2) + varint(len(payload)) + payload


def f32(fno, x):
    return varint(fno << 3 | 5) + struct.pack("<f", x)


def packet(*fields):
    return ld(1, b"".join(fields))  # Trace.packet = 1


def clock_snapshot(boot_s=BOOT0_S - 1.0):
    boot_ns = round(boot_s * 1e9)
    real_ns = round((boot_s + REALTIME_MINUS_BOOT_S) * 1e9)
    clocks = ld(1, vint(1, 6) + vint(2, boot_ns)) + ld(1, vint(1, 1) + vint(2, real_ns))  # BOOTTIME, REALTIME
    return packet(vint(8, boot_ns), ld(6, clocks))  # TracePacket.clock_snapshot = 6


def rail_descriptors(rails):
    body = b"".join(ld(1, vint(1, i) + ld(2, name) + ld(3, sub) + vint(4, 1000)) for i, (name, sub) in enumerate(rails))
    return packet(vint(8, round((BOOT0_S - 0.5) * 1e9)), ld(40, body))  # TracePacket.power_rails = 40


def energy_packet(t_boot_s, values_uws):
    ts_ms = round(t_boot_s * 1000)
    body = b"".join(ld(2, vint(1, i) + vint(2, ts_ms) + vint(3, uws)) for i, uws in enumerate(values_uws))
    return packet(vint(8, ts_ms * 1_000_000), ld(40, body))


def battery_packet(t_boot_s, current_ua=None, voltage_uv=None, charge_uah=None, capacity_pct=None):
    body = b""
    if charge_uah is not None:
        body += vint(1, charge_uah)
    if capacity_pct is not None:
        body += f32(2, capacity_pct)
    if current_ua is not None:
        body += vint(3, current_ua)
    if voltage_uv is not None:
        body += vint(7, voltage_uv)
    return packet(vint(8, round(t_boot_s * 1e9)), ld(38, body))  # TracePacket.battery = 38


def cumulative(samples):
    out, e = [0.0], 0.0
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
        e += (t1 - t0) * (p0 + p1) / 2
        out.append(e)
    return out


RAILS = [("S4M_VDD_CPUCL0", "CPU(LITTLE)"), ("S2M_VDD_CPUCL2", "CPU(BIG)"), ("S2S_VDD_G3D", "GPU")]
SHARES = (0.5, 0.3, 0.2)
OFFSETS_UWS = (7 * 10**12, 10**9, 3 * 10**10)  # counters accumulated since boot: large


def rails_trace(samples, compress=False):
    cum = cumulative(samples)
    pkts = [clock_snapshot(), rail_descriptors(RAILS)]
    for (t, _p), e in zip(samples, cum):
        pkts.append(energy_packet(BOOT0_S + t, [o + round(share * e * 1e6) for o, share in zip(OFFSETS_UWS, SHARES)]))
    if compress:  # TracePacket.compressed_packets = 50: zlib-deflated Trace.packet fields
        body = b"".join(pkts[1:])
        return pkts[0] + packet(ld(50, zlib.compress(body)))
    return b"".join(pkts)


def wall(t):
    """The phone's wall-clock time of planted time ``t``."""
    return BOOT0_S + t + REALTIME_MINUS_BOOT_S


def _write(tmp_path, data, name="power.pftrace"):
    p = tmp_path / name
    p.write_bytes(data)
    return p


# -- rails -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compress", [False, True])
def test_rails_energy_within_half_a_percent_of_the_planted_trapezoid(tmp_path, compress):
    samples = wave(n=41, duration_s=20.0, base_w=2.5, amp_w=1.0)
    path = _write(tmp_path, rails_trace(samples, compress))
    m = PerfettoTraceMeter(path)
    assert m.is_available(), m.why_unavailable()
    assert m.sample_period_s == pytest.approx(0.5)
    d = m.describe()
    assert d["reads"] == "rails" and d["rails"] == sorted(n for n, _ in RAILS)
    w = m.energy_between(wall(0.0), wall(20.0))
    planted = trapezoid(samples)
    assert w.energy_j == pytest.approx(planted, rel=0.005)
    assert abs(w.energy_j / planted - 1) < 1e-5          # counters are exact up to their 1 uWs rounding
    assert w.duration_s == pytest.approx(20.0) and w.source == "perfetto:rails"
    # a window inside the trace, between samples: the counters are interpolated at both ends
    w = m.energy_between(wall(3.2), wall(14.7))
    sub, _ = integrate_between(samples, 3.2, 14.7)
    assert w.energy_j == pytest.approx(sub, rel=0.005)
    # rails chosen by rail or subsystem name
    gpu_big = PerfettoTraceMeter(path, rails=["GPU", "S2M_VDD_CPUCL2"])
    assert gpu_big.energy_between(wall(0.0), wall(20.0)).energy_j == pytest.approx(0.5 * planted, rel=0.005)
    assert "present:" in PerfettoTraceMeter(path, rails=["NOPE"]).why_unavailable()


def test_start_stop_on_the_phone_clock_and_windows_outside_the_trace(tmp_path):
    samples = wave(n=21, duration_s=10.0, base_w=1.2, amp_w=0.4)
    path = _write(tmp_path, rails_trace(samples))
    now = {"t": wall(1.0)}
    m = PerfettoTraceMeter(path, clock=lambda: now["t"])
    m.start()
    now["t"] = wall(9.0)
    w = m.stop()
    assert w.energy_j == pytest.approx(integrate_between(samples, 1.0, 9.0)[0], rel=0.005)
    # a host clock 2.5 s behind the phone: clock_offset_s aligns it
    off = PerfettoTraceMeter(path, clock_offset_s=2.5)
    assert off.energy_between(wall(0.0) - 2.5, wall(10.0) - 2.5).energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    with pytest.raises(MeasurementError, match="not the window"):
        m.energy_between(wall(5.0), wall(11.0))
    with pytest.raises(MeasurementError, match="stop\\(\\) without start"):
        m.stop()


def test_no_clock_snapshot_still_reads_boottime_windows(tmp_path):
    samples = wave(n=11, duration_s=5.0)
    data = rails_trace(samples)
    data = data[len(clock_snapshot()):]                  # drop the snapshot packet
    m = PerfettoTraceMeter(_write(tmp_path, data))
    with pytest.raises(MeasurementError, match="clock snapshot"):
        m.energy_between(wall(0.0), wall(5.0))
    assert m.energy_between_boot(BOOT0_S, BOOT0_S + 5.0).energy_j == pytest.approx(trapezoid(samples), rel=0.005)


def test_a_counter_that_goes_backwards_is_an_error(tmp_path):
    samples = wave(n=11, duration_s=5.0)
    pkts = [clock_snapshot(), rail_descriptors(RAILS[:1])]
    for k, (t, _p) in enumerate(samples):
        pkts.append(energy_packet(BOOT0_S + t, [10**9 + (0 if k == 6 else k * 10**6)]))  # a reset at sample 6
    m = PerfettoTraceMeter(_write(tmp_path, b"".join(pkts)))
    with pytest.raises(MeasurementError, match="backwards"):
        m.energy_between(wall(0.0), wall(5.0))


# -- battery ---------------------------------------------------------------------------------------------------
def test_battery_current_times_voltage_within_half_a_percent(tmp_path):
    import math

    samples = wave(n=81, duration_s=20.0, base_w=3.0, amp_w=1.2)
    pkts = [clock_snapshot()]
    volts = []
    for k, (t, p) in enumerate(samples):
        v = 3.85 + 0.05 * math.sin(k / 7)                  # the voltage sags and recovers with load
        volts.append(v)
        # BatteryManager's convention: negative while discharging
        pkts.append(battery_packet(BOOT0_S + t, current_ua=-round(p / v * 1e6), voltage_uv=round(v * 1e6),
                                   capacity_pct=81.0))
    path = _write(tmp_path, b"".join(pkts))
    m = PerfettoTraceMeter(path)                             # auto: no rails in this trace -> the battery
    assert m.is_available(), m.why_unavailable()
    assert m.sample_period_s == pytest.approx(0.25)
    w = m.energy_between(wall(0.0), wall(20.0))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert w.source == "perfetto:battery" and m.last_window_info["discharge_sign"] == -1
    assert min(p for _, p in w.samples) > 0                 # discharge is positive power
    # a phone that reports discharge as positive current: the sign is found from the window
    flipped = [clock_snapshot()] + [battery_packet(BOOT0_S + t, current_ua=round(p / v * 1e6), voltage_uv=round(v * 1e6))
                                    for (t, p), v in zip(samples, volts)]
    m2 = PerfettoTraceMeter(_write(tmp_path, b"".join(flipped), "flipped.pftrace"))
    assert m2.energy_between(wall(0.0), wall(20.0)).energy_j == pytest.approx(trapezoid(samples), rel=0.005)


def test_battery_charge_counter_within_half_a_percent(tmp_path):
    samples = wave(n=41, duration_s=20.0, base_w=3.0, amp_w=1.2)
    v = 3.9
    charge_c = cumulative([(t, p / v) for t, p in samples])  # coulombs drawn so far (trapezoid of the current)
    pkts = [clock_snapshot()]
    for (t, p), q in zip(samples, charge_c):
        pkts.append(battery_packet(BOOT0_S + t, charge_uah=3_000_000 - round(q / 3.6e-3), voltage_uv=round(v * 1e6),
                                   current_ua=-round(p / v * 1e6)))
    path = _write(tmp_path, b"".join(pkts))
    m = PerfettoTraceMeter(path, source="battery", battery_energy="charge")
    w = m.energy_between(wall(0.0), wall(20.0))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert m.last_window_info["mean_voltage_v"] == pytest.approx(v)
    # without voltage in the trace the meter asks for one, and uses it when given
    no_v = [clock_snapshot()] + [battery_packet(BOOT0_S + t, charge_uah=3_000_000 - round(q / 3.6e-3))
                                 for (t, _p), q in zip(samples, charge_c)]
    path2 = _write(tmp_path, b"".join(no_v), "nov.pftrace")
    assert "voltage_v" in PerfettoTraceMeter(path2, battery_energy="charge").why_unavailable()
    given = PerfettoTraceMeter(path2, battery_energy="charge", voltage_v=v)
    assert given.energy_between(wall(0.0), wall(20.0)).energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert "current_ua" in PerfettoTraceMeter(path2, voltage_v=v).why_unavailable()


def test_rails_preferred_over_battery_and_battery_on_request(tmp_path):
    samples = wave(n=21, duration_s=10.0, base_w=2.0)
    data = rails_trace(samples) + b"".join(battery_packet(BOOT0_S + t, current_ua=-round(2 * p / 4.0 * 1e6),
                                                          voltage_uv=4_000_000) for t, p in samples)
    path = _write(tmp_path, data)
    assert PerfettoTraceMeter(path).energy_between(wall(0), wall(10)).energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    bat = PerfettoTraceMeter(path, source="battery")
    assert bat.energy_between(wall(0), wall(10)).energy_j == pytest.approx(2 * trapezoid(samples), rel=0.005)
    pt = read_trace(path)
    assert len(pt.battery) == len(samples) and set(pt.rail_energy) == {0, 1, 2}


# -- hostile and malformed input -------------------------------------------------------------------------------
HOSTILE = {
    "truncated varint": b"\x0a\xff",
    "length past the end": b"\x0a\x05ab",
    "absurd length": b"\x0a" + varint(2**62) + b"x",
    "11-byte varint": b"\x08" + b"\xff" * 10 + b"\x01",
    "varint over 64 bits": b"\x08" + b"\xff" * 9 + b"\x7f",
    "group wire type": varint(1 << 3 | 3) + b"\x00",
    "field number 0": b"\x02\x00",
    "battery as a varint": packet(vint(8, 1), vint(38, 5)),
    "truncated fixed32": packet(vint(8, 1), ld(38, varint(2 << 3 | 5) + b"\x00\x00")),
    "energy data as fixed64": packet(ld(40, varint(2 << 3 | 1) + b"\x00" * 8)),
    "truncated packet inside": packet(ld(40, ld(2, vint(1, 0))[:-1])),
    "compressed garbage": packet(ld(50, b"not zlib at all")),
    "truncated compression": packet(ld(50, zlib.compress(packet(vint(8, 1), ld(38, vint(3, 5))) * 50)[:-9])),
    "nested compression": packet(ld(50, zlib.compress(packet(ld(50, zlib.compress(b"")))))),
    "battery without a timestamp": packet(ld(38, vint(3, 5))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_traces_are_format_errors(tmp_path, case):
    with pytest.raises(FormatError):
        parse_trace(HOSTILE[case])
    m = PerfettoTraceMeter(_write(tmp_path, HOSTILE[case]))
    assert not m.is_available() and "Perfetto trace" in m.why_unavailable()
    with pytest.raises(NoMeterError):
        m.start()


def test_size_caps(tmp_path):
    bomb = packet(ld(50, zlib.compress(b"\x00" * 2_000_000)))   # 2 KB that would inflate to 2 MB
    with pytest.raises(FormatError, match="inflate past"):
        parse_trace(bomb, max_inflated_bytes=1_000_000)
    samples = wave(n=11, duration_s=5.0)
    path = _write(tmp_path, rails_trace(samples))
    with pytest.raises(FormatError, match="over the 100-byte limit"):
        read_trace(path, max_bytes=100)
    assert "limit" in PerfettoTraceMeter(path, max_bytes=100).why_unavailable()
    assert "does not exist" in PerfettoTraceMeter(tmp_path / "missing.pftrace").why_unavailable()


def test_empty_and_foreign_traces(tmp_path):
    assert "no android.power data" in PerfettoTraceMeter(_write(tmp_path, b"")).why_unavailable()
    other = packet(vint(8, 5), ld(2, b"ftrace events"), vint(10, 1))  # packets of other data sources only
    assert "no android.power data" in PerfettoTraceMeter(_write(tmp_path, other, "o.pftrace")).why_unavailable()


def test_random_bytes_never_escape_as_other_errors():
    rng = random.Random(13)
    good = rails_trace(wave(n=5, duration_s=2.0))
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        data = bytes(data[:rng.randint(0, len(data))])
        try:
            parse_trace(data)
        except FormatError:
            pass


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_fuzz_only_format_errors(data):
    try:
        parse_trace(data)
    except FormatError:
        pass


def test_recording_config():
    """The config for `perfetto --txt -c` (checked once against perfetto 0.59.1's TraceConfig with text_format)."""
    from thor_sdk.errors import UsageError

    text = android_power_config(duration_s=600, battery_poll_ms=500)
    for line in ('name: "android.power"', "battery_poll_ms: 500", "collect_power_rails: true", "duration_ms: 600000",
                 "BATTERY_COUNTER_CURRENT", "BATTERY_COUNTER_VOLTAGE", "BATTERY_COUNTER_CHARGE", "write_into_file: true"):
        assert line in text
    for bad in ({"duration_s": 0}, {"battery_poll_ms": 1.5}, {"buffer_kb": True}):
        with pytest.raises(UsageError):
            android_power_config(**bad)
