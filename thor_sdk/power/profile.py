"""Profile time per sample and peak power per (batch size, GPU frequency) into a SQLite file.

Order ("Accelerated Training on Low-Power Edge Devices"): with a known cap the profile is
*economical*: the largest batch first, frequencies upward until the peak power crosses the cap, then
the next (smaller) batch starting from the last feasible frequency of the previous one (a smaller
batch draws less power, so everything below that frequency is feasible for it too and is not worth
measuring: the selection only needs each batch's highest feasible frequency). Should the starting
frequency already be over the cap for a batch (power not monotone in batch size), the search steps
down from there instead. Without a cap every pair is measured.

Frequencies are pinned through ``GpuFrequencyController`` inside a ``with`` block: restored on normal
exit, exceptions, Ctrl-C and SIGTERM. Every measurement is committed as it is taken; ``resume=True``
re-uses the rows already in the file (nothing measured twice).

File (SQLite): table ``meta(key, value)`` (``format`` = ``thor-sdk/power-profile``, ``version`` 1,
``model``, ``device`` JSON, ``simulated``, ``power_cap_w``) and table ``rows(batch_size, freq_hz,
time_per_sample_s, peak_power_w, mean_power_w, n_steps, seq)``.
"""

import json
import os
import sqlite3

from thor_sdk.errors import DeviceError, DeviceUnavailableError, FormatError, NotFoundError, StoreError, UsageError

PROFILE_FORMAT = "thor-sdk/power-profile"
PROFILE_VERSION = 1


class ProfileStore:
    """One profile file: metadata plus one row per measured (batch size, frequency)."""

    def __init__(self, path, create=False):
        if not create and not os.path.isfile(path):
            raise NotFoundError(f"no such profile file: {path}")
        self.path = path
        try:
            self.db = sqlite3.connect(path)
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self.db.execute("CREATE TABLE IF NOT EXISTS rows (batch_size INTEGER NOT NULL, freq_hz REAL NOT NULL, "
                            "time_per_sample_s REAL NOT NULL, peak_power_w REAL NOT NULL, mean_power_w REAL, "
                            "n_steps INTEGER, seq INTEGER NOT NULL, PRIMARY KEY (batch_size, freq_hz))")
            self.db.commit()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path} is not a readable profile database: {e}") from e
        if not create:
            fmt = self.meta().get("format")
            if fmt != PROFILE_FORMAT:
                raise FormatError(f"{path} is not a power profile (format {fmt!r}, expected {PROFILE_FORMAT!r})")

    def close(self):
        self.db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def meta(self):
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **kv):
        with self.db:
            for k, v in kv.items():
                self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, json.dumps(v)))

    def get(self, batch_size, freq_hz):
        r = self.db.execute("SELECT batch_size, freq_hz, time_per_sample_s, peak_power_w, mean_power_w, n_steps "
                            "FROM rows WHERE batch_size = ? AND freq_hz = ?", (batch_size, freq_hz)).fetchone()
        return _row(r) if r else None

    def add(self, row):
        with self.db:
            seq = self.db.execute("SELECT COALESCE(MAX(seq), -1) + 1 FROM rows").fetchone()[0]
            self.db.execute("INSERT OR REPLACE INTO rows VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (int(row["batch_size"]), float(row["freq_hz"]), float(row["time_per_sample_s"]),
                             float(row["peak_power_w"]), row.get("mean_power_w"), row.get("n_steps"), seq))

    def rows(self):
        return [_row(r) for r in self.db.execute(
            "SELECT batch_size, freq_hz, time_per_sample_s, peak_power_w, mean_power_w, n_steps FROM rows ORDER BY seq")]


def _row(r):
    return {"batch_size": r[0], "freq_hz": r[1], "time_per_sample_s": r[2], "peak_power_w": r[3],
            "mean_power_w": r[4], "n_steps": r[5]}


def economical_order(batch_sizes, freqs, power_cap_w, measure):
    """Measure in the paper's economical order; returns the rows in the order they were taken.

    ``measure(batch_size, freq_hz) -> row dict`` (with ``peak_power_w``). With ``power_cap_w`` None,
    the full grid (largest batch first, frequencies upward).
    """
    freqs = sorted(freqs)
    rows = []
    start = 0
    for bs in sorted(batch_sizes, reverse=True):
        if power_cap_w is None:
            rows.extend(measure(bs, f) for f in freqs)
            continue
        last = None
        i = start
        while i < len(freqs):
            row = measure(bs, freqs[i])
            rows.append(row)
            if row["peak_power_w"] > power_cap_w:
                break
            last = i
            i += 1
        if last is None:  # already over the cap at the start frequency: step down
            j = start - 1
            while j >= 0:
                row = measure(bs, freqs[j])
                rows.append(row)
                if row["peak_power_w"] <= power_cap_w:
                    last = j
                    break
                j -= 1
        if last is not None:
            start = last
    return rows


def profile(board, model, batch_sizes, out, power_cap_w=None, n_steps=5, warmup=2, resume=False,
            progress=None, freqs=None):
    """Profile ``model`` on ``board`` into the SQLite file ``out``; returns the rows measured/re-used."""
    import torch

    from .board import flops_per_sample
    from .data import build_net, input_shape_for

    from thor_sdk.bounds import MAX_POWER_W, MAX_STEPS, batch_sizes as check_batch_sizes, number

    check_batch_sizes(batch_sizes)
    number("power cap (W)", power_cap_w, low=0, low_open=True, high=MAX_POWER_W, optional=True)
    number("steps", n_steps, low=1, high=MAX_STEPS, integer=True)
    number("warm-up steps", warmup, low=0, high=MAX_STEPS, integer=True)
    if os.path.exists(out) and not resume:
        raise UsageError(f"{out} exists; give --resume to continue it or another --out")
    ctl = board.controller()
    if ctl is None:
        raise UsageError(f"{board.name}: no GPU frequency control here, so there is nothing to profile per "
                         "frequency (profile on a Jetson, or the simulated one with --device sim)")
    why_ctl = ctl.why_unavailable()
    if why_ctl:
        raise (DeviceUnavailableError if ctl.path is None else DeviceError)(f"{board.name}: {why_ctl}")
    ok, why, meter = board.meter_status()
    if not ok:
        raise UsageError(f"{board.name}: no power meter ({why}); the table needs peak power")
    batch_sizes = sorted(set(int(b) for b in batch_sizes))
    shape = input_shape_for(model, 64)
    n_features = shape[0] if model == "mlp" else None
    fps = flops_per_sample(model, n_features) if board.simulated else None
    dev = "cuda" if (not board.simulated and torch.cuda.is_available()) else "cpu"
    store = ProfileStore(out, create=True)
    try:
        meta = store.meta()
        if meta and (meta.get("model") != model or meta.get("simulated") != board.simulated):
            raise UsageError(f"{out} holds a profile of {meta.get('model')!r} (simulated={meta.get('simulated')}); "
                             "give another --out")
        store.set_meta(format=PROFILE_FORMAT, version=PROFILE_VERSION, model=model, device=board.describe(),
                       simulated=board.simulated, power_cap_w=power_cap_w, flops_per_sample=fps,
                       n_steps=n_steps, torch_device=dev)
        nets = {}

        def step_for(bs):
            if bs not in nets:
                net = build_net(model, n_features or 64, 10, seed=0).to(dev)
                opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
                x = torch.randn((bs, *shape), device=dev)
                y = torch.randint(0, 10, (bs,), device=dev)

                def step():
                    opt.zero_grad(set_to_none=True)
                    torch.nn.functional.cross_entropy(net(x), y).backward()
                    opt.step()
                    if dev == "cuda":
                        torch.cuda.synchronize()
                nets.clear()
                nets[bs] = step
            return nets[bs]

        with ctl:
            avail = ctl.available_frequencies()
            use = sorted(freqs) if freqs else avail
            bad = [f for f in use if f not in avail]
            if bad:
                raise UsageError(f"frequencies {bad} are not available ({avail})")
            planned = len(batch_sizes) * len(use)
            done = [0]

            def measure(bs, f):
                cached = store.get(bs, float(f))
                if cached is None:
                    ctl.set_frequency(f)
                    step = step_for(bs) if not board.simulated else None
                    m = board.measure(step, bs, n_steps=n_steps, warmup=warmup, flops_per_sample=fps)
                    cached = {"batch_size": bs, "freq_hz": float(f), **{k: m[k] for k in (
                        "time_per_sample_s", "peak_power_w", "mean_power_w", "n_steps")}}
                    store.add(cached)
                done[0] += 1
                if progress:
                    progress(done[0], planned, f"batch {bs} @ {f / 1e6:g} MHz")
                return cached

            rows = economical_order(batch_sizes, use, power_cap_w, measure)
    finally:
        store.close()
    return rows


def load_profile(path):
    """``(meta, rows)`` of a profile file."""
    with ProfileStore(path) as s:
        return s.meta(), s.rows()
