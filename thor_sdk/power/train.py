"""Fine-tune under a power cap with the selected (batch size, GPU frequency); log every epoch; report.

The pair comes from a power table (``select(table, cap)``): the one given, or, on a device with
frequency control (``Device.frequency_controller()``) and no table, one profiled on the spot for the
cap (``profile_for_cap``: the economical order, then the given batch-size ratios or flat ones, said in
the report). On a Jetson (real or SIMULATED) the frequency is pinned through devfreq for the whole run
and restored afterwards (also on Ctrl-C or an exception); on the host there is no frequency control
and the report says so. Energy per epoch is
logged only when a meter is readable (INA3221 on a Jetson, a host meter from
``thor_sdk.meters.registry``); otherwise the log says "no energy meter readable; time only" and
energy stays ``null`` -- it is never made up from time x an assumed power. Training stops at the
first epoch whose validation accuracy reaches the target (or after ``max_epochs``).

Report (format ``thor-sdk/train-run`` v1, schema ``$defs/run_report`` of ``table.schema.json``).
"""

import contextlib
import math
import time

from thor_sdk.devices.base import NO_POWER_METER as NO_METER
from thor_sdk.devices.simjetson import LABEL
from thor_sdk.errors import UsageError

DEFAULT_BATCH_SIZES = (8, 16, 32, 64, 128)


def profile_for_cap(device, power_cap_w, model, target_accuracy, ratios=None, batch_sizes=DEFAULT_BATCH_SIZES,
                    n_steps=5, profile_out=None, log=None):
    """A power table made on the spot: profile ``device`` in the economical order for ``power_cap_w``
    (``thor_sdk.power.profile``), then combine it with ``ratios`` (a ratios document from
    ``thor-sdk table ratios``) or, without one, with *flat* ratios (every batch size counted as equally
    sample-efficient: the selection then minimises time per sample alone, and the table says so).

    Returns ``(table, notes)``. ``profile_out``: keep the profile database there (default: a
    temporary file, removed).
    """
    import os
    import tempfile

    from .profile import load_profile, profile
    from .ratios import RATIOS_FORMAT, RATIOS_VERSION
    from .table import build_table

    say = log or (lambda line: None)
    notes = []
    batch_sizes = sorted({int(b) for b in batch_sizes})
    if ratios is None:
        ratios = {"format": RATIOS_FORMAT, "version": RATIOS_VERSION, "model": model, "proxy": "none",
                  "target_accuracy": target_accuracy, "reference_batch_size": batch_sizes[-1],
                  "ratios": [{"batch_size": b, "ratio": 1.0, "samples_to_target": []} for b in batch_sizes]}
        notes.append("no batch-size ratios were given (--ratios from `thor-sdk table ratios`): every batch size "
                     "is counted as equally sample-efficient, so the pair was chosen for time per sample alone")
    elif ratios.get("model") != model:
        raise UsageError(f"the ratios are of {ratios.get('model')!r}, not {model!r}")
    with tempfile.TemporaryDirectory(prefix="thor-train-profile-") as tmp:
        db = profile_out or os.path.join(tmp, "profile.db")
        say(f"profiling {model} on {device.name} for a {power_cap_w:g} W cap (economical order, batch sizes "
            f"{', '.join(map(str, batch_sizes))})")
        profile(device, model, batch_sizes, db, power_cap_w=power_cap_w, n_steps=n_steps)
        meta, rows = load_profile(db)
    table = build_table(meta, rows, ratios, sources={"profile": profile_out or "measured by thor-sdk train"})
    notes.append(f"power table profiled on the spot: {len(rows)} (batch size, frequency) pairs measured "
                 f"for the {power_cap_w:g} W cap" + (f", kept in {profile_out}" if profile_out else ""))
    return table, notes


def check_args(power_cap_w=None, target_accuracy=0.9, base_lr=0.1, max_epochs=30, batch_size=None,
               reference_batch_size=None, profile_steps=None, seed=0):
    """A training run's options in their bounds (``thor_sdk.bounds``), before any work (here or on a board)."""
    from thor_sdk.bounds import MAX_EPOCHS, MAX_LR, MAX_POWER_W, MAX_RUN_BATCH_SIZE, MAX_STEPS, number

    number("power cap (W)", power_cap_w, low=0, low_open=True, high=MAX_POWER_W, optional=True)
    number("target accuracy", target_accuracy, low=0, low_open=True, high=1)
    number("base learning rate", base_lr, low=0, low_open=True, high=MAX_LR)
    number("max epochs", max_epochs, low=1, high=MAX_EPOCHS, integer=True)
    number("batch size", batch_size, low=1, high=MAX_RUN_BATCH_SIZE, integer=True, optional=True)
    number("reference batch size", reference_batch_size, low=1, high=MAX_RUN_BATCH_SIZE, integer=True,
           optional=True)
    number("profile steps", profile_steps, low=1, high=MAX_STEPS, integer=True, optional=True)
    number("seed", seed, low=0, high=2 ** 32 - 1, integer=True)


def train_under_cap(device, power_cap_w, model="mlp", data="digits", target_accuracy=0.9, table=None,
                    batch_size=None, base_lr=0.1, reference_batch_size=None, max_epochs=30, seed=0,
                    log=None, ratios=None, batch_sizes=DEFAULT_BATCH_SIZES, profile_steps=5, profile_out=None):
    """Run the fine-tuning; returns the run report (dict). ``log(line)`` receives one line per event.

    On a device with frequency control and no ``table``, the table is made first (``profile_for_cap``:
    ``batch_sizes``, ``profile_steps``, ``ratios``, ``profile_out``).
    """
    import torch

    from .data import Trainer, adapt, build_net, load_proxy, split
    from .select import select

    say = log or (lambda line: None)
    notes = []
    check_args(power_cap_w, target_accuracy, base_lr, max_epochs, batch_size, reference_batch_size, profile_steps,
               seed)
    choice = None
    ctl = device.frequency_controller()
    if table is None and ctl is not None:
        if power_cap_w is None:
            raise UsageError(f"{device.name}: give --power-cap (and optionally --table from `thor-sdk table build`)")
        table, made = profile_for_cap(device, power_cap_w, model, target_accuracy, ratios, batch_sizes,
                                      profile_steps, profile_out, log=say)
        notes += made
    if table is not None:
        if power_cap_w is None:
            raise UsageError("a power table needs --power-cap")
        if table.get("simulated") and not device.simulated:
            notes.append("the table was profiled on a SIMULATED Jetson")
        choice = select(table, power_cap_w)
        bs, freq = choice["batch_size"], choice["freq_hz"]
        ref_b = reference_batch_size or table["reference_batch_size"]
        say(f"selected batch {bs} at {freq / 1e6:g} MHz under {power_cap_w:g} W: {choice['why']}")
    else:
        bs, freq = int(batch_size or 32), None
        ref_b = reference_batch_size or 128
        notes.append(f"no power table: batch size {bs} was given (or the default), not selected")
    freq_control = ctl is not None
    if not freq_control:
        msg = "no GPU frequency control on this device (host): the frequency is not set"
        notes.append(msg)
        say(msg)
        freq = None
    ok, why, meter_name = device.power_status()
    if not ok:
        say(NO_METER)
        notes.append(f"{NO_METER} ({why})" if why and why != NO_METER else NO_METER)
        if power_cap_w is not None:
            notes.append("the power cap cannot be checked without a meter")
    if device.simulated:
        notes.append(f"{LABEL}: frequency, power and energy come from the simulated Jetson's model; "
                     "time and accuracy are real training on this machine's CPU")

    X, y, info = load_proxy(data)
    Xtr, Xv, ytr, yv = split(X, y)
    xt, xv = adapt(Xtr, model, info), adapt(Xv, model, info)
    n_classes = int(y.max()) + 1
    if bs > len(xt):
        raise UsageError(f"batch {bs} exceeds the {len(xt)} training samples")
    lr = base_lr * math.sqrt(bs / ref_b)
    dev = "cuda" if (freq_control and not device.simulated and torch.cuda.is_available()) else "cpu"
    net = build_net(model, xt[0].numel() if model == "mlp" else 64, n_classes, seed=seed)
    tr = Trainer(net, xt, torch.as_tensor(ytr), xv, torch.as_tensor(yv), bs, lr, seed=seed, device=dev)

    epochs, reached, over_cap = [], False, 0
    restored = None
    with (ctl if freq_control else contextlib.nullcontext()):
        if freq_control:
            ctl.set_frequency(int(freq))
        try:
            for ep in range(1, max_epochs + 1):
                device.begin_load(bs)
                win = device.power_window() if ok else None
                if win is not None:
                    win.start()
                t0 = time.perf_counter()
                for xb, yb in tr.epoch_batches():
                    tr.step(xb, yb)
                    tr.seen += len(xb)
                if dev == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                w = win.stop() if win is not None else None
                device.end_load()
                acc = tr.val_accuracy()
                row = {"epoch": ep, "time_s": dt, "samples": tr.seen, "val_accuracy": acc,
                       "energy_j": w["energy_j"] if w else None, "peak_power_w": w["peak_power_w"] if w else None}
                if w and power_cap_w is not None and w["peak_power_w"] > power_cap_w:
                    over_cap += 1
                epochs.append(row)
                say(f"epoch {ep}: {dt:.3f} s, val accuracy {acc:.4f}"
                    + (f", {w['energy_j']:.3f} J, peak {w['peak_power_w']:.3f} W"
                       + (f" ({LABEL})" if device.simulated else "") if w else " (time only)"))
                if acc >= target_accuracy:
                    reached = True
                    break
        finally:
            device.end_load()
    device.end_load()  # the simulator's idle state now reflects the restored range
    if freq_control:
        restored = ctl.state()
    total_e = math.fsum(e["energy_j"] for e in epochs) if ok and epochs else None
    report = {"format": "thor-sdk/train-run", "version": 1, "device": device.power_info(),
              "simulated": device.simulated, "power_cap_w": power_cap_w, "model": model, "data": info["name"],
              "target_accuracy": target_accuracy, "batch_size": bs, "freq_hz": freq, "lr": lr,
              "selection": choice and {k: choice[k] for k in ("why", "est_time_to_accuracy_s", "score_s")},
              "frequency_control": freq_control, "frequency_after_run": restored,
              "energy_measured": bool(ok), "meter": meter_name,
              "reached_target": reached, "final_val_accuracy": epochs[-1]["val_accuracy"] if epochs else None,
              "total_time_s": math.fsum(e["time_s"] for e in epochs), "total_energy_j": total_e,
              "epochs_over_cap": over_cap if ok else None, "epochs": epochs, "notes": notes}
    return report
