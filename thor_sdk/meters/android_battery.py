"""Android (and Linux) battery fuel gauge: ``current_now`` x ``voltage_now`` from sysfs.

``/sys/class/power_supply/battery/``:

- ``current_now``: instantaneous battery current. The kernel ABI says microamps, negative while
  discharging; in practice some vendors report milliamps and some report discharge as positive
  (the kernel documented the sign only in 2020 for that reason). Units are detected from the
  magnitude unless given (``current_unit="uA"|"mA"``); the discharge sign is taken from the
  window's median sample unless given (``discharge_sign=-1|+1``).
- ``voltage_now``: microvolts (a few devices: millivolts; detected from the magnitude).
- ``status``: ``Charging`` / ``Discharging`` / ``Not charging`` / ``Full``.
- ``capacity`` (%), ``temp`` (tenths of a degree C): recorded as device state.

Measuring while the phone is plugged in is refused unless ``allow_charging=True``: USB power
then supplies the phone and the battery current no longer shows what the work draws. Use adb over
Wi-Fi (``adb tcpip 5555`` then ``adb connect PHONE_IP``) and unplug the cable.

The fuel gauge updates about once a second (``sample_period_s=1.0``), so the protocol's windows
are ~20 s; the sampler polls it 4x faster.
"""

import statistics

from thor_sdk.errors import MeasurementError, UsageError

from .base import SamplingMeter, as_fs, probe_readable, read_number

PS = "sys/class/power_supply"
CHARGING_STATES = ("Charging", "Full", "Not charging")
#: |current_now| above this is microamps (>= 10 mA), below it milliamps (< 10 A); see docs/devices.md
AUTO_UA_THRESHOLD = 10000
#: voltage_now above this is microvolts, below it millivolts
AUTO_UV_THRESHOLD = 100000


def _micro_or_milli(raw_values, unit, micro, milli, threshold, option):
    """1e-6 for micro units, 1e-3 for milli; "auto" decides by the median magnitude vs ``threshold``."""

    if unit == micro:
        return 1e-6
    if unit == milli:
        return 1e-3
    if unit != "auto":
        raise UsageError(f"{option} must be '{micro}', '{milli}' or 'auto', got {unit!r}")
    mags = [abs(v) for v in raw_values if v]
    if not mags:
        return 1e-6
    return 1e-6 if statistics.median(mags) >= threshold else 1e-3


def current_scale_a(raw_values, unit="auto"):
    """Amps per raw unit for ``current_now`` values (``unit`` "uA", "mA" or "auto")."""
    return _micro_or_milli(raw_values, unit, "uA", "mA", AUTO_UA_THRESHOLD, "current_unit")


def voltage_scale_v(raw_values, unit="auto"):
    """Volts per raw unit for ``voltage_now`` values (``unit`` "uV", "mV" or "auto")."""
    return _micro_or_milli(raw_values, unit, "uV", "mV", AUTO_UV_THRESHOLD, "voltage_unit")


def discharge_sign_of(raw_currents, sign="auto", charging=False):
    """+1 or -1: the sign ``current_now`` has while the battery discharges."""

    if sign in (1, -1):
        return sign
    if sign != "auto":
        raise UsageError(f"discharge_sign must be +1, -1 or 'auto', got {sign!r}")
    if charging:
        return -1  # the net current may flip sign: fall back to the kernel's documented convention
    med = statistics.median(raw_currents) if raw_currents else 0
    return -1 if med < 0 else 1


class AndroidBatteryMeter(SamplingMeter):
    """Battery discharge power by sampling ``current_now`` and ``voltage_now``."""

    name = "android-battery"

    def __init__(self, root="/", supply="battery", allow_charging=False, current_unit="auto", voltage_unit="auto",
                 discharge_sign="auto", sample_period_s=1.0, poll_period_s=0.25, clock=None, sampler=None):
        super().__init__(sample_period_s=sample_period_s, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.fs = as_fs(root)
        self.supply = supply
        self.allow_charging = allow_charging
        self.current_unit = current_unit
        self.voltage_unit = voltage_unit
        self.discharge_sign = discharge_sign
        self.last_window_info = {}

    def _f(self, leaf):
        return f"{PS}/{self.supply}/{leaf}"

    def charging_reason(self):
        """'' when on battery power, else what shows external power (status, online supplies)."""
        reasons = []
        try:
            status = self.fs.read_text(self._f("status")).strip()
        except OSError:
            status = ""
        if status in CHARGING_STATES:
            reasons.append(f"battery status is {status!r}")
        for rel in self.fs.glob(f"{PS}/*/online"):
            sup = rel.split("/")[-2]
            if sup == self.supply:
                continue
            try:
                online = self.fs.read_text(rel).strip()
            except OSError:
                continue
            if online not in ("", "0"):
                reasons.append(f"{sup} power is online")
        return ", ".join(reasons)

    def why_unavailable(self):
        if not self.fs.is_dir(f"{PS}/{self.supply}"):
            return f"no battery at {self.fs.path(PS + '/' + self.supply)}"
        for leaf in ("current_now", "voltage_now"):
            why = probe_readable(self.fs, self._f(leaf))
            if why:
                return why
        if not self.allow_charging:
            why = self.charging_reason()
            if why:
                return (f"the device is on external power ({why}): USB power hides the draw; unplug it "
                        "(adb over Wi-Fi) or allow charging explicitly")
        return ""

    def read_sample(self):
        return (read_number(self.fs, self._f("current_now"), "battery current"),
                read_number(self.fs, self._f("voltage_now"), "battery voltage"))

    def samples_to_power(self, samples):
        charging = self.charging_reason()
        if charging and not self.allow_charging:
            raise MeasurementError(f"the device went on external power during the window ({charging}); "
                                   "the battery current no longer shows the draw")
        cur = [c for _, (c, _v) in samples]
        vol = [v for _, (_c, v) in samples]
        a = current_scale_a(cur, self.current_unit)
        v = voltage_scale_v(vol, self.voltage_unit)
        sign = discharge_sign_of(cur, self.discharge_sign, charging=bool(charging))
        self.last_window_info = {"current_unit": "uA" if a == 1e-6 else "mA", "voltage_unit": "uV" if v == 1e-6 else "mV",
                                 "discharge_sign": sign, "external_power": charging or None}
        return [(t, (c * a * sign) * (u * v)) for t, (c, u) in samples]

    def power_w(self):
        """Instantaneous discharge power, W (units and sign as decided for a single sample)."""
        return self.samples_to_power([(0.0, self.read_sample())])[0][1]

    def state(self):
        """Battery level (%), temperature (C) and status, for the window's device-state record."""

        out = {}
        for leaf, key, scale in (("capacity", "battery_pct", 1), ("temp", "battery_temp_c", 0.1)):
            if not self.fs.exists(self._f(leaf)):
                continue
            try:
                out[key] = read_number(self.fs, self._f(leaf)) * scale
            except MeasurementError as e:  # state is best effort: say what could not be read
                out[key + "_error"] = str(e)
        if self.fs.exists(self._f("status")):
            try:
                out["battery_status"] = self.fs.read_text(self._f("status")).strip()
            except OSError as e:
                out["battery_status_error"] = str(e)
        return out

    def describe(self):
        d = super().describe()
        d["supply"] = self.supply
        d["allow_charging"] = self.allow_charging
        return d
