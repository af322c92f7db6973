"""ssh transport: quoting through a real POSIX shell, tar push/pull with odd names, unsafe tar refused."""

import io
import os
import subprocess
import tarfile

import pytest

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.transports.base import RunOutput, TransportDisconnected
from thor_sdk.transports.ssh import SshTransport, extract_checked, parse_target

WEIRD = ["a b", "it's", 'say "hi"', "x;touch pwned", "$HOME", "`id`", "*", ""]


class FakeSsh:
    """Plays the ssh client: checks the argv shape, then runs the ONE command string with a real `sh -c`
    whose $HOME is a folder under tmp_path (the board's home)."""

    def __init__(self, home, fail_with=None):
        self.home = str(home)
        self.calls = []
        self.fail_with = fail_with

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        self.calls.append(argv)
        assert argv[0] == "ssh" and "--" in argv
        i = argv.index("--")
        assert len(argv) == i + 3, "ssh must get the target and ONE pre-quoted command"
        if self.fail_with:
            return RunOutput(255, b"", self.fail_with.encode())
        p = subprocess.run(["sh", "-c", argv[i + 2]], capture_output=True, input=input, cwd=self.home,
                           env={"HOME": self.home, "PATH": os.environ["PATH"]})
        return RunOutput(p.returncode, p.stdout, p.stderr)


@pytest.fixture
def board(tmp_path):
    home = tmp_path / "board home"
    home.mkdir()
    return home, SshTransport.from_target("ubuntu@nano.local:2222", runner=FakeSsh(home))


def test_parse_target():
    assert parse_target("ubuntu@nano.local") == ("ubuntu", "nano.local", None)
    assert parse_target("nano:2222") == (None, "nano", 2222)
    assert parse_target("me@[fe80::1]:22") == ("me", "fe80::1", 22)
    for bad in ("", "-oProxyCommand=x", "u@h:99999", "u@"):
        with pytest.raises(UsageError):
            parse_target(bad)


def test_argv_shape_and_quoting(board):
    home, t = board
    for w in WEIRD:
        assert t.run(["printf", "%s|", w]).stdout == w + "|"
    assert not (home / "pwned").exists()
    argv = t.runner.calls[-1]
    assert argv[:2] == ["ssh", "-o"] and "BatchMode=yes" in argv and argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("--") + 1] == "ubuntu@nano.local"


def test_push_pull_roundtrip_with_odd_names(board, tmp_path):
    home, t = board
    src = tmp_path / "bundle src"
    (src / "sub dir").mkdir(parents=True)
    (src / "manifest.json").write_text('{"a": 1}')
    (src / "sub dir" / "it's; a file.onnx").write_bytes(b"\x00\x01onnx")
    wd = t.workdir()
    assert wd == str(home) + "/.cache/thor-sdk/device"
    remote = wd + "/run 1/bundle 'x';y"
    t.push(src, remote)
    assert (home / ".cache/thor-sdk/device/run 1/bundle 'x';y/sub dir/it's; a file.onnx").read_bytes() == b"\x00\x01onnx"
    back = tmp_path / "back"
    t.pull(remote, back)
    assert (back / "manifest.json").read_text() == '{"a": 1}'
    assert (back / "sub dir" / "it's; a file.onnx").read_bytes() == b"\x00\x01onnx"
    single = tmp_path / "one.json"
    t.pull(remote + "/manifest.json", single)
    assert single.read_text() == '{"a": 1}'
    with pytest.raises(UsageError):
        t.push(src, "/")


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 2
                tf.addfile(info, io.BytesIO(b"hi"))
            elif kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
                tf.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize("members,match", [
    ([("results", "dir"), ("results/../../evil", "file")], "leaves its folder"),
    ([("/etc/evil", "file")], "absolute"),
    ([("results/ok", "file"), ("results/l", "link")], "link"),
    ([("other/x", "file")], "unexpected entry"),
])
def test_unsafe_tar_from_device_refused(tmp_path, members, match):
    members = [(n, "file" if k == "dir" else k) for n, k in members]
    with pytest.raises(FormatError, match=match):
        extract_checked(_tar(members), "results", str(tmp_path / "out"))
    assert not (tmp_path / "evil").exists()


def test_connection_failure_is_a_disconnect(tmp_path):
    t = SshTransport("nano.local", runner=FakeSsh(tmp_path, fail_with="ssh: connect to host nano.local port 22: "
                                                                    "Connection refused"))
    with pytest.raises(TransportDisconnected, match="Connection refused"):
        t.run(["true"])
