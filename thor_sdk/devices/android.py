"""Android phones over adb, measured by the harness app (``android_harness/``).

The app runs the bundle's exported ONNX training steps with ONNX Runtime's Java API and reads the
battery through ``BatteryManager`` while it does; this side pushes the bundle, starts the app's
instrumentation and pulls the results. ``meters()`` reports what the phone's sysfs shows (battery
fuel gauge, ODPM rails), read through adb, so ``thor-sdk devices`` can say why energy is or is not
measurable (e.g. the phone is charging over USB: use adb over Wi-Fi and unplug it).
"""

from thor_sdk.meters.android_battery import AndroidBatteryMeter
from thor_sdk.meters.odpm import OdpmMeter, PowerStatsDumpMeter, dumpsys_reader
from thor_sdk.transports.adb import AdbTransport

from .remote import AndroidHarness, DeviceMeter, RemoteDevice, snapshot_files

METER_FILES = [
    "/sys/class/power_supply/*/type", "/sys/class/power_supply/*/status", "/sys/class/power_supply/*/online",
    "/sys/class/power_supply/battery/current_now", "/sys/class/power_supply/battery/voltage_now",
    "/sys/class/power_supply/battery/capacity", "/sys/class/power_supply/battery/temp",
    "/sys/bus/iio/devices/iio:device*/name", "/sys/bus/iio/devices/iio:device*/energy_value",
    "/sys/bus/iio/devices/iio:device*/enabled_rails", "/sys/bus/iio/devices/iio:device*/sampling_rate",
]


class AndroidDevice(RemoteDevice):
    kind = "android"

    def __init__(self, serial=None, meter=None, transport=None, allow_charging=False, connect=None, name=None, **kw):
        # a HOST:PORT serial (adb over TCP, a DeviceFarmer STF device) is reached with `adb connect` first
        transport = transport or AdbTransport(serial=serial, connect=connect)
        super().__init__(transport, AndroidHarness(), meter=meter,
                         name=name or (f"android:{serial}" if serial else "android"), **kw)
        self.allow_charging = allow_charging

    def device_meters(self):
        """In preference order: ODPM sysfs (rail counters; root/system only), the power-stats HAL dump (the same
        counters through ``dumpsys``, readable over adb), then the battery fuel gauge (~1 s, whole phone)."""
        snap = snapshot_files(self.transport, METER_FILES, root=self.device_root)
        return [DeviceMeter(OdpmMeter(snap)), DeviceMeter(PowerStatsDumpMeter(dumpsys_reader(self.transport, once=True))),
                DeviceMeter(AndroidBatteryMeter(snap, allow_charging=self.allow_charging))]
