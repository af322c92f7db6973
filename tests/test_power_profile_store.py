"""The (batch size, GPU frequency) profile lives in the campaign store (its ``power_rows`` table) with a
campaign's guarantees: atomic creation, one writer, measured rows never replaced, SQLite failures as one
StoreError; standalone profile files of earlier versions are still read; version 1 campaigns are upgraded."""

import json
import os
import sqlite3

import pytest

from thor_sdk.errors import FormatError, StoreError, UsageError
from thor_sdk.power.profile import PROFILE_FORMAT, load_profile
from thor_sdk.store.campaign import POWER_PROFILE, Campaign

ROW = {"batch_size": 64, "freq_hz": 1.0e9, "time_per_sample_s": 0.002, "peak_power_w": 9.5, "mean_power_w": 8.0,
       "n_steps": 5}
META = {"campaign_kind": POWER_PROFILE, "model": "mlp", "simulated": True}


def test_one_writer_and_rows_never_replaced(tmp_path):
    path = str(tmp_path / "p.db")
    with Campaign.create(path, META) as c:
        c.add_power_row(ROW)
        with pytest.raises(StoreError, match="being written by another"):
            Campaign.open(path, writer=True, power=True)  # a second writer (another table profile --resume)
        with pytest.raises(StoreError, match="never replaced"):
            c.add_power_row(dict(ROW, peak_power_w=99.0))
        meta, rows = load_profile(path)  # readers take no lock
        assert meta["campaign_kind"] == POWER_PROFILE and meta["model"] == "mlp" and rows == [ROW]
    with Campaign.open(path, writer=True, power=True) as c:  # the lock went with the first writer
        assert c.get_power_row(64, 1.0e9) == ROW and c.get_power_row(32, 1.0e9) is None


def test_creation_is_atomic_and_never_over_another_file(tmp_path):
    other = tmp_path / "notes.db"
    other.write_text("someone's file")
    with pytest.raises(UsageError, match="exists"):
        Campaign.create(str(other), META)
    assert other.read_text() == "someone's file"
    with pytest.raises(UsageError, match="no such folder"):
        Campaign.create(str(tmp_path / "no" / "p.db"), META)
    assert sorted(os.listdir(tmp_path)) == ["notes.db"]  # no temporary file left
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")  # nothing was ever stored: a new profile may be made there
    Campaign.create(str(empty), META).close()
    assert load_profile(str(empty))[1] == []


def test_a_campaign_or_foreign_database_is_not_a_profile_and_a_profile_is_not_a_campaign(tmp_path):
    thor = str(tmp_path / "c.db")
    Campaign.create(thor, {"campaign_kind": "targets", "metric": "time"}).close()
    with pytest.raises(FormatError, match="not a power profile"):
        load_profile(thor)
    for _ in range(2):  # --resume onto a THOR campaign: refused, and the lock released
        with pytest.raises(FormatError, match="not a power profile"):
            Campaign.open(thor, writer=True, power=True)
    foreign = tmp_path / "f.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO meta VALUES ('format', '\"someone/else\"')")
    conn.commit()
    conn.close()
    with pytest.raises(FormatError, match="not a power profile"):
        load_profile(str(foreign))
    prof = str(tmp_path / "p.db")
    Campaign.create(prof, META).close()
    with pytest.raises(FormatError, match="is a power profile"):  # fit, probe --resume, bundle...: one line
        Campaign.open(prof)


def _standalone(path, rows):
    """A profile file as thor-sdk wrote it before profiles became campaigns."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE rows (batch_size INTEGER NOT NULL, freq_hz REAL NOT NULL, time_per_sample_s REAL "
                 "NOT NULL, peak_power_w REAL NOT NULL, mean_power_w REAL, n_steps INTEGER, seq INTEGER NOT NULL, "
                 "PRIMARY KEY (batch_size, freq_hz))")
    for k, v in {"format": PROFILE_FORMAT, "version": 1, "model": "mlp", "simulated": True,
                 "device": {"name": "jetson-nano (SIMULATED)"}}.items():
        conn.execute("INSERT INTO meta VALUES (?, ?)", (k, json.dumps(v)))
    for i, r in enumerate(rows):
        conn.execute("INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?)", (*r.values(), i))
    conn.commit()
    conn.close()


def test_standalone_profiles_of_earlier_versions_are_read_not_continued(tmp_path):
    import thor_sdk
    from thor_sdk.devices import get_device
    from thor_sdk.power.profile import profile

    path = str(tmp_path / "old.db")
    rows = [ROW, dict(ROW, batch_size=32, peak_power_w=7.0)]
    _standalone(path, rows)
    meta, got = load_profile(path)
    assert meta["format"] == PROFILE_FORMAT and got == rows
    ratios = tmp_path / "r.json"
    ratios.write_text(json.dumps({
        "format": "thor-sdk/batch-ratios", "version": 1, "model": "mlp", "proxy": "digits", "target_accuracy": 0.9,
        "reference_batch_size": 64, "ratios": [{"batch_size": 32, "ratio": 0.5, "samples_to_target": [500.0]},
                                               {"batch_size": 64, "ratio": 1.0, "samples_to_target": [1000.0]}]}))
    doc = thor_sdk.table_build(path, str(ratios))
    assert doc["simulated"] is True and len(doc["rows"]) == 2
    with pytest.raises(UsageError, match="earlier thor-sdk"):
        profile(get_device("sim", root=str(tmp_path / "sim")), "mlp", [32], path, resume=True)


def test_a_version_1_campaign_is_read_as_it_is_and_upgraded_by_its_writer(tmp_path):
    path = str(tmp_path / "c.db")
    Campaign.create(path, {"campaign_kind": "targets"}).close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE power_rows")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'version'")
    conn.commit()
    conn.close()
    with Campaign.open(path) as c:
        assert c.meta["version"] == 1 and c.power_rows() == []
    Campaign.open(path, writer=True).close()
    with Campaign.open(path) as c:
        assert c.meta["version"] == 2 and c.power_rows() == []
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'power_rows'").fetchone()
    conn.close()
