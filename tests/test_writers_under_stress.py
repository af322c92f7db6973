"""Writers under stress as a user meets them: a full disk during probe, fit and export, two `probe --resume`
on one campaign at once. Real console script in subprocesses, real host device, real files; a full disk
is RLIMIT_FSIZE with SIGXFSZ ignored, so a write past the limit fails with EFBIG as on a full disk."""

import json
import os
import resource
import signal
import statistics
import subprocess

import pytest

pytest.importorskip("torch")

from fake_device import FakeDevice  # noqa: E402

import thor_sdk  # noqa: E402
from thor_sdk.harness.protocol import ProtocolSettings  # noqa: E402
from thor_sdk.store import Campaign  # noqa: E402

QUICK = ["--min-rounds", "2", "--max-rounds", "2", "--window-s", "0.002"]
FAST = ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.002)


def cli(*args, limit_bytes=None, wait=True):
    """``thor-sdk ARGS`` in a subprocess; ``limit_bytes``: no file it writes may grow past this."""
    def full_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    argv = ["thor-sdk", *map(str, args)]
    pre = full_disk if limit_bytes is not None else None
    if not wait:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=pre)
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, preexec_fn=pre)


def one_line_error(p, text=""):
    err = p.stderr if isinstance(p.stderr, str) else p.stderr.read()
    lines = err.strip().splitlines()
    assert p.returncode not in (0, None) and len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err and text in lines[0], err


def temp_files(folder):
    return sorted(f for f in os.listdir(folder) if ".tmp" in f)


def windows_match_samples(db):
    """Every measured probe's stored windows are exactly the ones its stored sample was derived from."""
    with Campaign.open(db) as c:
        samples = c.samples("time")
        assert samples
        for s in samples:
            windows = c.windows(s["probe_id"])
            assert {w[0] for w in windows} == set(s["parts"])
            for part, d in s["parts"].items():
                times = [w[2] for w in windows if w[0] == part]
                assert len(times) == d["n"] and statistics.median(times) == pytest.approx(d["median"], rel=1e-12)
        ids = [r[0] for r in c.conn.execute("SELECT id FROM probes WHERE status = 'done'")]
        assert sorted(ids) == sorted(s["probe_id"] for s in samples)  # each done probe once, with its sample


def test_a_full_disk_while_probing_is_one_error_and_the_campaign_resumes(tmp_path):
    db = tmp_path / "c.db"
    p = cli("probe", "--model", "lenet5", "--batch-size", "2", "--out", db, "--quiet", *QUICK, limit_bytes=8192)
    one_line_error(p, "cannot create campaign")
    assert os.listdir(tmp_path) == []  # no campaign (not even an empty one), no temp file
    thor_sdk.probe(["lenet5"], device="host", batch_sizes=[2], out=str(db), settings=FAST, max_probes=1)
    size = db.stat().st_size
    p = cli("probe", "--resume", "--out", db, "--quiet", limit_bytes=size)  # the campaign cannot grow
    one_line_error(p, "cannot write campaign")
    assert temp_files(tmp_path) == []
    with Campaign.open(db) as c:
        before = c.status_counts()
    assert 1 <= before.get("done", 0) < 12
    summary = thor_sdk.probe([], device="host", out=str(db), resume=True)  # the limit lifted: it completes
    assert summary["probes_done"] == 12 and summary["stop_reason"].startswith("every layer config")
    windows_match_samples(str(db))


def test_a_full_disk_during_fit_and_export_is_one_error_and_leaves_the_old_output(tmp_path):
    db = str(tmp_path / "c.db")
    thor_sdk.probe(["lenet5"], device=FakeDevice(), out=db)
    out = tmp_path / "out"
    out.mkdir()
    (out / "e.json").write_text("old estimator")
    one_line_error(cli("fit", db, "--out", out / "e.json", limit_bytes=1024), "cannot write estimator")
    one_line_error(cli("export", "--model", "lenet5", "--batch-size", "2", "--format", "onnx", "--out",
                       out / "l.onnx", limit_bytes=4096), "cannot write ONNX file")
    one_line_error(cli("export", "--model", "lenet5", "--batch-size", "2", "--format", "torchscript", "--out",
                       out / "l.pt", limit_bytes=4096), "cannot write TorchScript file")
    assert os.listdir(out) == ["e.json"] and (out / "e.json").read_text() == "old estimator"


def test_two_resumes_of_one_campaign_one_proceeds_the_other_gets_one_error(tmp_path):
    db = tmp_path / "c.db"
    thor_sdk.probe(["lenet5"], device="host", batch_sizes=[2], out=str(db), settings=FAST, max_probes=1)
    procs = [cli("probe", "--resume", "--out", db, "--quiet", "--json", wait=False) for _ in range(2)]
    for proc in procs:
        proc.wait(timeout=300)
    winners = [p for p in procs if p.returncode == 0]
    losers = [p for p in procs if p.returncode != 0]
    assert len(winners) == 1 and len(losers) == 1, [p.stderr.read() for p in procs]
    one_line_error(losers[0], "being written by another")
    assert json.loads(winners[0].stdout.read())["probes_done"] == 12
    windows_match_samples(str(db))
    assert temp_files(tmp_path) == []
