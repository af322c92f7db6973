"""The evaluation report on disk: ``index.html`` (self-contained), ``report.md`` with its PNG figures, ``results.json``.

Every file is written atomically (``thor_sdk.store.files``); the folder is checked before any measurement
(``check_report_dir``), so a bad ``--out`` never costs a run. Figures need the ``[report]`` extra
(matplotlib); without it the report is written with its tables and says so.
"""

import base64
import datetime
import html
import json
import os

from thor_sdk.errors import FormatError, MissingExtraError, UsageError

FORMAT = "thor-sdk/evaluation"
VERSION = 1
FIGURES = (("estimated_vs_measured", "Estimated vs measured"), ("error_per_method", "Error per method"),
           ("kind_fits", "Per-kind GP estimates and probes"))


def check_report_dir(out_dir):
    """UsageError unless ``out_dir`` is (or can be made as) a writable folder; nothing is created here."""

    out_dir = os.fspath(out_dir)
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise UsageError(f"cannot write the report into {out_dir}: it exists and is not a folder")
    parent = out_dir if os.path.isdir(out_dir) else (os.path.dirname(os.path.abspath(out_dir)) or ".")
    if not os.path.isdir(parent):
        raise UsageError(f"cannot write the report into {out_dir}: no such folder {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write the report into {out_dir}: {parent} is not writable")
    return out_dir


def _fmt(v, scale=1.0, nd=3):
    return "-" if v is None else f"{v * scale:.{nd}f}"


def _pct(v):
    return "-" if v is None else f"{v:.1f}"


def _scale(unit):
    return (1e3, "ms") if unit == "s" else (1.0, unit)


def summary_table(result):
    """(header, rows) of the per-method summary."""
    head = ["method", "models", "MAPE %", "median APE %", "max APE %", "95% coverage", "what it assumed"]
    rows = []
    for name, m in result["methods"].items():
        rows.append([name, str(m["n"]), _pct(m["mape"]), _pct(m.get("median_ape")),
                     _pct(m["max_ape"]), "-" if m["coverage95"] is None else f"{100 * m['coverage95']:.0f}%",
                     m.get("note") or ""])
    return head, rows


def model_table(result):
    """(header, rows) of the per-model table: measured, THOR with its std and interval, every method's APE."""
    scale, unit = _scale(result["unit"])
    names = list(result["methods"])
    head = ["model", "group", "batch", f"measured {unit}", f"THOR {unit}", "std", "in 95%", "extrapolated %",
            *[f"{n} {unit} (APE %)" for n in names if n != "THOR"], "THOR APE %"]
    rows = []
    for r in result["rows"]:
        th = r["estimates"]["THOR"]
        cells = [r["model"], r.get("group") or "-", str(r["batch_size"]), _fmt(r["measured"], scale),
                 _fmt(th["value"], scale), _fmt(th.get("std"), scale), "yes" if th.get("covered95") else "NO",
                 "-" if r.get("extrapolated_share") is None else f"{100 * r['extrapolated_share']:.0f}"]
        for n in names:
            if n == "THOR":
                continue
            e = r["estimates"].get(n) or {}
            cells.append("-" if e.get("value") is None else f"{_fmt(e['value'], scale)} ({_pct(e.get('ape'))})")
        cells.append(_pct(th["ape"]))
        rows.append(cells)
    return head, rows


def step_table(result):
    """(header, rows) of STEP scored on per-epoch run logs (empty rows without any)."""
    head = ["run log", "epochs", "epochs used", "stable from epoch", "projected", "measured total", "APE %"]
    rows = [[os.path.basename(s["log"]), str(s["epochs"]), str(s["epochs_used"]),
             "-" if s["stable_epoch"] is None else str(s["stable_epoch"]),
             "-" if s["projected"] is None else f"{s['projected']:.4g} {s['unit']}",
             f"{s['measured_total']:.4g} {s['unit']}", _pct(s["ape"]) if s["projected"] is not None
             else f"- ({s['reason']})"] for s in result.get("step") or []]
    return head, rows


def _md_table(head, rows):
    esc = [[str(c).replace("|", "\\|") for c in r] for r in rows]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |"
                                                                                   for r in esc)])


def _html_table(head, rows):
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _facts(result):
    ref = result.get("reference") or {}
    lines = [f"Device {result['device']}, runtime {result['runtime']}, metric {result['metric']} ({result['unit']} "
             f"per training step), batch sizes {', '.join(map(str, result['batch_sizes']))}; "
             f"{len(result['rows'])} model runs measured in {result.get('elapsed_s') or 0:.0f} s."]
    if result.get("estimator"):
        e = result["estimator"]
        lines.append(f"Estimator: device {e.get('device')}, runtime {e.get('runtime')}, whole-model relative std "
                     f"{_fmt(e.get('whole_model_rel_std'))}, {len(e.get('kinds') or [])} layer kinds.")
        cv = e.get("cross_validation")
        if cv:
            from thor_sdk.evaluate.unseen import cv_line

            lines.append(f"Its {cv_line(cv)}.")
    if ref.get("spread") is not None:
        lines.append(f"Reference {ref['model']} b{ref['batch_size']} re-measured {len(ref['runs'])} times: "
                     f"max/min - 1 = {100 * ref['spread']:.1f}% (the machine's drift during the run).")
    if result.get("measurement_floor"):
        from thor_sdk.evaluate.unseen import floor_line

        line = floor_line(result["measurement_floor"])
        lines.append(line[0].upper() + line[1:] + ".")
    if result.get("thor_level_adjusted_mape") is not None:
        lines.append(f"Diagnostic: THOR x the device's speed now vs during its profile: MAPE "
                     f"{result['thor_level_adjusted_mape']:.1f}%.")
    can = result.get("canary")
    if can:
        lines.append("At the profile's canary level (every pass of every net put at the machine speed the profile "
                     "describes, as the host's canary read beside its windows reads it; THOR and FLOPs at the profile's "
                     f"level): THOR MAPE {_pct(can.get('thor_mape'))}%, FLOPs {_pct(can.get('flops_mape'))}%, "
                     f"coverage {_pct(100 * can['coverage95'])}%"
                     + "".join(f"; {g} {_pct(m['canary']['thor_mape'])}% vs {_pct(m['canary']['flops_mape'])}%"
                               for g, m in (result.get("groups") or {}).items() if m.get("canary")) + ".")
    if result.get("level_warning"):
        lines.append(f"Warning: {result['level_warning']}.")
    if result.get("device_warning"):
        lines.append(f"Warning: {result['device_warning']}.")
    lv, un = result.get("relevel"), result.get("unleveled")
    if lv and un:
        from thor_sdk.api import level_disagreement

        if lv.get("applied"):
            head = f"Releveled (--relevel): THOR and FLOPs scaled by the device's level {lv['level']:.3f} "
        elif not lv.get("beyond_drift"):
            head = f"Not releveled (--relevel): the device's level {lv['level']:.3f}, within the profile's own drift "
        else:
            head = f"Not releveled (--relevel): the device's level {lv['level']:.3f}, {level_disagreement(lv)}, "
        lines.append(head +
                     f"(ln-std {lv['log_std']:.3f}), measured before the run from {lv['readings']} readings of the "
                     f"profile's reference probe {lv['probe']}. At the profile's level: THOR MAPE "
                     f"{_pct(un.get('thor_mape'))}%, FLOPs {_pct(un.get('flops_mape'))}%, coverage "
                     f"{_pct(100 * un['coverage95'] if un.get('coverage95') is not None else None)}%"
                     + "".join(f"; {g} {_pct(m.get('thor_mape'))}% vs {_pct(m.get('flops_mape'))}%"
                               for g, m in (un.get("groups") or {}).items()) + ".")
    for s in result.get("skipped") or []:
        lines.append(f"Skipped {s['model']} b{s['batch_size']}: {s['reason']}")
    for w in result.get("warnings") or []:
        lines.append(f"Warning: {w}")
    if result.get("command"):
        lines.append(f"Command: `{result['command']}`")
    return lines


def figures(result, estimator=None, samples=()):
    """``{name: png bytes}`` (empty, with the reason, without matplotlib): ``(figs, note)``."""

    try:
        from thor_sdk.evaluate import plots

        figs = {"estimated_vs_measured": plots.estimated_vs_measured(result),
                "error_per_method": plots.error_per_method(result)}
        if estimator is not None and result.get("layers"):
            pts = plots.kind_points(estimator, result["layers"], samples)
            if pts:
                figs["kind_fits"] = plots.kind_fits(pts, result["unit"], result["device"])
        return figs, None
    except MissingExtraError as e:
        return {}, f"no figures: {e}"


def write_report(result, out_dir, estimator=None, samples=(), timestamp=None):
    """Write ``index.html``, ``report.md``, ``results.json`` and the figures' PNGs into ``out_dir`` (made if
    missing); returns ``{"files": [...], "figures": [...], "note": ...}``."""
    from thor_sdk.store.files import json_default, write_bytes, write_text

    check_report_dir(out_dir)
    stamp = (timestamp or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    doc = {"format": FORMAT, "version": VERSION, "created_utc": stamp, **{k: v for k, v in result.items() if k != "layers"}}
    try:
        results_text = json.dumps(doc, indent=1, allow_nan=False, default=json_default) + "\n"
    except ValueError:
        raise FormatError("the evaluation holds a number that is not finite (NaN or infinity); no report "
                          "written") from None
    os.makedirs(out_dir, exist_ok=True)
    figs, note = figures(result, estimator, samples)
    written = []
    for name, png in figs.items():
        written.append(write_bytes(os.path.join(out_dir, f"{name}.png"), png, "report figure"))
    written.append(write_text(os.path.join(out_dir, "results.json"), results_text, "report results"))
    title = f"THOR and baselines vs measured: {result['device']} / {result['runtime']}"
    sh, sr = summary_table(result)
    mh, mr = model_table(result)
    th, tr = step_table(result)
    facts = _facts(result)
    md = [f"# {title}", "", f"Written {stamp}.", "", *[f"- {f}" for f in facts], "", "## Methods", "",
          _md_table(sh, sr), "", "## Models", "", _md_table(mh, mr), ""]
    if tr:
        md += ["## STEP on run logs", "", "STEP projects a run from its own first epochs; it is scored on "
               "per-epoch logs, not on the models above.", "", _md_table(th, tr), ""]
    if note:
        md += [f"_{note}_", ""]
    for name, caption in FIGURES:
        if name in figs:
            md += [f"## {caption}", "", f"![{caption}]({name}.png)", ""]
    md.append("APE: |estimate - measured| / measured. THOR's 95% interval: mean +- 1.96 std. Accuracy on models the "
              "estimator never probed is what counts; the group column says which nets fed the profile's prior "
              "(reference, zoo) and which never did (heldout).")
    written.append(write_text(os.path.join(out_dir, "report.md"), "\n".join(md) + "\n", "report"))
    imgs = "".join(
        f"<h2>{html.escape(caption)}</h2><img id=\"fig-{name}\" alt=\"{html.escape(caption)}\" "
        f"src=\"data:image/png;base64,{base64.b64encode(figs[name]).decode('ascii')}\">"
        for name, caption in FIGURES if name in figs)
    page = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>"
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}td,th{border:1px solid #bbb;padding:3px 6px;"
        "text-align:left}th{background:#eee}img{max-width:100%;display:block;margin:1em 0}"
        "</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>Written {html.escape(stamp)}.</p><ul>"
        + "".join(f"<li>{html.escape(f)}</li>" for f in facts) + "</ul><h2>Methods</h2>" + _html_table(sh, sr)
        + "<h2>Models</h2>" + _html_table(mh, mr)
        + (("<h2>STEP on run logs</h2><p>STEP projects a run from its own first epochs; it is scored on per-epoch "
            "logs, not on the models above.</p>" + _html_table(th, tr)) if tr else "") + (f"<p><em>{html.escape(note)}</em></p>" if note else "")
        + imgs + "</body></html>\n")
    written.append(write_text(os.path.join(out_dir, "index.html"), page, "report page"))
    return {"files": written, "figures": sorted(figs), "note": note}
