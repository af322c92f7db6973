"""TI INA238 power monitors through the mainline ``ina238`` hwmon driver: Jetson AGX Thor's system input (VIN).

Jetson AGX Thor (JetPack 7) keeps an INA3221 for module rails and adds an INA238 on the carrier board
for the whole system input; each INA238 is one channel, one hwmon device::

    /sys/class/hwmon/hwmon<N>/name           "ina238"
    /sys/class/hwmon/hwmon<N>/label          rail name, where the device tree gives one (hwmon core, Linux 6.2+)
    /sys/class/hwmon/hwmon<N>/power1_input   power, microwatts
    /sys/class/hwmon/hwmon<N>/in1_input      bus voltage, mV
    /sys/class/hwmon/hwmon<N>/curr1_input    current, mA
    (in0_input: shunt voltage; temp1_input: die temperature, m°C; power1_max: limit, uW)

Units are the driver's (``drivers/hwmon/ina238.c``; jetson-stats 7.2.2 reads the same files). Power
is read directly (``power1_input``) and falls back to bus voltage x current where it is absent. A
rail is named by its ``label``, else by its hwmon folder (``hwmon5``); ``rails=`` selects by either;
the default sums every INA238. The driver's default configuration averages 16 conversions of
~1 ms per channel, so the value changes about every 50 ms (``sample_period_s=0.05``).
"""

from .base import RailSamplingMeter, probe_readable, read_number

HWMON = "sys/class/hwmon"
#: device files a remote board's snapshot needs to decide availability (see devices/remote.snapshot_files)
SNAPSHOT_FILES = ["/sys/class/hwmon/hwmon*/name", "/sys/class/hwmon/hwmon*/label",
                  "/sys/class/hwmon/hwmon*/power1_input", "/sys/class/hwmon/hwmon*/in1_input",
                  "/sys/class/hwmon/hwmon*/curr1_input"]


class Ina238Rail:
    """One INA238 channel: its name and where its power (or voltage and current) is read."""

    def __init__(self, name, hwmon, power=None, voltage=None, current=None):
        self.name = name
        self.hwmon = hwmon
        self.power = power  # uW file, or None
        self.voltage = voltage  # mV file
        self.current = current  # mA file

    def to_dict(self):
        return {"name": self.name, "hwmon": self.hwmon, "form": "power" if self.power else "voltage x current"}


def discover_ina238(fs):
    """Every INA238 hwmon device under ``fs``, in hwmon order."""
    rails = []
    for rel in fs.glob(f"{HWMON}/hwmon*/name"):
        d = rel.rsplit("/", 1)[0]
        try:
            if fs.read_text(rel).strip() != "ina238":
                continue
        except OSError:
            continue
        hw = d.rsplit("/", 1)[-1]
        try:
            label = fs.read_text(f"{d}/label").strip()
        except OSError:
            label = ""
        power = f"{d}/power1_input"
        rails.append(Ina238Rail(label or hw, hw, power=power if fs.exists(power) else None,
                                voltage=f"{d}/in1_input", current=f"{d}/curr1_input"))
    return sorted(rails, key=lambda r: (len(r.hwmon), r.hwmon))


class Ina238Meter(RailSamplingMeter):
    """Energy of INA238 channels by sampling their power (sum of the selected ones)."""

    name = "ina238"

    def all_rails(self):
        return discover_ina238(self.fs)

    def selected_rails(self):
        found = self.all_rails()
        if self.rails is None:
            return found
        return [r for r in found if r.name in self.rails or r.hwmon in self.rails]

    def why_unavailable(self):
        found = self.all_rails()
        if not found:
            return (f"no INA238 power monitor (no {self.fs.path(HWMON)}/hwmon*/name says ina238: not a Jetson AGX "
                    "Thor, or its ina238 driver is not loaded)")
        sel = self.selected_rails()
        if not sel:
            return (f"no INA238 channel named {', '.join(self.rails)} "
                    f"(present: {', '.join(r.name for r in found)})")
        for r in sel:
            for f in (r.power,) if r.power else (r.voltage, r.current):
                why = probe_readable(self.fs, f)
                if why:
                    return why
        return ""

    def rail_power_w(self, r):
        if r.power:
            return read_number(self.fs, r.power, f"{r.name} power, uW") / 1e6
        mv = read_number(self.fs, r.voltage, f"{r.name} bus voltage, mV")
        ma = read_number(self.fs, r.current, f"{r.name} current, mA")
        return mv * ma / 1e6

