"""NVIDIA Jetson boards (and other Linux boards) over ssh: ``jetson://user@host[:port]``.

The board has the same thor-sdk installed; this side pushes the bundle, runs
``thor-sdk harness run BUNDLE --out results.json`` there (which measures with the board's own
meters: INA3221 rails on a Jetson) and pulls the results. ``meters()`` reads the board's INA3221
files over ssh so ``thor-sdk devices`` can show the rails.
"""

from thor_sdk.meters.ina3221 import Ina3221Meter
from thor_sdk.transports.ssh import SshTransport

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
        return [DeviceMeter(Ina3221Meter(snapshot_files(self.transport, METER_FILES, root=self.device_root)))]
