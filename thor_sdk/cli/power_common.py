"""What ``thor-sdk table`` and ``thor-sdk train`` share: their device options, progress bars and text output."""

from functools import partial

import click

from thor_sdk.devices import is_remote

from .common import Progress, table

ratio_model_option = partial(click.option, "--ratio-model", type=click.Choice(["unimodal", "mccandlish", "mean"]),
                             default="unimodal", show_default=True)
sysfs_option = click.option("--sysfs-root", type=click.Path(file_okay=False),
                            help="sysfs root (/ on a Jetson; a folder for sim; a folder on the board for jetson://).")
device_option = partial(click.option, "--device", show_default=True,
                        help="host, jetson (run on the Jetson itself), jetson://user@host[:port] (over ssh; thor-sdk "
                             "installed there) or sim (SIMULATED Jetson under --sysfs-root).")
batch_sizes_option = partial(click.option, "--batch-sizes", default="8,16,32,64,128", show_default=True)


def remote_options(f):
    """``--remote-sudo`` and ``--remote-command`` of ``--device jetson://...``."""
    f = click.option("--remote-command", default="thor-sdk", show_default=True,
                     help="jetson://: the thor-sdk executable on the board (a full path when it is not on PATH).")(f)
    return click.option("--remote-sudo", is_flag=True,
                        help="jetson://: run thor-sdk on the board with `sudo -n` (root).")(f)


def progress(quiet, label):
    """A ``(done, total, what)`` callback drawing one progress bar (nothing with --quiet)."""
    state = {}

    def cb(done, total, what):
        if "bar" not in state:
            state.update(bar=Progress(total, label, quiet=quiet), done=0)
        state["bar"].update(done - state["done"], label=f"{label}: {what}")
        state["done"] = done
        if done >= total:
            state["bar"].close()
    return cb


def _f(x, fmt):
    return "-" if x is None else format(x, fmt)


def reset_text(r, device):
    on = f" on {device}" if is_remote(device) else ""
    return f"GPU frequency range reopened{on}: {r['min_freq']}..{r['max_freq']} Hz"


def profile_text(doc):
    sim = " (SIMULATED Jetson: modelled time and power)" if doc.get("simulated") else ""
    rows = [(r["batch_size"], f"{r['freq_hz'] / 1e6:g}", f"{r['time_per_sample_s'] * 1e3:.3f}",
             f"{r['peak_power_w']:.3f}") for r in doc["rows"]]
    return table(rows, ["batch", "MHz", "ms/sample", "peak W"]) + f"\n{len(doc['rows'])} pairs -> {doc['out']}{sim}"


def ratios_text(doc, out):
    rows = [(e["batch_size"], f"{e['lr']:.4g}", f"{e['reached']}/{len(doc['seeds'])}", _f(e["mean_samples"], ".0f"),
             _f(e["expected_samples"], ".0f"), _f(e["ratio"], ".3f")) for e in doc["ratios"]]
    return (table(rows, ["batch", "lr", "reached", "mean samples", f"{doc['ratio_model']} fit", "ratio"])
            + f"\n{doc['model']} on {doc['proxy']} to {doc['target_accuracy']}" + (f" -> {out}" if out else ""))


def build_text(doc, out):
    sim = " (SIMULATED)" if doc["simulated"] else ""
    lines = [f"{len(doc['rows'])} rows, {len(doc['ratios'])} batch sizes -> {out}{sim}"]
    return "\n".join(lines + [f"note: {n}" for n in doc["sources"]["notes"]])


def select_text(doc, res):
    sel, cap = res["selected"], res["power_cap_w"]
    sim = " [SIMULATED table]" if doc.get("simulated") else ""
    out = [f"batch {sel['batch_size']} at {sel['freq_hz'] / 1e6:g} MHz (peak {sel['peak_power_w']:.3f} W "
           f"<= {cap:g} W){sim}"]
    if sel["est_time_to_accuracy_s"] is not None:
        out.append(f"est. time-to-accuracy: {sel['est_time_to_accuracy_s']:.1f} s "
                   f"({doc.get('reference_samples_source', '')})")
    out.append(f"why: {res['why']}")
    for name in ("baseline1", "baseline2"):
        b = res[name]
        e = "" if b["est_time_to_accuracy_s"] is None else f", est. {b['est_time_to_accuracy_s']:.1f} s"
        out.append(f"{name}: batch {b['batch_size']} at {b['freq_hz'] / 1e6:g} MHz{e}"
                   + (f" ({b['note']})" if b.get("note") else ""))
    return "\n".join(out)


def replay_text(res):
    def figures(r):
        return (r["cases"], _f(r["within_5pct_share"], ".0%"), _f(r["median_slowdown"], ".3f"),
                _f(r["max_slowdown"], ".3f"), _f(r["speedup_vs_baseline1"], ".2f"),
                _f(r["speedup_vs_baseline2"], ".2f"))

    rows = [(w["workload"], w["target_metric"], *figures(w)) for w in res["workloads"]] + [("ALL", "", *figures(res))]
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
    out += [f"skipped {s['workload']}: {s['why']}" for s in res["skipped"]]
    return "\n".join(out)


def run_text(rep, out):
    rows = [(e["epoch"], f"{e['time_s']:.3f}", f"{e['val_accuracy']:.4f}", _f(e["energy_j"], ".3f"))
            for e in rep["epochs"]]
    state = "reached" if rep["reached_target"] else "did NOT reach"
    lines = [table(rows, ["epoch", "time s", "val acc", "energy J"]),
             f"{state} {rep['target_accuracy']} in {len(rep['epochs'])} epochs, {rep['total_time_s']:.2f} s "
             f"(batch {rep['batch_size']}" + (f", {rep['freq_hz'] / 1e6:g} MHz)" if rep["freq_hz"] else ")")]
    lines += [f"note: {n}" for n in rep["notes"]]
    return "\n".join(lines + ([f"report -> {out}"] if out else []))
