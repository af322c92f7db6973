"""Local transport and the shared helpers (remote shell quoting, device path validation)."""

import os
import shlex

import pytest

from thor_sdk.errors import FormatError, NotFoundError
from thor_sdk.transports.base import remote_shell_command, validate_device_path
from thor_sdk.transports.local import LocalTransport


def test_remote_shell_command_roundtrips():
    argv = ["thor-sdk", "harness", "run", "/tmp/a b/it's;x", "--out", "$HOME/`r`.json", ""]
    assert shlex.split(remote_shell_command(argv)) == argv
    with pytest.raises(TypeError):
        remote_shell_command("echo hi")


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../b", "a\\b", "", "C:/x", "a/\x00"])
def test_validate_device_path_refuses(bad):
    with pytest.raises(FormatError):
        validate_device_path(bad)


def test_validate_device_path_accepts():
    assert validate_device_path("results/part head.json") == "results/part head.json"
    assert validate_device_path("./a//b") == "a/b"


def test_local_run_push_pull(tmp_path):
    t = LocalTransport(root=tmp_path / "dev")
    assert t.run(["printf", "%s", "a b;c"]).stdout == "a b;c"
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    t.push(src, "bundle")
    assert (tmp_path / "dev" / "bundle" / "f").read_text() == "x"
    t.pull("bundle", tmp_path / "back")
    assert (tmp_path / "back" / "f").read_text() == "x"
    os.symlink("/etc/passwd", tmp_path / "dev" / "bundle" / "link")
    with pytest.raises(FormatError, match="symbolic link"):
        t.pull("bundle", tmp_path / "back2")
    with pytest.raises(NotFoundError):
        t.pull("missing", tmp_path / "x")
