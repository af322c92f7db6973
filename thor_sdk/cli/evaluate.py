"""`thor-sdk evaluate`: THOR and the baselines against measured training steps (a thin layer over thor_sdk.evaluate)."""

import click

from thor_sdk.errors import UsageError

from .common import Progress, emit_json, json_option, quiet_option, table, trainable_option, unknown_ops_option
from .probe import protocol_options, settings_from


@click.command("evaluate")
@click.option("--estimator", type=click.Path(dir_okay=False),
              help="A device profile's estimator (`thor-sdk profile` + `fit`): estimate the models with it and with "
                   "every baseline, measure them, and report (default models: zoo:heldout, nets it never saw).")
@click.option("--device", default="host", show_default=True)
@click.option("--models", "model_list", help="Comma-separated models: names, zoo:GROUP (zoo:heldout, zoo:reference, "
              "zoo:zoo, zoo:all), file.py:Class, layer-list .json, .onnx.")
@click.option("--model", "models", multiple=True, help="One model (any form; repeatable).")
@click.option("--input-shape", help="Per-sample input shape for file.py:Class models, e.g. 3,32,32.")
@click.option("--batch-size", "batch_sizes", type=int, multiple=True, default=None,
              help="Batch size(s) [default: 16 with --estimator, 32 without].")
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="With --estimator: write the report here (index.html, report.md, results.json, figures).")
@click.option("--campaign", type=click.Path(dir_okay=False, exists=True),
              help="With --estimator: the profile's campaign, to plot its probes beside the GP estimates.")
@click.option("--tdp-w", type=float, help="With --estimator: the device's TDP in watts for the TDP baseline's "
              "(assumed) energy [default: from its table with --tdp-device; time needs none].")
@click.option("--tdp-device", help="With --estimator: a device name in the TDP baseline's table (docs/baselines.md).")
@click.option("--pre-variant", "pre_variants", multiple=True,
              type=click.Choice(["linear", "ridge", "kernel_ridge", "svr"]),
              help="With --estimator: PRE variants scored (repeatable) [default: all four].")
@click.option("--pre-runs", type=click.Path(dir_okay=False, exists=True),
              help="With --estimator: more whole-model runs to train PRE on (runs CSV or a campaign of "
                   "`thor-sdk measure --out` runs); an evaluated model's own runs are always left out.")
@click.option("--step-log", "step_logs", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="With --estimator: per-epoch logs (`thor-sdk train` reports or CSV) to score STEP on.")
@click.option("--unseen", is_flag=True, help="Kept for older scripts: the same as giving --estimator.")
@click.option("--metric", type=click.Choice(["time", "energy"]), default=None,
              help="What is measured [default: the estimator's metric; time without one].")
@click.option("--runtime", type=click.Choice(["torch", "onnxruntime"]), default=None,
              help="Runtime measured [default: the estimator's; torch without one].")
@click.option("--out-dir", default="thor-evaluate", show_default=True, type=click.Path(file_okay=False),
              help="Without --estimator: campaigns and estimators of the per-model benchmark are kept here.")
@click.option("--passes", type=click.IntRange(1, 20), default=1, show_default=True,
              help="With --estimator: measure every model this many times (every other pass in reverse order) and "
                   "score the median: on a machine that drifts, one pass reads the machine as much as the model.")
@click.option("--relevel", is_flag=True,
              help="With --estimator: measure the device's level once first (the profile's reference probe) and "
                   "score THOR and FLOPs at it, as an app that measures its device would; the estimates at the "
                   "profile's level are reported beside them.")
@click.option("--max-probes", type=int, help="Without --estimator: probes per model's campaign at most.")
@click.option("--max-seconds", type=float, help="Without --estimator: seconds per model's campaign at most.")
@unknown_ops_option
@trainable_option
@protocol_options
@quiet_option
@json_option
def cmd(estimator, device, model_list, models, input_shape, batch_sizes, out, campaign, tdp_w, tdp_device, pre_variants,
        pre_runs, step_logs, unseen, metric, runtime, out_dir, passes, relevel, unknown_ops, trainable, max_probes,
        max_seconds, min_rounds, max_rounds, window_s, cv_target, threads, quiet, as_json):
    """THOR and the baselines against measured training steps.

    With --estimator (a device profile): estimate models it never saw with THOR and each baseline, measure
    them directly, and report MAPE, max error and the 95% interval's coverage per method (--out DIR adds an
    HTML page, Markdown and JSON with figures). Without: the per-model benchmark (a THOR campaign per model).
    """
    from thor_sdk.models import expand_models

    specs = [m for m in (model_list or "").split(",") if m.strip()] + list(models)
    settings = settings_from(min_rounds, max_rounds, window_s, cv_target)
    if estimator or unseen:
        if not estimator:
            raise UsageError("--unseen needs --estimator (from `thor-sdk profile` and `thor-sdk fit`)")
        baselines = {"tdp": {k: v for k, v in (("tdp_w", tdp_w), ("device", tdp_device)) if v is not None},
                     "pre_variants": tuple(pre_variants or ("linear", "ridge", "kernel_ridge", "svr")),
                     "pre_runs": pre_runs, "step_logs": tuple(step_logs), "passes": passes, "relevel": relevel,
                     "unknown_ops": unknown_ops, "trainable": trainable or None}
        return _unseen(estimator, device, expand_models(specs or ["zoo:heldout"]), input_shape,
                       list(batch_sizes or (16,)), metric, runtime, threads, settings, out, campaign, baselines, quiet,
                       as_json)
    if passes != 1:
        raise UsageError("--passes goes with --estimator (the per-model benchmark measures in its own rounds)")
    if relevel:
        raise UsageError("--relevel goes with --estimator (a device profile's reference probe gives the level)")
    if unknown_ops != "error":
        raise UsageError("--unknown-ops goes with --estimator (the per-model benchmark probes every layer's kind)")
    if trainable:
        raise UsageError("--trainable goes with --estimator (the per-model benchmark probes the nets trained whole)")
    for name, v in (("--out", out), ("--campaign", campaign), ("--input-shape", input_shape), ("--tdp-w", tdp_w),
                    ("--tdp-device", tdp_device), ("--pre-variant", pre_variants), ("--pre-runs", pre_runs),
                    ("--step-log", step_logs)):
        if v:
            raise UsageError(f"{name} goes with --estimator (the per-model benchmark takes reference names)")
    return _per_model(device, expand_models(specs or ["zoo:reference"]), list(batch_sizes or (32,)),
                      metric or "time", runtime or "torch",
                      out_dir, max_probes, max_seconds, settings, threads, quiet, as_json)


def _per_model(device, models, batch_sizes, metric, runtime, out_dir, max_probes, max_seconds, settings, threads,
               quiet, as_json):
    import sys

    from thor_sdk.evaluate import evaluate

    batch_size = batch_sizes[0]
    bar = Progress(len(models), "evaluating", quiet)
    started = []

    def progress(event, name):
        if event == "model":
            if started:
                bar.update(1)
            started.append(name)
            bar.update(0, label=f"campaign {name}")

    try:
        r = evaluate(models, device=device, batch_size=batch_size, metric=metric, out_dir=out_dir, runtime=runtime,
                     settings=settings, max_probes=max_probes, max_seconds=max_seconds, progress=progress,
                     threads=threads)
        bar.update(1)
    finally:
        bar.close()
    r["command"] = "thor-sdk " + " ".join(sys.argv[1:])
    if as_json:
        emit_json(r)
        return
    scale, unit = (1e3, "ms") if r["unit"] == "s" else (1.0, r["unit"])

    def f(v, nd=2):
        return "-" if v is None else f"{v * scale:.{nd}f}"

    click.echo(table([(x["model"], f(x["measured"]), f(x["thor"]), f(x["thor_std"]), f"{x['thor_ape']:.1f}",
                       f(x["flops"]), "-" if x["flops_ape"] is None else f"{x['flops_ape']:.1f}", x["probes"],
                       f"{x['probe_seconds']:.0f}", x["flagged"]) for x in r["rows"]],
                     ["model", f"measured {unit}", f"THOR {unit}", "THOR std", "THOR APE %", f"FLOPs {unit}",
                      "FLOPs APE %", "probes", "probe s", "flagged"]))
    click.echo(f"\nTHOR MAPE {r['thor_mape']:.1f}% (max {r['thor_max_ape']:.1f}%), FLOPs MAPE "
               f"{r['flops_mape']:.1f}%, ratio {r['flops_over_thor']:.1f}x; device {r['device']}, runtime {runtime}, "
               f"batch {batch_size}, {metric}")
    click.echo(f"command: {r['command']}")


def _unseen(estimator, device, models, input_shape, batch_sizes, metric, runtime, threads, settings, out, campaign,
            baselines, quiet, as_json):
    import sys

    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.evaluate.report import check_report_dir, write_report
    from thor_sdk.runtime import load_estimator

    if out:
        check_report_dir(out)  # before any measurement
    est = load_estimator(estimator)
    samples = _campaign_samples(campaign, est.metric) if campaign else ()
    bar = None

    def progress(event, info):
        nonlocal bar
        if event == "start":
            bar = Progress(info, "measuring", quiet)
        elif bar is not None:
            bar.update(1, label=f"done {info}")

    try:
        r = evaluate_unseen(est, models, device=device, batch_sizes=batch_sizes, metric=metric, settings=settings,
                            threads=threads, progress=progress, input_shape=input_shape,
                            runtime=runtime, **baselines)
    finally:
        if bar is not None:
            bar.close()
    r["command"] = "thor-sdk " + " ".join(sys.argv[1:])
    if out:
        r["report"] = write_report(r, out, estimator=est, samples=samples)
    r.pop("layers", None)
    if as_json:
        emit_json(r)
        return
    click.echo(unseen_table(r))
    click.echo("\n" + methods_table(r))
    if out:
        click.echo(f"report: {r['report']['files'][-1]}" + (f" ({r['report']['note']})" if r["report"]["note"] else ""))
    click.echo(f"command: {r['command']}")


def _campaign_samples(path, metric):
    from thor_sdk.store import Campaign

    c = Campaign.open(path)
    try:
        return c.samples(metric)
    finally:
        c.close()


def methods_table(r):
    """Every method's MAPE, max error and (THOR) coverage, one line each, and STEP on the run logs."""
    rows = [(n, m["n"], "-" if m["mape"] is None else f"{m['mape']:.1f}",
             "-" if m["max_ape"] is None else f"{m['max_ape']:.1f}",
             "-" if m["coverage95"] is None else f"{100 * m['coverage95']:.0f}%",
             "" if m["n"] else (m.get("note") or "")) for n, m in r["methods"].items()]
    text = table(rows, ["method", "models", "MAPE %", "max APE %", "95% coverage", "note"])
    for s in r.get("step") or []:
        text += (f"\nSTEP on {s['log']}: {s['epochs_used']} of {s['epochs']} epochs used, projected "
                 + (f"{s['projected']:.4g} {s['unit']} vs measured {s['measured_total']:.4g} {s['unit']} "
                    f"({s['ape']:.1f}%)" if s["projected"] is not None else f"nothing ({s['reason']})"))
    return text


def unseen_table(r):
    """The generalization report as text (also used by bench/bench_generalization.py)."""
    scale, unit = (1e3, "ms") if r["unit"] == "s" else (1.0, r["unit"])
    rows = [(x["model"], x["batch_size"], f"{x['measured'] * scale:.3f}", f"{x['thor'] * scale:.3f}",
             f"{x['thor_std'] * scale:.3f}", f"{x['thor_ape']:.1f}", f"{x['z']:+.2f}", "yes" if x["covered95"] else "NO",
             f"{x['flops'] * scale:.3f}" if x["flops"] is not None else "-",
             f"{x['flops_ape']:.1f}" if x["flops_ape"] is not None else "-") for x in r["rows"]]
    text = table(rows, ["model", "batch", f"measured {unit}", f"THOR {unit}", "std", "THOR APE %", "z", "in 95%",
                        f"FLOPs {unit}", "FLOPs APE %"])
    ref = r["reference"]
    text += (f"\n\nunseen models: THOR MAPE {r['thor_mape']:.1f}% (max {r['thor_max_ape']:.1f}%), FLOPs MAPE "
             f"{r['flops_mape']:.1f}% ({r['flops_over_thor']:.1f}x); 95% interval coverage "
             f"{100 * r['coverage95']:.0f}%, median |z| {r['median_abs_z']:.2f}; device {r['device']}, runtime "
             f"{r['runtime']}, {r['metric']}")
    groups = r.get("groups") or {}
    if len(groups) > 1:
        for g, m in groups.items():
            text += (f"\n  {g} ({m['n']}): THOR MAPE {m['thor_mape']:.1f}%"
                     + (f", FLOPs {m['flops_mape']:.1f}%" if m["flops_mape"] is not None else "")
                     + (f" ({m['flops_over_thor']:.1f}x)" if m["flops_over_thor"] is not None else "")
                     + f", coverage {100 * m['coverage95']:.0f}%"
                     + (f", x level {m['thor_level_adjusted_mape']:.1f}%"
                        if m["thor_level_adjusted_mape"] is not None else "")
                     + (f", measurement floor {m['measurement_floor_mape']:.1f}%"
                        if m.get("measurement_floor_mape") is not None else ""))
    fl = r.get("measurement_floor")
    if fl:
        from thor_sdk.evaluate.unseen import floor_line

        text += f"\n{floor_line(fl)}"
    if r.get("thor_level_adjusted_mape") is not None:
        text += (f"\ndiagnostic, the device's speed now vs during its profile (the profile's reference probe measured "
                 f"around each model, level {min(x['device_level'] for x in r['rows']):.2f}-"
                 f"{max(x['device_level'] for x in r['rows']):.2f}): THOR x level MAPE "
                 f"{r['thor_level_adjusted_mape']:.1f}%, coverage {100 * r['coverage95_level_adjusted']:.0f}%")
    can = r.get("canary")
    if can:
        text += (f"\nat the profile's canary level (each pass put at the machine speed the profile describes, as the "
                 f"host's canary read beside its windows reads it): THOR MAPE {can['thor_mape']:.1f}%"
                 + (f", FLOPs {can['flops_mape']:.1f}%" if can["flops_mape"] is not None else "")
                 + f", coverage {100 * can['coverage95']:.0f}%"
                 + "".join(f"; {g} {m['canary']['thor_mape']:.1f}%"
                           + (f" vs {m['canary']['flops_mape']:.1f}%" if m["canary"]["flops_mape"] is not None else "")
                           for g, m in groups.items() if m.get("canary")))
    cv = (r.get("estimator") or {}).get("cross_validation")
    if cv:
        from thor_sdk.evaluate.unseen import cv_line

        text += f"\nthe estimator's {cv_line(cv)}"
    if r.get("level_warning"):
        text += f"\nwarning: {r['level_warning']}"
    if r.get("device_warning"):
        text += f"\nwarning: {r['device_warning']}"
    text += relevel_lines(r)
    if ref["spread"] is not None:
        text += (f"\nreference {ref['model']} b{ref['batch_size']} re-measured {len(ref['runs'])} times: "
                 f"max/min - 1 = {100 * ref['spread']:.1f}% (machine drift during the run)")
    return text


def relevel_lines(r):
    """With --relevel: the level the estimates were scaled by, and the figures at the profile's level."""
    lv, un = r.get("relevel"), r.get("unleveled")
    if not lv or not un:
        return ""
    from thor_sdk.api import level_disagreement

    if lv.get("applied"):
        text = (f"\nreleveled: THOR and FLOPs scaled by the device's level {lv['level']:.3f} (ln-std "
                f"{lv['log_std']:.3f}; {lv['readings']} readings of reference probe {lv['probe']} before the run)")
    else:  # within the drift band, or beyond it while the panel of other probes disagreed (as the report says)
        why = ("lies within the profile's own drift (the estimates' std covers it)" if not lv.get("beyond_drift")
               else f"is {level_disagreement(lv)}")
        text = f"\nnot releveled: the device's level {lv['level']:.3f} before the run {why}"
    for g, m in [("all", un)] + list((un.get("groups") or {}).items()):
        if m.get("thor_mape") is None:
            continue
        text += (f"\n  at the profile's level, {g} ({m['n']}): THOR MAPE {m['thor_mape']:.1f}%"
                 + (f", FLOPs {m['flops_mape']:.1f}%" if m["flops_mape"] is not None else "")
                 + (f" ({m['flops_over_thor']:.1f}x)" if m["flops_over_thor"] is not None else "")
                 + f", coverage {100 * m['coverage95']:.0f}%")
    return text
