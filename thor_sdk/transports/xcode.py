"""iOS devices through Xcode's command-line tooling (``xcrun devicectl``, Xcode 15+, macOS only).

- devices: ``xcrun devicectl list devices --json-output FILE``
- the harness app is installed once by hand (docs/devices.md: ``xcrun devicectl device install app``)
- run it: ``xcrun devicectl device process launch --device UDID --terminate-existing BUNDLE_ID ARGS...``
  (the app's own arguments are separate argv elements; devicectl passes them through)
- files: ``xcrun devicectl device copy to|from --device UDID --domain-type appDataContainer
  --domain-identifier BUNDLE_ID --source SRC --destination DST`` (paths inside the app's container,
  e.g. ``Documents/bundle``)

iOS has no shell: ``run(argv)`` launches the app ``argv[0]`` with arguments ``argv[1:]``. Off macOS
every operation raises ``DeviceUnavailableError`` saying so.
"""

import json
import os
import shutil
import sys
import tempfile

from thor_sdk.errors import DeviceError, DeviceUnavailableError, FormatError

from .base import Transport, TransportDisconnected, check_local_tree, validate_device_path

HARNESS_BUNDLE_ID = "dev.thorsdk.harness"
_DISCONNECT = ("device is not connected", "could not connect", "no device", "tunnel", "disconnected",
               "unavailable", "was not found")


def parse_devicectl_devices(doc):
    """``devicectl list devices`` JSON -> [{"udid", "name", "model", "os_version", "state"}]."""
    try:
        devices = doc["result"]["devices"]
    except (KeyError, TypeError):
        raise FormatError("unexpected `devicectl list devices` JSON (no result.devices)") from None
    out = []
    for d in devices:
        hw = d.get("hardwareProperties", {})
        dp = d.get("deviceProperties", {})
        cp = d.get("connectionProperties", {})
        out.append({"udid": hw.get("udid") or d.get("identifier"), "identifier": d.get("identifier"),
                    "name": dp.get("name"), "model": hw.get("marketingName") or hw.get("productType"),
                    "os_version": dp.get("osVersionNumber"), "platform": hw.get("platform"),
                    "pairing": cp.get("pairingState"), "tunnel": cp.get("tunnelState")})
    return out


class XcodeTransport(Transport):
    name = "xcode"

    def __init__(self, udid=None, xcrun="xcrun", bundle_id=HARNESS_BUNDLE_ID, runner=None, platform=None):
        self._own_runner = runner is None
        super().__init__(runner)
        self.udid = udid
        self.xcrun = xcrun
        self.bundle_id = bundle_id
        self.platform = platform or sys.platform

    def why_unavailable(self):
        if self.platform != "darwin":
            return (f"not macOS (this is {self.platform}): iOS devices are reached with Xcode's `xcrun devicectl`, "
                    "which runs only on macOS")
        if self._own_runner and shutil.which(self.xcrun) is None:
            return "xcrun is not installed (install Xcode 15 or newer and its command-line tools)"
        return ""

    def _need(self):
        why = self.why_unavailable()
        if why:
            raise DeviceUnavailableError(why)

    def _devicectl(self, args, what, timeout_s=300):
        self._need()
        res = self._exec([self.xcrun, "devicectl", *args], timeout_s=timeout_s)
        if res.returncode != 0:
            err = (res.stderr + res.stdout).lower()
            if any(s in err for s in _DISCONNECT):
                raise TransportDisconnected(f"lost the iOS device during {what}: {res.stderr.strip()[-300:]}")
            raise self._fail(what, res)
        return res

    def devices(self):
        with tempfile.TemporaryDirectory(prefix="thor-devicectl-") as d:
            out = os.path.join(d, "devices.json")
            self._devicectl(["list", "devices", "--json-output", out], "devicectl list devices", timeout_s=60)
            try:
                with open(out) as f:
                    return parse_devicectl_devices(json.load(f))
            except (OSError, json.JSONDecodeError) as e:
                raise FormatError(f"devicectl wrote no readable device list: {e}") from e

    def resolve(self):
        devs = self.devices()
        if self.udid:
            for d in devs:
                if self.udid in (d["udid"], d["identifier"]):
                    return self.udid
            raise DeviceUnavailableError(f"no iOS device {self.udid!r} (devicectl lists: "
                                         f"{', '.join(str(d['udid']) for d in devs) or 'none'})")
        if len(devs) == 1:
            return devs[0]["udid"]
        if not devs:
            raise DeviceUnavailableError("no iOS device paired with this Mac (pair it once in Xcode)")
        raise DeviceError("several iOS devices: choose one with --device ios:UDID")

    def run(self, argv, timeout_s=None, check=True, input=None):
        """Launch app ``argv[0]`` (a bundle id) with arguments ``argv[1:]``."""
        if input is not None:
            raise DeviceError("iOS apps launched by devicectl take no standard input")
        bundle, *args = argv
        res = self._devicectl(["device", "process", "launch", "--device", self.resolve(), "--terminate-existing",
                               bundle, *map(str, args)], f"launching {bundle}", timeout_s=timeout_s or 300)
        return res

    def _copy_args(self, src, dst):
        return ["--device", self.resolve(), "--domain-type", "appDataContainer", "--domain-identifier",
                self.bundle_id, "--source", src, "--destination", dst]

    def push(self, local_path, remote_path):
        validate_device_path(remote_path)
        self._devicectl(["device", "copy", "to", *self._copy_args(os.fspath(local_path), remote_path)],
                        f"copying {local_path} to the device")

    def pull(self, remote_path, local_path):
        validate_device_path(remote_path)
        self._devicectl(["device", "copy", "from", *self._copy_args(remote_path, os.fspath(local_path))],
                        f"copying {remote_path} from the device")
        check_local_tree(os.fspath(local_path))

    def workdir(self):
        return "Documents/thor-sdk"

    def info(self):
        udid = self.resolve()
        for d in self.devices():
            if udid in (d["udid"], d["identifier"]):
                return {"transport": self.name, **d}
        return {"transport": self.name, "udid": udid}
