"""adb transport: argv lists, remote-shell quoting, device states, and the real adb binary's no-device path."""

import shutil
import socket
import subprocess

import pytest

from thor_sdk.errors import DeviceError, DeviceUnavailableError, UsageError
from thor_sdk.transports.adb import AdbTransport, parse_devices
from thor_sdk.transports.base import RunOutput, TransportDisconnected

WEIRD = ["a b", "it's", 'say "hi"', "x;rm -rf /tmp/nope", "$HOME", "`id`", "back\\slash", "*", ""]

# recorded `adb devices -l` outputs
ONE = ("List of devices attached\n"
       "1A2B3C4D5E6F7G        device usb:1-1 product:oriole model:Pixel_6 device:oriole transport_id:4\n\n")
MANY = ("List of devices attached\n"
        "1A2B3C4D5E6F7G        device usb:1-1 product:oriole model:Pixel_6 device:oriole transport_id:4\n"
        "R58M12ABCDE           unauthorized usb:1-2 transport_id:5\n"
        "192.168.1.20:5555     offline transport_id:6\n"
        "0123456789ABCDEF      no permissions (missing udev rules? user is in the plugdev group); see "
        "[http://developer.android.com/tools/device.html] usb:1-3 transport_id:7\n"
        "odd serial;'x'        device product:x model:Y device:z transport_id:8\n")


class FakeAdb:
    """Replays `adb devices -l`; runs `adb shell CMD` through a real local `sh -c CMD` (the device's shell)."""

    def __init__(self, devices=ONE, drop_after=None):
        self.devices = devices
        self.calls = []
        self.drop_after = drop_after

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        self.calls.append(argv)
        args = argv[1:]
        if args[:1] == ["-P"]:
            args = args[2:]
        if args == ["devices", "-l"]:
            return RunOutput(0, self.devices.encode())
        assert args[0] == "-s"
        serial, verb, rest = args[1], args[2], args[3:]
        if self.drop_after is not None and len(self.calls) > self.drop_after:
            return RunOutput(1, b"", f"adb: device '{serial}' not found\n".encode())
        if verb == "shell":
            assert len(rest) == 1, "adb shell must get ONE pre-quoted command string"
            p = subprocess.run(["sh", "-c", rest[0]], capture_output=True, input=input)
            return RunOutput(p.returncode, p.stdout, p.stderr)
        if verb in ("push", "pull"):
            return RunOutput(0, b"1 file pushed.\n")
        raise AssertionError(argv)


def test_parse_devices_states_and_odd_serials():
    devs = parse_devices(MANY)
    assert [(d["serial"], d["state"]) for d in devs[:3]] == [
        ("1A2B3C4D5E6F7G", "device"), ("R58M12ABCDE", "unauthorized"), ("192.168.1.20:5555", "offline")]
    assert devs[0]["model"] == "Pixel_6"
    assert devs[3]["state"].startswith("no permissions")
    assert devs[4]["serial"] == "odd serial;'x'"


def test_arguments_reach_the_device_shell_unchanged():
    fake = FakeAdb()
    t = AdbTransport(runner=fake)
    for w in WEIRD:
        res = t.run(["printf", "%s|", w])
        assert res.stdout == w + "|"
    res = t.run(["printf", "%s\n", *WEIRD])
    assert res.stdout.split("\n")[:-1] == WEIRD
    shell_calls = [c for c in fake.calls if "shell" in c]
    assert all(c[:3] == ["adb", "-s", "1A2B3C4D5E6F7G"] for c in shell_calls)


def test_serial_with_spaces_quotes_semicolon_passes_as_one_argv_element(tmp_path):
    fake = FakeAdb(devices=MANY)
    serial = "odd serial;'x'"
    t = AdbTransport(serial=serial, runner=fake)
    t.push(tmp_path / "my model; v2.onnx", "/data/local/tmp/thor sdk/a'b")
    push = fake.calls[-1]
    assert push == ["adb", "-s", serial, "push", str(tmp_path / "my model; v2.onnx"), "/data/local/tmp/thor sdk/a'b"]
    assert t.run(["echo", "ok"]).stdout == "ok\n"


def test_device_state_errors():
    with pytest.raises(DeviceError, match="Allow USB debugging"):
        AdbTransport(serial="R58M12ABCDE", runner=FakeAdb(MANY)).run(["true"])
    with pytest.raises(DeviceError, match="adb reconnect"):
        AdbTransport(serial="192.168.1.20:5555", runner=FakeAdb(MANY)).run(["true"])
    with pytest.raises(DeviceError, match="udev"):
        AdbTransport(serial="0123456789ABCDEF", runner=FakeAdb(MANY)).run(["true"])
    with pytest.raises(UsageError, match="android:SERIAL"):
        AdbTransport(runner=FakeAdb(MANY)).run(["true"])
    with pytest.raises(DeviceUnavailableError, match="lists none"):
        AdbTransport(runner=FakeAdb("List of devices attached\n\n")).run(["true"])
    with pytest.raises(DeviceUnavailableError, match="'nope'"):
        AdbTransport(serial="nope", runner=FakeAdb(ONE)).run(["true"])


def test_remote_failure_vs_disconnect():
    t = AdbTransport(runner=FakeAdb())
    with pytest.raises(DeviceError, match="exit 3") as ei:
        t.run(["sh", "-c", "echo boom >&2; exit 3"])
    assert not isinstance(ei.value, TransportDisconnected)
    assert t.run(["false"], check=False).returncode == 1
    dropping = AdbTransport(runner=FakeAdb(drop_after=2))
    dropping.run(["true"])
    with pytest.raises(TransportDisconnected):
        dropping.run(["true"])


def test_getprop_info():
    class Props(FakeAdb):
        def __call__(self, argv, timeout_s=None, input=None, env=None):
            if argv[-2:] == ["shell", "getprop"]:
                self.calls.append(argv)
                return RunOutput(0, b"[ro.product.model]: [Pixel 6]\n[ro.build.version.sdk]: [34]\n"
                                    b"[ro.product.manufacturer]: [Google]\n")
            return super().__call__(argv, timeout_s, input, env)

    info = AdbTransport(runner=Props()).info()
    assert info["model"] == "Pixel 6" and info["sdk"] == "34" and info["serial"] == "1A2B3C4D5E6F7G"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("adb") is None, reason="Debian's adb is not installed")
def test_real_adb_no_device():
    """The real adb client, on a private server port (killed afterwards): no device, odd serial kept intact."""
    port = _free_port()
    try:
        serial = "no such; phone 'x'"
        with pytest.raises(DeviceUnavailableError) as ei:
            AdbTransport(serial=serial, server_port=port).run(["true"])
        assert repr(serial) in str(ei.value)
        with pytest.raises(DeviceUnavailableError, match="lists none"):
            AdbTransport(server_port=port).run(["true"])
    finally:
        subprocess.run(["adb", "-P", str(port), "kill-server"], capture_output=True, timeout=30)


def test_adb_devices_asks_again_while_another_thread_starts_the_server():
    """A fleet's devices all run `adb devices` at once; while one of them starts the adb server the others
    read `cannot connect to daemon` (adb 1.0.41): asked again after a wait, not lost. A server that never
    comes up is still one error."""
    starting = RunOutput(1, b"", b"adb: failed to check server version: cannot connect to daemon\n")

    class Starting(FakeAdb):
        def __init__(self, failures):
            super().__init__()
            self.failures = failures

        def __call__(self, argv, timeout_s=None, input=None, env=None):
            if argv[1:] == ["devices", "-l"] and self.failures > 0:
                self.failures -= 1
                self.calls.append(argv)
                return starting
            return super().__call__(argv, timeout_s, input, env)

    waits = []
    t = AdbTransport("1A2B3C4D5E6F7G", runner=Starting(2))
    t.sleep = waits.append
    assert t.resolve() == "1A2B3C4D5E6F7G" and waits == [0.5, 1.0]
    never = AdbTransport("1A2B3C4D5E6F7G", runner=Starting(99))
    never.sleep = waits.append
    with pytest.raises(DeviceError, match="cannot connect to daemon"):
        never.devices()
    assert len(never.runner.calls) == 4 and waits[2:] == [0.5, 1.0, 2.0]  # the first ask and three more
