"""A bench power meter's log (Monsoon, Otii, a USB power meter...): CSV of timestamped samples.

The log is written by the bench meter's own software, on its own clock. A window ``[t0, t1]``
on this machine's clock (``time.time()`` by default) covers log times
``[t0 + clock_offset_s, t1 + clock_offset_s]``; energy is the trapezoid integral of the logged
power over that span, interpolated at both ends. The log may still be growing: ``stop()`` waits
up to ``wait_s`` for it to cover the window's end.

CSV contract (a header row, then one row per sample; other columns are ignored):

- time: ``time_s`` / ``timestamp`` / ``time`` / ``t`` / ``Time(s)`` in seconds, ``time_ms`` /
  ``Time(ms)`` in milliseconds, or ISO-8601 strings (``2025-01-31T12:00:00.125+00:00``);
- power: ``power_w`` / ``power`` / ``watts`` / ``Power(W)`` in W or ``power_mw`` / ``Power(mW)``
  in mW; or current and voltage: ``current_a`` / ``current_ma`` / ``Main(mA)`` with
  ``voltage_v`` / ``voltage_mv`` / ``Main Voltage(V)``.

``--meter external:FILE.csv`` uses it; append ``,offset=SECONDS`` for a clock offset.
"""

import csv
import math
import os
import re
import statistics
import time

from thor_sdk.errors import FormatError, MeasurementError, NoMeterError, NotFoundError, ThorError, UsageError

from .base import EnergyWindow, Meter, trapezoid_j

TIME_COLS = {"time_s": 1.0, "timestamp": 1.0, "time": 1.0, "t": 1.0, "time(s)": 1.0, "unix_s": 1.0,
             "time_ms": 1e-3, "time(ms)": 1e-3, "timestamp_ms": 1e-3}
POWER_COLS = {"power_w": 1.0, "power": 1.0, "watts": 1.0, "power(w)": 1.0,
              "power_mw": 1e-3, "power(mw)": 1e-3}
CURRENT_COLS = {"current_a": 1.0, "current(a)": 1.0, "main(a)": 1.0,
                "current_ma": 1e-3, "current(ma)": 1e-3, "main(ma)": 1e-3}
VOLTAGE_COLS = {"voltage_v": 1.0, "voltage(v)": 1.0, "mainvoltage(v)": 1.0,
                "voltage_mv": 1e-3, "voltage(mv)": 1e-3}


def _norm(name):
    return re.sub(r"\s+", "", name.strip().lower())


def _parse_time(text, scale):
    try:
        return float(text) * scale
    except ValueError:
        import datetime as dt

        try:
            d = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        if d.tzinfo is None:
            d = d.astimezone()  # naive times are local wall-clock times
        return d.timestamp()


def read_power_log(path):
    """``[(t_s, power_w)]`` sorted by time, from a bench meter's CSV (see the module docstring)."""

    try:
        f = open(path, newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise NotFoundError(f"no such meter log: {path}") from None
    except OSError as e:
        raise FormatError(f"cannot read meter log {path}: {e.strerror or e}") from e
    try:
        with f:
            return _read_rows(f, path)
    except UnicodeDecodeError as e:
        raise FormatError(f"meter log {path} is not UTF-8 text (byte {e.start} of a chunk); save it as UTF-8") from None
    except csv.Error as e:  # a NUL byte, a field over the csv module's limit, broken quoting
        raise FormatError(f"meter log {path} is not a readable CSV: {e}") from None


def _read_rows(f, path):
    """The rows of an open meter log (``read_power_log``; decoding and CSV errors are raised to it)."""

    reader = csv.reader(f)
    header = next(reader, None)
    if not header:
        raise FormatError(f"meter log {path} is empty (a header row is required)")
    cols = {_norm(h): i for i, h in enumerate(header)}

    def pick(table):
        for name, scale in table.items():
            if name in cols:
                return cols[name], scale
        return None, None

    ti, ts = pick(TIME_COLS)
    if ti is None:
        raise FormatError(f"meter log {path}: no time column (one of {', '.join(TIME_COLS)}) in {header}")
    pi, ps = pick(POWER_COLS)
    ci, cs = pick(CURRENT_COLS)
    vi, vs = pick(VOLTAGE_COLS)
    if pi is None and (ci is None or vi is None):
        raise FormatError(f"meter log {path}: no power column ({', '.join(POWER_COLS)}) and no current + "
                          f"voltage columns in {header}")
    rows, bad, last = [], [], 0
    for lineno, row in enumerate(reader, start=2):
        if not row or all(not c.strip() for c in row):
            continue
        last = lineno
        try:
            t = _parse_time(row[ti], ts)
            if pi is not None:
                p = float(row[pi]) * ps
            else:
                p = float(row[ci]) * cs * float(row[vi]) * vs
        except (ValueError, IndexError):
            t, p = None, float("nan")
        if t is None or not math.isfinite(t) or not math.isfinite(p):
            bad.append(lineno)
            continue
        rows.append((t, p))
    # the last line of a log that is still being written may be partial: skip only that one
    bad = [n for n in bad if n != last]
    if bad:
        raise FormatError(f"meter log {path}: unreadable time or power on line(s) {', '.join(map(str, bad[:5]))}")
    rows.sort()
    return rows


def _interp(samples, t):
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return p0 if t1 == t0 else p0 + (p1 - p0) * (t - t0) / (t1 - t0)
    raise ValueError("time outside the samples")


def integrate_between(samples, a, b):
    """Energy (J) of ``[(t_s, power_w)]`` over ``[a, b]``, interpolating at the ends; the samples' own span."""
    inner = [(t, p) for t, p in samples if a < t < b]
    pts = [(a, _interp(samples, a))] + inner + [(b, _interp(samples, b))]
    return trapezoid_j(pts), pts


class ExternalLogMeter(Meter):
    """Energy from a bench meter's CSV log aligned to this machine's clock by ``clock_offset_s``."""

    name = "external"

    def __init__(self, path, clock_offset_s=0.0, clock=None, wait_s=5.0, max_gap_factor=10.0, sleep=None):
        self.path = os.fspath(path)
        self.clock_offset_s = float(clock_offset_s)
        self.clock = clock or time.time
        self.wait_s = float(wait_s)
        self.max_gap_factor = float(max_gap_factor)
        self.sleep = sleep or time.sleep
        self._t0 = None
        self._cache = (None, None)
        self.sample_period_s = self._period_from_log()

    def _samples(self):
        st = os.stat(self.path)
        key = (st.st_mtime_ns, st.st_size)
        if self._cache[0] != key:
            self._cache = (key, read_power_log(self.path))
        return self._cache[1]

    def _period_from_log(self):
        try:
            s = self._samples()
        except (ThorError, OSError):
            return 1.0
        dts = [b[0] - a[0] for a, b in zip(s, s[1:]) if b[0] > a[0]]
        return statistics.median(dts) if dts else 1.0

    def why_unavailable(self):
        if not os.path.exists(self.path):
            return f"meter log {self.path} does not exist"
        try:
            s = self._samples()
        except ThorError as e:
            return str(e)
        except OSError as e:
            return f"cannot read meter log {self.path}: {e.strerror or e}"
        if len(s) < 2:
            return f"meter log {self.path} has fewer than two samples"
        return ""

    def energy_between(self, t0_s, t1_s):
        """``EnergyWindow`` for host-clock times ``[t0_s, t1_s]`` (waits up to ``wait_s`` for the log)."""

        a, b = t0_s + self.clock_offset_s, t1_s + self.clock_offset_s
        waited = 0.0
        while True:
            s = self._samples()
            if len(s) >= 2 and s[-1][0] >= b:
                break
            if waited >= self.wait_s:
                end = f"ends at {s[-1][0]:.3f}" if s else "is empty"
                raise MeasurementError(f"meter log {self.path} {end}, before the window's end {b:.3f} (log clock): "
                                       "is the logger still running, and is the clock offset right?")
            self.sleep(0.25)
            waited += 0.25
        if s[0][0] > a:
            raise MeasurementError(f"meter log {self.path} starts at {s[0][0]:.3f}, after the window's start "
                                   f"{a:.3f} (log clock): check the clock offset")
        energy, pts = integrate_between(s, a, b)
        dts = [y[0] - x[0] for x, y in zip(s, s[1:]) if y[0] > x[0]]
        typical = statistics.median(dts) if dts else 0.0
        gaps = [y[0] - x[0] for x, y in zip(pts, pts[1:])]
        if typical > 0 and gaps and max(gaps) > self.max_gap_factor * typical and max(gaps) > 1.0:
            raise MeasurementError(f"meter log {self.path} has a {max(gaps):.2f} s gap inside the window "
                                   f"(typical sample period {typical:.3g} s)")
        return EnergyWindow(energy_j=energy, duration_s=b - a, meter=self.name,
                            samples=[(t - a, p) for t, p in pts])

    def start(self):
        if not self.is_available():
            raise NoMeterError(f"{self.name}: {self.why_unavailable()}")
        self._t0 = self.clock()

    def stop(self):
        if self._t0 is None:
            raise MeasurementError("external meter: stop() without start()")
        t0, self._t0 = self._t0, None
        return self.energy_between(t0, self.clock())

    def describe(self):
        d = super().describe()
        d.update({"path": self.path, "clock_offset_s": self.clock_offset_s})
        return d


def parse_meter_spec(spec):
    """``external:FILE.csv[,offset=SECONDS]`` -> ExternalLogMeter; other specs raise UsageError."""

    if not isinstance(spec, str) or not spec.startswith("external:"):
        raise UsageError(f"unknown meter {spec!r}; known: external:FILE.csv[,offset=SECONDS]")
    body = spec[len("external:"):]
    offset = 0.0
    m = re.search(r",offset=([-+0-9.eE]+)$", body)
    if m:
        try:
            offset = float(m.group(1))
        except ValueError:
            raise UsageError(f"bad clock offset in {spec!r}") from None
        if not abs(offset) <= 1e9:  # finite, and within about 30 years of this clock
            raise UsageError(f"clock offset in {spec!r} must be a finite number of seconds (at most 1e9)")
        body = body[:m.start()]
    if not body:
        raise UsageError("external meter needs a file: external:FILE.csv")
    return ExternalLogMeter(body, clock_offset_s=offset)
