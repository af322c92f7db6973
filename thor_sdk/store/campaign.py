"""Campaign store: one SQLite file per campaign; every measurement is committed as it is taken.

Tables (schema version in ``meta``):

- ``meta(key, value)``: JSON values -- format, version, device info, metric, batch sizes, target
  models, protocol settings, runtime.
- ``probes(id, seq, kind, role, batch_size, config, status, ..., cache)``: every probe the campaign planned, in
  order; ``status`` is ``planned`` until its measurement is committed, then ``done``. ``cache`` (``swept`` or
  ``warm``, ``thor_sdk.probes.build``) is NULL in rows planned before it existed: those probes ran warm (and are
  rebuilt so if re-measured); the column is added on a file's first plan.
- ``windows(probe_id, part, round, time_s, energy_j, net_energy_j, start_s, end_s, state, idle_power_w,
  canary_s)``: each
  measured window, committed per round (time and gross energy per step); when the probe completes,
  the same transaction adds what is known only then or is bulkier: the energy per step with the idle
  baseline subtracted (and that idle power), the window's start and end on the wall clock
  (``time.time()``, to align an external meter's log) and the device state read after it (clocks,
  temperatures, battery: JSON) and the canary reading beside it (the machine's speed then).
  Files made before these columns existed get them on the first completed probe; their old rows
  keep NULL there.
- ``samples(probe_id, metric, value, std, n, flagged, flag_reason, parts, noisy, noise_reason, canary_s)``: the
  per-layer cost derived by subtraction, written in the same transaction that marks the probe
  ``done``. ``flagged`` samples (implausible) are left out of fits; ``noisy`` ones (spread above the
  protocol's target, or measured on a busy machine) stay in, and fits name the kinds resting on them.
  Files made before ``noisy`` existed get the columns on the first completed probe (NULL: unknown); likewise
  ``canary_s``, the probe's median canary reading (``thor_sdk.harness.canary``; NULL where none was read).
- ``model_runs(...)``: whole-model measurements (``thor-sdk measure --out``).
- ``power_rows(batch_size, freq_hz, time_per_sample_s, peak_power_w, mean_power_w, n_steps, seq,
  measured_utc)``: a power profile's (batch size, GPU frequency) pairs (``thor-sdk table profile``; meta
  ``campaign_kind`` = ``power-profile``), each committed once as it is measured and never replaced.
  Version 1 files (before this table) are read as they are and gain it on their first writer open
  (version 2).

A planned probe is inserted (and committed) before it is measured, so after a crash ``--resume``
re-measures exactly the probes that were planned but not done, discarding their partial windows:
each planned probe ends up in the campaign exactly once.
"""

import contextlib
import datetime as _dt
import json
import os
import sqlite3

from thor_sdk.errors import FormatError, NotFoundError, NotOurFileError, StoreError, UsageError
from thor_sdk.store.files import sweep_stale_tmp

FORMAT = "thor-sdk/campaign"
VERSION = 2
#: versions this thor-sdk reads; a writer upgrades an older one to VERSION (tables added, nothing changed)
READ_VERSIONS = (1, 2)
#: ``campaign_kind`` of a (batch size, GPU frequency) power profile: read only where a profile is expected
POWER_PROFILE = "power-profile"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS probes (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('planned', 'done', 'failed')),
    planned_utc TEXT NOT NULL,
    done_utc TEXT,
    reason TEXT,
    cache TEXT
);
CREATE TABLE IF NOT EXISTS windows (
    probe_id TEXT NOT NULL REFERENCES probes(id),
    part TEXT NOT NULL,
    round INTEGER NOT NULL,
    time_s REAL NOT NULL,
    energy_j REAL,
    net_energy_j REAL,
    start_s REAL,
    end_s REAL,
    state TEXT,
    idle_power_w REAL,
    canary_s REAL,
    PRIMARY KEY (probe_id, part, round)
);
CREATE TABLE IF NOT EXISTS samples (
    probe_id TEXT NOT NULL REFERENCES probes(id),
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    std REAL NOT NULL,
    n INTEGER NOT NULL,
    flagged INTEGER NOT NULL DEFAULT 0,
    flag_reason TEXT,
    parts TEXT NOT NULL,
    noisy INTEGER,
    noise_reason TEXT,
    canary_s REAL,
    PRIMARY KEY (probe_id, metric)
);
CREATE TABLE IF NOT EXISTS model_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    model TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    metric TEXT NOT NULL,
    mean REAL NOT NULL,
    std REAL NOT NULL,
    n INTEGER NOT NULL,
    runtime TEXT NOT NULL,
    created_utc TEXT NOT NULL,
    detail TEXT
);
CREATE TABLE IF NOT EXISTS power_rows (
    batch_size INTEGER NOT NULL,
    freq_hz REAL NOT NULL,
    time_per_sample_s REAL NOT NULL,
    peak_power_w REAL NOT NULL,
    mean_power_w REAL,
    n_steps INTEGER,
    seq INTEGER NOT NULL,
    measured_utc TEXT NOT NULL,
    PRIMARY KEY (batch_size, freq_hz)
);
"""


def _now():
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _lock(path):
    """An exclusive, non-blocking OS lock on the campaign file (``flock``: released when the process
    dies, kill -9 included; independent of SQLite's own byte-range locks). Returns the locked file
    object, or None where the platform has no ``flock``."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): one writer is then the user's to ensure
        return None
    f = open(path, "rb")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise StoreError(f"campaign {path} is being written by another thor-sdk process (probe, profile, "
                         "measure --out, harness ingest or table profile); wait for it to finish") from None
    return f


def _empty_file(path):
    return os.path.isfile(path) and not os.path.islink(path) and os.path.getsize(path) == 0


def check_new(path):
    """UsageError unless a new campaign can be made at ``path`` (call it before any work): its folder
    exists and is writable, and nothing but an empty regular file is there."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"cannot create campaign {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"cannot create campaign {path}: folder {folder} is not writable")
    if os.path.lexists(path) and not _empty_file(path):
        if os.path.islink(path) or not os.path.isfile(path):
            raise UsageError(f"refusing to create campaign {path}: it exists and is not a regular file")
        raise UsageError(f"campaign {path} exists; continue it with --resume or choose another --out")
    return path


class Campaign:
    """A campaign database. Use ``Campaign.create(path, meta)`` or ``Campaign.open(path[, writer=True])``.

    One writer per campaign: ``create`` and ``open(..., writer=True)`` hold an exclusive OS lock on the
    file until ``close``; a second writer gets a StoreError at once. Readers (``fit``, ``evaluate``)
    take no lock. ``batch()`` groups writes into one transaction (all or nothing)."""

    def __init__(self, path, conn, lock=None):
        self.path = path
        self.conn = conn
        self._lockfile = lock
        self._batch = False

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def create(cls, path, meta):
        """A new campaign at ``path``, made whole in a temporary file beside it and linked into place
        (so two creators race cleanly: one wins, the other is told the campaign exists). An empty regular
        file at ``path`` (nothing was ever stored in it) is replaced; anything else is refused."""
        check_new(path)
        folder = os.path.dirname(os.path.abspath(path))
        sweep_stale_tmp(folder, os.path.basename(path), ("", "-journal"))  # what a killed creator left
        tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp{os.getpid()}")
        try:
            conn = sqlite3.connect(tmp)
            try:
                conn.executescript(SCHEMA)
                with conn:
                    for k, v in dict(meta, format=FORMAT, version=VERSION, created_utc=_now()).items():
                        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (k, json.dumps(v)))
            finally:
                conn.close()
            if _empty_file(path):
                os.unlink(path)
            try:
                os.link(tmp, path)  # fails if path exists: never replaces another campaign
            except FileExistsError:
                raise UsageError(f"campaign {path} exists; continue it with --resume or choose another --out") \
                    from None
        except (OSError, sqlite3.Error) as e:
            hint = " (is the disk full?)" if "disk" in str(e) or getattr(e, "errno", None) in (27, 28) else ""
            raise StoreError(f"cannot create campaign {path}: {getattr(e, 'strerror', None) or e}{hint}") from None
        finally:
            for f in (tmp, tmp + "-journal"):
                if os.path.exists(f):
                    os.unlink(f)
        return cls.open(path, writer=True, power=meta.get("campaign_kind") == POWER_PROFILE)

    @classmethod
    def open(cls, path, writer=False, power=False):
        """Open an existing campaign; ``writer=True`` also takes the one-writer lock (and refuses a file
        or folder that cannot be written, before any work). ``power=True`` opens a power profile
        (``campaign_kind`` ``power-profile``); without it a power profile is refused, and the other way
        round (FormatError)."""
        if not os.path.isfile(path):
            raise NotFoundError(f"no such campaign: {path}")
        if _empty_file(path):
            raise StoreError(f"campaign {path} is an empty file: nothing was ever stored in it (a new campaign "
                             "may be started there)")
        if writer:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.access(path, os.W_OK) or not os.access(folder, os.W_OK):
                raise UsageError(f"campaign {path} cannot be written (the file or its folder {folder} is read-only)")
        lock = _lock(path) if writer else None
        try:
            return cls._open(path, lock, power)
        except BaseException:
            if lock is not None:
                lock.close()
            raise

    @classmethod
    def _open(cls, path, lock, power=False):
        try:
            conn = sqlite3.connect(path)
            rows = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as e:
            raise NotOurFileError(f"{path} is not a thor-sdk campaign database ({e})") from None
        try:
            fmt, ver = json.loads(rows.get("format", "null")), json.loads(rows.get("version", "null"))
        except json.JSONDecodeError:
            fmt, ver = None, None
        if fmt != FORMAT:
            raise NotOurFileError(f"{path} is not a thor-sdk campaign database")
        if ver not in READ_VERSIONS:
            raise StoreError(f"{path} is campaign format version {ver}; this thor-sdk reads versions "
                             f"{', '.join(map(str, READ_VERSIONS))}")
        kind = json.loads(rows.get("campaign_kind", "null"))
        if power and kind != POWER_PROFILE:
            raise FormatError(f"{path} is not a power profile (a THOR campaign of `thor-sdk probe`/`profile`); "
                              "profile with `thor-sdk table profile`")
        if not power and kind == POWER_PROFILE:
            raise FormatError(f"{path} is a power profile (`thor-sdk table profile`), not a THOR campaign: give it "
                              "to `thor-sdk table build`")
        if lock is not None and ver != VERSION:  # a writer upgrades: version 2 adds the power_rows table
            try:
                conn.executescript(SCHEMA)
                with conn:
                    conn.execute("UPDATE meta SET value = ? WHERE key = 'version'", (json.dumps(VERSION),))
            except sqlite3.Error as e:
                raise StoreError(f"cannot upgrade campaign {path} to version {VERSION}: {e}") from None
        return cls(path, conn, lock)

    def close(self):
        self.conn.close()
        if self._lockfile is not None:
            self._lockfile.close()
            self._lockfile = None

    def _store_error(self, e):
        """One line for an SQLite failure while writing (a full disk, a file over its size limit)."""
        hint = " (is the disk full?)" if isinstance(e, sqlite3.OperationalError) and "disk" in str(e) else ""
        return StoreError(f"cannot write campaign {self.path}: {e}{hint}; what was committed before is kept "
                          "(continue with --resume)")

    @contextlib.contextmanager
    def _tx(self):
        """One committed transaction, or part of the enclosing ``batch()`` (which commits once). SQLite
        failures become StoreError (IntegrityError passes through for the caller to name)."""
        try:
            if self._batch:
                yield
            else:
                with self.conn:
                    yield
        except sqlite3.IntegrityError:
            raise
        except sqlite3.Error as e:
            raise self._store_error(e) from None

    @contextlib.contextmanager
    def batch(self):
        """Every write inside goes into one transaction: committed at the end, rolled back on any error."""
        if self._batch:
            yield self
            return
        self._batch = True
        try:
            with self.conn:
                yield self
        except sqlite3.Error as e:
            raise self._store_error(e) from None
        finally:
            self._batch = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- metadata --------------------------------------------------------------------------------
    @property
    def meta(self):
        return {k: json.loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def set_meta(self, key, value):
        """Set one description of the campaign (its targets, a power profile's settings): metadata, not a
        measurement, so a resumed run may update it. Measured rows are never replaced."""
        with self._tx():
            self.conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                              "value = excluded.value", (key, json.dumps(value)))

    # -- probes ----------------------------------------------------------------------------------
    def plan(self, probe):
        """Record ``probe`` as planned (committed). Returns False if it was already in the campaign."""
        with self._tx():
            if not self._has_cache_column():
                self.conn.execute("ALTER TABLE probes ADD COLUMN cache TEXT")
            seq = self.conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM probes").fetchone()[0]
            cur = self.conn.execute(
                "INSERT OR IGNORE INTO probes(id, seq, kind, role, batch_size, config, status, planned_utc, cache) "
                "VALUES (?, ?, ?, ?, ?, ?, 'planned', ?, ?)",
                (probe.id, seq, probe.kind, probe.role, probe.batch_size,
                 json.dumps(probe.config, sort_keys=True), _now(), probe.cache))
        return cur.rowcount == 1

    def _columns(self, table):
        """The column names ``table`` has in this file (older files lack the ones added since)."""
        return {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}

    def _has_cache_column(self):
        return "cache" in self._columns("probes")

    def _probes(self, where="", args=()):
        from thor_sdk.probes import Probe

        cache = "cache" if self._has_cache_column() else "NULL"
        rows = self.conn.execute(
            f"SELECT kind, role, batch_size, config, {cache} FROM probes {where} ORDER BY seq", args).fetchall()
        return [Probe(k, json.loads(c), b, r, st or "warm") for k, r, b, c, st in rows]

    def probes(self, status=None):
        if status is None:
            return self._probes()
        return self._probes("WHERE status = ?", (status,))

    def status_counts(self):
        return dict(self.conn.execute("SELECT status, COUNT(*) FROM probes GROUP BY status").fetchall())

    def discard_partial(self, probe_id):
        """Drop windows of a probe that was planned but never completed (before re-measuring it)."""
        with self._tx():
            self.conn.execute("DELETE FROM windows WHERE probe_id = ? AND probe_id IN "
                              "(SELECT id FROM probes WHERE status != 'done')", (probe_id,))

    def add_window(self, probe_id, part, rnd, time_s, energy_j=None):
        """Store one measured window; a window already stored is never overwritten (StoreError)."""
        try:
            with self._tx():
                self.conn.execute("INSERT INTO windows(probe_id, part, round, time_s, energy_j) "
                                  "VALUES (?, ?, ?, ?, ?)", (probe_id, part, rnd, time_s, energy_j))
        except sqlite3.IntegrityError:
            raise StoreError(f"window {part}/{rnd} of probe {probe_id} is already stored in {self.path}; "
                             "measured data is never overwritten") from None

    _WINDOW_DETAIL = (("net_energy_j", "REAL"), ("start_s", "REAL"), ("end_s", "REAL"), ("state", "TEXT"),
                      ("idle_power_w", "REAL"), ("canary_s", "REAL"))

    def _ensure_window_detail_columns(self):
        have = self._columns("windows")
        for name, typ in self._WINDOW_DETAIL:
            if name not in have:
                self.conn.execute(f"ALTER TABLE windows ADD COLUMN {name} {typ}")

    def _ensure_sample_columns(self):
        have = self._columns("samples")
        for name, typ in self._SAMPLE_ADDED:
            if name not in have:
                self.conn.execute(f"ALTER TABLE samples ADD COLUMN {name} {typ}")

    #: sample columns added after version 1's table: a file gains them on its first completed probe
    _SAMPLE_ADDED = (("noisy", "INTEGER"), ("noise_reason", "TEXT"), ("canary_s", "REAL"))

    def complete(self, probe_id, samples, window_detail=None):
        """Store the derived samples and mark the probe done, atomically.

        ``samples``: list of dicts with metric, value, std, n, flagged, flag_reason, parts and optionally
        noisy, noise_reason.
        ``window_detail``: optional list of dicts with ``part``, ``round`` and any of
        ``net_energy_j``, ``start_s``, ``end_s``, ``state`` (a dict), ``idle_power_w`` (the idle power the
        net energy was computed with), written onto those windows in the same transaction.
        """
        try:
            if window_detail:
                self._ensure_window_detail_columns()
            self._ensure_sample_columns()
            self._complete(probe_id, samples, window_detail)
        except sqlite3.IntegrityError as e:
            raise StoreError(f"cannot store probe {probe_id} in {self.path}: {e}") from None
        except sqlite3.Error as e:
            raise self._store_error(e) from None

    def _complete(self, probe_id, samples, window_detail):
        with self._tx():
            for w in window_detail or ():
                self.conn.execute(
                    "UPDATE windows SET net_energy_j = ?, start_s = ?, end_s = ?, state = ?, idle_power_w = ?, "
                    "canary_s = ? WHERE probe_id = ? AND part = ? AND round = ?",
                    (w.get("net_energy_j"), w.get("start_s"), w.get("end_s"),
                     None if w.get("state") is None else json.dumps(w["state"], sort_keys=True),
                     w.get("idle_power_w"), w.get("canary_s"), probe_id, w["part"], int(w["round"])))
            status = self.conn.execute("SELECT status FROM probes WHERE id = ?", (probe_id,)).fetchone()
            if status is None:
                raise StoreError(f"probe {probe_id} is not in campaign {self.path}")
            if status[0] == "done":
                raise StoreError(f"probe {probe_id} is already measured in {self.path}")
            for s in samples:
                self.conn.execute(
                    "INSERT INTO samples(probe_id, metric, value, std, n, flagged, flag_reason, parts, noisy, "
                    "noise_reason, canary_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (probe_id, s["metric"], s["value"], s["std"], s["n"], int(bool(s.get("flagged"))),
                     s.get("flag_reason"), json.dumps(s.get("parts", {})),
                     None if s.get("noisy") is None else int(bool(s["noisy"])), s.get("noise_reason"),
                     s.get("canary_s")))
            self.conn.execute("UPDATE probes SET status = 'done', done_utc = ? WHERE id = ?", (_now(), probe_id))

    def fail(self, probe_id, reason):
        with self._tx():
            self.conn.execute("UPDATE probes SET status = 'failed', reason = ? WHERE id = ?", (reason, probe_id))

    def samples(self, metric=None, include_flagged=True):
        """All derived samples as dicts (kind, role, batch_size, config, metric, value, std, n, flagged,
        flag_reason, parts, noisy, noise_reason, measured_utc, cache, canary_s; ``noisy`` None where the file predates
        it; ``measured_utc``: when the probe's measurement was stored; ``cache`` ``warm`` where the file predates it;
        ``canary_s``: the probe's median canary reading, ``campaign.measure.probe_canary``, None where not read)."""
        have = self._columns("samples")
        noisy_cols = "s.noisy, s.noise_reason" if "noisy" in have else "NULL, NULL"
        canary = "s.canary_s" if "canary_s" in have else "NULL"
        cache = "p.cache" if self._has_cache_column() else "NULL"
        q = ("SELECT p.id, p.kind, p.role, p.batch_size, p.config, s.metric, s.value, s.std, s.n, s.flagged, "
             f"s.flag_reason, s.parts, {noisy_cols}, p.done_utc, {cache}, {canary} FROM samples s JOIN probes p ON "
             "p.id = s.probe_id")
        cond, args = [], []
        if metric:
            cond.append("s.metric = ?")
            args.append(metric)
        if not include_flagged:
            cond.append("s.flagged = 0")
        if cond:
            q += " WHERE " + " AND ".join(cond)
        q += " ORDER BY p.seq"
        from thor_sdk.layers.kinds import with_added_features

        out = []
        for pid, kind, role, b, cfg, m, v, sd, n, fl, why, parts, noisy, nwhy, done, st, cs in self.conn.execute(q, args):
            out.append({"probe_id": pid, "kind": kind, "role": role, "batch_size": b,
                        "config": with_added_features(kind, json.loads(cfg)),
                        "metric": m, "value": v, "std": sd, "n": n, "flagged": bool(fl), "flag_reason": why,
                        "parts": json.loads(parts), "noisy": None if noisy is None else bool(noisy),
                        "noise_reason": nwhy, "measured_utc": done, "cache": st or "warm", "canary_s": cs})
        return out

    def windows(self, probe_id, detail=False):
        """``(part, round, time_s, energy_j)`` per window; ``detail=True``: dicts that also hold
        ``net_energy_j``, ``start_s``, ``end_s``, ``state`` and ``idle_power_w`` (None where not recorded)."""
        if not detail:
            return self.conn.execute("SELECT part, round, time_s, energy_j FROM windows WHERE probe_id = ? "
                                     "ORDER BY round, part", (probe_id,)).fetchall()
        have = self._columns("windows")
        cols = ["part", "round", "time_s", "energy_j"] + [n for n, _ in self._WINDOW_DETAIL if n in have]
        out = []
        for row in self.conn.execute(f"SELECT {', '.join(cols)} FROM windows WHERE probe_id = ? "
                                     "ORDER BY round, part", (probe_id,)):
            d = dict.fromkeys(n for n, _ in self._WINDOW_DETAIL)
            d.update(zip(cols, row))
            if d["state"] is not None:
                d["state"] = json.loads(d["state"])
            out.append(d)
        return out

    # -- whole-model runs ------------------------------------------------------------------------
    def add_model_run(self, model, batch_size, metric, mean, std, n, runtime, detail=None):
        with self._tx():
            self.conn.execute(
                "INSERT INTO model_runs(model, batch_size, metric, mean, std, n, runtime, created_utc, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (model, batch_size, metric, mean, std, n, runtime, _now(), json.dumps(detail or {})))

    def model_runs(self):
        """Whole-model runs as dicts, ``detail`` parsed (``{}`` when none was stored)."""
        cols = ("model", "batch_size", "metric", "mean", "std", "n", "runtime", "created_utc", "detail")
        out = []
        for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM model_runs ORDER BY id"):
            d = dict(zip(cols, r))
            d["detail"] = json.loads(d["detail"]) if d["detail"] else {}
            out.append(d)
        return out

    # -- power profile: (batch size, GPU frequency) pairs ---------------------------------------------
    _POWER_COLS = ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w", "mean_power_w", "n_steps")

    def add_power_row(self, row):
        """Store one measured (batch size, frequency) pair (committed); one already stored is never replaced
        (StoreError)."""
        try:
            with self._tx():
                seq = self.conn.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM power_rows").fetchone()[0]
                self.conn.execute(
                    "INSERT INTO power_rows(batch_size, freq_hz, time_per_sample_s, peak_power_w, mean_power_w, "
                    "n_steps, seq, measured_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (int(row["batch_size"]), float(row["freq_hz"]), float(row["time_per_sample_s"]),
                     float(row["peak_power_w"]), row.get("mean_power_w"), row.get("n_steps"), seq, _now()))
        except sqlite3.IntegrityError:
            raise StoreError(f"{self.path} already holds batch {row['batch_size']} at {row['freq_hz']:g} Hz; a "
                             "measured row is never replaced") from None

    def _has_power_rows(self):
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'power_rows'"
                                 ).fetchone() is not None

    def get_power_row(self, batch_size, freq_hz):
        """The stored pair as a dict, or None."""
        if not self._has_power_rows():
            return None
        r = self.conn.execute(f"SELECT {', '.join(self._POWER_COLS)} FROM power_rows WHERE batch_size = ? AND "
                              "freq_hz = ?", (int(batch_size), float(freq_hz))).fetchone()
        return dict(zip(self._POWER_COLS, r)) if r else None

    def power_rows(self):
        """Every stored pair, in the order measured (``[]`` for a file without the table)."""
        if not self._has_power_rows():
            return []
        return [dict(zip(self._POWER_COLS, r)) for r in
                self.conn.execute(f"SELECT {', '.join(self._POWER_COLS)} FROM power_rows ORDER BY seq")]
