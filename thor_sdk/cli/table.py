"""``thor-sdk table``: the (batch size, GPU frequency) table for training under a power cap."""

import click

from .common import Progress, emit_json, json_option, quiet_option, table


def _progress(quiet, label):
    state = {}

    def cb(done, total, what):
        if "bar" not in state:
            state["bar"] = Progress(total, label, quiet=quiet)
            state["done"] = 0
        state["bar"].update(done - state["done"], label=f"{label}: {what}")
        state["done"] = done
        if done >= total:
            state["bar"].close()
    return cb


@click.group("table")
def cmd():
    """Profile, build and query the power-cap table; replay the selection on real GPU traces."""


@cmd.command("profile")
@click.option("--device", default="jetson", show_default=True,
              help="jetson (run on the Jetson itself), jetson://user@host[:port] (over ssh; thor-sdk installed "
                   "there), sim (SIMULATED Jetson under --sysfs-root), host.")
@click.option("--sysfs-root", type=click.Path(file_okay=False),
              help="sysfs root (/ on a Jetson; a folder for sim; a folder on the board for jetson://).")
@click.option("--sim-flavor", type=click.Choice(["nano", "orin"]), default="nano", show_default=True)
@click.option("--model", default="mlp", show_default=True, help="mlp or a reference network (thor-sdk models).")
@click.option("--batch-sizes", default="8,16,32,64,128", show_default=True)
@click.option("--power-cap", type=float, help="Profile economically for this cap (W); default: every pair.")
@click.option("--steps", type=int, default=5, show_default=True, help="Timed training steps per pair.")
@click.option("--out", type=click.Path(dir_okay=False), help="Profile database (SQLite) to write.")
@click.option("--resume", is_flag=True, help="Continue an interrupted profile in --out.")
@click.option("--reset-frequency", is_flag=True,
              help="Only reopen the GPU's whole frequency range (after a hard kill) and exit.")
@click.option("--remote-sudo", is_flag=True, help="jetson://: run thor-sdk on the board with `sudo -n` (root).")
@click.option("--remote-command", default="thor-sdk", show_default=True,
              help="jetson://: the thor-sdk executable on the board (a full path when it is not on PATH).")
@json_option
@quiet_option
def profile_cmd(device, sysfs_root, sim_flavor, model, batch_sizes, power_cap, steps, out, resume,
                reset_frequency, remote_sudo, remote_command, as_json, quiet):
    """Measure time per sample and peak power per (batch size, GPU frequency)."""
    from thor_sdk.errors import UsageError
    from thor_sdk.power.board import board_from
    from thor_sdk.power.profile import profile
    from thor_sdk.power.ratios import parse_batch_sizes
    from thor_sdk.power.remote import is_remote

    if is_remote(device):
        return _profile_remote(device, sysfs_root, model, batch_sizes, power_cap, steps, out, resume,
                               reset_frequency, remote_sudo, remote_command, as_json, quiet)
    board = board_from(device, sysfs_root, sim_flavor)
    if reset_frequency:
        ctl = board.controller()
        if ctl is None:
            raise UsageError(f"{board.name}: no GPU frequency control")
        r = ctl.reset_full_range()
        emit_json(r) if as_json else click.echo(f"GPU frequency range reopened: {r['min_freq']}..{r['max_freq']} Hz")
        return
    if not out:
        raise UsageError("give --out FILE.db")
    rows = profile(board, model, parse_batch_sizes(batch_sizes), out, power_cap_w=power_cap, n_steps=steps,
                   resume=resume, progress=_progress(quiet, "profiling"))
    sim = " (SIMULATED Jetson: modelled time and power)" if board.simulated else ""
    if as_json:
        emit_json({"out": out, "simulated": board.simulated, "device": board.describe(), "rows": rows})
        return
    _print_profile(rows, out, sim)


def _print_profile(rows, out, sim):
    click.echo(table([(r["batch_size"], f"{r['freq_hz'] / 1e6:g}", f"{r['time_per_sample_s'] * 1e3:.3f}",
                       f"{r['peak_power_w']:.3f}") for r in rows],
                     ["batch", "MHz", "ms/sample", "peak W"]))
    click.echo(f"{len(rows)} pairs -> {out}{sim}")


def _profile_remote(device, sysfs_root, model, batch_sizes, power_cap, steps, out, resume, reset_frequency,
                    remote_sudo, remote_command, as_json, quiet):
    """``--device jetson://user@host``: the same command on the board over ssh (thor_sdk.power.remote)."""
    from thor_sdk.errors import UsageError
    from thor_sdk.power.ratios import parse_batch_sizes
    from thor_sdk.power.remote import profile_remote, reset_frequency_remote, transport_for

    log = None if quiet else (lambda line: click.echo(line, err=True))
    kw = {"command": (remote_command,), "sudo": remote_sudo, "sysfs_root": sysfs_root, "log": log}
    if reset_frequency:
        r = reset_frequency_remote(transport_for(device), **kw)
        emit_json(r) if as_json else click.echo(f"GPU frequency range reopened on {device}: "
                                                f"{r['min_freq']}..{r['max_freq']} Hz")
        return
    if not out:
        raise UsageError("give --out FILE.db")
    doc = profile_remote(transport_for(device), model, parse_batch_sizes(batch_sizes), out, power_cap_w=power_cap,
                         n_steps=steps, resume=resume, **kw)
    if as_json:
        emit_json(doc)
        return
    _print_profile(doc["rows"], out, " (SIMULATED Jetson: modelled time and power)" if doc.get("simulated") else "")


@cmd.command("ratios")
@click.option("--model", default="mlp", show_default=True, help="mlp or a reference network that takes images.")
@click.option("--proxy", default="digits", show_default=True, help="digits, synthetic, or a folder (X.npy+y.npy or data.csv).")
@click.option("--batch-sizes", default="8,16,32,64,128", show_default=True)
@click.option("--target-accuracy", type=float, default=0.9, show_default=True)
@click.option("--seeds", default="0,1,2", show_default=True)
@click.option("--base-lr", type=float, default=0.1, show_default=True, help="Learning rate of the largest batch.")
@click.option("--max-epochs", type=int, default=30, show_default=True)
@click.option("--ratio-model", type=click.Choice(["unimodal", "mccandlish", "mean"]), default="unimodal",
              show_default=True, help="Estimator of the expected samples per batch size (docs/power-aware-training.md).")
@click.option("--out", type=click.Path(dir_okay=False), help="Write the ratios JSON here.")
@json_option
@quiet_option
def ratios_cmd(model, proxy, batch_sizes, target_accuracy, seeds, base_lr, max_epochs, ratio_model, out, as_json,
               quiet):
    """Samples-to-accuracy per batch size on an offline proxy, relative to the largest batch."""
    from thor_sdk.errors import UsageError
    from thor_sdk.power.ratios import estimate_ratios, parse_batch_sizes
    from thor_sdk.power.table import validate, write_json

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"seeds must be comma-separated integers, got {seeds!r}") from None
    doc = estimate_ratios(model, proxy, parse_batch_sizes(batch_sizes), target_accuracy, seed_list, base_lr,
                          max_epochs, progress=_progress(quiet, "training"), ratio_model=ratio_model)
    validate(doc, "ratios", "batch ratios")
    if out:
        write_json(doc, out)
    if as_json:
        emit_json(doc)
        return
    click.echo(table([(e["batch_size"], f"{e['lr']:.4g}", f"{e['reached']}/{len(doc['seeds'])}",
                       "-" if e["mean_samples"] is None else f"{e['mean_samples']:.0f}",
                       "-" if e["expected_samples"] is None else f"{e['expected_samples']:.0f}",
                       "-" if e["ratio"] is None else f"{e['ratio']:.3f}") for e in doc["ratios"]],
                     ["batch", "lr", "reached", "mean samples", f"{ratio_model} fit", "ratio"]))
    click.echo(f"{model} on {doc['proxy']} to {target_accuracy}" + (f" -> {out}" if out else ""))


@cmd.command("build")
@click.argument("profile_db", type=click.Path(dir_okay=False))
@click.argument("ratios_json", type=click.Path(dir_okay=False))
@click.option("--samples-to-target", type=float,
              help="Samples the reference batch needs on the real task (default: the proxy's).")
@click.option("--out", type=click.Path(dir_okay=False), required=True)
@json_option
def build_cmd(profile_db, ratios_json, samples_to_target, out, as_json):
    """Combine a profile and batch-size ratios into a power table JSON."""
    from thor_sdk.power.profile import load_profile
    from thor_sdk.power.table import build_table, read_json, write_json

    meta, rows = load_profile(profile_db)
    ratios = read_json(ratios_json, "ratios", "batch ratios")
    doc = build_table(meta, rows, ratios, samples_to_target, sources={"profile": profile_db, "ratios": ratios_json})
    write_json(doc, out)
    if as_json:
        emit_json(doc)
        return
    sim = " (SIMULATED)" if doc["simulated"] else ""
    click.echo(f"{len(doc['rows'])} rows, {len(doc['ratios'])} batch sizes -> {out}{sim}")
    for n in doc["sources"]["notes"]:
        click.echo(f"note: {n}")


@cmd.command("select")
@click.argument("table_json", type=click.Path(dir_okay=False))
@click.option("--power-cap", type=float, required=True, help="Power cap in watts.")
@json_option
def select_cmd(table_json, power_cap, as_json):
    """The (batch size, frequency) pair to train with under the cap, and why."""
    from thor_sdk.power.select import compare
    from thor_sdk.power.table import read_json

    doc = read_json(table_json)
    res = compare(doc, power_cap)
    sel = res["selected"]
    if as_json:
        emit_json({"simulated": doc.get("simulated", False), **res})
        return
    est = sel["est_time_to_accuracy_s"]
    sim = " [SIMULATED table]" if doc.get("simulated") else ""
    click.echo(f"batch {sel['batch_size']} at {sel['freq_hz'] / 1e6:g} MHz (peak {sel['peak_power_w']:.3f} W "
               f"<= {power_cap:g} W){sim}")
    if est is not None:
        click.echo(f"est. time-to-accuracy: {est:.1f} s ({doc.get('reference_samples_source', '')})")
    click.echo(f"why: {res['why']}")
    for name in ("baseline1", "baseline2"):
        b = res[name]
        e = "" if b["est_time_to_accuracy_s"] is None else f", est. {b['est_time_to_accuracy_s']:.1f} s"
        click.echo(f"{name}: batch {b['batch_size']} at {b['freq_hz'] / 1e6:g} MHz{e}"
                   + (f" ({b['note']})" if b.get("note") else ""))


@cmd.command("replay")
@click.option("--power-trace", type=click.Path(dir_okay=False), required=True,
              help="CSV: dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power.")
@click.option("--train-trace", type=click.Path(dir_okay=False), required=True,
              help="CSV: dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch.")
@click.option("--power-column", type=click.Choice(["bound", "average"]), default="bound", show_default=True,
              help="Peak power of a (batch, limit): max(limit, measured average) or the measured average.")
@click.option("--cap-step", type=float, default=5.0, show_default=True, help="Watts between replayed caps.")
@click.option("--target", "targets", multiple=True, metavar="DATASET=VALUE",
              help="Target metric for a workload (default: Zeus's simulator defaults).")
@click.option("--cases", "with_cases", is_flag=True, help="Include every case in the JSON.")
@click.option("--ratio-model", type=click.Choice(["unimodal", "mccandlish", "mean"]), default="unimodal",
              show_default=True, help="Batch-size efficiency model fitted on the selection half.")
@click.option("--splits", type=int, default=None, help="Also score N seeded random half-splits of the runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random half-splits.")
@json_option
@quiet_option
def replay_cmd(power_trace, train_trace, power_column, cap_step, targets, with_cases, ratio_model, splits, seed,
               as_json, quiet):
    """Replay selection, baselines and oracle on real GPU traces (power limit as the frequency knob)."""
    from thor_sdk.errors import UsageError
    from thor_sdk.power.replay import replay

    tg = {}
    for t in targets:
        k, sep, v = t.partition("=")
        try:
            tg[k] = float(v)
        except ValueError:
            raise UsageError(f"--target wants DATASET=VALUE, got {t!r}") from None
        if not sep:
            raise UsageError(f"--target wants DATASET=VALUE, got {t!r}")
    res = replay(power_trace, train_trace, power_column, cap_step, targets=tg, with_cases=with_cases,
                 progress=_progress(quiet, "replaying"), ratio_model=ratio_model, splits=splits, seed=seed)
    if as_json:
        emit_json(res)
        return
    click.echo(replay_table(res))


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def replay_table(res):
    rows = [(w["workload"], w["target_metric"], w["cases"], _f(w["within_5pct_share"], ".0%"),
             _f(w["median_slowdown"], ".3f"), _f(w["max_slowdown"], ".3f"), _f(w["speedup_vs_baseline1"], ".2f"),
             _f(w["speedup_vs_baseline2"], ".2f")) for w in res["workloads"]]
    rows.append(("ALL", "", res["cases"], _f(res["within_5pct_share"], ".0%"), _f(res["median_slowdown"], ".3f"),
                 _f(res["max_slowdown"], ".3f"), _f(res["speedup_vs_baseline1"], ".2f"),
                 _f(res["speedup_vs_baseline2"], ".2f")))
    out = [table(rows, ["workload", "target", "cases", "within 5%", "median slow", "max slow", "x vs b1", "x vs b2"])]
    ref = res["reference"]
    out.append(f"peak power: {res['power_definition']}; caps {res['caps_w'][0]:g}-{res['caps_w'][1]:g} W")
    out.append(f"protocol: {res['protocol']}")
    out.append(f"reference: in-sample {_f(ref['in_sample_within_5pct_share'], '.0%')} within 5% "
               f"(frequency rule alone); seed-noise oracle {_f(ref['seed_noise_within_5pct_share'], '.0%')} "
               "(seed variation alone)")
    if res["baseline1_failed_cases"] or res["baseline2_failed_cases"] or res["selected_failed_cases"]:
        out.append(f"did not reach the target in the scoring runs: selected {res['selected_failed_cases']}, "
                   f"baseline1 {res['baseline1_failed_cases']}, baseline2 {res['baseline2_failed_cases']} cases "
                   "(left out of the speed-up means)")
    for s in res["skipped"]:
        out.append(f"skipped {s['workload']}: {s['why']}")
    return "\n".join(out)
