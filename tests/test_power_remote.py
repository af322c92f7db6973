"""Profiling and training on a remote Jetson (``--device jetson://user@host``) without a Jetson.

The real ssh transport runs against a fake ``ssh`` client on PATH that executes the ONE remote command
string with a real ``sh -c`` in a 'board' folder (with a space in its name); the board's ``thor-sdk`` is
this very package, and its sysfs root (``--sysfs-root``, forwarded to the board) is a SIMULATED Jetson
tree, so the remote profile/training really runs, and the pulled database/report and the restored
frequencies are checked. The error mappings (sudo password, thor-sdk missing, a path with ``..``,
a dropped connection) use a runner replaying recorded ssh output through the real ``SshTransport``.
"""

import json
import os
import posixpath
import shlex
import sqlite3
import stat
import sys

import pytest

from helpers import cli
from thor_sdk.devices.devfreq import GpuFrequencyController
from thor_sdk.devices.simjetson import SimulatedJetson
from thor_sdk.errors import FormatError, RemoteCommandError, RemoteSudoError, RemoteThorSdkMissing
from thor_sdk.power.profile import load_profile
from thor_sdk.power.remote import profile_remote, train_remote
from thor_sdk.power.select import make_table, select
from thor_sdk.power.table import validate
from thor_sdk.transports.base import RunOutput, TransportDisconnected
from thor_sdk.transports.local import LocalTransport
from thor_sdk.transports.ssh import SshTransport

FAKE_SSH = """#!{python}
import json, os, subprocess, sys
args = sys.argv[1:]
i = args.index("--")
if len(args) != i + 3:
    sys.exit("fake ssh: expected the target and ONE command string after --")
with open(os.environ["FAKE_SSH_LOG"], "a") as f:
    f.write(json.dumps(args) + "\\n")
home = os.environ["FAKE_BOARD_HOME"]
env = dict(os.environ, HOME=home, PATH=os.environ["FAKE_BOARD_PATH"])
sys.exit(subprocess.run(["sh", "-c", args[i + 2]], cwd=home, env=env).returncode)
"""
BOARD_THOR_SDK = '#!/bin/sh\nexec "{python}" -m thor_sdk.cli.main "$@"\n'
SUDO_WANTS_PASSWORD = '#!/bin/sh\necho "sudo: a password is required" >&2\nexit 1\n'


def _script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


class Board:
    def __init__(self, tmp_path, monkeypatch):
        self.home = tmp_path / "board home"
        self.bin = self.home / "bin"
        self.bin.mkdir(parents=True)
        _script(self.bin / "thor-sdk", BOARD_THOR_SDK.format(python=sys.executable))
        self.sim_root = str(self.home / "sim jetson")
        self.sim = SimulatedJetson.create(self.sim_root, "nano")
        client_bin = tmp_path / "client-bin"
        client_bin.mkdir()
        _script(client_bin / "ssh", FAKE_SSH.format(python=sys.executable))
        self.log = tmp_path / "ssh.log"
        monkeypatch.setenv("PATH", f"{client_bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("FAKE_SSH_LOG", str(self.log))
        monkeypatch.setenv("FAKE_BOARD_HOME", str(self.home))
        monkeypatch.setenv("FAKE_BOARD_PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")

    def commands(self):
        """Each ssh call: (argv before the command, the remote command's words)."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            args = json.loads(line)
            out.append((args[:-1], shlex.split(args[-1])))
        return out

    def thor_calls(self):
        return [(a, w) for a, w in self.commands() if "thor-sdk" in w[:3]]

    def leftovers(self):
        wd = self.home / ".cache/thor-sdk/device"
        return sorted(p.name for p in wd.iterdir()) if wd.is_dir() else []

    def assert_full_range(self):
        freqs = self.sim.params["freqs_hz"]
        st = GpuFrequencyController(self.sim_root).state()
        assert (st["min_freq"], st["max_freq"]) == (freqs[0], freqs[-1])


@pytest.fixture
def board(tmp_path, monkeypatch):
    return Board(tmp_path, monkeypatch)


def test_profile_over_ssh_runs_on_the_board_and_pulls_the_database(board, tmp_path, capsys):
    out = str(tmp_path / "local" / "nano mlp.db")
    code, text, err = cli(["table", "profile", "--device", "jetson://ubuntu@nano:2222", "--sysfs-root",
                           board.sim_root, "--model", "mlp", "--batch-sizes", "32,128", "--power-cap", "4",
                           "--out", out, "--json"], capsys)
    assert code == 0, err
    doc = json.loads(text)
    assert doc["out"] == out and doc["simulated"] is True and doc["board"] == "ubuntu@nano"
    meta, rows = load_profile(out)
    assert meta["simulated"] is True and "SIMULATED" in meta["device"]["name"]
    assert [(r["batch_size"], r["freq_hz"]) for r in rows] == [(r["batch_size"], r["freq_hz"]) for r in doc["rows"]]
    assert {r["batch_size"] for r in rows} == {32, 128}
    rail = board.sim.layout["rails"][0]
    for r in rows:  # the board measured its (simulated) rails at each pinned frequency
        assert r["peak_power_w"] == pytest.approx(board.sim.power_w(r["freq_hz"], r["batch_size"])[rail], abs=2e-3)
    board.assert_full_range()  # the board restored its GPU frequencies
    assert board.leftovers() == []  # the run folder on the board was removed
    (ssh_argv, words), = board.thor_calls()
    assert ssh_argv[ssh_argv.index("-p") + 1] == "2222" and ssh_argv[-1] == "ubuntu@nano"
    assert words[:7] == ["thor-sdk", "table", "profile", "--device", "jetson", "--sysfs-root", board.sim_root]
    remote_out = words[words.index("--out") + 1]
    assert remote_out.startswith(str(board.home) + "/.cache/thor-sdk/device/power-") and doc["remote_out"] == remote_out
    assert "--power-cap" in words and "--resume" not in words and "sudo" not in words
    assert "progress is not streamed" in err

    # after a hard kill left the board's GPU pinned, --reset-frequency reopens its range over ssh
    freqs = board.sim.params["freqs_hz"]
    devfreq = board.sim.devfreq_path
    for node in ("min_freq", "max_freq"):
        with open(os.path.join(devfreq, node), "w") as f:
            f.write(f"{freqs[1]}\n")
    code, text, err = cli(["table", "profile", "--device", "jetson://ubuntu@nano", "--sysfs-root", board.sim_root,
                           "--reset-frequency", "--json"], capsys)
    assert code == 0, err
    assert json.loads(text) == {"min_freq": freqs[0], "max_freq": freqs[-1]}
    board.assert_full_range()

    # an existing --out without --resume is refused here, before reaching the board
    n_calls = len(board.commands())
    code, _, err = cli(["table", "profile", "--device", "jetson://ubuntu@nano", "--out", out], capsys)
    assert code == 2 and "give --resume" in err and len(board.commands()) == n_calls


def test_resume_pushes_the_local_profile_first(board, tmp_path):
    """Through the real LocalTransport: the board's thor-sdk continues the pushed database."""
    out = str(tmp_path / "p.db")
    t = LocalTransport(root=board.home / "work")
    python_cmd = (sys.executable, "-m", "thor_sdk.cli.main")
    first = profile_remote(t, "mlp", [128], out, command=python_cmd, sysfs_root=board.sim_root, resume=True)
    freqs = board.sim.params["freqs_hz"]
    assert [r["freq_hz"] for r in first["rows"]] == freqs
    marker = 123.0  # mark one stored row: a re-measured row would lose the mark
    with sqlite3.connect(out) as db:
        db.execute("UPDATE power_rows SET time_per_sample_s = ? WHERE batch_size = 128 AND freq_hz = ?", (marker, freqs[0]))
    lines = []
    doc = profile_remote(t, "mlp", [16, 128], out, command=python_cmd, sysfs_root=board.sim_root, resume=True,
                         log=lines.append)
    meta, rows = load_profile(out)
    assert [(r["batch_size"], r["freq_hz"]) for r in rows] == [(128, f) for f in freqs] + [(16, f) for f in freqs]
    assert rows[0]["time_per_sample_s"] == marker  # the pushed row was re-used on the board, not measured again
    assert doc["rows"][0]["time_per_sample_s"] == marker
    assert any("pushed" in ln for ln in lines)
    board.assert_full_range()
    assert sorted(os.listdir(board.home / "work")) == []


def _table(board, tmp_path):
    sim = board.sim
    rail = sim.layout["rails"][0]
    rows = [{"batch_size": b, "freq_hz": f, "time_per_sample_s": sim.time_per_sample_s(b, f, 5e4),
             "peak_power_w": sim.power_w(f, b)[rail]} for b in (32, 128) for f in sim.params["freqs_hz"]]
    doc = make_table(rows, {32: 0.5, 128: 1.0}, reference_samples_to_target=4000.0, simulated=True)
    path = tmp_path / "table.json"
    path.write_text(json.dumps(doc))
    return doc, str(path)


def test_train_over_ssh_with_a_local_table_and_data_folder(board, tmp_path, capsys):
    import numpy as np
    from sklearn.datasets import load_digits

    doc, tab = _table(board, tmp_path)
    data = tmp_path / "my digits"
    data.mkdir()
    d = load_digits()
    np.save(data / "X.npy", (d.data / 16.0).astype(np.float32))
    np.save(data / "y.npy", d.target.astype(np.int64))
    out = str(tmp_path / "run.json")
    cap = 4.0
    code, text, err = cli(["train", "--device", "jetson://ubuntu@nano", "--sysfs-root", board.sim_root, "--table", tab,
                           "--power-cap", str(cap), "--data", str(data), "--target-accuracy", "0.85",
                           "--max-epochs", "5", "--out", out], capsys)
    assert code == 0, err
    rep = validate(json.loads(open(out).read()), "run_report", "run report")
    chosen = select(doc, cap)
    assert (rep["batch_size"], rep["freq_hz"]) == (chosen["batch_size"], chosen["freq_hz"])
    assert rep["simulated"] is True and rep["reached_target"] is True and rep["data"] == "my digits"
    assert all(e["peak_power_w"] <= cap and e["energy_j"] > 0 for e in rep["epochs"])
    freqs = board.sim.params["freqs_hz"]
    assert (rep["frequency_after_run"]["min_freq"], rep["frequency_after_run"]["max_freq"]) == (freqs[0], freqs[-1])
    board.assert_full_range()
    assert any("trained on the board ubuntu@nano" in n for n in rep["notes"])
    assert "SIMULATED" in text and "reached 0.85" in text
    (_, words), = board.thor_calls()
    run_dir = posixpath.dirname(words[words.index("--out") + 1])
    assert words[words.index("--table") + 1] == run_dir + "/table.json"
    assert words[words.index("--data") + 1] == run_dir + "/data/my digits"
    assert board.leftovers() == []


def test_train_over_ssh_without_a_table_profiles_on_the_board_with_pushed_ratios(board, tmp_path, capsys):
    ratios = {"format": "thor-sdk/batch-ratios", "version": 1, "model": "mlp", "proxy": "digits",
              "target_accuracy": 0.85, "reference_batch_size": 64,
              "ratios": [{"batch_size": 16, "ratio": 0.5, "samples_to_target": [2000.0]},
                         {"batch_size": 64, "ratio": 1.0, "samples_to_target": [4000.0]}]}
    rpath = str(tmp_path / "ratios.json")
    with open(rpath, "w") as f:
        json.dump(ratios, f)
    code, text, err = cli(["train", "--device", "jetson://ubuntu@nano", "--sysfs-root", board.sim_root,
                           "--power-cap", "4", "--ratios", rpath, "--batch-sizes", "16,64", "--profile-steps", "2",
                           "--target-accuracy", "0.85", "--max-epochs", "1", "--json"], capsys)
    assert code == 0, err
    rep = json.loads(text)
    assert rep["batch_size"] in (16, 64) and rep["freq_hz"] in board.sim.params["freqs_hz"]
    assert any("profiled on the spot" in n for n in rep["notes"])
    assert not any("equally sample-efficient" in n for n in rep["notes"])
    (_, words), = board.thor_calls()
    run_dir = posixpath.dirname(words[words.index("--out") + 1])
    assert words[words.index("--ratios") + 1] == run_dir + "/ratios.json"
    assert words[words.index("--batch-sizes") + 1] == "16,64" and "--table" not in words
    board.assert_full_range()
    assert board.leftovers() == []


def test_sudo_wanting_a_password_is_one_line_on_the_cli(board, tmp_path, capsys):
    _script(board.bin / "sudo", SUDO_WANTS_PASSWORD)
    out = tmp_path / "p.db"
    code, text, err = cli(["table", "profile", "--device", "jetson://ubuntu@nano", "--remote-sudo", "--out", str(out),
                           "-q"], capsys)
    assert code == 1 and text == ""
    assert err.startswith("Error: sudo on ubuntu@nano wants a password") and err.count("\n") == 1
    (_, words), = [c for c in board.commands() if c[1][:1] == ["sudo"]]
    assert words[:5] == ["sudo", "-n", "thor-sdk", "table", "profile"]
    assert not out.exists() and board.leftovers() == []


# ------------------------------------------------------------------------------------------------
# recorded ssh output for the error mappings
# ------------------------------------------------------------------------------------------------
class Recorded:
    """Plays ssh from recorded output: ``answer(words)`` for the thor-sdk command, success for the rest."""

    def __init__(self, answer):
        self.answer = answer
        self.commands = []

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        words = shlex.split(argv[-1])
        self.commands.append(words)
        if words[:2] == ["printenv", "HOME"]:
            return RunOutput(0, b"/home/ubuntu\n")
        if "thor-sdk" in words[:3]:
            return self.answer(words)
        if words[:1] == ["tar"]:
            return RunOutput(2, b"", b"tar: unexpected pull\n")
        return RunOutput(0)


def _recorded(answer):
    rec = Recorded(answer)
    return rec, SshTransport.from_target("ubuntu@nano", runner=rec)


def _removed_run_dir(rec):
    rms = [w for w in rec.commands if w[:2] == ["rm", "-rf"]]
    return len(rms) == 1 and posixpath.basename(rms[0][2]).startswith("power-")


@pytest.mark.parametrize("sudo,rc,stderr,cls,match", [
    (True, 1, "sudo: a password is required\n", RemoteSudoError, "wants a password"),
    (True, 1, "ubuntu is not in the sudoers file.  This incident will be reported.\n", RemoteSudoError, "sudoers"),
    (False, 127, "bash: line 1: thor-sdk: command not found\n", RemoteThorSdkMissing, "pip install thor-sdk"),
    (True, 1, "sudo: thor-sdk: command not found\n", RemoteThorSdkMissing, "--remote-command"),
    (True, 127, "bash: sudo: command not found\n", RemoteThorSdkMissing, "sudo is not installed"),
    (False, 2, "Error: cannot write /sys/devices/gpu.0/devfreq/57000000.gpu/min_freq: permission denied; setting "
               "the GPU frequency needs root (run with sudo)\n", RemoteCommandError, r"exit 2\).*give --remote-sudo"),
])
@pytest.mark.parametrize("what", ["profile", "train"])
def test_board_failures_map_to_one_line_errors(tmp_path, sudo, rc, stderr, cls, match, what):
    rec, t = _recorded(lambda words: RunOutput(rc, b"", stderr.encode()))
    out = tmp_path / "p.db"
    with pytest.raises(cls, match=match) as ei:
        if what == "profile":
            profile_remote(t, "mlp", [32], str(out), sudo=sudo)
        else:
            train_remote(t, 4.0, sudo=sudo)
    assert "\n" not in str(ei.value)
    thor = [w for w in rec.commands if "thor-sdk" in w[:3]]
    assert len(thor) == 1 and (thor[0][:2] == ["sudo", "-n"]) == sudo
    assert thor[0][2 if sudo else 0:][:1] == ["thor-sdk"]
    assert _removed_run_dir(rec) and not out.exists()


@pytest.mark.parametrize("reported", ["{run}/../../../etc/cron.d/x.db", "/etc/passwd", "{run}/../power-other/p.db"])
def test_a_path_outside_the_run_folder_is_refused(tmp_path, reported):
    def answer(words):
        run = posixpath.dirname(words[words.index("--out") + 1])
        doc = {"out": reported.format(run=run), "simulated": True, "device": {}, "rows": []}
        return RunOutput(0, json.dumps(doc).encode())

    rec, t = _recorded(answer)
    out = tmp_path / "p.db"
    with pytest.raises(FormatError, match="leaves its folder|outside the run folder"):
        profile_remote(t, "mlp", [32], str(out))
    assert not [w for w in rec.commands if w[:1] == ["tar"]]  # nothing was pulled
    assert not out.exists() and _removed_run_dir(rec)


def test_a_dropped_connection_leaves_the_board_folder_and_says_where(tmp_path):
    rec, t = _recorded(lambda words: RunOutput(255, b"", b"Connection to nano closed by remote host.\n"))
    with pytest.raises(TransportDisconnected, match=r"closed by remote host.*/home/ubuntu/\.cache/thor-sdk/device/"
                                                    r"power-\w+ was left there"):
        profile_remote(t, "mlp", [32], str(tmp_path / "p.db"))
    assert not [w for w in rec.commands if w[:2] == ["rm", "-rf"]]


PARTIAL_BOARD = """
import sys
from thor_sdk.store.campaign import POWER_PROFILE, Campaign
out = sys.argv[sys.argv.index("--out") + 1]
with Campaign.create(out, {"campaign_kind": POWER_PROFILE, "model": "mlp", "simulated": True}) as c:
    c.add_power_row({"batch_size": 128, "freq_hz": 1.0, "time_per_sample_s": 0.5, "peak_power_w": 2.0})
print("warning: the fan is off", file=sys.stderr)
print("Error: out of memory at batch 64", file=sys.stderr)
sys.exit(1)
"""


def test_a_failed_profile_brings_back_the_rows_it_measured(tmp_path):
    """A recorded board command that commits one row and fails: the row comes back for --resume."""
    t = LocalTransport(root=tmp_path / "board")
    out = str(tmp_path / "p.db")
    lines = []
    with pytest.raises(RemoteCommandError, match=r"out of memory at batch 64 \(1 rows measured so far kept in"):
        profile_remote(t, "mlp", [64, 128], out, command=(sys.executable, "-c", PARTIAL_BOARD), log=lines.append)
    assert load_profile(out)[1] == [{"batch_size": 128, "freq_hz": 1.0, "time_per_sample_s": 0.5,
                                     "peak_power_w": 2.0, "mean_power_w": None, "n_steps": None}]
    assert "board: warning: the fan is off" in lines
    assert os.listdir(tmp_path / "board") == []
