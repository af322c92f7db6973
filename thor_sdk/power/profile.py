"""Profile time per sample and peak power per (batch size, GPU frequency) of a device, into a campaign.

Order ("Accelerated Training on Low-Power Edge Devices"): with a known cap the profile is
*economical*: the largest batch first, frequencies upward until the peak power crosses the cap, then
the next (smaller) batch starting from the last feasible frequency of the previous one (a smaller
batch draws less power, so everything below that frequency is feasible for it too and is not worth
measuring: the selection only needs each batch's highest feasible frequency). Should the starting
frequency already be over the cap for a batch (power not monotone in batch size), the search steps
down from there instead. Without a cap every pair is measured.

The device (``thor_sdk.devices``) brings the two capabilities: ``frequency_controller()`` pins each
frequency inside a ``with`` block (restored on normal exit, exceptions, Ctrl-C and SIGTERM) and
``measure_power_steps`` times the steps and reads their peak power.

The profile is a campaign (``thor_sdk.store.campaign``, ``campaign_kind`` ``power-profile``) with the
campaign's guarantees: made whole and linked into place, one writer, every pair committed as it is
measured in its ``power_rows`` table and never replaced; ``resume=True`` re-uses the pairs already
there (nothing measured twice). ``load_profile`` also reads the standalone profile files of earlier
versions (format ``thor-sdk/power-profile``: ``meta`` and ``rows`` tables), which are not continued.
"""

import json
import os
import sqlite3

from thor_sdk.errors import DeviceError, DeviceUnavailableError, FormatError, NotFoundError, StoreError, UsageError

#: the standalone profile files of earlier versions (read by ``load_profile``, never written)
PROFILE_FORMAT = "thor-sdk/power-profile"


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


def check_args(batch_sizes, power_cap_w=None, n_steps=5, warmup=2):
    """A profile's options in their bounds (``thor_sdk.bounds``), before any work (here or on a board)."""
    from thor_sdk.bounds import MAX_POWER_W, MAX_STEPS, batch_sizes as check_batch_sizes, number

    check_batch_sizes(batch_sizes)
    number("power cap (W)", power_cap_w, low=0, low_open=True, high=MAX_POWER_W, optional=True)
    number("steps", n_steps, low=1, high=MAX_STEPS, integer=True)
    number("warm-up steps", warmup, low=0, high=MAX_STEPS, integer=True)


def profile(device, model, batch_sizes, out, power_cap_w=None, n_steps=5, warmup=2, resume=False,
            progress=None, freqs=None):
    """Profile ``model`` on ``device`` (a ``thor_sdk.devices.Device``) into the campaign ``out``; returns the
    rows measured or re-used, in the order taken."""
    import torch

    from thor_sdk import __version__
    from thor_sdk.store.campaign import POWER_PROFILE, Campaign

    from .data import build_net, flops_per_sample, input_shape_for

    check_args(batch_sizes, power_cap_w, n_steps, warmup)
    if os.path.exists(out) and not resume:
        raise UsageError(f"{out} exists; give --resume to continue it or another --out")
    ctl = device.frequency_controller()
    if ctl is None:
        raise UsageError(f"{device.name}: no GPU frequency control here, so there is nothing to profile per "
                         "frequency (profile on a Jetson, or the simulated one with --device sim)")
    why_ctl = ctl.why_unavailable()
    if why_ctl:
        raise (DeviceUnavailableError if ctl.path is None else DeviceError)(f"{device.name}: {why_ctl}")
    ok, why, meter = device.power_status()
    if not ok:
        raise UsageError(f"{device.name}: no power meter ({why}); the table needs peak power")
    existing = resume and os.path.isfile(out) and os.path.getsize(out) > 0
    if existing and _standalone_format(out) == PROFILE_FORMAT:
        raise UsageError(f"{out} is a standalone power profile of an earlier thor-sdk: `table build` reads it, "
                         "but it is not continued; profile into another --out")
    batch_sizes = sorted(set(int(b) for b in batch_sizes))
    shape = input_shape_for(model, 64)
    n_features = shape[0] if model == "mlp" else None
    fps = flops_per_sample(model, n_features) if device.simulated else None
    dev = "cuda" if (not device.simulated and torch.cuda.is_available()) else "cpu"
    settings = {"model": model, "device": device.power_info(), "simulated": device.simulated,
                "power_cap_w": power_cap_w, "flops_per_sample": fps, "n_steps": n_steps, "torch_device": dev}
    if existing:
        store = Campaign.open(out, writer=True, power=True)
    else:
        store = Campaign.create(out, {"campaign_kind": POWER_PROFILE, **settings,
                                      "producer": f"thor-sdk {__version__}"})
    try:
        meta = store.meta
        if meta.get("model") != model or meta.get("simulated") != device.simulated:
            raise UsageError(f"{out} holds a profile of {meta.get('model')!r} (simulated={meta.get('simulated')}); "
                             "give another --out")
        with store.batch():  # settings, not measurements: a resumed run updates them
            for k, v in settings.items():
                store.set_meta(k, v)
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
                cached = store.get_power_row(bs, float(f))
                if cached is None:
                    ctl.set_frequency(f)
                    step = step_for(bs) if not device.simulated else None
                    m = device.measure_power_steps(step, bs, n_steps=n_steps, warmup=warmup, flops_per_sample=fps)
                    cached = {"batch_size": bs, "freq_hz": float(f), **{k: m[k] for k in (
                        "time_per_sample_s", "peak_power_w", "mean_power_w", "n_steps")}}
                    store.add_power_row(cached)
                done[0] += 1
                if progress:
                    progress(done[0], planned, f"batch {bs} @ {f / 1e6:g} MHz")
                return cached

            rows = economical_order(batch_sizes, use, power_cap_w, measure)
    finally:
        store.close()
    return rows


def _standalone_format(path):
    """The ``format`` in a SQLite file's ``meta`` table (None when it has none); StoreError when the file is
    not a readable SQLite database."""
    try:
        conn = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a readable profile database: {e}") from None
    try:
        return json.loads(row[0]) if row else None
    except ValueError:
        return None


def _load_standalone(path):
    """``(meta, rows)`` of a standalone profile file of earlier versions."""
    cols = ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w", "mean_power_w", "n_steps")
    try:
        conn = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        try:
            meta = {k: json.loads(v) for k, v in conn.execute("SELECT key, value FROM meta")}
            rows = [dict(zip(cols, r)) for r in conn.execute(f"SELECT {', '.join(cols)} FROM rows ORDER BY seq")]
        finally:
            conn.close()
    except (sqlite3.DatabaseError, ValueError) as e:
        raise StoreError(f"{path} is not a readable profile database: {e}") from None
    return meta, rows


def load_profile(path):
    """``(meta, rows)`` of a power profile, read without the writer lock: a campaign of kind
    ``power-profile``, or a standalone profile file of earlier versions (format ``thor-sdk/power-profile``)."""
    from thor_sdk.store.campaign import FORMAT, Campaign

    if not os.path.isfile(path):
        raise NotFoundError(f"no such profile file: {path}")
    fmt = _standalone_format(path) if os.path.getsize(path) > 0 else None
    if fmt == PROFILE_FORMAT:
        return _load_standalone(path)
    if fmt != FORMAT:
        raise FormatError(f"{path} is not a power profile (format {fmt!r}, expected a {FORMAT!r} file of "
                          "`thor-sdk table profile`)")
    with Campaign.open(path, power=True) as c:
        return c.meta, c.power_rows()
