"""Android power from a Perfetto ``android.power`` trace (ODPM rail energy, battery counters), parsed on the host.

Record on the phone (``android_power_config()`` writes the config), pull the trace, give its path::

    adb shell perfetto -o /data/misc/perfetto-traces/power.pftrace -t 120s --txt -c - < power.pbtxt
    adb pull /data/misc/perfetto-traces/power.pftrace

Sources (``source=``): ``"rails"``, the ODPM rails' energy counters (``PowerRails.energy_data``: uWs
accumulated since boot, the same counters as ``odpm``/``power-stats``; ``rails=`` picks by rail or
subsystem name, default all); ``"battery"``, the fuel gauge (``battery_energy="current"``: the
trapezoid of ``current_ua x voltage_uv``, discharge positive; ``"charge"``: the charge counter's
decrease x the window's mean voltage); ``"auto"``: rails when the trace has them, else the battery.

Windows are given on the phone's wall clock (``time.time()`` there, what the harness records for each
window), plus ``clock_offset_s``; the trace's own ``ClockSnapshot`` maps them to CLOCK_BOOTTIME, the
clock of its counters, so no manual alignment is needed for windows timed on the same phone.

Why not the ``perfetto`` Python package: its ``TraceProcessor`` runs a native ``trace_processor_shell``
that it downloads from Google's storage on first use (perfetto 0.59.1,
``perfetto/prebuilts/perfetto_prebuilts.py``), which an offline machine or CI cannot do. The few
messages needed are read here with a small protobuf wire-format reader (stdlib only) that refuses
hostile input (truncated varints, lengths past the end, groups, wrong wire types, size caps) with a
``FormatError``. Field numbers relied on, from Perfetto's ``protos/perfetto/trace/trace.proto``,
``trace_packet.proto``, ``clock_snapshot.proto``, ``power/battery_counters.proto`` and
``power/power_rails.proto`` (checked against the descriptors bundled in perfetto 0.59.1's
``perfetto_trace_pb2``)::

    Trace.packet = 1 (repeated TracePacket)
    TracePacket: clock_snapshot = 6, timestamp = 8 (uint64 ns on the trace clock), battery = 38,
                 power_rails = 40, compressed_packets = 50 (bytes: zlib-deflated Trace.packet fields),
                 timestamp_clock_id = 58
    ClockSnapshot: clocks = 1 (Clock: clock_id = 1, timestamp = 2 ns), primary_trace_clock = 2
                 (BuiltinClock: REALTIME = 1, BOOTTIME = 6; the trace clock defaults to BOOTTIME)
    BatteryCounters: charge_counter_uah = 1 (int64), capacity_percent = 2 (float),
                 current_ua = 3 (int64), current_avg_ua = 4 (int64), name = 5 (string),
                 energy_counter_uwh = 6 (int64), voltage_uv = 7 (int64)
    PowerRails: rail_descriptor = 1 (RailDescriptor: index = 1, rail_name = 2, subsys_name = 3,
                 sampling_rate = 4 Hz), energy_data = 2 (EnergyData: index = 1,
                 timestamp_ms = 2 (CLOCK_BOOTTIME ms), energy = 3 (uWs accumulated since boot))

The battery's ``current_ua`` follows ``BatteryManager``: negative while discharging on most phones;
the discharge sign is taken from the window's median unless ``discharge_sign`` is given.
"""

import os
import statistics
import struct
import time
import zlib

from thor_sdk.errors import FormatError, MeasurementError, NotFoundError, ThorError, UsageError

from .base import EnergyWindow, Meter

#: a trace larger than this is refused (``max_bytes=`` raises it)
MAX_TRACE_BYTES = 512 * 2**20
#: compressed_packets inflate to at most this much in all (a zip bomb stops here)
MAX_INFLATED_BYTES = 512 * 2**20
#: power samples (rail energy points + battery polls) kept from one trace
MAX_SAMPLES = 5_000_000
#: rails described in one trace
MAX_RAILS = 4096
#: a window may start or end this much outside the samples (rail timestamps are whole ms; wall-clock
#: times mapped through a clock snapshot carry float rounding): the gap is left out, not extrapolated
EDGE_TOL_S = 0.002

CLOCK_REALTIME = 1
CLOCK_BOOTTIME = 6

# field numbers (see the module docstring for their source)
TRACE_PACKET = 1
PKT_CLOCK_SNAPSHOT, PKT_TIMESTAMP, PKT_BATTERY, PKT_POWER_RAILS, PKT_COMPRESSED, PKT_CLOCK_ID = 6, 8, 38, 40, 50, 58
SNAP_CLOCKS, SNAP_PRIMARY = 1, 2
CLOCK_ID, CLOCK_TS = 1, 2
BAT_CHARGE_UAH, BAT_CAPACITY_PCT, BAT_CURRENT_UA, BAT_CURRENT_AVG_UA, BAT_NAME, BAT_ENERGY_UWH, BAT_VOLTAGE_UV = \
    1, 2, 3, 4, 5, 6, 7
RAILS_DESCRIPTOR, RAILS_ENERGY_DATA = 1, 2
DESC_INDEX, DESC_NAME, DESC_SUBSYS, DESC_RATE = 1, 2, 3, 4
DATA_INDEX, DATA_TS_MS, DATA_ENERGY_UWS = 1, 2, 3

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


def android_power_config(duration_s=120, battery_poll_ms=250, rails=True, buffer_kb=8192):
    """A Perfetto text config recording what this meter reads (``perfetto --txt -c``): the ``android.power``
    data source with power rails and the battery's current, voltage and charge counters."""

    for name, v, lo in (("duration_s", duration_s, 1), ("battery_poll_ms", battery_poll_ms, 100),
                        ("buffer_kb", buffer_kb, 64)):
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise UsageError(f"{name} must be an integer >= {lo}, got {v!r}")
    counters = "".join(f"      battery_counters: BATTERY_COUNTER_{c}\n" for c in ("CURRENT", "VOLTAGE", "CHARGE"))
    return (f"duration_ms: {duration_s * 1000}\n"
            "write_into_file: true\nfile_write_period_ms: 5000\n"  # long runs: drained to the file every 5 s
            f"buffers {{ size_kb: {buffer_kb} fill_policy: RING_BUFFER }}\n"
            "data_sources {\n  config {\n    name: \"android.power\"\n    android_power_config {\n"
            f"      battery_poll_ms: {battery_poll_ms}\n{counters}"
            f"      collect_power_rails: {'true' if rails else 'false'}\n"
            "    }\n  }\n}\n")


# ---------------------------------------------------------------------------------------------
# protobuf wire format (just what the messages above need)
# ---------------------------------------------------------------------------------------------
def read_varint(buf, pos, end):
    """``(value, next position)`` of the varint at ``buf[pos:end]``; FormatError if truncated or over 64 bits."""

    value = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise FormatError(f"Perfetto trace: truncated varint at byte {start}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise FormatError(f"Perfetto trace: varint longer than 10 bytes at byte {start}")
    if value >= 1 << 64:
        raise FormatError(f"Perfetto trace: varint over 64 bits at byte {start}")
    return value, pos


def iter_fields(buf, start, end):
    """``(field number, wire type, value)`` of one message in ``buf[start:end]``.

    ``value`` is an int for varint and fixed fields and a ``(start, end)`` span for length-delimited ones.
    Groups (wire types 3 and 4, unused by Perfetto) and unknown wire types are a FormatError.
    """

    pos = start
    while pos < end:
        at = pos
        key, pos = read_varint(buf, pos, end)
        fno, wt = key >> 3, key & 7
        if fno == 0:
            raise FormatError(f"Perfetto trace: field number 0 at byte {at}")
        if wt == VARINT:
            v, pos = read_varint(buf, pos, end)
        elif wt == LEN:
            n, pos = read_varint(buf, pos, end)
            if n > end - pos:
                raise FormatError(f"Perfetto trace: field {fno} at byte {at} claims {n} bytes, only {end - pos} left")
            v = (pos, pos + n)
            pos += n
        elif wt in (FIXED64, FIXED32):
            size = 8 if wt == FIXED64 else 4
            if size > end - pos:
                raise FormatError(f"Perfetto trace: truncated fixed{size * 8} field {fno} at byte {at}")
            v = int.from_bytes(buf[pos:pos + size], "little")
            pos += size
        else:
            raise FormatError(f"Perfetto trace: wire type {wt} (field {fno}) at byte {at} is not used by Perfetto")
        yield fno, wt, v


def _expect(fno, wt, want, msg):
    if wt != want:
        raise FormatError(f"Perfetto trace: {msg} field {fno} has wire type {wt}, expected {want}")


def _int64(v):
    """A varint read as a two's-complement int64 (how protobuf encodes negative int64 values)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(buf, span):
    return bytes(buf[span[0]:span[1]]).decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------------------------
# the trace
# ---------------------------------------------------------------------------------------------
class PowerTrace:
    """What a trace's ``android.power`` packets hold, on CLOCK_BOOTTIME seconds.

    ``rails``: {index: {"name", "subsystem", "sampling_rate_hz"}}; ``rail_energy``: {index: [(t_s,
    energy_j)]} cumulative counters in time order; ``battery``: [{"t_s", "charge_uah", "current_ua",
    "voltage_uv", "capacity_pct", ...}] in time order; ``realtime_offsets``: [(boot t_s, REALTIME - BOOTTIME
    in s)] from the clock snapshots.
    """

    def __init__(self):
        self.rails = {}
        self.rail_energy = {}
        self.battery = []
        self.realtime_offsets = []
        self.primary_clock = CLOCK_BOOTTIME
        self._snapshots = []  # {clock_id: ns}
        self._n = 0

    # -- clocks ------------------------------------------------------------------------------------
    def to_boot_s(self, clock_id, ts_ns):
        """A timestamp on ``clock_id`` as CLOCK_BOOTTIME seconds (through the nearest clock snapshot)."""

        if clock_id == CLOCK_BOOTTIME:
            return ts_ns / 1e9
        best = None
        for snap in self._snapshots:
            if clock_id in snap and CLOCK_BOOTTIME in snap:
                d = abs(snap[clock_id] - ts_ns)
                if best is None or d < best[0]:
                    best = (d, snap[CLOCK_BOOTTIME] - snap[clock_id])
        if best is None:
            raise FormatError(f"Perfetto trace: a timestamp on clock {clock_id} and no clock snapshot relating it "
                              "to CLOCK_BOOTTIME")
        return (ts_ns + best[1]) / 1e9

    def boot_s_from_realtime(self, realtime_s):
        """Wall-clock (REALTIME) seconds -> CLOCK_BOOTTIME seconds, through the nearest snapshot."""

        if not self.realtime_offsets:
            raise MeasurementError("the Perfetto trace has no clock snapshot relating the wall clock to CLOCK_BOOTTIME")
        best = min(self.realtime_offsets, key=lambda bo: abs(bo[0] + bo[1] - realtime_s))
        return realtime_s - best[1]

    # -- parsing -----------------------------------------------------------------------------------
    def _count(self):
        self._n += 1
        if self._n > MAX_SAMPLES:
            raise FormatError(f"Perfetto trace: more than {MAX_SAMPLES} power samples")

    def _snapshot(self, buf, span):
        snap, primary = {}, None
        for fno, wt, v in iter_fields(buf, *span):
            if fno == SNAP_CLOCKS:
                _expect(fno, wt, LEN, "ClockSnapshot")
                cid = ts = None
                for f2, w2, v2 in iter_fields(buf, *v):
                    if f2 == CLOCK_ID:
                        _expect(f2, w2, VARINT, "ClockSnapshot.Clock")
                        cid = v2
                    elif f2 == CLOCK_TS:
                        _expect(f2, w2, VARINT, "ClockSnapshot.Clock")
                        ts = v2
                if cid is not None and ts is not None:
                    snap[cid] = ts
            elif fno == SNAP_PRIMARY:
                _expect(fno, wt, VARINT, "ClockSnapshot")
                primary = v
        if primary is not None:
            self.primary_clock = primary
        if snap:
            self._snapshots.append(snap)

    def _battery(self, buf, span, t_s):
        row = {"t_s": t_s}
        names = {BAT_CHARGE_UAH: "charge_uah", BAT_CURRENT_UA: "current_ua", BAT_CURRENT_AVG_UA: "current_avg_ua",
                 BAT_ENERGY_UWH: "energy_uwh", BAT_VOLTAGE_UV: "voltage_uv"}
        for fno, wt, v in iter_fields(buf, *span):
            if fno in names:
                _expect(fno, wt, VARINT, "BatteryCounters")
                row[names[fno]] = _int64(v)
            elif fno == BAT_CAPACITY_PCT:
                _expect(fno, wt, FIXED32, "BatteryCounters")
                row["capacity_pct"] = struct.unpack("<f", v.to_bytes(4, "little"))[0]
            elif fno == BAT_NAME:
                _expect(fno, wt, LEN, "BatteryCounters")
                row["name"] = _text(buf, v)[:200]
        if t_s is None:
            raise FormatError("Perfetto trace: a battery packet without a timestamp")
        self._count()
        self.battery.append(row)

    def _rails(self, buf, span, t_s):
        for fno, wt, v in iter_fields(buf, *span):
            if fno == RAILS_DESCRIPTOR:
                _expect(fno, wt, LEN, "PowerRails")
                d = {"name": None, "subsystem": "", "sampling_rate_hz": None}
                idx = 0
                for f2, w2, v2 in iter_fields(buf, *v):
                    if f2 == DESC_INDEX:
                        _expect(f2, w2, VARINT, "PowerRails.RailDescriptor")
                        idx = v2
                    elif f2 == DESC_NAME:
                        _expect(f2, w2, LEN, "PowerRails.RailDescriptor")
                        d["name"] = _text(buf, v2)[:200]
                    elif f2 == DESC_SUBSYS:
                        _expect(f2, w2, LEN, "PowerRails.RailDescriptor")
                        d["subsystem"] = _text(buf, v2)[:200]
                    elif f2 == DESC_RATE:
                        _expect(f2, w2, VARINT, "PowerRails.RailDescriptor")
                        d["sampling_rate_hz"] = v2
                if idx not in self.rails and len(self.rails) >= MAX_RAILS:
                    raise FormatError(f"Perfetto trace: more than {MAX_RAILS} power rails")
                d["name"] = d["name"] or f"rail{idx}"
                self.rails[idx] = d
            elif fno == RAILS_ENERGY_DATA:
                _expect(fno, wt, LEN, "PowerRails")
                idx, ts_ms, uws = 0, None, None
                for f2, w2, v2 in iter_fields(buf, *v):
                    if f2 in (DATA_INDEX, DATA_TS_MS, DATA_ENERGY_UWS):
                        _expect(f2, w2, VARINT, "PowerRails.EnergyData")
                        if f2 == DATA_INDEX:
                            idx = v2
                        elif f2 == DATA_TS_MS:
                            ts_ms = v2
                        else:
                            uws = v2
                if uws is None:
                    continue
                t = ts_ms / 1e3 if ts_ms is not None else t_s  # timestamp_ms is CLOCK_BOOTTIME
                if t is None:
                    raise FormatError("Perfetto trace: rail energy data without a timestamp")
                self._count()
                self.rail_energy.setdefault(idx, []).append((t, uws * 1e-6))

    def _packets(self, buf, start, end, budget, nested=False):
        """Parse a ``Trace`` message (a run of ``packet`` fields); ``budget``: [inflatable bytes left]."""

        for fno, wt, v in iter_fields(buf, start, end):
            if fno != TRACE_PACKET:
                continue  # other top-level fields: none today; skipped for forward compatibility
            _expect(fno, wt, LEN, "Trace")
            ts = clock = None
            want = []
            for f2, w2, v2 in iter_fields(buf, *v):
                if f2 == PKT_TIMESTAMP:
                    _expect(f2, w2, VARINT, "TracePacket")
                    ts = v2
                elif f2 == PKT_CLOCK_ID:
                    _expect(f2, w2, VARINT, "TracePacket")
                    clock = v2
                elif f2 in (PKT_CLOCK_SNAPSHOT, PKT_BATTERY, PKT_POWER_RAILS, PKT_COMPRESSED):
                    _expect(f2, w2, LEN, "TracePacket")
                    want.append((f2, v2))
            for f2, span in want:
                if f2 == PKT_CLOCK_SNAPSHOT:
                    self._snapshot(buf, span)
                elif f2 == PKT_COMPRESSED:
                    if nested:
                        raise FormatError("Perfetto trace: compressed packets inside compressed packets")
                    inner = self._inflate(buf, span, budget)
                    self._packets(inner, 0, len(inner), budget, nested=True)
                else:
                    # the packet's clock: its own, else the trace's (BOOTTIME unless a snapshot said otherwise)
                    t_s = None if ts is None else self.to_boot_s(self.primary_clock if clock is None else clock, ts)
                    (self._battery if f2 == PKT_BATTERY else self._rails)(buf, span, t_s)

    @staticmethod
    def _inflate(buf, span, budget):
        d = zlib.decompressobj()
        try:
            out = d.decompress(bytes(buf[span[0]:span[1]]), budget[0] + 1)
        except zlib.error as e:
            raise FormatError(f"Perfetto trace: compressed packets that do not inflate ({e})") from None
        if len(out) > budget[0] or d.unconsumed_tail:
            raise FormatError(f"Perfetto trace: compressed packets inflate past the {budget[0]}-byte limit left")
        if not d.eof:
            raise FormatError("Perfetto trace: truncated compressed packets")
        budget[0] -= len(out)
        return out

    def _finish(self):
        for k in self.rail_energy:
            self.rail_energy[k].sort(key=lambda te: te[0])
        self.battery.sort(key=lambda r: r["t_s"])
        for snap in self._snapshots:
            if CLOCK_REALTIME in snap and CLOCK_BOOTTIME in snap:
                self.realtime_offsets.append((snap[CLOCK_BOOTTIME] / 1e9,
                                              (snap[CLOCK_REALTIME] - snap[CLOCK_BOOTTIME]) / 1e9))
        self.realtime_offsets.sort()
        return self


def parse_trace(data, max_inflated_bytes=MAX_INFLATED_BYTES):
    """A serialized Perfetto ``Trace`` (bytes) -> ``PowerTrace``; hostile or malformed input raises FormatError."""
    pt = PowerTrace()
    buf = memoryview(data)
    # packets are read in order: a timestamp on a clock other than BOOTTIME goes through the clock
    # snapshots seen so far (traced writes one at the start of every trace)
    pt._packets(buf, 0, len(buf), [int(max_inflated_bytes)])
    return pt._finish()


def read_trace(path, max_bytes=MAX_TRACE_BYTES):
    """The ``PowerTrace`` of the trace file at ``path`` (size-capped; FormatError / NotFoundError)."""

    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise NotFoundError(f"no such Perfetto trace: {path}") from None
    except OSError as e:
        raise FormatError(f"cannot read Perfetto trace {path}: {e.strerror or e}") from e
    if size > max_bytes:
        raise FormatError(f"Perfetto trace {path} is {size} bytes, over the {max_bytes}-byte limit "
                          "(record only android.power, or raise max_bytes)")
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise FormatError(f"cannot read Perfetto trace {path}: {e.strerror or e}") from e
    if len(data) > max_bytes:
        raise FormatError(f"Perfetto trace {path} grew past the {max_bytes}-byte limit while read")
    try:
        return parse_trace(data)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None


# ---------------------------------------------------------------------------------------------
# the meter
# ---------------------------------------------------------------------------------------------
def _covers(first_s, last_s, a, b, what):
    """MeasurementError unless ``[first_s, last_s]`` covers the window ``[a, b]`` (up to ``EDGE_TOL_S`` at each end)."""

    if first_s > a + EDGE_TOL_S or last_s < b - EDGE_TOL_S:
        raise MeasurementError(f"{what} in the Perfetto trace cover {first_s:.3f}-{last_s:.3f} s (BOOTTIME), not the "
                               f"window {a:.3f}-{b:.3f} s: record the trace over the whole run")


def _interp(points, t):
    """Linear interpolation of ``[(t, v)]`` (time order) at ``t``, which must lie within them."""
    import bisect

    i = bisect.bisect_left(points, (t, float("-inf")))
    if i < len(points) and points[i][0] == t:
        return points[i][1]
    (t0, v0), (t1, v1) = points[i - 1], points[i]
    return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)


class PerfettoTraceMeter(Meter):
    """Energy over windows of a pulled Perfetto trace (ODPM rails or the battery), see the module docstring."""

    name = "perfetto"

    def __init__(self, path, source="auto", rails=None, battery_energy="current", discharge_sign="auto",
                 voltage_v=None, clock_offset_s=0.0, clock=None, wait_s=0.0, sleep=None, max_bytes=MAX_TRACE_BYTES):

        if source not in ("auto", "rails", "battery"):
            raise UsageError(f"Perfetto meter source must be 'auto', 'rails' or 'battery', got {source!r}")
        if battery_energy not in ("current", "charge"):
            raise UsageError(f"battery_energy must be 'current' or 'charge', got {battery_energy!r}")
        self.path = os.fspath(path)
        self.source = source
        self.rails = [rails] if isinstance(rails, str) else (list(rails) if rails else None)
        self.battery_energy = battery_energy
        self.discharge_sign = discharge_sign
        self.voltage_v = voltage_v
        self.clock_offset_s = float(clock_offset_s)
        self.clock = clock or time.time
        self.wait_s = float(wait_s)
        self.sleep = sleep or time.sleep
        self.max_bytes = int(max_bytes)
        self._cache = (None, None)
        self._t0 = None
        self.last_window_info = {}
        self.sample_period_s = self._period()

    # -- the trace ---------------------------------------------------------------------------------
    def trace(self):
        st = os.stat(self.path)
        key = (st.st_mtime_ns, st.st_size)
        if self._cache[0] != key:
            self._cache = (key, read_trace(self.path, self.max_bytes))
        return self._cache[1]

    def _chosen(self, pt):
        """'rails' or 'battery' for this trace (``source="auto"``: rails when there are any)."""
        if self.source != "auto":
            return self.source
        return "rails" if pt.rail_energy else "battery"

    def selected_rails(self, pt):
        """{index: name} of the rails summed (by rail or subsystem name; all by default)."""
        out = {}
        for idx in pt.rail_energy:
            d = pt.rails.get(idx, {"name": f"rail{idx}", "subsystem": ""})
            if self.rails is None or d["name"] in self.rails or d["subsystem"] in self.rails:
                out[idx] = d["name"]
        return out

    def _period(self):
        try:
            pt = self.trace()
        except (ThorError, OSError):
            return 1.0
        if self._chosen(pt) == "rails":
            series = [[t for t, _ in s] for s in pt.rail_energy.values()]
        else:
            series = [[r["t_s"] for r in pt.battery]]
        dts = [b - a for ts in series for a, b in zip(ts, ts[1:]) if b > a]
        return statistics.median(dts) if dts else 1.0

    def why_unavailable(self):
        if not os.path.exists(self.path):
            return f"Perfetto trace {self.path} does not exist"
        try:
            pt = self.trace()
        except ThorError as e:
            return str(e)
        except OSError as e:
            return f"cannot read Perfetto trace {self.path}: {e.strerror or e}"
        if not pt.rail_energy and not pt.battery:
            return (f"Perfetto trace {self.path} holds no android.power data (no power_rails or battery packets): "
                    "record with the android.power data source (collect_power_rails: true, battery_counters)")
        src = self._chosen(pt)
        if src == "rails":
            if not pt.rail_energy:
                return (f"Perfetto trace {self.path} has no power rail energy (collect_power_rails: true; "
                        "ODPM phones only)")
            if not self.selected_rails(pt):
                names = sorted(({d["name"] for d in pt.rails.values()}
                                | {d["subsystem"] for d in pt.rails.values()}) - {""})
                return f"no rail in the Perfetto trace matches {', '.join(self.rails)} (present: {', '.join(names)})"
            return ""
        if len(pt.battery) < 2:
            return f"Perfetto trace {self.path} has fewer than two battery samples"
        if self.battery_energy == "current":
            if not any("current_ua" in r for r in pt.battery):
                return "the trace's battery packets carry no current_ua (battery_counters: BATTERY_COUNTER_CURRENT)"
        elif not any("charge_uah" in r for r in pt.battery):
            return "the trace's battery packets carry no charge_counter_uah (battery_counters: BATTERY_COUNTER_CHARGE)"
        if self.voltage_v is None and not any("voltage_uv" in r for r in pt.battery):
            return ("the trace's battery packets carry no voltage_uv (BATTERY_COUNTER_VOLTAGE, newer Android): "
                    "give voltage_v= the battery's voltage")
        return ""

    # -- energy ------------------------------------------------------------------------------------
    def _rails_between(self, pt, a, b):
        series = {}
        for idx, name in self.selected_rails(pt).items():
            pts = pt.rail_energy[idx]
            _covers(pts[0][0], pts[-1][0], a, b, f"rail {name}")
            inside = [p for p in pts if a <= p[0] <= b]
            for (t0, e0), (t1, e1) in zip(inside, inside[1:]):
                if e1 < e0:
                    raise MeasurementError(f"rail {name}'s energy counter went backwards at {t1:.3f} s (reboot?)")
            series[name] = pts
        t_a = max([a] + [pts[0][0] for pts in series.values()])   # within EDGE_TOL_S of the window's ends
        t_b = min([b] + [pts[-1][0] for pts in series.values()])
        times = sorted({t_a, t_b} | {t for pts in series.values() for t, _ in pts if t_a < t < t_b})
        cum = [sum(_interp(pts, t) for pts in series.values()) for t in times]
        samples = [(t1 - a, (c1 - c0) / (t1 - t0)) for t0, t1, c0, c1 in zip(times, times[1:], cum, cum[1:]) if t1 > t0]
        return cum[-1] - cum[0], samples, {"rails": sorted(series)}

    def _battery_between(self, pt, a, b):
        from .android_battery import discharge_sign_of
        from .external import integrate_between

        key = "current_ua" if self.battery_energy == "current" else "charge_uah"
        rows = [r for r in pt.battery if key in r and (self.voltage_v is not None or "voltage_uv" in r)]
        if len(rows) < 2:
            raise MeasurementError(f"the Perfetto trace has fewer than two battery samples with {key} and a voltage")
        _covers(rows[0]["t_s"], rows[-1]["t_s"], a, b, "the battery samples")
        a0, a, b = a, max(a, rows[0]["t_s"]), min(b, rows[-1]["t_s"])  # within EDGE_TOL_S of the window's ends

        def volts(r):
            return self.voltage_v if self.voltage_v is not None else r["voltage_uv"] * 1e-6

        if self.battery_energy == "current":
            inside = [r["current_ua"] for r in rows if a <= r["t_s"] <= b] or [r["current_ua"] for r in rows]
            sign = discharge_sign_of(inside, self.discharge_sign)
            power = [(r["t_s"], sign * r["current_ua"] * 1e-6 * volts(r)) for r in rows]
            energy, pts = integrate_between(power, a, b)
            return energy, [(t - a0, p) for t, p in pts], {"battery_energy": "current", "discharge_sign": sign}
        charge = [(r["t_s"], r["charge_uah"]) for r in rows]
        v_in = [volts(r) for r in rows if a <= r["t_s"] <= b] or [volts(r) for r in rows]
        v_mean = sum(v_in) / len(v_in)
        q_c = (_interp(charge, a) - _interp(charge, b)) * 1e-6 * 3600.0  # uAh -> C; the counter falls on discharge
        inner = [(t, c) for t, c in charge if a < t < b]
        pts = [(a, _interp(charge, a))] + inner + [(b, _interp(charge, b))]
        samples = [(t1 - a0, (c0 - c1) * 3.6e-3 * v_mean / (t1 - t0))
                   for (t0, c0), (t1, c1) in zip(pts, pts[1:]) if t1 > t0]
        return q_c * v_mean, samples, {"battery_energy": "charge", "mean_voltage_v": v_mean}

    def energy_between_boot(self, a_s, b_s):
        """``EnergyWindow`` over CLOCK_BOOTTIME seconds ``[a_s, b_s]`` of the trace."""

        self._check()
        pt = self.trace()
        if not b_s >= a_s:
            raise MeasurementError(f"a window must not end before it starts ({a_s} -> {b_s})")
        src = self._chosen(pt)
        energy, samples, info = (self._rails_between if src == "rails" else self._battery_between)(pt, a_s, b_s)
        self.last_window_info = dict(info, source=src)
        return EnergyWindow(energy_j=energy, duration_s=b_s - a_s, meter=self.name, samples=samples,
                            source=f"perfetto:{src}")

    def energy_between(self, t0_s, t1_s):
        """``EnergyWindow`` for wall-clock times ``[t0_s, t1_s]`` (+ ``clock_offset_s``: the phone's clock).

        Waits up to ``wait_s`` for a trace that is still being pulled to cover the window's end.
        """

        a_rt, b_rt = t0_s + self.clock_offset_s, t1_s + self.clock_offset_s
        waited = 0.0
        while True:
            self._check()
            pt = self.trace()
            a, b = pt.boot_s_from_realtime(a_rt), pt.boot_s_from_realtime(b_rt)
            try:
                return self.energy_between_boot(a, b)
            except MeasurementError:
                if waited >= self.wait_s:
                    raise
            self.sleep(0.25)
            waited += 0.25

    def start(self):
        self._check()
        self._t0 = self.clock()

    def stop(self):
        if self._t0 is None:
            raise MeasurementError("perfetto meter: stop() without start()")
        t0, self._t0 = self._t0, None
        return self.energy_between(t0, self.clock())

    def describe(self):
        d = super().describe()
        d.update({"path": self.path, "source": self.source, "clock_offset_s": self.clock_offset_s})
        try:
            if self.is_available():
                pt = self.trace()
                d["reads"] = self._chosen(pt)
                d["rails"] = sorted(self.selected_rails(pt).values()) if d["reads"] == "rails" else []
        except ThorError as e:  # describe() reports, it does not fail
            d["trace_error"] = str(e)
        return d
