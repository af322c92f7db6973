"""Outputs are written whole or not at all, never over something that is not a regular file."""

import os

import pytest

from thor_sdk.errors import StoreError, UsageError
from thor_sdk.store.files import atomic_output, check_output, write_text


def test_a_failing_writer_leaves_the_target_as_it_was_and_no_temp_file(tmp_path):
    target = tmp_path / "est.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(str(target)) as tmp:
            with open(tmp, "w") as f:
                f.write("half")
            raise RuntimeError("killed mid-write")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["est.json"]
    write_text(str(target), "new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["est.json"]


def test_outputs_that_are_not_regular_files_or_lack_a_folder_are_refused_before_any_work(tmp_path):
    (tmp_path / "adir").mkdir()
    os.symlink("/dev/null", tmp_path / "link")
    for bad in (tmp_path / "adir", tmp_path / "link", tmp_path / "no" / "such" / "x.json", "/dev/null"):
        with pytest.raises(UsageError):
            check_output(str(bad))
    os.chmod(tmp_path / "adir", 0o500)
    try:
        if not os.access(tmp_path / "adir", os.W_OK):  # root may write anywhere
            with pytest.raises(UsageError):
                check_output(str(tmp_path / "adir" / "x.json"))
    finally:
        os.chmod(tmp_path / "adir", 0o700)


def test_a_full_disk_is_one_error_and_no_temp_file(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    # the temp file cannot be a device; emulate ENOSPC by writing through /dev/full inside the writer
    with pytest.raises(StoreError, match="cannot write"):
        with atomic_output(str(tmp_path / "x.json"), "estimator") as tmp:
            with open(tmp, "w") as f:
                f.write("x")
            with open("/dev/full", "w") as full:
                full.write("y" * 10)
                full.flush()
    assert os.listdir(tmp_path) == []


def test_fit_refuses_a_bad_out_before_fitting(tmp_path):
    import thor_sdk

    with pytest.raises(UsageError):
        thor_sdk.fit(str(tmp_path / "missing.db"), out="/dev/null")


@pytest.mark.parametrize("argv,text", [
    (["export", "--model", "lenet5", "--format", "onnx", "--out", "{missing}/m.onnx"], "no such folder"),
    (["export", "--model", "lenet5", "--format", "torchscript", "--out", "/dev/null"], "not a regular file"),
    (["harness", "run", "{tmp}", "--out", "{missing}/r.json"], "cannot write results"),  # before the bundle is read
    (["bundle", "--campaign", "{missing}/c.db", "--out", "{missing}/b"], "cannot write bundle"),
    (["bundle", "--campaign", "{missing}/c.db", "--out", "/dev/null"], "not a folder"),
    (["bundle", "--campaign", "{missing}/c.db", "--out", "{tmp}/b", "--zip"], "not a regular file"),  # b.zip: a folder
    (["probe", "--model", "lenet5", "--out", "{missing}/c.db"], "cannot create campaign"),
    (["probe", "--model", "lenet5", "--out", "/dev/null"], "not a regular file"),
    (["profile", "--max-probes", "1", "--out", "{missing}/p.db"], "cannot create campaign"),
    (["measure", "--model", "lenet5", "--out", "{missing}/c.db"], "no such campaign"),
    (["fit", "{missing}/c.db", "--out", "{tmp}"], "is a directory"),
    (["layers", "nosuchnet", "--out", "{missing}/l.json"], "cannot write layer list"),  # before the model is looked up
    (["train", "--power-cap", "10", "--out", "{missing}/run.json"], "cannot write run report"),
])
def test_every_command_checks_its_output_before_any_work_in_one_line(tmp_path, capsys, argv, text):
    from thor_sdk.cli.main import main

    (tmp_path / "b.zip").mkdir()
    subst = {"{missing}": str(tmp_path / "no" / "such"), "{tmp}": str(tmp_path)}
    for k, v in subst.items():
        argv = [a.replace(k, v) for a in argv]
    before = sorted(os.listdir(tmp_path))
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert e.value.code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), err
    assert text in lines[0] and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == before


def test_an_empty_campaign_file_never_blocks_a_fresh_run_and_resume_says_why(tmp_path):
    from fake_device import FakeDevice

    import thor_sdk
    from thor_sdk.errors import StoreError
    from thor_sdk.store import Campaign

    db = tmp_path / "c.db"
    db.write_bytes(b"")  # what a crash of an older thor-sdk left
    with pytest.raises(StoreError, match="empty file"):
        thor_sdk.probe([], device=FakeDevice(), out=str(db), resume=True)
    thor_sdk.probe(["har"], device=FakeDevice(), out=str(db), max_probes=1)
    with Campaign.open(str(db)) as c:
        assert c.status_counts() == {"done": 1}
    with pytest.raises(UsageError, match="exists"):  # a campaign with data is never replaced
        thor_sdk.probe(["har"], device=FakeDevice(), out=str(db), max_probes=1)


def _dead_pid():
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid  # reaped: no process has it (until the OS hands it out again, which the test tolerates)


def test_a_temp_file_left_by_a_killed_writer_is_swept_by_the_next_write(tmp_path):
    """kill -9 between writing the temp file and renaming it leaves ``.<name>.tmp<PID>``; the next write of
    that target removes it once its process is gone and it is old, and nothing else."""
    import time

    from thor_sdk.store.campaign import Campaign
    from thor_sdk.store.files import STALE_TMP_S, sweep_stale_tmp

    dead = _dead_pid()
    old = time.time() - STALE_TMP_S - 5
    names = {"stale": f".est.json.tmp{dead}", "fresh": f".est.json.tmp{dead + 1000000}",
             "live": f".est.json.tmp{os.getppid()}", "other": f".other.json.tmp{dead}",
             "notpid": ".est.json.tmpabc", "superscript": ".est.json.tmp\u00b2",
             "stale_suffix": f".est.json.tmp{dead}.mlmodel"}
    for key, name in names.items():
        (tmp_path / name).write_text("half")
        if key != "fresh":
            os.utime(tmp_path / name, (old, old))
    write_text(str(tmp_path / "est.json"), "whole")
    left = set(os.listdir(tmp_path))
    assert names["stale"] not in left and "est.json" in left
    # a live process's file, a young one, another target's, a name without a PID, another suffix: kept
    for key in ("fresh", "live", "other", "notpid", "superscript", "stale_suffix"):
        assert names[key] in left, key
    assert sweep_stale_tmp(str(tmp_path), "est.json", ("", ".mlmodel")) == [names["stale_suffix"]]
    # a campaign's creator killed mid-create leaves its temp database and journal
    for name in (f".c.db.tmp{dead}", f".c.db.tmp{dead}-journal"):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (old, old))
    Campaign.create(str(tmp_path / "c.db"), {"device": "host"}).close()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".c.db.tmp")]
