"""Android devices through the real ``adb`` client (Android platform-tools; Debian package ``adb``).

- The device is chosen with ``-s SERIAL`` (an argv element: passed unchanged); without a serial,
  exactly one device must be attached and authorized.
- ``adb shell`` joins its arguments with spaces into ONE remote shell command, so every argument
  is quoted for the device's shell (``shlex.quote``): ``run(["echo", "a b;c"])`` prints ``a b;c``.
- ``adb push``/``adb pull`` use the sync protocol: their device paths are not seen by a shell.
- Unauthorized, offline and absent devices give errors that say what to do.
- A network serial ``HOST:PORT`` (adb over Wi-Fi, a DeviceFarmer STF device's remote-debug address) is
  reached with ``adb connect HOST:PORT`` first, and again after a drop; from then on it is an ordinary serial.
"""

import re
import shutil
import time

from thor_sdk.errors import DeviceError, DeviceUnavailableError, UsageError

from .base import Transport, TransportDisconnected, check_local_tree, remote_shell_command

STATES = ("device", "offline", "unauthorized", "bootloader", "recovery", "sideload", "rescue", "authorizing",
          "connecting", "host", "unknown")
_LINE = re.compile(r"^(?P<serial>.+?)\s+(?P<state>" + "|".join(STATES) + r"|no permissions.*?)"
                   r"(?:\s+(?P<props>(?:\S+:\S*\s*)*))?$")
#: adb's own failures (as opposed to the remote command's): the connection is gone
_DISCONNECT = ("device offline", "not found", "no devices/emulators found", "error: closed", "protocol fault",
               "connection reset", "device unauthorized", "broken pipe", "cannot connect to daemon")

DEVICE_TMP = "/data/local/tmp/thor-sdk"
#: what `adb devices` says while the adb server is being started by someone else, and the waits (seconds)
#: before asking again
_DAEMON_STARTING = ("cannot connect to daemon", "failed to check server version", "daemon not running")
DAEMON_RETRY_S = (0.5, 1.0, 2.0)
#: ``HOST:PORT`` or ``[IPv6]:PORT``: a serial that ``adb connect`` reaches (emulator-5554 and USB serials are not)
_NETWORK_SERIAL = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(?P<port>[0-9]{1,5})$")


def is_network_serial(serial):
    """True for ``HOST:PORT`` (a port in 1..65535): a device reached over TCP with ``adb connect``."""
    m = _NETWORK_SERIAL.match(serial or "")
    return bool(m) and 1 <= int(m.group("port")) <= 65535


def connect_problem(text):
    """'' when ``adb connect`` output says it connected, else why not. adb prints ``connected to X`` or
    ``already connected to X``, and its failures (``failed to connect to 'X': Connection refused``, ``failed to
    resolve host``, ``cannot connect to X: ...``) on stdout, with exit status 0 on older versions (29.0.6)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and not ln.startswith("*")]
    if any(ln.startswith(("connected to ", "already connected to ")) for ln in lines):
        return ""
    return (lines[-1] if lines else "no output")[:200]


def parse_devices(text):
    """``adb devices -l`` output -> [{"serial", "state", "model", "product", "device", "transport_id"}]."""
    out = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("List of devices") or line.startswith("*"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        d = {"serial": m.group("serial").strip(), "state": m.group("state")}
        for kv in (m.group("props") or "").split():
            k, _, v = kv.partition(":")
            d[k] = v
        out.append(d)
    return out


def state_problem(serial, state):
    """'' for a usable device, else what is wrong and how to fix it."""
    if state == "device":
        return ""
    if state in ("unauthorized", "authorizing"):
        return (f"Android device {serial!r} is unauthorized: unlock it and accept the 'Allow USB debugging' "
                "prompt (revoke and re-plug if no prompt shows)")
    if state == "offline":
        return f"Android device {serial!r} is offline: re-plug the cable or run `adb reconnect`"
    if state.startswith("no permissions"):
        return (f"Android device {serial!r}: no permission to open the USB device (add a udev rule for it, "
                "or add your user to the plugdev group)")
    return f"Android device {serial!r} is in {state!r} mode, not booted into Android"


class AdbTransport(Transport):
    """One Android device through adb. ``serial=None`` means: the only attached device."""

    name = "adb"

    def __init__(self, serial=None, adb="adb", server_port=None, runner=None, workdir=DEVICE_TMP, connect=None):
        self._own_runner = runner is None
        super().__init__(runner)
        self.serial = serial
        #: run ``adb connect SERIAL`` when the serial is not attached (default: when it is a HOST:PORT)
        self.connect_first = is_network_serial(serial) if connect is None else bool(connect)
        self.adb = adb
        self.server_port = server_port
        self._workdir = workdir
        self._resolved = None
        self.sleep = time.sleep  # the waits before asking a starting adb server again (tests pass their own)

    # -- argv ------------------------------------------------------------------------------------
    def _base(self):
        argv = [self.adb]
        if self.server_port:
            argv += ["-P", str(self.server_port)]
        return argv

    def _dev(self):
        if self._resolved is None:
            self._resolved = self.resolve()
        return self._base() + ["-s", self._resolved]

    # -- discovery -------------------------------------------------------------------------------
    def why_unavailable(self):
        if self._own_runner and shutil.which(self.adb) is None:
            return "adb is not installed (Android platform-tools; Debian: apt-get install adb)"
        return ""

    def devices(self):
        if self.why_unavailable():
            raise DeviceUnavailableError(self.why_unavailable())
        res = self._exec(self._base() + ["devices", "-l"], timeout_s=30)
        for wait_s in DAEMON_RETRY_S:
            if res.returncode == 0 or not any(m in (res.stderr + res.stdout).lower() for m in _DAEMON_STARTING):
                break
            # another thread or process is starting the adb server (a fleet's devices all ask at once): its
            # first `adb devices` may fail to reach it for a moment; ask again rather than lose the device
            self.sleep(wait_s)
            res = self._exec(self._base() + ["devices", "-l"], timeout_s=30)
        if res.returncode != 0:
            raise self._fail("adb devices", res)
        return parse_devices(res.stdout)

    def connect(self):
        """``adb connect SERIAL`` (an argument list); DeviceUnavailableError saying why when adb could not."""
        if self.why_unavailable():
            raise DeviceUnavailableError(self.why_unavailable())
        res = self._exec(self._base() + ["connect", self.serial], timeout_s=60)
        why = connect_problem(res.stdout + "\n" + res.stderr)
        if why or res.returncode != 0:
            raise DeviceUnavailableError(f"adb connect {self.serial} failed: {why or f'exit {res.returncode}'} "
                                         "(is the device's adb over TCP on, or the STF device still yours?)")

    def resolve(self):
        """The serial to use, after checking the device is attached and usable (``adb connect`` first for a
        network serial that ``adb devices`` does not list)."""
        devs = self.devices()
        if self.connect_first and not any(d["serial"] == self.serial for d in devs):  # listed offline: say so below
            self.connect()
            devs = self.devices()
        if self.serial is not None:
            for d in devs:
                if d["serial"] == self.serial:
                    why = state_problem(d["serial"], d["state"])
                    if why:
                        raise DeviceError(why)
                    return self.serial
            listed = ", ".join(repr(d["serial"]) for d in devs) or "none"
            raise DeviceUnavailableError(f"no Android device {self.serial!r} attached (adb devices lists: {listed})")
        usable = [d for d in devs if d["state"] == "device"]
        if len(usable) == 1:
            return usable[0]["serial"]
        if len(usable) > 1:
            raise UsageError("several Android devices are attached: choose one with --device android:SERIAL ("
                             + ", ".join(d["serial"] for d in usable) + ")")
        if devs:
            raise DeviceError("; ".join(state_problem(d["serial"], d["state"]) for d in devs))
        raise DeviceUnavailableError("no Android device attached (adb devices lists none): connect one with USB "
                                     "debugging on, or `adb connect HOST:PORT` for adb over Wi-Fi")

    # -- operations ------------------------------------------------------------------------------
    def _raise_for(self, what, res):
        err = (res.stderr + res.stdout).lower()
        if any(s in err for s in _DISCONNECT) and res.returncode != 0:
            self._resolved = None
            raise TransportDisconnected(f"lost the Android device during {what}: "
                                        f"{(res.stderr or res.stdout).strip()[:200]}")
        raise self._fail(what, res)

    def raise_if_lost(self, what, res):
        """After a command run with ``check=False`` failed (``adb shell`` exits non-zero, or with 255 and no
        output, when the device vanishes under it): TransportDisconnected when adb says the device is gone or
        ``adb devices`` no longer lists it as usable; otherwise nothing (the command's own failure)."""
        if res.returncode == 0:
            return
        err = (res.stderr + res.stdout).lower()
        gone = any(s in err for s in _DISCONNECT)
        if not gone and self.serial is not None:
            try:
                gone = not any(d["serial"] == self.serial and d["state"] == "device" for d in self.devices())
            except DeviceError:
                gone = True
        if gone:
            self._resolved = None
            raise TransportDisconnected(f"lost the Android device during {what} (exit {res.returncode}): "
                                        f"{(res.stderr or res.stdout).strip()[:200] or 'no output'}")

    def run(self, argv, timeout_s=None, check=True, input=None):
        cmd = remote_shell_command(argv)
        res = self._exec(self._dev() + ["shell", cmd], timeout_s=timeout_s, input=input)
        if check and res.returncode != 0:
            self._raise_for(f"`{argv[0]}` on the device", res)
        return res

    def push(self, local_path, remote_path):
        res = self._exec(self._dev() + ["push", str(local_path), str(remote_path)], timeout_s=600)
        if res.returncode != 0:
            self._raise_for("adb push", res)

    def pull(self, remote_path, local_path):
        res = self._exec(self._dev() + ["pull", str(remote_path), str(local_path)], timeout_s=600)
        if res.returncode != 0:
            self._raise_for("adb pull", res)
        check_local_tree(str(local_path))

    def reconnect(self, timeout_s=60.0):
        if self.connect_first:  # a TCP device that dropped needs adb connect again before it can be waited for
            try:
                self.connect()
            except DeviceError as e:
                raise TransportDisconnected(f"the Android device {self.serial} did not come back: {e}") from e
        try:
            res = self._exec(self._base() + (["-s", self.serial] if self.serial else []) + ["wait-for-device"],
                             timeout_s=timeout_s)
        except DeviceError as e:
            raise TransportDisconnected(f"the Android device did not come back within {timeout_s:g} s") from e
        if res.returncode != 0:
            raise TransportDisconnected(f"the Android device did not come back within {timeout_s:g} s")
        self._resolved = None

    def workdir(self):
        return self._workdir

    def getprops(self):
        res = self.run(["getprop"], timeout_s=30)
        return dict(re.findall(r"^\[([^\]]+)\]: \[([^\]]*)\]", res.stdout, flags=re.M))

    def info(self):
        p = self.getprops()
        return {"transport": self.name, "serial": self._dev()[-1],
                "manufacturer": p.get("ro.product.manufacturer"), "model": p.get("ro.product.model"),
                "device": p.get("ro.product.device"), "android_release": p.get("ro.build.version.release"),
                "sdk": p.get("ro.build.version.sdk"), "soc": p.get("ro.soc.model") or p.get("ro.board.platform"),
                "abi": p.get("ro.product.cpu.abi")}
