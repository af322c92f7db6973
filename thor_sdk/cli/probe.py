"""``thor-sdk probe``: a target-driven campaign measuring the layers of given models on a device."""

import click

from .common import Progress, json_option, quiet_option, report_campaign, trainable_option, unknown_ops_option


def protocol_options(f):
    f = click.option("--min-rounds", type=int, default=None, help="Rounds measured at least (default 5).")(f)
    f = click.option("--max-rounds", type=int, default=None, help="Rounds measured at most (default 15).")(f)
    f = click.option("--window-s", type=float, default=None,
                     help="Minimum seconds per measurement window (default 0.05; longer for slow meters).")(f)
    f = click.option("--threads", type=int, default=None,
                     help="Host only: intra-op threads for training steps (default 1; recorded).")(f)
    f = click.option("--cv-target", type=float, default=None,
                     help="Stop repeating once every part's coefficient of variation is below this (default 0.03).")(f)
    return f


def settings_from(min_rounds, max_rounds, window_s, cv_target):
    from thor_sdk.harness.protocol import ProtocolSettings

    d = ProtocolSettings().to_dict()
    # what is given is kept as given (a --max-rounds below --min-rounds is refused, never raised); a default
    # moves to make room for the other option alone
    if min_rounds is not None:
        d["min_rounds"] = min_rounds
        if max_rounds is None and isinstance(min_rounds, int):
            d["max_rounds"] = max(d["max_rounds"], min_rounds)
    if max_rounds is not None:
        d["max_rounds"] = max_rounds
        if min_rounds is None and isinstance(max_rounds, int):
            d["min_rounds"] = max(min(d["min_rounds"], max_rounds), 2)
    if window_s is not None:
        d["min_window_s"] = window_s
    if cv_target is not None:
        d["cv_target"] = cv_target
    return ProtocolSettings(**d)  # checked: bounds, finite


#: ``--device``, repeatable: one device, or a fleet (``fleet_or_one``); ``probe`` and ``profile`` share it
device_option = click.option(
    "--device", "devices", multiple=True,
    help="Device to profile (see `thor-sdk devices`; default host). Repeat it to profile several devices in "
         "parallel, one campaign each in --out-dir.")


def out_options(f):
    """``--out FILE.db`` for one device, ``--out-dir DIR`` for a fleet (``probe`` and ``profile``)."""
    f = click.option("--out-dir", type=click.Path(file_okay=False),
                     help="Several devices: one campaign per device in this folder, named by its spec (android:A -> "
                          "android-A.db).")(f)
    return click.option("--out", type=click.Path(dir_okay=False), help="Campaign database (SQLite), for one device.")(f)


@click.command("probe")
@device_option
@click.option("--model", "models", multiple=True, help="Target model(s): name, file.py:Class, .onnx or layer-list .json.")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--batch-size", "batch_sizes", type=int, multiple=True, default=(32,), show_default=True)
@click.option("--metric", type=click.Choice(["time", "energy"]), default="time", show_default=True)
@click.option("--meter", help="Energy meter overriding the device's own, e.g. external:monsoon.csv[,offset=S].")
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default="torch", show_default=True,
              help="What executes the training steps on the host.")
@out_options
@click.option("--resume", is_flag=True, help="Continue the campaign in --out where it stopped.")
@click.option("--max-probes", type=int, help="Stop after this many probes in the campaign.")
@click.option("--max-seconds", type=float, help="Stop selecting new probes after this many seconds.")
@click.option("--target-std", type=float, help="Stop once the targets' relative std is below this (e.g. 0.03).")
@protocol_options
@unknown_ops_option
@trainable_option
@quiet_option
@json_option
def cmd(devices, meter, models, input_shape, batch_sizes, metric, runtime, out, out_dir, resume, max_probes, max_seconds,
        target_std, min_rounds, max_rounds, window_s, cv_target, threads, unknown_ops, trainable, quiet, as_json):
    """Profile DEVICE with THOR probes for the layers of the target model(s)."""
    from thor_sdk.api import probe

    devices, is_fleet = fleet_or_one(devices, out, out_dir, threads)
    if is_fleet:
        settings = None if resume else settings_from(min_rounds, max_rounds, window_s, cv_target)
        return fleet(devices, meter, models, input_shape, batch_sizes, metric, runtime, out_dir, resume, max_probes,
                     max_seconds, target_std, settings, unknown_ops, quiet, as_json, trainable or None)
    (device,) = devices
    bar = {}

    def progress(event, info):
        if event == "start":
            bar["b"] = Progress(max(info["total"] - info["done"], 1), "probing", quiet)
        elif event == "probe":
            p = info["probe"]
            bar["b"].update(1, label=f"{p['kind']}/{p['role']}")
        elif event == "stop":
            bar["b"].close()

    settings = None if resume else settings_from(min_rounds, max_rounds, window_s, cv_target)
    summary = probe(list(models), device=device, batch_sizes=batch_sizes, metric=metric, out=out, resume=resume,
                    max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_std, runtime=runtime,
                    settings=settings, input_shape=input_shape, progress=progress, threads=threads,
                    unknown_ops=unknown_ops, trainable=trainable or None,
                    meter=meter)
    report_campaign(summary, as_json)


def fleet_or_one(devices, out, out_dir, threads):
    """(device specs, True for a fleet) from ``--device`` (default host), ``--out``, ``--out-dir`` and
    ``--threads``: several devices or ``--out-dir`` make a fleet (one campaign each, no ``--out``, no
    ``--threads``); one device needs ``--out``. UsageError otherwise, before any work."""
    from thor_sdk.errors import UsageError

    devices = list(devices) or ["host"]
    if len(devices) > 1 or out_dir:
        if out:
            raise UsageError("several devices write one campaign each: give --out-dir DIR, not --out")
        if threads is not None:
            raise UsageError("--threads applies to the host device only, not to a fleet")
        return devices, True
    if not out:
        raise UsageError("give --out FILE.db (or --out-dir DIR for several devices)")
    return devices, False


def fleet(devices, meter, models, input_shape, batch_sizes, metric, runtime, out_dir, resume, max_probes, max_seconds,
          target_std, settings, unknown_ops, quiet, as_json, trainable=None):
    """Several devices in parallel: a progress line per device and probe (none with --quiet), then one line per
    device (done, or why it stopped and how to continue); exit status 1 when any device did not finish."""
    from thor_sdk.api import probe_fleet

    progress = fleet_progress(quiet)
    results = probe_fleet(list(models), devices, out_dir, batch_sizes=batch_sizes, metric=metric, resume=resume,
                          max_probes=max_probes, max_seconds=max_seconds, target_rel_std=target_std, runtime=runtime,
                          settings=settings, input_shape=input_shape, meter=meter, progress=progress,
                          unknown_ops=unknown_ops, trainable=trainable)
    return fleet_report(results, "probe", devices, out_dir, as_json)


def fleet_progress(quiet):
    """``progress(device, event, info)`` for a fleet of ``probe`` or ``profile`` campaigns: one stderr line per
    device and probe (nothing with ``quiet``); the devices' threads call it, so lines never interleave."""
    import threading

    say_lock = threading.Lock()
    counts = {}

    def progress(device, event, info):
        if quiet:
            return
        with say_lock:  # called from the devices' threads: counts and stderr are touched under the one lock
            if event == "start":
                total = info.get("total", info.get("max_probes"))
                counts[device] = [info["done"], total]
                line = f"{device}: {info['done']}/{total or '?'} probe(s) done, probing"
            elif event == "probe":
                c = counts.setdefault(device, [0, None])
                c[0] += 1
                p = info["probe"]
                line = f"{device}: {c[0]}/{c[1] or '?'} {p['kind']}/{p['role']} b{p['batch_size']}"
                if info.get("seconds_left") is not None:
                    line += f" | {info['seconds_left']:.0f} s left"
            elif event == "calibration":
                line = f"{device}: calibration {info['model']} b{info['batch_size']}"
            elif event == "stop":
                line = f"{device}: stopped: {info['reason']}"
            else:
                return
            click.echo(line, err=True)

    return progress


def fleet_report(results, command, devices, out_dir, as_json):
    """One line per device (or ``{"devices": [...]}`` with ``as_json``); 1 when any device did not finish."""
    import shlex

    if as_json:
        from .common import emit_json, warn_measurement

        for r in results:
            warn_measurement(r)
        emit_json({"devices": results})
    else:
        again = " ".join(["thor-sdk", command, "--resume", "--out-dir", shlex.quote(str(out_dir))]
                         + [f"--device {shlex.quote(d)}" for d in devices])
        for r in results:
            if r["status"] == "done":
                click.echo(f"{r['device']}: done: {r['probes_done']} probe(s) ({r['probes_measured_now']} now, "
                           f"{r['probes_failed']} failed), stop: {r['stop_reason']} -> {r['campaign']}")
            else:
                click.echo(f"{r['device']}: {r['status']}: {r['error']} (its campaign {r['campaign']} keeps what was "
                           f"measured; rerun with --resume: {again})")
    return 0 if all(r["status"] == "done" for r in results) else 1
