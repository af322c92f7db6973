"""Intel/AMD RAPL energy counters through the Linux powercap interface.

Layout (``/sys/class/powercap``)::

    intel-rapl:0/name                  "package-0"
    intel-rapl:0/energy_uj             cumulative energy, microjoules
    intel-rapl:0/max_energy_range_uj   the value at which energy_uj wraps back to 0
    intel-rapl:0:0/name                "core" (a sub-zone of package 0; part of the package)
    intel-rapl:0:2/name                "dram" (not included in the package counter)
    intel-rapl:1/name                  "package-1" (second socket) or "psys" (whole SoC, overlaps)

By default the meter sums every top-level ``package-N`` zone (not ``psys``, which already
contains the packages). Since Linux 5.10 ``energy_uj`` is readable by root only (the PLATYPUS
side channel, CVE-2020-8694); the meter says so instead of failing obscurely.
"""

import re

from thor_sdk.errors import MeasurementError

from .base import CounterMeter, as_fs, probe_readable, read_number

BASE = "sys/class/powercap"
_TOP = re.compile(r"^intel-rapl:(\d+)$")
_SUB = re.compile(r"^intel-rapl:(\d+):(\d+)$")

PERMISSION_HINT = ("since Linux 5.10 RAPL energy_uj is readable by root only (CVE-2020-8694); run as root, or "
                   "grant read access, e.g. `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj` "
                   "(until reboot) or a udev rule")


class RaplMeter(CounterMeter):
    """Sum of RAPL zones (default: every package); ``domains`` picks zones by name (``["package-0", "dram"]``)."""

    name = "rapl"

    def __init__(self, root="/", domains=None, poll_period_s=1.0, clock=None, sampler=None):
        # RAPL counters update about every millisecond; polling catches wraps between reads.
        super().__init__(sample_period_s=0.001, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.fs = as_fs(root)
        self.domains = list(domains) if domains else None

    def zones(self):
        """[(zone dir, zone name)] of every RAPL zone present (top-level and sub-zones)."""
        out = []
        for rel in self.fs.glob(f"{BASE}/intel-rapl:*"):
            leaf = rel.rsplit("/", 1)[-1]
            if not (_TOP.match(leaf) or _SUB.match(leaf)):
                continue
            try:
                zname = self.fs.read_text(f"{rel}/name").strip()
            except OSError:
                zname = leaf
            out.append((rel, zname))
        return out

    def selected(self):
        zones = self.zones()
        if self.domains is None:
            return [(d, n) for d, n in zones if _TOP.match(d.rsplit("/", 1)[-1]) and n.startswith("package")]
        by_name = {n: d for d, n in zones}
        return [(by_name[n], n) for n in self.domains if n in by_name]

    def why_unavailable(self):
        if not self.fs.is_dir(BASE):
            return f"no powercap interface ({self.fs.path(BASE)} does not exist: not Linux, or no RAPL driver)"
        zones = self.zones()
        if not zones:
            return "no RAPL zones under powercap (CPU without RAPL, or the intel_rapl driver is not loaded)"
        sel = self.selected()
        if self.domains is not None:
            missing = [n for n in self.domains if n not in {z for _, z in sel}]
            if missing:
                return f"no RAPL zone named {', '.join(missing)} (present: {', '.join(n for _, n in zones)})"
        if not sel:
            return f"no RAPL package zone (present: {', '.join(n for _, n in zones)})"
        for d, _ in sel:
            why = probe_readable(self.fs, f"{d}/energy_uj")
            if why:
                return why + ("; " + PERMISSION_HINT if "permission denied" in why else "")
            why = probe_readable(self.fs, f"{d}/max_energy_range_uj")
            if why:
                return why
        return ""

    def read_counters(self):
        out = {}
        for d, zname in self.selected():
            try:
                e_uj = read_number(self.fs, f"{d}/energy_uj", "RAPL energy")
            except MeasurementError as e:
                if "permission denied" in str(e):
                    raise MeasurementError(f"{e}; {PERMISSION_HINT}") from e
                raise
            wrap_uj = read_number(self.fs, f"{d}/max_energy_range_uj", "RAPL counter range")
            out[zname] = (e_uj * 1e-6, wrap_uj * 1e-6)
        return out

    def describe(self):
        d = super().describe()
        d["zones"] = [n for _, n in self.selected()] if self.fs.is_dir(BASE) else []
        return d
