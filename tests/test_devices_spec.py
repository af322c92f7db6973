"""get_device spec parsing and meter override; `thor-sdk devices` on this machine; meters read over adb/ssh."""

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from fixtures.sysfs import plant, write
from thor_sdk.devices import get_device
from thor_sdk.devices.android import AndroidDevice
from thor_sdk.devices.discover import android_entries, jetson_entries
from thor_sdk.devices.jetson import JetsonDevice
from thor_sdk.errors import NotFoundError, UsageError
from thor_sdk.meters.external import ExternalLogMeter
from thor_sdk.transports.adb import AdbTransport
from thor_sdk.transports.base import RunOutput
from thor_sdk.transports.ssh import SshTransport


def test_specs():
    assert get_device("host").name == "host"
    assert get_device("android").name == "android"
    d = get_device("android:R58 M1;'x'")
    assert isinstance(d, AndroidDevice) and d.transport.serial == "R58 M1;'x'"
    j = get_device("jetson://ubuntu@nano.local:2222")
    assert isinstance(j, JetsonDevice) and (j.transport.user, j.transport.host, j.transport.port) == (
        "ubuntu", "nano.local", 2222)
    assert get_device("ios:00008110-000A").transport.udid == "00008110-000A"
    for bad, err in (("android:", UsageError), ("ios:", UsageError), ("jetson://", UsageError),
                     ("jetson://u@h:0", UsageError), ("pixel", NotFoundError), ("", UsageError)):
        with pytest.raises(err):
            get_device(bad)


def test_external_meter_for_any_device(tmp_path):
    log = tmp_path / "bench log.csv"
    log.write_text("t,power_w\n0,1\n1,1\n")
    for spec in ("host", "android:X", "jetson://u@h", "ios:U"):
        d = get_device(spec, meter=f"external:{log},offset=1.5")
        (m,) = d.meters()
        assert isinstance(m, ExternalLogMeter) and m.path == str(log) and m.clock_offset_s == 1.5
        assert d.energy_meter() is m
    with pytest.raises(UsageError):
        get_device("host", meter="monsoon")


class DeviceShell:
    """A fake adb/ssh client whose device shell is a real `sh -c` on this machine (device files planted under tmp)."""

    def __init__(self, adb_devices="List of devices attached\nSER 1        device model:Pixel_6\n"):
        self.adb_devices = adb_devices
        self.calls = []

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        self.calls.append(argv)
        if argv[1:] == ["devices", "-l"]:
            return RunOutput(0, self.adb_devices.encode())
        cmd = argv[-1]
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, input=input)
        return RunOutput(p.returncode, p.stdout, p.stderr)


def test_android_meters_read_over_adb_from_a_pixel_tree(tmp_path):
    plant(tmp_path, "pixel6")
    shell = DeviceShell()
    dev = AndroidDevice("SER 1", transport=AdbTransport("SER 1", runner=shell), device_root=str(tmp_path))
    meters = {m.name: m for m in dev.meters()}
    assert meters["android-battery"].is_available(), meters["android-battery"].why_unavailable()
    assert meters["odpm"].is_available(), meters["odpm"].why_unavailable()
    assert meters["odpm"].describe()["measured_by"] == "the harness on the device"
    write(tmp_path, "sys/class/power_supply/battery/status", "Charging")
    write(tmp_path, "sys/class/power_supply/usb/online", "1")
    bat = {m.name: m for m in dev.meters()}["android-battery"]
    assert not bat.is_available() and "usb power is online" in bat.why_unavailable()
    entries = android_entries(AdbTransport(runner=shell))
    assert entries[0]["spec"] == "android:SER 1" and entries[0]["model"] == "Pixel_6"


def test_jetson_meters_read_over_ssh_from_an_orin_tree(tmp_path):
    plant(tmp_path, "orin")
    shell = DeviceShell()
    dev = JetsonDevice("ubuntu@orin", transport=SshTransport("orin", user="ubuntu", runner=shell),
                       device_root=str(tmp_path))
    (m,) = dev.meters()
    assert m.is_available(), m.why_unavailable()
    assert {r["name"] for r in m.describe()["rails"]} == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"}
    (e,) = jetson_entries(["ubuntu@orin"], transport_factory=lambda t: SshTransport("orin", runner=shell))
    assert e["status"] == "available"

    def down(argv, timeout_s=None, input=None, env=None):
        return RunOutput(255, b"", b"ssh: connect to host orin port 22: No route to host")
    (e,) = jetson_entries(["ubuntu@orin"], transport_factory=lambda t: SshTransport("orin", runner=down))
    assert e["status"] == "unreachable" and "No route to host" in e["why"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_devices_on_this_machine(tmp_path):
    """`thor-sdk devices --json`: host with its meters (none readable here, each with why), other kinds absent."""
    port = _free_port()
    env = dict(os.environ, ANDROID_ADB_SERVER_PORT=str(port))
    try:
        p = subprocess.run([sys.executable, "-m", "thor_sdk.cli.main", "devices", "--json"], capture_output=True,
                           text=True, env=env, timeout=120)
        assert p.returncode == 0, p.stderr
        entries = {e["kind"]: e for e in json.loads(p.stdout)["devices"]}
        host = entries["host"]
        assert host["status"] == "available"
        names = {m["name"] for m in host["meters"]}
        assert "rapl" in names and not any(n.startswith("nvml") for n in names)  # NVML measures the GPU's steps
        gpu = entries["host:cuda"]
        assert gpu["status"] == "available" or gpu["why"]
        for m in host["meters"]:
            if not m["available"]:
                assert m["why_unavailable"]
        assert entries["android"]["status"] in ("absent", "available")
        if entries["android"]["status"] == "absent":
            assert "adb" in entries["android"]["why"]
        assert "no ssh target given" in entries["jetson"]["why"]
        if sys.platform != "darwin":
            assert "not macOS" in entries["ios"]["why"]
        text = subprocess.run([sys.executable, "-m", "thor_sdk.cli.main", "devices"], capture_output=True, text=True,
                              env=env, timeout=120)
        assert text.returncode == 0 and "meters of host" in text.stdout
    finally:
        if shutil.which("adb"):
            subprocess.run(["adb", "-P", str(port), "kill-server"], capture_output=True, timeout=30)
