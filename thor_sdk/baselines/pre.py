"""PRE baseline (del Rey et al.): regression from model and device features to the cost of a training step.

Features of one (model, batch size, device) run (``features_of``): ``batch_size``, ``input_size``
(elements of one input sample), ``train_flops`` (one step: forward, backward, update), ``params``,
``n_layers``, ``kind_<kind>`` (layers of each kind), and the device's ``cpu_count`` and ``threads``
(intra-op threads) where every training run records them. Each is taken as ``log(1 + x)`` and
standardised; the target is ``log(cost per step)``, so errors are relative and a prediction is never
negative. Per epoch = per step x ceil(samples / batch size) (``estimate(..., samples_per_epoch=)``).

Variants (the paper's): ``linear`` (least squares), ``ridge``, ``kernel_ridge`` (RBF kernel, target
centred) and ``svr`` (RBF, epsilon-insensitive). Hyper-parameters (ridge alpha; kernel alpha and gamma;
SVR C, epsilon and gamma) are chosen on the training runs alone by an inner grouped cross-validation
(by model) over small grids. ``cross_validate`` scores every variant leaving one model out at a time
(``LeaveOneGroupOut``; ``GroupKFold(10)`` above 50 models), so a model is never in its own training
set, and reports the MAPE of the step cost.

Training runs come from a campaign's whole-model runs (``thor-sdk measure --out``: ``rows_from_campaign``)
or a CSV (``read_pre_csv``; columns in docs/baselines.md). A fitted model is plain versioned JSON
(``to_dict``/``save``, format ``thor-sdk/pre-model``, schema ``schemas/pre-model.schema.json``):
scaler, coefficients, or support vectors and dual coefficients with gamma for the kernel variants;
``load`` predicts from it with numpy alone, no refit, no pickle.
"""

import csv
import io
import json
import math
import numbers
import os
import re

from thor_sdk.errors import FormatError, UsageError

from .base import UNITS, Baseline, check_batch_size, check_metric, model_layers, train_flops

FORMAT = "thor-sdk/pre-model"
VERSION = 1
VARIANTS = ("linear", "ridge", "kernel_ridge", "svr")
COST_COLUMNS = {"time": "time_s", "energy": "energy_j"}
BASE_FEATURES = ("batch_size", "input_size", "train_flops", "params", "n_layers")
DEVICE_FEATURES = ("cpu_count", "threads")
KIND_PREFIX = "kind_"
MAX_ROWS = 100_000
MAX_COLUMNS = 512
MAX_FILE_BYTES = 16 * 1024 * 1024
GRIDS = {  # gamma is a multiple of 1 / n_features (scikit-learn's "scale" on standardised data)
    "linear": {},
    "ridge": {"alpha": [0.01, 0.1, 1.0, 10.0, 100.0]},
    "kernel_ridge": {"alpha": [0.001, 0.01, 0.1, 1.0], "gamma": [0.1, 0.3, 1.0, 3.0]},
    "svr": {"C": [1.0, 10.0, 100.0], "epsilon": [0.01, 0.1], "gamma": [0.1, 0.3, 1.0, 3.0]},
}
_KIND_RE = re.compile(r"^[a-z0-9_]{1,64}$")


# -- features ------------------------------------------------------------------------------------
def features_of(model, batch_size, device=None, input_shape=None):
    """The feature row of ``model`` at ``batch_size`` (no cost): ``{"model", "batch_size", "input_size",
    "train_flops", "params", "n_layers", "kinds": {kind: count}, "cpu_count", "threads"}``. ``device``: a
    dict with ``cpu_count`` and ``threads`` (or ``torch_threads``, as ``Device.info()`` has it), or None."""
    from thor_sdk.layers.kinds import get_kind

    batch_size = check_batch_size(batch_size)
    name, layers, shape = model_layers(model, input_shape)
    if not layers:
        raise UsageError("a model without layers has no PRE features")
    kinds = {}
    for l in layers:
        kinds[l["kind"]] = kinds.get(l["kind"], 0) + 1
    if not shape:  # a bare layer list: its first layer's input
        first = layers[0]
        shape = get_kind(first["kind"]).in_shape(first["config"])
    row = {"model": name, "batch_size": batch_size, "input_size": math.prod(shape) if shape else None,
           "train_flops": train_flops(layers, batch_size),
           "params": sum(get_kind(l["kind"]).num_params(l["config"]) for l in layers), "n_layers": len(layers),
           "kinds": kinds}
    dev = device or {}
    row["cpu_count"] = dev.get("cpu_count")
    row["threads"] = dev.get("threads", dev.get("torch_threads"))
    return row


def _check_row(row, where, metric=None):
    """A clean copy of a training or query row; FormatError on anything not finite or out of range."""
    if not isinstance(row, dict):
        raise FormatError(f"{where}: a run is an object of features")
    out = {"model": str(row.get("model")) if row.get("model") is not None else None}
    for col in BASE_FEATURES + DEVICE_FEATURES:
        v = row.get(col)
        if v is None and col in DEVICE_FEATURES + ("input_size",):
            out[col] = None
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0 \
                or (v < 1 and col not in ("train_flops", "params")):
            raise FormatError(f"{where}: {col} must be a finite number >= {0 if col in ('train_flops', 'params') else 1}, "
                              f"got {v!r}")
        out[col] = float(v)
    kinds = row.get("kinds") or {}
    if not isinstance(kinds, dict):
        raise FormatError(f"{where}: kinds must map layer kinds to counts")
    out["kinds"] = {}
    for k, n in kinds.items():
        if not isinstance(k, str) or not _KIND_RE.match(k):
            raise FormatError(f"{where}: bad layer kind name {k!r}")
        if isinstance(n, bool) or not isinstance(n, numbers.Real) or not math.isfinite(n) or n < 0:
            raise FormatError(f"{where}: count of {k} must be a finite number >= 0, got {n!r}")
        out["kinds"][k] = float(n)
    if metric is not None:
        col = COST_COLUMNS[metric]
        v = row.get(col)
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
            raise FormatError(f"{where}: {col} must be a finite number > 0, got {v!r}")
        out[col] = float(v)
    return out


# -- CSV and campaign sources ----------------------------------------------------------------------
def read_pre_csv(path):
    """Training runs from a CSV (one row per model and batch size; columns in docs/baselines.md)."""
    from thor_sdk.store.files import read_text

    text = read_text(path, "runs file", MAX_FILE_BYTES)
    return parse_pre_csv(text, path)


def _cell(raw, col, where, integer=False):
    from thor_sdk.store.files import csv_number

    raw = (raw or "").strip()
    return float(csv_number(raw, where, col, integer=integer)) if raw else None


def parse_pre_csv(text, source="runs CSV"):
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [c.strip() for c in next(reader)]
    except StopIteration:
        raise FormatError(f"{source}: empty file") from None
    except csv.Error as e:
        raise FormatError(f"{source}: malformed CSV ({e})") from None
    if len(header) > MAX_COLUMNS:
        raise FormatError(f"{source}: more than {MAX_COLUMNS} columns")
    need = {"model", "batch_size", "input_size", "train_flops", "params", "n_layers"}
    if need - set(header) or not set(COST_COLUMNS.values()) & set(header):
        raise FormatError(f"{source}: a runs CSV needs the columns {', '.join(sorted(need))} and time_s and/or "
                          f"energy_j; missing {', '.join(sorted(need - set(header))) or 'a cost column'}")
    if len(set(header)) != len(header):
        raise FormatError(f"{source}: repeated column names")
    kind_cols = [c for c in header if c.startswith(KIND_PREFIX)]
    for c in kind_cols:
        if not _KIND_RE.match(c[len(KIND_PREFIX):]):
            raise FormatError(f"{source}: bad layer-kind column {c!r}")
    rows = []
    try:
        for line, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            where = f"{source}:{line}"
            if len(rows) >= MAX_ROWS:
                raise FormatError(f"{source}: more than {MAX_ROWS} runs")
            if len(cells) != len(header):
                raise FormatError(f"{where}: {len(cells)} cells for {len(header)} columns")
            rec = dict(zip(header, cells))
            row = {"model": rec["model"].strip() or None}
            if row["model"] is None:
                raise FormatError(f"{where}: no model name")
            for col in BASE_FEATURES + DEVICE_FEATURES:
                row[col] = _cell(rec.get(col), col, where, integer=col not in ("train_flops", "params"))
            for col in COST_COLUMNS.values():
                row[col] = _cell(rec.get(col), col, where)
            if row["time_s"] is None and row["energy_j"] is None:
                raise FormatError(f"{where}: give time_s or energy_j")
            row["kinds"] = {c[len(KIND_PREFIX):]: _cell(rec[c], c, where, integer=True) or 0.0 for c in kind_cols}
            for col in ("device", "runtime"):
                if rec.get(col, "").strip():
                    row[col] = rec[col].strip()
            checked = _check_row(row, where)
            checked.update({k: row[k] for k in ("time_s", "energy_j", "device", "runtime") if row.get(k) is not None})
            for col in COST_COLUMNS.values():
                if col in checked and not checked[col] > 0:
                    raise FormatError(f"{where}: {col} must be > 0")
            rows.append(checked)
    except csv.Error as e:
        raise FormatError(f"{source}: malformed CSV ({e})") from None
    if not rows:
        raise FormatError(f"{source}: no runs")
    return rows


def pre_csv_text(rows):
    """The CSV text of ``rows`` (feature rows with ``time_s`` and/or ``energy_j``), in the documented columns."""
    kinds = sorted({k for r in rows for k in (r.get("kinds") or {})})
    extra = [c for c in ("device", "runtime", "load_1m", "other_runnable") if any(r.get(c) is not None for r in rows)]
    header = (["model"] + list(BASE_FEATURES) + list(DEVICE_FEATURES) + [KIND_PREFIX + k for k in kinds]
              + ["time_s", "energy_j"] + extra)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)

    def fmt(v):
        if v is None:
            return ""
        if isinstance(v, float) and v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return repr(v) if isinstance(v, float) else str(v)

    for r in rows:
        w.writerow([fmt(r.get("model"))] + [fmt(r.get(c)) for c in BASE_FEATURES + DEVICE_FEATURES]
                   + [fmt((r.get("kinds") or {}).get(k, 0)) for k in kinds]
                   + [fmt(r.get("time_s")), fmt(r.get("energy_j"))] + [fmt(r.get(c)) for c in extra])
    return buf.getvalue()


def write_pre_csv(path, rows):
    from thor_sdk.store.files import write_text

    return write_text(path, pre_csv_text(rows), what="runs CSV")


def rows_from_campaign(path, metric="time"):
    """Training rows from a campaign's whole-model runs of ``metric``: ``thor-sdk measure --out`` runs and a
    device profile's ``calibration:<net>`` runs (each run's model rebuilt by its label for its features);
    a profile's ``reference:<probe>`` drift re-measurements are probes, not models, and are left out.
    Device features from the campaign's ``device`` meta where recorded."""
    from thor_sdk.store import Campaign

    metric = check_metric(metric)
    c = Campaign.open(path)
    try:
        runs = [dict(r, model=r["model"][len("calibration:"):] if r["model"].startswith("calibration:") else r["model"])
                for r in c.model_runs() if r.get("metric") == metric and not r["model"].startswith("reference:")]
        device = (c.meta or {}).get("device") or {}
    finally:
        c.close()
    if not runs:
        raise UsageError(f"campaign {path} has no whole-model runs of metric {metric} (thor-sdk measure --out)")
    rows, cache = [], {}
    for r in runs:
        key = (r["model"], r["batch_size"])
        if key not in cache:
            cache[key] = features_of(r["model"], int(r["batch_size"]), device if isinstance(device, dict) else None)
        row = dict(cache[key], **{COST_COLUMNS[metric]: float(r["mean"])})
        rows.append(_check_row(row, f"{path}: run of {r['model']}", metric) | {"model": r["model"]})
    return rows


def load_runs(source, metric="time"):
    """Training rows from a CSV path, a campaign path (``.db``) or a list of row dicts."""
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        return read_pre_csv(p) if p.lower().endswith(".csv") else rows_from_campaign(p, metric)
    if not isinstance(source, (list, tuple)):
        raise UsageError("PRE trains on a runs CSV, a campaign or a list of run dicts")
    return list(source)


# -- the design matrix -----------------------------------------------------------------------------
def _design(rows, features):
    """Rows -> the raw feature matrix ``log(1 + x)`` in the order of ``features``."""
    import numpy as np

    X = np.empty((len(rows), len(features)))
    for i, r in enumerate(rows):
        for j, f in enumerate(features):
            v = (r.get("kinds") or {}).get(f[len(KIND_PREFIX):], 0.0) if f.startswith(KIND_PREFIX) else r.get(f)
            if v is None:
                raise UsageError(f"run {r.get('model')!r} has no {f}, which the PRE model uses")
            X[i, j] = math.log1p(float(v))
    return X


def _feature_names(rows):
    """The features every run has: the base ones (input size only where every run records it), the
    device ones every run records, and a count per layer kind seen in any run."""
    feats = [f for f in BASE_FEATURES + DEVICE_FEATURES if all(r.get(f) is not None for r in rows)]
    feats += [KIND_PREFIX + k for k in sorted({k for r in rows for k in (r.get("kinds") or {})})]
    return feats


def _make(variant, params, random_state):
    if variant == "linear":
        from sklearn.linear_model import LinearRegression

        return LinearRegression()
    if variant == "ridge":
        from sklearn.linear_model import Ridge

        return Ridge(**params)
    if variant == "kernel_ridge":
        from sklearn.kernel_ridge import KernelRidge

        return KernelRidge(kernel="rbf", **params)
    from sklearn.svm import SVR

    return SVR(kernel="rbf", **params)


def _grid(variant, n_features):
    grid = dict(GRIDS[variant])
    if "gamma" in grid:
        grid["gamma"] = [g / n_features for g in grid["gamma"]]
    return grid


def _fit_variant(variant, Xs, y, groups, random_state=0):
    """A fitted sklearn estimator on standardised ``Xs`` and centred log targets, hyper-parameters by an
    inner grouped CV where there are at least 3 models; returns ``(estimator, params)``."""
    import itertools

    import numpy as np

    grid = _grid(variant, Xs.shape[1])
    keys = sorted(grid)
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*(grid[k] for k in keys))] or [{}]
    uniq = sorted(set(groups))
    if len(combos) > 1 and len(uniq) >= 3:
        from sklearn.model_selection import GroupKFold

        cv = GroupKFold(n_splits=min(5, len(uniq)))
        best, best_err = combos[0], math.inf
        for p in combos:
            errs = []
            for tr, te in cv.split(Xs, y, groups):
                m = _make(variant, p, random_state).fit(Xs[tr], y[tr])
                errs.append(float(np.mean((m.predict(Xs[te]) - y[te]) ** 2)))
            err = float(np.mean(errs))
            if err < best_err:
                best, best_err = p, err
        params = best
    else:
        params = combos[len(combos) // 2] if len(combos) > 1 else combos[0]
    return _make(variant, params, random_state).fit(Xs, y), params


def _export(variant, est, y_mean):
    """The fitted estimator as plain numbers: ``{"type": "linear", "coef", "intercept"}`` or ``{"type":
    "rbf", "gamma", "support", "dual_coef", "intercept"}`` (intercept includes the target's centring)."""
    import numpy as np

    if variant in ("linear", "ridge"):
        return {"type": "linear", "coef": [float(c) for c in np.ravel(est.coef_)],
                "intercept": float(np.ravel(est.intercept_)[0] if np.ndim(est.intercept_) else est.intercept_) + y_mean}
    if variant == "kernel_ridge":
        return {"type": "rbf", "gamma": float(est.gamma), "support": est.X_fit_.tolist(),
                "dual_coef": [float(c) for c in np.ravel(est.dual_coef_)], "intercept": y_mean}
    return {"type": "rbf", "gamma": float(est._gamma), "support": est.support_vectors_.tolist(),
            "dual_coef": [float(c) for c in np.ravel(est.dual_coef_)], "intercept": float(est.intercept_[0]) + y_mean}


def _predict_log(model, Xs):
    """Log-cost predictions of the exported ``model`` on standardised ``Xs`` (numpy only)."""
    import numpy as np

    if model["type"] == "linear":
        return Xs @ np.asarray(model["coef"], dtype=float) + model["intercept"]
    S = np.asarray(model["support"], dtype=float).reshape(-1, Xs.shape[1])
    d2 = np.maximum((Xs ** 2).sum(1)[:, None] + (S ** 2).sum(1)[None, :] - 2.0 * Xs @ S.T, 0.0)
    return np.exp(-model["gamma"] * d2) @ np.asarray(model["dual_coef"], dtype=float) + model["intercept"]


class PreBaseline(Baseline):
    """PRE: a regression (``variant``: linear, ridge, kernel_ridge, svr) from model and device features to
    the log cost of a training step, trained on measured whole-model runs."""

    name = "pre"
    _fitted = ("model_",)

    def __init__(self, variant="svr", metric="time", random_state=0):
        if variant not in VARIANTS:
            raise UsageError(f"unknown PRE variant {variant!r} ({', '.join(VARIANTS)})")
        self.variant, self.metric, self.random_state = variant, check_metric(metric), random_state

    @property
    def assumptions(self):
        n = getattr(self, "n_runs_", None)
        return (f"{self.variant} regression of log cost per step on log(1 + feature) of batch size, input size, training "
                "FLOPs, parameters, layer count, layer-kind counts and device cpu count/threads"
                + (f", trained on {n} measured runs of {len(self.models_)} models" if n else "")
                + "; models unlike the training runs extrapolate poorly")

    def fit(self, runs):
        """Train on ``runs``: a runs CSV path, a campaign path or a list of run dicts (``features_of`` plus
        ``time_s``/``energy_j`` per step)."""
        import numpy as np

        rows = [_check_row(r, f"run {i}", self.metric) for i, r in enumerate(load_runs(runs, self.metric))
                if r.get(COST_COLUMNS[self.metric]) is not None]
        if len(rows) < 2:
            raise UsageError(f"PRE needs at least 2 measured runs with {COST_COLUMNS[self.metric]}, got {len(rows)}")
        self.features_ = _feature_names(rows)
        X = _design(rows, self.features_)
        mean = X.mean(0)
        scale = X.std(0)
        scale[scale <= 1e-12] = 1.0
        y = np.log([r[COST_COLUMNS[self.metric]] for r in rows])
        y_mean = float(y.mean())
        groups = [r["model"] for r in rows]
        est, params = _fit_variant(self.variant, (X - mean) / scale, y - y_mean, groups, self.random_state)
        self.x_mean_, self.x_scale_ = mean.tolist(), scale.tolist()
        self.params_ = {k: float(v) for k, v in params.items()}
        self.model_ = _export(self.variant, est, y_mean)
        self.n_runs_ = len(rows)
        self.models_ = sorted(set(groups))
        self.device_defaults_ = {f: rows[0][f] for f in DEVICE_FEATURES
                                 if f in self.features_ and len({r[f] for r in rows}) == 1}
        self.sklearn_ = est  # for checking the export against scikit-learn's own predict; not saved
        return self

    def predict_rows(self, rows):
        """Per-step costs of feature rows (dicts as ``features_of`` returns)."""
        import numpy as np

        self._check_fitted()
        clean = []
        for i, r in enumerate(rows):
            r = dict(r)
            for f, v in self.device_defaults_.items():
                if r.get(f) is None:
                    r[f] = v
            clean.append(_check_row(r, f"row {i}"))
        if not clean:
            return []
        X = _design(clean, self.features_)
        Xs = (X - np.asarray(self.x_mean_)) / np.asarray(self.x_scale_)
        with np.errstate(over="ignore"):
            return [float(v) for v in np.exp(_predict_log(self.model_, Xs))]

    def estimate(self, model, batch_size, input_shape=None, device=None, samples_per_epoch=None):
        self._check_fitted()
        row = features_of(model, batch_size, device, input_shape)
        unseen = sorted(k for k in row["kinds"] if KIND_PREFIX + k not in self.features_)
        (value,) = self.predict_rows([row])
        extra = {"model": row["model"], "batch_size": row["batch_size"], "variant": self.variant,
                 "train_flops": row["train_flops"]}
        if unseen:
            extra["warning"] = f"layer kinds never seen in training: {', '.join(unseen)} (ignored)"
        if samples_per_epoch is not None:
            if isinstance(samples_per_epoch, bool) or not isinstance(samples_per_epoch, numbers.Integral) \
                    or samples_per_epoch < 1:
                raise UsageError(f"samples_per_epoch must be an integer >= 1, got {samples_per_epoch!r}")
            steps = -(-int(samples_per_epoch) // row["batch_size"])
            extra.update(steps_per_epoch=steps, per_step=value)
            return self._result(value * steps, per="epoch", **extra)
        return self._result(value, **extra)

    # -- plain JSON ---------------------------------------------------------------------------------
    def to_dict(self):
        self._check_fitted()
        return {"format": FORMAT, "version": VERSION, "variant": self.variant, "metric": self.metric,
                "unit": UNITS[self.metric], "per": "step", "target": "log cost per step",
                "features": list(self.features_), "feature_transform": "log1p", "x_mean": list(self.x_mean_),
                "x_scale": list(self.x_scale_), "params": dict(self.params_), "model": self.model_,
                "device_defaults": dict(self.device_defaults_), "n_runs": self.n_runs_, "models": list(self.models_)}

    def save(self, path):
        from thor_sdk.store.files import write_text

        return write_text(path, json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", what="PRE model")

    @classmethod
    def from_dict(cls, doc, source="PRE model"):
        _validate(doc, source)
        self = cls(doc["variant"], doc["metric"])
        self.features_ = list(doc["features"])
        self.x_mean_, self.x_scale_ = list(doc["x_mean"]), list(doc["x_scale"])
        self.params_, self.model_ = dict(doc["params"]), dict(doc["model"])
        self.device_defaults_ = dict(doc.get("device_defaults") or {})
        self.n_runs_, self.models_ = doc["n_runs"], list(doc["models"])
        return self

    @classmethod
    def load(cls, path):
        from thor_sdk.store.files import read_json

        return cls.from_dict(read_json(path, "PRE model", max_bytes=MAX_FILE_BYTES), path)


def _validate(doc, source):
    """FormatError unless ``doc`` follows the schema and its arrays agree in length."""
    from thor_sdk.store.files import validate_schema

    validate_schema(doc, "pre-model.schema.json", source)
    n = len(doc["features"])
    m = doc["model"]
    if len(doc["x_mean"]) != n or len(doc["x_scale"]) != n:
        raise FormatError(f"{source}: x_mean and x_scale need one value per feature ({n})")
    if any(not s > 0 for s in doc["x_scale"]):
        raise FormatError(f"{source}: x_scale values must be > 0")
    if m["type"] == "linear" and len(m["coef"]) != n:
        raise FormatError(f"{source}: model.coef needs one value per feature ({n})")
    if m["type"] == "rbf" and (len(m["support"]) != len(m["dual_coef"]) or any(len(s) != n for s in m["support"])):
        raise FormatError(f"{source}: model.support needs one row of {n} features per dual coefficient")


def cross_validate(runs, variants=VARIANTS, metric="time", random_state=0):
    """Grouped CV of each variant: every model's runs predicted by a PRE fitted without that model.

    Returns ``{"scheme", "n_runs", "n_models", "variants": {variant: {"mape", "median_ape", "max_ape",
    "per_model": {model: mape}}}, "predictions": [{model, batch_size, measured, variant: predicted}]}``
    (errors in percent)."""
    import numpy as np
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    metric = check_metric(metric)
    col = COST_COLUMNS[metric]
    rows = [_check_row(r, f"run {i}", metric) for i, r in enumerate(load_runs(runs, metric))
            if r.get(col) is not None]
    groups = np.array([r["model"] for r in rows])
    n_models = len(set(groups))
    if n_models < 3:
        raise UsageError(f"grouped cross-validation needs runs of at least 3 models, got {n_models}")
    splitter = LeaveOneGroupOut() if n_models <= 50 else GroupKFold(n_splits=10)
    scheme = "leave one model out" if n_models <= 50 else "10-fold grouped by model"
    preds = {v: [None] * len(rows) for v in variants}
    for tr, te in splitter.split(rows, groups=groups):
        for v in variants:
            m = PreBaseline(v, metric, random_state).fit([rows[i] for i in tr])
            for i, p in zip(te, m.predict_rows([rows[i] for i in te])):
                preds[v][i] = p
    out = {"scheme": scheme, "n_runs": len(rows), "n_models": n_models, "metric": metric, "variants": {},
           "predictions": [{"model": r["model"], "batch_size": int(r["batch_size"]), "measured": r[col],
                            **{v: preds[v][i] for v in variants}} for i, r in enumerate(rows)]}
    for v in variants:
        ape = np.array([abs(p - r[col]) / r[col] * 100.0 for p, r in zip(preds[v], rows)])
        per_model = {g: float(ape[groups == g].mean()) for g in sorted(set(groups))}
        out["variants"][v] = {"mape": float(ape.mean()), "median_ape": float(np.median(ape)),
                              "max_ape": float(ape.max()), "per_model": per_model}
    return out
