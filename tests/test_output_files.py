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
