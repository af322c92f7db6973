"""How check results read: numbers with their units, what a budget covers, and one human line per result."""

import math

STATUS_WORDS = {"pass": "PASS", "fail": "FAIL", "info": "INFO"}
INDENT = "      "


def fmt_value(v, unit):
    """``612.3 J``, ``12340 J``, ``41.2 s``, ``6.45 ms`` (times below a second in milliseconds)."""
    if not math.isfinite(v):
        return f"{v} {unit}"
    if unit == "s" and abs(v) < 1.0:
        v, unit = v * 1e3, "ms"
    text = f"{v:.4g}"
    if "e+" in text and abs(v) < 1e9:
        text = f"{v:.0f}"
    return f"{text} {unit}"


def fmt_confidence(c):
    """``95%``, ``99.99%``."""
    return f"{c * 100:.6g}%"


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe(run, per):
    """What a budget ``per`` step, epoch or run covers: ``3 epochs x 313 steps``, ``1 epoch x 313 steps``,
    ``1 step at batch 16``."""
    if per == "step":
        return f"1 step at batch {run['batch_size']}"
    steps = _plural(run["steps_per_epoch"], "step")
    if per == "epoch":
        return f"1 epoch x {steps}"
    return f"{_plural(run['epochs'], 'epoch')} x {steps}"


def bound_text(period, unit, confidence):
    """``612 J (95% upper bound 701 J)``."""
    return f"{fmt_value(period['mean'], unit)} ({fmt_confidence(confidence)} upper bound {fmt_value(period['upper'], unit)})"


def result_line(r):
    """``PASS  Net: 3 epochs x 313 steps = 612 J (95% upper bound 701 J) <= budget 900 J   [pixel8 / onnxruntime]``."""
    run = {"batch_size": r.batch_size, "steps_per_epoch": r.steps_per_epoch, "epochs": r.epochs}
    head = f"{STATUS_WORDS[r.status]}  {r.model}: {describe(run, r.per)} = " \
           f"{bound_text(r.period, r.unit, r.confidence)}"
    if r.status == "info":
        verdict = f", no {r.metric} budget"
    else:
        verdict = f" {'<=' if r.status == 'pass' else '>'} budget {fmt_value(r.budget, r.unit)}"
    return f"{head}{verdict}   [{r.device} / {r.runtime}]"


def result_lines(r):
    """The result's line, and for an over-budget result its explanation on indented lines."""
    lines = [result_line(r)]
    if r.explanation is not None:
        lines += [INDENT + text for text in r.explanation.lines]
    return lines
