"""A Jetson AGX Thor as a device, on the fake Thor tree: this machine as the board (power meter and status from its
INA238) and a board over ssh (the meter listing from a snapshot of its INA238 files), beside an Orin's INA3221."""

import subprocess

import pytest

from fixtures.sysfs import plant, write
from thor_sdk.devices import get_device
from thor_sdk.devices.jetson import JetsonDevice, LocalJetsonDevice
from thor_sdk.meters.ina238 import Ina238Meter
from thor_sdk.transports.base import RunOutput
from thor_sdk.transports.ssh import SshTransport

VIN = "sys/class/hwmon/hwmon1"


def _shell(argv, timeout_s=None, input=None, env=None):
    """A fake ssh client whose remote shell is a real `sh -c` here (the board's files planted under tmp)."""
    p = subprocess.run(["sh", "-c", argv[-1]], capture_output=True, input=input)
    return RunOutput(p.returncode, p.stdout, p.stderr)


def test_the_local_jetson_on_a_thor_reads_power_from_its_ina238(tmp_path):
    plant(tmp_path, "thor")
    write(tmp_path, f"{VIN}/power1_input", 61_250_000)  # uW
    dev = get_device("jetson", root=str(tmp_path))
    assert isinstance(dev, LocalJetsonDevice)
    m = dev.power_meter()
    assert isinstance(m, Ina238Meter) and m.power_w() == pytest.approx(61.25)
    assert dev.power_status() == (True, "", "ina238:hwmon1")
    assert dev.power_info()["meter"] == "ina238:hwmon1"
    assert dev.frequency_controller().available_frequencies()[-1] == 1_575_000_000  # gpu-gpc-0
    # the board's own listing agrees: INA238 first, and it is the energy meter
    assert dev.energy_meter().name == "ina238"


def test_the_local_jetson_elsewhere_keeps_ina3221_and_says_why_without_a_monitor(tmp_path):
    plant(tmp_path / "orin", "orin")
    dev = LocalJetsonDevice(root=str(tmp_path / "orin"))
    assert dev.power_meter().name == "ina3221" and dev.power_status()[2].startswith("ina3221:")
    empty = LocalJetsonDevice(root=str(tmp_path / "empty"))
    ok, why, meter = empty.power_status()
    assert not ok and meter is None and "INA3221" in why and empty.power_meter() is None


def test_a_thor_over_ssh_lists_its_ina238_from_one_snapshot(tmp_path):
    plant(tmp_path, "thor")
    write(tmp_path, f"{VIN}/power1_input", 45_000_000)
    calls = []

    def shell(argv, timeout_s=None, input=None, env=None):
        calls.append(argv)
        return _shell(argv, timeout_s, input, env)

    dev = JetsonDevice("ubuntu@thor", transport=SshTransport("thor", user="ubuntu", runner=shell),
                       device_root=str(tmp_path))
    meters = dev.meters()
    assert [m.name for m in meters] == ["ina238", "ina3221"] and len(calls) == 1
    assert meters[0].is_available(), meters[0].why_unavailable()
    assert meters[0].describe()["rails"] == [{"name": "hwmon1", "hwmon": "hwmon1", "form": "power"}]
    assert not meters[1].is_available()  # this fake Thor has no INA3221 files
    assert dev.energy_meter().name == "ina238"
    # an Orin over ssh lists INA3221 alone, as before
    orin = tmp_path / "orin"
    plant(orin, "orin")
    dev = JetsonDevice("ubuntu@orin", transport=SshTransport("orin", user="ubuntu", runner=_shell),
                       device_root=str(orin))
    assert [m.name for m in dev.meters()] == ["ina3221"] and dev.energy_meter().name == "ina3221"
