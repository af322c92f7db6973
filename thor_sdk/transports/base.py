"""Transport base: run a command on a device, push and pull files, describe the device.

Commands are argument lists end to end. Where the remote side concatenates arguments into one
shell string (``adb shell``, ``ssh``), each argument is quoted for the remote POSIX shell with
``shlex.quote`` so it arrives unchanged, spaces, quotes and ``;`` included.

Every transport takes a ``runner`` (default: ``subprocess_runner``) that executes a local argv; a
fake runner replaying recorded output tests the real transport code without a device.
"""

import os
import posixpath
import shlex
import subprocess
from dataclasses import dataclass

from thor_sdk.errors import DeviceError, DeviceUnavailableError, FormatError, TransportDisconnected  # noqa: F401


@dataclass
class RunOutput:
    """What a runner returns: exit status and raw output bytes."""

    returncode: int
    stdout: bytes = b""
    stderr: bytes = b""


@dataclass
class CommandResult:
    argv: list
    returncode: int
    stdout: str
    stderr: str
    stdout_bytes: bytes = b""

    @property
    def ok(self):
        return self.returncode == 0


def subprocess_runner(argv, timeout_s=None, input=None, env=None):
    """Run a local argv (never through a shell); map OS errors into the ThorError tree."""
    if isinstance(argv, str):
        raise TypeError("commands are argument lists, not shell strings")
    try:
        p = subprocess.run(list(argv), input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout_s, env=env, check=False)
    except FileNotFoundError as e:
        raise DeviceUnavailableError(f"{argv[0]} is not installed or not on PATH") from e
    except PermissionError as e:
        raise DeviceUnavailableError(f"{argv[0]} cannot be executed (permission denied)") from e
    except subprocess.TimeoutExpired as e:
        raise DeviceError(f"`{argv[0]}` did not finish within {timeout_s:g} s") from e
    return RunOutput(p.returncode, p.stdout or b"", p.stderr or b"")


def remote_shell_command(argv):
    """One POSIX-shell command string whose words are exactly ``argv`` (for adb shell / ssh)."""
    if isinstance(argv, str):
        raise TypeError("commands are argument lists, not shell strings")
    if not argv:
        raise ValueError("empty command")
    return " ".join(shlex.quote(str(a)) for a in argv)


def validate_device_path(rel):
    """A relative path that came from a device: refuse absolute paths, ``..`` and odd separators."""
    if not isinstance(rel, str) or not rel:
        raise FormatError(f"bad path from device: {rel!r}")
    if "\\" in rel or "\x00" in rel:
        raise FormatError(f"path from device contains a backslash or NUL: {rel!r}")
    if rel.startswith("/") or posixpath.isabs(rel) or (len(rel) > 1 and rel[1] == ":"):
        raise FormatError(f"absolute path from device refused: {rel!r}")
    parts = rel.split("/")
    if any(p == ".." for p in parts):
        raise FormatError(f"path from device leaves its folder: {rel!r}")
    norm = posixpath.normpath(rel)
    if norm in (".", "") or norm.startswith("../"):
        raise FormatError(f"bad path from device: {rel!r}")
    return norm


def check_local_tree(root):
    """After a pull: refuse symlinks and special files anywhere under ``root`` (a file or folder)."""
    if os.path.islink(root):
        raise FormatError(f"device sent a symbolic link: {root}")
    if os.path.isfile(root):
        return
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                raise FormatError(f"device sent a symbolic link: {p}")
            if not (os.path.isdir(p) or os.path.isfile(p)):
                raise FormatError(f"device sent a special file: {p}")


class Transport:
    """One way to reach a device. Subclasses: local, adb, ssh, xcode."""

    name = "transport"

    def __init__(self, runner=None):
        self.runner = runner or subprocess_runner

    # -- availability ------------------------------------------------------------------------------
    def is_available(self):
        return self.why_unavailable() == ""

    def why_unavailable(self):
        return ""

    # -- the four operations -----------------------------------------------------------------------
    def run(self, argv, timeout_s=None, check=True, input=None):
        """Run ``argv`` on the device; returns a ``CommandResult`` (DeviceError when ``check`` and rc != 0)."""
        raise NotImplementedError

    def push(self, local_path, remote_path):
        raise NotImplementedError

    def pull(self, remote_path, local_path):
        raise NotImplementedError

    def info(self):
        return {"transport": self.name}

    def reconnect(self, timeout_s=60.0):
        """Wait until the device answers again (after a drop or a reboot)."""
        return None

    def workdir(self):
        """A folder on the device where bundles and results go."""
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------------------
    def _exec(self, argv, timeout_s=None, input=None):
        out = self.runner(list(argv), timeout_s=timeout_s, input=input)
        return CommandResult(list(argv), out.returncode, out.stdout.decode("utf-8", "replace"),
                             out.stderr.decode("utf-8", "replace"), out.stdout)

    @staticmethod
    def _fail(what, res):
        msg = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1][:300]
        return DeviceError(f"{what} failed (exit {res.returncode}): {msg}")
