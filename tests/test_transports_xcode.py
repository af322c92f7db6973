"""Xcode (devicectl) transport: clear error off macOS; argv shapes and JSON parsing with a fake runner."""

import json

import pytest

from thor_sdk.errors import DeviceUnavailableError, FormatError
from thor_sdk.transports.base import RunOutput
from thor_sdk.transports.xcode import XcodeTransport, parse_devicectl_devices

# shape of `xcrun devicectl list devices --json-output` (Xcode 15), trimmed
DEVICES = {"info": {"outcome": "success"}, "result": {"devices": [{
    "identifier": "5B5C1D5E-0000-4000-8000-00000000ABCD",
    "connectionProperties": {"pairingState": "paired", "tunnelState": "connected", "transportType": "wired"},
    "deviceProperties": {"name": "Lab iPhone", "osVersionNumber": "17.5.1"},
    "hardwareProperties": {"udid": "00008110-000A11223344801E", "marketingName": "iPhone 13", "platform": "iOS",
                           "productType": "iPhone14,5"}}]}}


class FakeXcrun:
    def __init__(self):
        self.calls = []

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        self.calls.append(argv)
        if argv[1:4] == ["devicectl", "list", "devices"]:
            with open(argv[argv.index("--json-output") + 1], "w") as f:
                json.dump(DEVICES, f)
        return RunOutput(0, b"")


def test_off_macos_every_operation_says_so():
    t = XcodeTransport("00008110-000A11223344801E", platform="linux")
    assert not t.is_available()
    assert "not macOS" in t.why_unavailable()
    with pytest.raises(DeviceUnavailableError, match="not macOS"):
        t.run(["dev.thorsdk.harness"])
    with pytest.raises(DeviceUnavailableError, match="not macOS"):
        t.devices()


def test_launch_and_copy_argv_keep_odd_arguments_separate(tmp_path):
    fake = FakeXcrun()
    t = XcodeTransport("00008110-000A11223344801E", runner=fake, platform="darwin")
    assert t.devices()[0]["name"] == "Lab iPhone"
    t.run(["dev.thorsdk.harness", "--bundle", "Documents/thor-sdk/a b;'c'", "--out", "results.json"])
    launch = fake.calls[-1]
    assert launch[:5] == ["xcrun", "devicectl", "device", "process", "launch"]
    assert launch[-5:] == ["dev.thorsdk.harness", "--bundle", "Documents/thor-sdk/a b;'c'", "--out", "results.json"]
    assert launch[launch.index("--device") + 1] == "00008110-000A11223344801E"
    t.push(tmp_path / "bundle x", "Documents/thor-sdk/bundle x")
    cp = fake.calls[-1]
    assert cp[2:5] == ["device", "copy", "to"] and cp[cp.index("--source") + 1] == str(tmp_path / "bundle x")
    assert cp[cp.index("--domain-identifier") + 1] == "dev.thorsdk.harness"
    with pytest.raises(FormatError):
        t.pull("../../etc/passwd", tmp_path / "x")


def test_unknown_udid_and_bad_json():
    t = XcodeTransport("nope", runner=FakeXcrun(), platform="darwin")
    with pytest.raises(DeviceUnavailableError, match="00008110"):
        t.resolve()
    with pytest.raises(FormatError):
        parse_devicectl_devices({"result": {}})
