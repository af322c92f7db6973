"""NVIDIA Jetson boards: this machine when it is one (``jetson``), or a board over ssh (``jetson://``).

``LocalJetsonDevice`` (``--device jetson``: thor-sdk runs ON the board) is the host device with the
board's two capabilities: GPU frequency control through devfreq (``thor_sdk.devices.devfreq``, root
needed) and power from the board's monitors: the INA238 system input on an AGX Thor
(``thor_sdk.meters.ina238``), else the INA3221 rails (``thor_sdk.meters.ina3221``); it probes and measures
in-process like the host, and power-aware profiling and training pin its GPU frequency.

``JetsonDevice`` (``jetson://``): the board has the same thor-sdk installed; this side pushes the
bundle, runs ``thor-sdk harness run BUNDLE --out results.json`` there (which measures with the
board's own meters: INA238 on an AGX Thor, INA3221 rails on the others) and pulls the results.
``meters()`` reads the board's INA238 and INA3221 files over ssh so ``thor-sdk devices`` can show them. Power-aware profiling and
training on it run ``thor-sdk table profile|train --device jetson`` on the board through the same
remote runner (``thor_sdk.power.remote``).
"""

from thor_sdk.meters import ina238
from thor_sdk.meters.base import as_fs
from thor_sdk.meters.ina238 import Ina238Meter, discover_ina238
from thor_sdk.meters.ina3221 import Ina3221Meter
from thor_sdk.transports.ssh import SshTransport

from .host import HostDevice
from .remote import CliHarness, DeviceMeter, RemoteDevice, snapshot_files

METER_FILES = [
    "/sys/bus/i2c/drivers/ina3221x/*/iio:device*/rail_name_*",
    "/sys/bus/i2c/drivers/ina3221x/*/iio:device*/in_power*_input",
    "/sys/bus/i2c/drivers/ina3221x/*/iio:device*/in_current*_input",
    "/sys/bus/i2c/drivers/ina3221x/*/iio:device*/in_voltage*_input",
    "/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label",
    "/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_input",
    "/sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/curr*_input",
]


class JetsonDevice(RemoteDevice):
    kind = "jetson"

    def __init__(self, target, meter=None, transport=None, command=("thor-sdk",), **kw):
        transport = transport or SshTransport.from_target(target)
        super().__init__(transport, CliHarness(command), meter=meter, name=f"jetson://{target}", **kw)
        self.target = target

    def device_meters(self):
        """The board's monitors from one snapshot of their files, in the order the board itself lists them
        (``host_meters``): an AGX Thor's INA238 (only where one is present), then INA3221."""
        fs = snapshot_files(self.transport, METER_FILES + ina238.SNAPSHOT_FILES, root=self.device_root)
        meters = [DeviceMeter(Ina238Meter(fs))] if discover_ina238(fs) else []
        return meters + [DeviceMeter(Ina3221Meter(fs))]


class LocalJetsonDevice(HostDevice):
    """This machine is a Jetson (``root``: ``/``, or a fake sysfs tree in tests)."""

    name = "jetson"
    kind = "jetson"

    def __init__(self, root="/", meter=None, threads=None, poll_period_s=0.02):
        super().__init__(meter=meter, root=str(root), threads=threads)
        self.poll_period_s = poll_period_s

    def frequency_controller(self):
        from .devfreq import GpuFrequencyController

        return GpuFrequencyController(self.root)

    def _ina3221(self):
        return Ina3221Meter(root=self.root, poll_period_s=self.poll_period_s)

    def _board_meters(self):
        """The board's power monitors in the order ``host_meters`` lists them: an AGX Thor's INA238 (the
        system input; only where one is present), then INA3221."""
        ina = [Ina238Meter(root=self.root, poll_period_s=self.poll_period_s)] if discover_ina238(as_fs(self.root)) else []
        return ina + [self._ina3221()]

    def power_meter(self):
        return next((m for m in self._board_meters() if m.is_available()), None)

    def power_status(self):
        whys = []
        for m in self._board_meters():
            why = m.why_unavailable()
            if not why:
                return True, "", f"{m.name}:" + "+".join(r.name for r in m.selected_rails())
            whys.append(why)
        return False, "; ".join(whys), None

    def power_window(self):
        from thor_sdk.meters.peak import PowerWindow

        m = self.power_meter()
        return None if m is None else PowerWindow(m, require_peak=True)
