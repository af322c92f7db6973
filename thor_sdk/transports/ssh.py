"""Linux boards (Jetson and others) through the OpenSSH client.

``ssh`` joins the remote command's arguments with spaces into ONE string for the remote login
shell, so each argument is quoted (``shlex.quote``) and arrives unchanged. Files move as tar
streams over the same connection (``tar -x`` / ``tar -c`` on the board, Python's ``tarfile`` here),
so no remote path is ever interpreted by a shell unquoted, and what comes back is checked
member by member (no absolute paths, no ``..``, no links or device files) before it is written.

Non-interactive: ``BatchMode=yes`` (keys or an agent, no password prompts); exit status 255 is
ssh's own failure (unreachable, refused, dropped) and becomes ``TransportDisconnected``.
"""

import io
import os
import posixpath
import shutil
import tarfile

from thor_sdk.errors import DeviceError, FormatError, UsageError

from .base import Transport, TransportDisconnected, remote_shell_command, validate_device_path


def parse_target(target):
    """``user@host[:port]`` -> (user or None, host, port or None)."""
    if not target or target.startswith("-"):
        raise UsageError(f"bad ssh target {target!r}; expected user@host[:port]")
    user, _, hostport = target.rpartition("@")
    host, port = hostport, None
    if hostport.startswith("["):  # [ipv6]:port
        end = hostport.find("]")
        host, rest = hostport[1:end], hostport[end + 1:]
        if rest.startswith(":"):
            port = rest[1:]
    elif hostport.count(":") == 1:
        host, port = hostport.split(":")
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"bad port in ssh target {target!r}")
        port = int(port)
    if not host:
        raise UsageError(f"bad ssh target {target!r}; expected user@host[:port]")
    return (user or None), host, port


class SshTransport(Transport):
    name = "ssh"

    def __init__(self, host, user=None, port=None, ssh="ssh", options=(), connect_timeout_s=10, runner=None,
                 workdir="~/.cache/thor-sdk/device"):
        self._own_runner = runner is None
        super().__init__(runner)
        self.host, self.user, self.port = host, user, port
        self.ssh = ssh
        self.options = list(options)
        self.connect_timeout_s = connect_timeout_s
        self._workdir = workdir

    @classmethod
    def from_target(cls, target, **kw):
        user, host, port = parse_target(target)
        return cls(host, user=user, port=port, **kw)

    @property
    def target(self):
        return f"{self.user}@{self.host}" if self.user else self.host

    def why_unavailable(self):
        if self._own_runner and shutil.which(self.ssh) is None:
            return "the OpenSSH client (ssh) is not installed"
        return ""

    def _argv(self, command):
        argv = [self.ssh, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(self.connect_timeout_s)}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.port:
            argv += ["-p", str(self.port)]
        argv += self.options
        return argv + ["--", self.target, command]

    def _call(self, command, what, timeout_s=None, input=None, check=True):
        res = self._exec(self._argv(command), timeout_s=timeout_s, input=input)
        if res.returncode == 255:
            raise TransportDisconnected(f"ssh to {self.target} failed during {what}: "
                                        f"{res.stderr.strip()[-300:] or 'connection lost'}")
        if check and res.returncode != 0:
            raise self._fail(what, res)
        return res

    def run(self, argv, timeout_s=None, check=True, input=None):
        return self._call(remote_shell_command(argv), f"`{argv[0]}` on {self.target}", timeout_s, input, check)

    @staticmethod
    def _remote_path(p):
        """Quote a device path for the remote shell, keeping a leading ``~/`` expandable."""
        import shlex

        if p == "~":
            return '"$HOME"'
        if p.startswith("~/"):
            return '"$HOME"/' + shlex.quote(p[2:])
        return shlex.quote(p)

    @staticmethod
    def _split(remote_path):
        name = posixpath.basename(remote_path.rstrip("/"))
        if name in ("", ".", "..", "~"):
            raise UsageError(f"device path {remote_path!r} must name a file or folder")
        return posixpath.dirname(remote_path.rstrip("/")) or ".", name

    def push(self, local_path, remote_path):
        local_path = os.fspath(local_path)
        parent, name = self._split(remote_path)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tf:
            tf.add(local_path, arcname=name)
        q = self._remote_path(parent)
        cmd = f"mkdir -p {q} && rm -rf {q}/{self._remote_path(name)} && tar -x -f - -C {q}"
        self._call(cmd, f"copying {local_path} to {self.target}", timeout_s=600, input=buf.getvalue())

    def pull(self, remote_path, local_path):
        local_path = os.fspath(local_path)
        parent, name = self._split(remote_path)
        cmd = f"tar -c -f - -C {self._remote_path(parent)} {self._remote_path(name)}"
        res = self._call(cmd, f"copying {remote_path} from {self.target}", timeout_s=600)
        extract_checked(res.stdout_bytes, name, local_path)

    def reconnect(self, timeout_s=60.0):
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._call("true", "reconnecting", timeout_s=self.connect_timeout_s + 5)
                return
            except DeviceError as e:
                if time.monotonic() >= deadline:
                    raise TransportDisconnected(f"{self.target} did not come back within {timeout_s:g} s") from e
                time.sleep(2.0)

    def workdir(self):
        """The device folder for bundles and results, as an absolute path (``~`` resolved once)."""
        if self._workdir.startswith("~"):
            home = self.run(["printenv", "HOME"], timeout_s=30).stdout.strip()
            if not home.startswith("/"):
                raise DeviceError(f"cannot find the home folder on {self.target} (got {home!r})")
            self._workdir = home + self._workdir[1:]
        return self._workdir

    def info(self):
        res = self.run(["sh", "-c", 'uname -srm; cat /proc/device-tree/model 2>/dev/null; echo; '
                                    'head -n 1 /etc/nv_tegra_release 2>/dev/null; true'], timeout_s=30)
        lines = [x.strip("\x00").strip() for x in res.stdout.splitlines()]
        return {"transport": self.name, "target": self.target, "port": self.port,
                "kernel": lines[0] if lines else None, "model": lines[1] if len(lines) > 1 else None,
                "l4t": lines[2] if len(lines) > 2 and lines[2] else None}


def extract_checked(tar_bytes, name, local_path):
    """Extract a tar stream whose top entry is ``name`` to ``local_path``, refusing unsafe members."""
    try:
        tf = tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:")
    except tarfile.TarError as e:
        raise FormatError(f"the device sent an unreadable tar stream: {e}") from e
    with tf:
        members = tf.getmembers()
        if not members:
            raise FormatError("the device sent an empty tar stream")
        plan = []
        for m in members:
            rel = validate_device_path(m.name)
            if rel != name and not rel.startswith(name + "/"):
                raise FormatError(f"unexpected entry {m.name!r} from the device (expected {name!r}/...)")
            if not (m.isfile() or m.isdir()):
                raise FormatError(f"the device sent a link or special file: {m.name!r}")
            plan.append((m, rel[len(name):].lstrip("/")))
        if os.path.isdir(local_path):
            shutil.rmtree(local_path)
        for m, sub in plan:
            dest = os.path.join(local_path, *sub.split("/")) if sub else local_path
            if m.isdir():
                os.makedirs(dest, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
            src = tf.extractfile(m)
            with open(dest, "wb") as f:
                shutil.copyfileobj(src, f)
