"""STEP baseline (del Rey et al.): find where a run's per-epoch cost stabilises, project the whole training.

Input: a per-epoch series, read and validated by ``read_epochs`` from
- the run report ``thor-sdk train`` writes (format ``thor-sdk/train-run``: its ``epochs`` list with
  ``epoch``, ``time_s`` and ``energy_j``, the latter null without a meter), as a path, a dict or a list
  of epoch dicts; or
- a CSV of per-epoch measurements: columns ``epoch`` (integer), ``energy_j`` and/or ``time_s``,
  optional ``power_w`` (the epoch's mean power; with ``time_s`` it gives the energy where ``energy_j``
  is empty). See docs/baselines.md.

Epochs must be consecutive integers (>= 0), every value finite and > 0; at most ``MAX_EPOCHS`` rows and
``MAX_FILE_BYTES`` bytes. Anything else is a FormatError naming the file and line.

Rule (``fit``): the first ``min_warmup`` epochs are warm-up and never stable. The run is stable from
the first epoch ``s`` after them whose window of ``window`` consecutive epochs ``s .. s+window-1`` has a
coefficient of variation (population std / mean) at most ``cv_threshold``. The stable cost per epoch
is the window's median (robust to a last warm-up epoch the window may still hold); the projection for
``n_epochs`` is the measured warm-up (epochs before ``s``) plus ``(n_epochs - warm-up epochs) x stable
cost``. The rule is relative to its threshold: a warm-up that drifts by less than ``cv_threshold`` over
``window`` epochs already counts as stable. Only epochs up to the window's end are used: STEP's point
is that a run need not be measured to its end. A series with no such window is reported as not
stabilised (``value`` None, ``stabilised`` False) rather than projected from an unstable mean.
"""

import csv
import io
import math
import numbers
import os
import statistics

from thor_sdk.errors import FormatError, NoMeterError, NotOurFileError, UsageError

from .base import Baseline, check_metric, check_positive

MAX_EPOCHS = 100_000
MAX_FILE_BYTES = 16 * 1024 * 1024
COLUMNS = ("epoch", "time_s", "energy_j", "power_w")


def _value(raw, col, where):
    """A finite float > 0 from a CSV cell or JSON value, None when empty/null; FormatError otherwise."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, bool):
        raise FormatError(f"{where}: {col} is not a number: {raw!r}")
    try:
        v = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise FormatError(f"{where}: {col} is not a number: {raw!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise FormatError(f"{where}: {col} must be finite and > 0, got {raw!r}")
    return v


def _epoch(raw, where):
    if isinstance(raw, bool):
        raise FormatError(f"{where}: epoch must be an integer >= 0, got {raw!r}")
    if isinstance(raw, str):
        raw = raw.strip()
        if not raw.isdigit():
            raise FormatError(f"{where}: epoch must be an integer >= 0, got {raw!r}")
        return int(raw)
    if isinstance(raw, numbers.Integral) and raw >= 0:
        return int(raw)
    raise FormatError(f"{where}: epoch must be an integer >= 0, got {raw!r}")


def _rows(records, source):
    """Validated ``[{"epoch", "time_s", "energy_j", "power_w"}]`` from ``(where, dict)`` pairs."""
    out = []
    for where, rec in records:
        if len(out) >= MAX_EPOCHS:
            raise FormatError(f"{source}: more than {MAX_EPOCHS} epochs")
        if not isinstance(rec, dict):
            raise FormatError(f"{where}: an epoch is an object with epoch, time_s and/or energy_j")
        if rec.get("epoch") is None:
            raise FormatError(f"{where}: no epoch number")
        row = {"epoch": _epoch(rec["epoch"], where)}
        for col in COLUMNS[1:]:
            row[col] = _value(rec.get(col), col, where)
        if row["energy_j"] is None and row["time_s"] is None:
            raise FormatError(f"{where}: give time_s or energy_j")
        if out and row["epoch"] != out[-1]["epoch"] + 1:
            raise FormatError(f"{where}: epochs must be consecutive and increasing: {row['epoch']} after "
                              f"{out[-1]['epoch']}")
        out.append(row)
    if not out:
        raise FormatError(f"{source}: no epochs")
    return out


def _read_text(path):
    from thor_sdk.store.files import read_text

    return read_text(path, "per-epoch log", MAX_FILE_BYTES)


def _from_csv_text(text, source):
    reader = csv.DictReader(io.StringIO(text, newline=""))
    cols = [c.strip() for c in (reader.fieldnames or [])]
    if "epoch" not in cols or not ({"time_s", "energy_j"} & set(cols)):
        raise FormatError(f"{source}: a per-epoch CSV needs the columns epoch and time_s and/or energy_j "
                          f"(optional power_w); got {', '.join(cols) or 'none'}")
    reader.fieldnames = cols
    try:
        records = [(f"{source}:{line}", row) for line, row in enumerate(reader, start=2)
                   if any((v or "").strip() for v in row.values() if isinstance(v, str))]
    except csv.Error as e:
        raise FormatError(f"{source}: malformed CSV ({e})") from None
    return _rows(records, source)


def read_epochs(source):
    """The validated per-epoch rows of ``source``: a path (``.csv``, else a JSON train report), a train
    report dict, or a list of epoch dicts. Returns ``[{"epoch", "time_s", "energy_j", "power_w"}]``."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        text = _read_text(path)
        if path.lower().endswith(".csv"):
            return _from_csv_text(text, path)
        from thor_sdk.store.files import parse_json

        try:
            doc = parse_json(text, path)
        except FormatError as e:
            raise FormatError(f"{e}; a per-epoch CSV must end in .csv") from None
        return read_epochs_doc(doc, path)
    return read_epochs_doc(source, "per-epoch series")


def read_epochs_doc(doc, source="per-epoch series"):
    if isinstance(doc, dict):
        if doc.get("format") not in (None, "thor-sdk/train-run"):
            raise NotOurFileError(f"{source}: format {doc.get('format')!r} is not a thor-sdk/train-run report")
        doc = doc.get("epochs")
    if not isinstance(doc, list):
        raise FormatError(f"{source}: expected a train-run report or a list of epochs")
    if len(doc) > MAX_EPOCHS:
        raise FormatError(f"{source}: more than {MAX_EPOCHS} epochs")
    return _rows([(f"{source}: epochs[{i}]", rec) for i, rec in enumerate(doc)], source)


def _run_labels(series):
    """``{"model", "batch_size"}`` of a train report (a dict, or a JSON path re-read within the size
    limit); empty for a CSV or a bare list. Labels only: never used in the projection."""
    doc = series
    if isinstance(series, (str, os.PathLike)) and not os.fspath(series).lower().endswith(".csv"):
        from thor_sdk.store.files import parse_json

        try:
            doc = parse_json(_read_text(os.fspath(series)), "per-epoch log")
        except FormatError:
            return {}
    if not isinstance(doc, dict):
        return {}
    out = {}
    if isinstance(doc.get("model"), str):
        out["model"] = doc["model"]
    b = doc.get("batch_size")
    if isinstance(b, numbers.Integral) and not isinstance(b, bool) and b >= 1:
        out["batch_size"] = int(b)
    return out


def epoch_costs(rows, metric):
    """Per-epoch cost of ``metric``: ``time_s``, or ``energy_j`` (else ``power_w x time_s``); NoMeterError
    when an epoch has no energy (a run without a meter), UsageError when one has no time."""
    check_metric(metric)
    out = []
    for r in rows:
        if metric == "time":
            if r["time_s"] is None:
                raise UsageError(f"epoch {r['epoch']} has no time_s")
            out.append(r["time_s"])
        else:
            e = r["energy_j"]
            if e is None and r["power_w"] is not None and r["time_s"] is not None:
                e = r["power_w"] * r["time_s"]
            if e is None:
                raise NoMeterError(f"epoch {r['epoch']} has no energy (no meter during the run): use metric time")
            out.append(e)
    return out


def stabilisation(costs, window=3, cv_threshold=0.05, min_warmup=1):
    """``(index, cv)``: the 0-based index of the first epoch from which ``window`` consecutive epochs
    vary by at most ``cv_threshold`` (after ``min_warmup`` epochs), with that window's CV; ``(None, best
    CV seen)`` when there is none."""
    best = None
    for s in range(min_warmup, len(costs) - window + 1):
        w = costs[s:s + window]
        mean = math.fsum(w) / window
        cv = math.sqrt(math.fsum((x - mean) ** 2 for x in w) / window) / mean
        best = cv if best is None else min(best, cv)
        if cv <= cv_threshold:
            return s, cv
    return None, best


class StepBaseline(Baseline):
    """STEP: stable per-epoch cost x epochs + the measured warm-up (see the module text for the rule)."""

    name = "step"
    _fitted = ("costs_",)

    def __init__(self, metric=None, window=3, cv_threshold=0.05, min_warmup=1):
        self.metric = None if metric is None else check_metric(metric)
        for n, v in (("window", window), ("min_warmup", min_warmup)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < (2 if n == "window" else 0):
                raise UsageError(f"{n} must be an integer >= {2 if n == 'window' else 0}, got {v!r}")
        self.window, self.min_warmup = int(window), int(min_warmup)
        self.cv_threshold = check_positive("cv_threshold", cv_threshold)

    @property
    def assumptions(self):
        return (f"after {self.min_warmup} warm-up epoch(s), the run is stable from the first {self.window} consecutive "
                f"epochs whose coefficient of variation is <= {self.cv_threshold:g}; every later epoch costs that "
                "window's median; the warm-up epochs count as measured")

    def fit(self, series):
        """Find the stable window of ``series`` (anything ``read_epochs`` takes). ``metric`` None picks
        energy when every epoch has it (or power and time), else time."""
        rows = read_epochs(series)
        self.run_ = _run_labels(series)
        metric = self.metric
        if metric is None:
            has_energy = all(r["energy_j"] is not None or (r["power_w"] and r["time_s"]) for r in rows)
            metric = "energy" if has_energy else "time"
        costs = epoch_costs(rows, metric)
        self.metric_ = metric
        self.first_epoch_ = rows[0]["epoch"]
        self.costs_ = costs
        s, cv = stabilisation(costs, self.window, self.cv_threshold, self.min_warmup)
        self.stable_index_, self.window_cv_ = s, cv
        self.stabilised_ = s is not None
        if s is not None:
            self.stable_cost_ = statistics.median(costs[s:s + self.window])
            self.warmup_cost_ = math.fsum(costs[:s])
            self.stable_epoch_ = rows[s]["epoch"]
            self.epochs_used_ = s + self.window
        else:
            self.stable_cost_ = self.warmup_cost_ = self.stable_epoch_ = None
            self.epochs_used_ = len(costs)
        return self

    def estimate(self, model=None, batch_size=None, n_epochs=None):
        """The whole training's cost projected to ``n_epochs`` (default: the series' length). ``model``
        and ``batch_size`` are the run's own (default: a train report's): STEP projects the run it was
        fitted on."""
        self._check_fitted()
        model = model if model is not None else self.run_.get("model")
        batch_size = batch_size if batch_size is not None else self.run_.get("batch_size")
        n = len(self.costs_) if n_epochs is None else n_epochs
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise UsageError(f"n_epochs must be an integer >= 1, got {n_epochs!r}")
        n = int(n)
        common = {"per": "run", "n_epochs": n, "stabilised": self.stabilised_, "stable_epoch": self.stable_epoch_,
                  "window_cv": self.window_cv_, "epochs_used": self.epochs_used_,
                  "model": model if isinstance(model, str) else None,
                  "batch_size": batch_size}
        if not self.stabilised_:
            cv = "none" if self.window_cv_ is None else f"{self.window_cv_:.3g}"
            return self._result(None, reason=f"the series never stabilises: no {self.window} consecutive epochs after "
                                f"the warm-up vary by <= {self.cv_threshold:g} (lowest CV {cv})",
                                stable_cost_per_epoch=None, **common)
        s = self.stable_index_
        if n < s:
            value = math.fsum(self.costs_[:n])
        else:
            value = self.warmup_cost_ + (n - s) * self.stable_cost_
        return self._result(value, stable_cost_per_epoch=self.stable_cost_, warmup_epochs=s,
                            warmup_cost=self.warmup_cost_, **common)
