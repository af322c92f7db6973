"""NVIDIA Jetson on-board INA3221 power monitors (one chip = up to three rails).

Two driver layouts exist across JetPack releases:

- **JetPack 4 (L4T r32) on Nano / TX1 / TX2 / Xavier**: NVIDIA's downstream ``ina3221x`` iio driver::

      /sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<N>/rail_name_<c>        e.g. POM_5V_IN
      /sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<N>/in_power<c>_input    mW
      /sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<N>/in_current<c>_input  mA
      /sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:device<N>/in_voltage<c>_input  mV     (c = 0, 1, 2)

- **JetPack 5-6 (L4T r34+) on Xavier / Orin**: the mainline ``ina3221`` hwmon driver::

      /sys/bus/i2c/drivers/ina3221/<bus-addr>/hwmon/hwmon<N>/in<c>_label   e.g. VDD_GPU_SOC ("NC": unconnected)
      /sys/bus/i2c/drivers/ina3221/<bus-addr>/hwmon/hwmon<N>/in<c>_input   bus voltage, mV
      /sys/bus/i2c/drivers/ina3221/<bus-addr>/hwmon/hwmon<N>/curr<c>_input current, mA       (c = 1, 2, 3)

  (``in4..in6`` are shunt voltages and ``in7``/``curr4`` sums; they are not rails.)

Power is read directly where the driver gives it (``in_power*``), else computed as V x I. The
default rails are the board's input rail when it has one (``VDD_IN`` on TX2/Xavier NX/Orin
NX/Nano, ``POM_5V_IN`` on the Nano); boards without one (AGX Xavier, AGX Orin) sum every rail,
which is what tegrastats' total does.
"""

import re

from .base import RailSamplingMeter, probe_readable, read_number

IIO_BASE = "sys/bus/i2c/drivers/ina3221x"
HWMON_BASE = "sys/bus/i2c/drivers/ina3221"
#: rails that carry the whole module's input power, in preference order
INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "5V_IN")


class Rail:
    """One monitored rail: where its power (or voltage and current) files are."""

    def __init__(self, name, layout, power=None, voltage=None, current=None):
        self.name = name
        self.layout = layout  # "iio" or "hwmon"
        self.power = power  # mW file (iio), or None
        self.voltage = voltage  # mV file
        self.current = current  # mA file

    def files(self):
        return [f for f in (self.power, self.voltage, self.current) if f]

    def to_dict(self):
        return {"name": self.name, "layout": self.layout,
                "form": "power" if self.power else "voltage x current"}


def discover_rails(fs):
    """Every connected INA3221 rail under ``fs`` (both layouts), in a stable order."""
    rails = []
    for rel in fs.glob(f"{IIO_BASE}/*/iio:device*/rail_name_*"):
        d, leaf = rel.rsplit("/", 1)
        c = leaf[len("rail_name_"):]
        try:
            name = fs.read_text(rel).strip()
        except OSError:
            continue
        if not name:
            continue
        power = f"{d}/in_power{c}_input"
        rails.append(Rail(name, "iio", power=power if fs.exists(power) else None,
                          voltage=f"{d}/in_voltage{c}_input", current=f"{d}/in_current{c}_input"))
    for rel in fs.glob(f"{HWMON_BASE}/*/hwmon/hwmon*/in*_label"):
        d, leaf = rel.rsplit("/", 1)
        m = re.match(r"^in([123])_label$", leaf)
        if not m:
            continue  # in7_label: sum of shunt voltages, not a rail
        c = m.group(1)
        try:
            name = fs.read_text(rel).strip()
        except OSError:
            continue
        if not name or name.upper() == "NC":
            continue
        rails.append(Rail(name, "hwmon", voltage=f"{d}/in{c}_input", current=f"{d}/curr{c}_input"))
    return rails


class Ina3221Meter(RailSamplingMeter):
    """Energy of Jetson INA3221 rails by sampling their power.

    ``rails``: rail names to sum (default: the input rail, else every rail). ``power_w()`` gives
    the instantaneous power of the selected rails in watts; ``rail_powers_w()`` per rail.
    """

    name = "ina3221"

    def all_rails(self):
        return discover_rails(self.fs)

    def selected_rails(self):
        found = self.all_rails()
        if self.rails is not None:
            by = {r.name: r for r in found}
            return [by[n] for n in self.rails if n in by]
        for name in INPUT_RAILS:
            for r in found:
                if r.name == name:
                    return [r]
        return found

    def why_unavailable(self):
        if not (self.fs.is_dir(IIO_BASE) or self.fs.is_dir(HWMON_BASE)):
            return (f"no INA3221 driver ({self.fs.path(IIO_BASE)} and {self.fs.path(HWMON_BASE)} are absent: "
                    "not a Jetson, or a Jetson without on-board power monitors such as the Nano 2GB)")
        found = self.all_rails()
        if not found:
            return "the INA3221 driver is loaded but lists no connected rail"
        if self.rails is not None:
            missing = [n for n in self.rails if n not in {r.name for r in found}]
            if missing:
                return f"no INA3221 rail named {', '.join(missing)} (present: {', '.join(r.name for r in found)})"
        for r in self.selected_rails():
            for f in (r.power,) if r.power else (r.voltage, r.current):
                why = probe_readable(self.fs, f)
                if why:
                    return why
        return ""

    def rail_power_w(self, r):
        return self._rail_power_w(self.fs, r)

    @staticmethod
    def _rail_power_w(fs, r):
        if r.power:
            return read_number(fs, r.power, f"{r.name} power, mW") / 1000.0
        mv = read_number(fs, r.voltage, f"{r.name} voltage, mV")
        ma = read_number(fs, r.current, f"{r.name} current, mA")
        return mv * ma / 1e6

