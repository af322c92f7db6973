"""Android On-Device Power Monitor (ODPM) rails: Pixel 6 and later, and other power-stats HALs.

Kernel interface (Google's ``odpm`` iio driver, one iio device per PMIC, e.g. ``s2mpg10-odpm``
and ``s2mpg11-odpm`` on a Pixel 6)::

    /sys/bus/iio/devices/iio:device<N>/energy_value
        t=<measurement timestamp, ms>
        CH<c>(T=<duration, ms>)[<schematic rail name>], <accumulated energy, uWs>
    /sys/bus/iio/devices/iio:device<N>/enabled_rails
        CH<c>[<schematic rail name>]:<subsystem>
    /sys/bus/iio/devices/iio:device<N>/sampling_rate     "<Hz>.<6 decimals>"

Rail names are device-specific (``S4M_VDD_CPUCL0`` / ``CPU(LITTLE)`` on a Pixel 6, other names
on later Pixels): ``rails`` selects by schematic name or subsystem; the default sums every
enabled channel. Reading ``energy_value`` refreshes the PMIC's accumulators (at most every ~20
samples of its ADC, so at the default 1 kHz about every 20 ms; at low rates seconds).

Without access to sysfs (it is usually not readable by apps), the same counters come from the
power-stats HAL dump, ``dumpsys android.hardware.power.stats.IPowerStats/default``, whose
"energy meter" section lists ``[<rail>]:<subsystem>   <cumulative energy> mWs`` per channel:
``PowerStatsDumpMeter`` reads that (through any callable returning the dump text, e.g. an adb
transport). The HAL formats the value as a 32-bit float, so on a phone that has been up for days
its resolution is coarse (tens of mWs): windows must be long.
"""

import re

from thor_sdk.errors import FormatError, MeasurementError, ThorError

from .base import CounterMeter, as_fs, probe_readable

IIO = "sys/bus/iio/devices"
#: the AIDL power-stats HAL's service, whose dump lists the ODPM rails' energy
POWER_STATS_SERVICE = "android.hardware.power.stats.IPowerStats/default"
_T = re.compile(r"^t=(\d+)")
_CH = re.compile(r"^CH(\d+)\(T=(\d+)\)\[([^\]]*)\],\s*(-?\d+)")
_EN = re.compile(r"^CH(\d+)\[([^\]]*)\]:(.*)$")


def parse_energy_value(text):
    """``energy_value`` text -> (timestamp_ms or None, {rail schematic name: energy_uws})."""

    t_ms, rails = None, {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        m = _T.match(line)
        if m:
            t_ms = int(m.group(1))
            continue
        m = _CH.match(line)
        if m:
            rails[m.group(3)] = int(m.group(4))
            continue
        raise FormatError(f"unexpected line in ODPM energy_value: {line[:80]!r}")
    return t_ms, rails


def parse_enabled_rails(text):
    """``enabled_rails`` text -> {schematic name: subsystem}."""
    out = {}
    for line in text.splitlines():
        m = _EN.match(line.strip())
        if m:
            out[m.group(2)] = m.group(3).strip()
    return out


def parse_power_stats_dump(text):
    """The energy-meter section of a power-stats HAL dump -> {rail: energy_j}.

    Rows look like ``  [S4M_VDD_CPUCL0]:CPU(LITTLE)   123456.78 mWs`` (HAL 2.0, AIDL) or
    ``  S4M_VDD_CPUCL0   123456.78 mWs`` (older layouts); with the ``delta`` argument a
    ``(<delta>)`` column follows and is ignored.
    """

    start = text.find("energy meter ==")
    if start < 0:
        raise FormatError("no 'PowerStats HAL ... energy meter' section in the dump (is this device's "
                          "power-stats HAL an ODPM one? `dumpsys -l | grep power.stats` lists it)")
    end = text.find("End of PowerStats HAL", start)
    section = text[start:end if end > 0 else len(text)].splitlines()[1:]
    rows = {}
    for line in section:
        m = re.match(r"^\s*(\S(?:.*\S)?)\s+(-?[0-9.]+)\s+mWs\b", line)
        if not m:
            continue
        label = m.group(1).strip()
        mb = re.match(r"^\[([^\]]+)\]:(.*)$", label)
        name = mb.group(1) if mb else label
        rows[name] = float(m.group(2)) / 1000.0
    if not rows:
        raise FormatError("the power-stats dump's energy meter section lists no channel")
    return rows


def dumpsys_reader(transport, once=False):
    """A ``dump_fn`` for ``PowerStatsDumpMeter``: ``dumpsys`` of the power-stats HAL through ``transport``.

    ``once=True`` runs it once and answers later calls from that text (a snapshot, for availability
    checks over adb); a failing command is a MeasurementError with its output.
    """
    seen = []

    def dump():
        if once and seen:
            return seen[0]
        res = transport.run(["dumpsys", POWER_STATS_SERVICE], timeout_s=30, check=False)
        if res.returncode != 0:
            why = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1][:200]
            raise MeasurementError(f"`dumpsys {POWER_STATS_SERVICE}` failed (exit {res.returncode}): {why}")
        seen[:] = [res.stdout]
        return res.stdout

    return dump


def _select(rails, wanted, subsystems):
    """Keep rails named in ``wanted`` (by schematic name or subsystem); None keeps all."""
    if wanted is None:
        return dict(rails)
    out = {}
    for name, v in rails.items():
        if name in wanted or subsystems.get(name) in wanted:
            out[name] = v
    return out


class OdpmMeter(CounterMeter):
    """Sum of ODPM rail energy counters read from ``iio:device*/energy_value``."""

    name = "odpm"

    def __init__(self, root="/", rails=None, poll_period_s=1.0, clock=None, sampler=None):
        super().__init__(sample_period_s=0.02, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.fs = as_fs(root)
        self.rails = [rails] if isinstance(rails, str) else (list(rails) if rails else None)
        self.sample_period_s = self._sensor_period_s()

    def devices(self):
        return [rel.rsplit("/", 1)[0] for rel in self.fs.glob(f"{IIO}/iio:device*/energy_value")]

    def _sensor_period_s(self):
        # the accumulators are refreshed after >= 20 ADC samples (see the module docstring)
        period = 0.02
        for d in self.devices():
            try:
                hz = float(self.fs.read_text(f"{d}/sampling_rate").split()[0])
            except (OSError, ValueError, IndexError):
                continue
            if hz > 0:
                period = max(period, 20.0 / hz)
        return period

    def subsystems(self):
        out = {}
        for d in self.devices():
            try:
                out.update(parse_enabled_rails(self.fs.read_text(f"{d}/enabled_rails")))
            except OSError:
                continue
        return out

    def why_unavailable(self):
        devs = self.devices()
        if not devs:
            return f"no ODPM energy counters ({self.fs.path(IIO)}/iio:device*/energy_value absent: no ODPM on this device)"
        for d in devs:
            why = probe_readable(self.fs, f"{d}/energy_value")
            if why:
                return why + ("; ODPM sysfs is usually readable by root/system only: use the power-stats dump "
                              "(`dumpsys android.hardware.power.stats.IPowerStats/default`)"
                              if "permission" in why else "")
        if self.rails is not None:
            present = {}
            for d in devs:
                present.update(parse_energy_value(self.fs.read_text(f"{d}/energy_value"))[1])
            if not _select(present, set(self.rails), self.subsystems()):
                return f"no ODPM rail matches {', '.join(self.rails)} (present: {', '.join(sorted(present))})"
        return ""

    def read_counters(self):
        subs = self.subsystems() if self.rails is not None else {}
        out = {}
        for d in self.devices():
            try:
                text = self.fs.read_text(f"{d}/energy_value")
            except OSError as e:
                raise MeasurementError(f"cannot read {self.fs.path(d + '/energy_value')}: {e.strerror or e}") from e
            _, rails = parse_energy_value(text)
            for name, uws in _select(rails, set(self.rails) if self.rails else None, subs).items():
                out[f"{d.rsplit('/', 1)[-1]}/{name}"] = (uws * 1e-6, None)
        return out

    def describe(self):
        d = super().describe()

        try:
            d["rails"] = sorted(self.read_counters()) if self.is_available() else []
        except ThorError as e:  # describe() reports, it does not fail
            d["rails_error"] = str(e)
        return d


class PowerStatsDumpMeter(CounterMeter):
    """ODPM rails read from the power-stats HAL dump text that ``dump_fn()`` returns."""

    name = "power-stats"

    def __init__(self, dump_fn, rails=None, poll_period_s=5.0, clock=None, sampler=None):
        super().__init__(sample_period_s=0.25, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.dump_fn = dump_fn
        self.rails = [rails] if isinstance(rails, str) else (list(rails) if rails else None)

    def why_unavailable(self):
        try:
            rows = parse_power_stats_dump(self.dump_fn())
        except ThorError as e:
            return str(e)
        if self.rails is not None and not _select(rows, set(self.rails), {}):
            return f"no power-stats channel matches {', '.join(self.rails)} (present: {', '.join(sorted(rows))})"
        return ""

    def read_counters(self):
        rows = parse_power_stats_dump(self.dump_fn())
        return {k: (v, None) for k, v in _select(rows, set(self.rails) if self.rails else None, {}).items()}
