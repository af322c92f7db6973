"""Load an estimator JSON and predict per-layer and whole-model costs with the Python standard library.

No numpy, no scikit-learn, no torch: this module (and ``thor_sdk.errors``) is all an app needs to
turn a layer list into a cost estimate. The math (``docs/estimator-format.md``) reproduces
scikit-learn's ``GaussianProcessRegressor.predict`` on the exported numbers:

- ``z = (ln(1 + x) - x_mean) / x_scale``, then ``u = z / length_scale`` (per feature);
- ``k_i = constant * matern52(|u - u_i|)`` against every stored training row ``u_i``;
- ``mu = y_scale * (k . alpha) + y_mean``; ``v = L^-1 k``;
  ``var = y_scale^2 * max(constant + noise_level - v . v, 0)`` (target space);
- ``"log"`` target: ``mean = exp(mu + var/2)``, ``std = mean * sqrt(exp(var) - 1)``;
  ``"linear"``: ``mean = mu``, ``std = sqrt(var)``.

Whole model: layers of different kinds are independent; layers of the same kind are jointly Gaussian
in target space with ``Cov(a, b) = y_scale^2 (k(a, b) - v_a . v_b)`` (white noise only on a layer's
own variance); a ``"log"`` target converts with ``Cov(a, b) = m_a m_b (exp(Cov_log(a, b)) - 1)``.
Identical layers are evaluated once and weighted by their count.
"""

import json
import math
import os
from math import dist, exp, expm1, fsum, log1p, sqrt
from operator import mul

from thor_sdk.errors import FormatError, NotFoundError, UsageError

ESTIMATOR_FORMAT = "thor-sdk/estimator"
ESTIMATOR_VERSION = 1
METRIC_UNITS = {"time": "s", "energy": "J"}
SQRT5 = math.sqrt(5.0)
_sumprod = getattr(math, "sumprod", None)  # Python >= 3.12: a C dot product (about 3x faster)
ROLE_CODES = {"input": 1.0, "hidden": 0.0}


# ----------------------------------------------------------------------------- validation helpers
def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _num(v, where, positive=False, nonneg=False):
    if not _is_num(v):
        raise FormatError(f"estimator: {where} must be a number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v):
        raise FormatError(f"estimator: {where} is not a finite number ({v})")
    if positive and v <= 0:
        raise FormatError(f"estimator: {where} must be > 0, got {v}")
    if nonneg and v < 0:
        raise FormatError(f"estimator: {where} must be >= 0, got {v}")
    return v


def _nums(v, where, length=None, positive=False):
    if not isinstance(v, list):
        raise FormatError(f"estimator: {where} must be an array, got {type(v).__name__}")
    if length is not None and len(v) != length:
        raise FormatError(f"estimator: {where} has {len(v)} numbers, expected {length}")
    return tuple(_num(x, f"{where}[{i}]", positive=positive) for i, x in enumerate(v))


def _field(d, key, where, typ=None):
    if key not in d:
        raise FormatError(f"estimator: {where} lacks field {key!r}")
    v = d[key]
    if typ is not None and not isinstance(v, typ):
        raise FormatError(f"estimator: {where}.{key} must be {typ.__name__ if isinstance(typ, type) else typ}, "
                          f"got {type(v).__name__}")
    return v


def _matern52(r):
    t = r * SQRT5
    return (1.0 + t + t * t / 3.0) * exp(-t)


# ----------------------------------------------------------------------------- one kind
class KindModel:
    """The exported GP of one layer kind, precomputed for fast prediction."""

    __slots__ = ("kind", "features", "index", "role_index", "is_log", "x_mean", "x_scale", "length_scale",
                 "constant", "noise", "jitter", "y_mean", "y_scale", "y_var_scale", "train_u", "alpha",
                 "L_rows", "L_diag", "L_inv", "L_inv_padded", "n_samples")

    def __init__(self, kind, d):
        where = f"kinds[{kind!r}]"
        if not isinstance(d, dict):
            raise FormatError(f"estimator: {where} must be an object")
        feats = _field(d, "features", where, list)
        if not feats or not all(isinstance(f, str) for f in feats) or len(set(feats)) != len(feats):
            raise FormatError(f"estimator: {where}.features must be a non-empty list of distinct names")
        nd = len(feats)
        if _field(d, "feature_transform", where) != "log1p":
            raise FormatError(f"estimator: {where}.feature_transform must be 'log1p', got {d['feature_transform']!r}")
        tt = _field(d, "target_transform", where)
        if tt not in ("log", "linear"):
            raise FormatError(f"estimator: {where}.target_transform must be 'log' or 'linear', got {tt!r}")
        k = _field(d, "kernel", where, dict)
        if _num(_field(k, "nu", f"{where}.kernel"), f"{where}.kernel.nu") != 2.5:
            raise FormatError(f"estimator: {where}.kernel.nu must be 2.5 (Matern 5/2), got {k['nu']}")
        x_train = _field(d, "x_train", where, list)
        n = len(x_train)
        if n < 1:
            raise FormatError(f"estimator: {where}.x_train is empty")
        n_samples = _field(d, "n_samples", where)
        if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples != n:
            raise FormatError(f"estimator: {where}.n_samples must be the number of x_train rows ({n}), "
                              f"got {n_samples!r}")
        self.kind = kind
        self.features = tuple(feats)
        self.index = {f: i for i, f in enumerate(feats)}
        self.role_index = self.index.get("role")
        self.is_log = tt == "log"
        self.x_mean = _nums(_field(d, "x_mean", where), f"{where}.x_mean", nd)
        self.x_scale = _nums(_field(d, "x_scale", where), f"{where}.x_scale", nd, positive=True)
        self.length_scale = _nums(_field(k, "length_scale", f"{where}.kernel"), f"{where}.kernel.length_scale",
                                  nd, positive=True)
        self.constant = _num(_field(k, "constant", f"{where}.kernel"), f"{where}.kernel.constant", positive=True)
        self.noise = _num(_field(k, "noise_level", f"{where}.kernel"), f"{where}.kernel.noise_level", nonneg=True)
        self.y_mean = _num(_field(d, "y_mean", where), f"{where}.y_mean")
        self.y_scale = _num(_field(d, "y_scale", where), f"{where}.y_scale", positive=True)
        self.y_var_scale = self.y_scale * self.y_scale
        ls = self.length_scale
        self.train_u = tuple(
            tuple(z / l for z, l in zip(_nums(row, f"{where}.x_train[{i}]", nd), ls)) for i, row in enumerate(x_train)
        )
        self.alpha = _nums(_field(d, "alpha", where), f"{where}.alpha", n)
        self.jitter = _num(_field(d, "jitter", where), f"{where}.jitter", nonneg=True)
        self.L_rows, self.L_diag = self._cholesky()
        self.L_inv = self._inverse_L()
        self.L_inv_padded = tuple(r + (0.0,) * (n - len(r)) for r in self.L_inv) if _sumprod else None
        self.n_samples = n

    def _cholesky(self):
        """Lower Cholesky factor of K = constant * Matern(train) + (noise + jitter) * I, as
        GaussianProcessRegressor.fit computes it: strictly-lower rows and the diagonal."""
        c, t = self.constant, self.train_u
        kdiag = c + self.noise
        kdiag += self.jitter
        tiny = 1e-13 * kdiag  # a pivot at rounding level means a singular matrix
        rows, diag = [], []
        for i, ti in enumerate(t):
            row = []
            for j in range(i):
                row.append((c * _matern52(dist(ti, t[j])) - fsum(map(mul, row, rows[j]))) / diag[j])
            d = kdiag - fsum(map(mul, row, row))
            if not d > tiny:
                raise FormatError(f"estimator: kinds[{self.kind!r}]: the kernel matrix of x_train is not positive "
                                  "definite (corrupt kernel or x_train)")
            rows.append(tuple(row))
            diag.append(sqrt(d))
        return tuple(rows), tuple(diag)

    def _inverse_L(self):
        """Rows of L^-1 (lower triangular; row i has i + 1 entries): v = L^-1 k is then one dot
        product per training point, with no dependency between them."""
        rows, diag = self.L_rows, self.L_diag
        inv = []
        for i in range(len(diag)):
            row = [0.0] * (i + 1)
            row[i] = 1.0 / diag[i]
            li = rows[i]
            for j in range(i):
                row[j] = -fsum(li[k] * inv[k][j] for k in range(j, i)) / diag[i]
            inv.append(tuple(row))
        return tuple(inv)

    # raw feature vector (list of floats in `features` order) -> standardised, length-scaled u
    def scaled(self, raw):
        return [((log1p(x) - m) / s) / l for x, m, s, l in zip(raw, self.x_mean, self.x_scale, self.length_scale)]

    def row(self, raw):
        """(mu, var, v, u) of one raw feature vector: target-space mean and (clipped) variance
        including the white noise, v = L^-1 k (normalised units) and the scaled input u."""
        u = self.scaled(raw)
        c = self.constant
        # c * Matern52(r), with t = sqrt(5) r, written out as scikit-learn evaluates it
        ks = [c * ((1.0 + t + t * t / 3.0) * exp(-t)) for t in [dist(u, tr) * SQRT5 for tr in self.train_u]]
        mu = self.y_scale * fsum(map(mul, ks, self.alpha)) + self.y_mean
        if _sumprod is not None:  # rows zero-padded to n: sumprod needs equal lengths
            v = [_sumprod(r, ks) for r in self.L_inv_padded]
        else:
            v = [sum(map(mul, r, ks)) for r in self.L_inv]
        var = c + self.noise - fsum(map(mul, v, v))
        if var < 0.0:
            var = 0.0
        return mu, var * self.y_var_scale, v, u

    def moments(self, mu, var):
        """Mean and std in original units of a target-space N(mu, var)."""
        if self.is_log:
            m = exp(mu + var / 2.0)
            return m, m * sqrt(expm1(var))
        return mu, sqrt(var)

    def vector(self, values, where):
        """Raw feature vector from a mapping of feature names to numbers (role may be a string)."""
        out = []
        for f in self.features:
            try:
                x = values[f]
            except KeyError:
                raise UsageError(f"{where}: kind {self.kind!r} needs feature {f!r} "
                                 f"(features: {', '.join(self.features)})") from None
            if f == "role" and isinstance(x, str):
                try:
                    x = ROLE_CODES[x]
                except KeyError:
                    raise UsageError(f"{where}: role must be 'input' or 'hidden' for kind {self.kind!r}, "
                                     f"got {x!r}") from None
            if not _is_num(x) or not (x > -1.0) or not math.isfinite(x):
                raise UsageError(f"{where}: feature {f!r} must be a finite number > -1, got {x!r}")
            out.append(float(x))
        return out


# ----------------------------------------------------------------------------- the estimator
class Estimator:
    """A loaded estimator: one GP per layer kind, for one device and one metric (time or energy)."""

    def __init__(self, doc):
        if not isinstance(doc, dict):
            raise FormatError("estimator: top level must be a JSON object")
        fmt = doc.get("format")
        if fmt != ESTIMATOR_FORMAT:
            raise FormatError(f"not a thor-sdk estimator: format is {fmt!r}, expected {ESTIMATOR_FORMAT!r}")
        version = doc.get("version")
        if version != ESTIMATOR_VERSION or isinstance(version, bool):
            raise FormatError(f"unsupported estimator version {version!r}; this thor-sdk reads version "
                              f"{ESTIMATOR_VERSION}")
        metric = _field(doc, "metric", "top level", str)
        if metric not in METRIC_UNITS:
            raise FormatError(f"estimator: metric must be 'time' or 'energy', got {metric!r}")
        unit = _field(doc, "unit", "top level", str)
        if unit != METRIC_UNITS[metric]:
            raise FormatError(f"estimator: unit of metric {metric!r} must be {METRIC_UNITS[metric]!r}, got {unit!r}")
        self.device = dict(_field(doc, "device", "top level", dict))
        self.flops_baseline = dict(_field(doc, "flops_baseline", "top level", dict))
        _num(_field(self.flops_baseline, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop")
        self.provenance = dict(doc.get("provenance") or {})
        self.created_utc = doc.get("created_utc")
        self.producer = doc.get("producer")
        kinds = _field(doc, "kinds", "top level", dict)
        if not kinds:
            raise FormatError("estimator: kinds is empty")
        self.metric = metric
        self.unit = unit
        self._models = {str(name): KindModel(str(name), d) for name, d in kinds.items()}
        self.doc = doc

    @property
    def kinds(self):
        """``{kind: [feature names]}`` of every kind this estimator has a GP for."""
        return {k: list(m.features) for k, m in self._models.items()}

    def _model(self, kind):
        try:
            return self._models[kind]
        except (KeyError, TypeError):
            raise NotFoundError(f"estimator has no GP for kind {kind!r}; probe it on this device") from None

    def predict_layer(self, kind, features):
        """(mean, std) of one layer's cost in ``self.unit``; ``features`` maps the kind's feature
        names (config features, ``batch_size``, ``role`` as 'input'/'hidden' or 1/0) to numbers."""
        model = self._model(kind)
        if not isinstance(features, dict):
            raise UsageError("features must be a dict of feature name -> number")
        mu, var, _, _ = model.row(model.vector(features, f"layer of kind {kind!r}"))
        return model.moments(mu, var)

    def estimate(self, layers, batch_size):
        """Per-layer and whole-model cost of one training step at ``batch_size``.

        ``layers``: ``[{"name", "kind", "role", "config"}]`` (``thor_sdk.layers.layers_of(...).layers``).
        Returns ``{"metric", "unit", "batch_size", "total": {"mean", "std"}, "layers": [...]}``.
        """
        if not _is_num(batch_size) or batch_size < 1 or batch_size != int(batch_size):
            raise UsageError(f"batch size must be a positive integer, got {batch_size!r}")
        batch_size = int(batch_size)
        groups = {}  # kind -> {raw feature tuple: count}
        keys = []
        for i, layer in enumerate(layers):
            try:
                kind, config = layer["kind"], layer["config"]
            except (KeyError, TypeError):
                raise UsageError(f"layer {i} must be a dict with 'kind' and 'config'") from None
            model = self._model(kind)
            if not isinstance(config, dict):
                raise UsageError(f"layer {i} ({kind}): config must be a dict")
            values = dict(config)
            values["batch_size"] = batch_size
            if model.role_index is not None:
                role = layer.get("role")
                if role not in ROLE_CODES:
                    raise UsageError(f"layer {i} ({kind}): role must be 'input' or 'hidden', got {role!r}")
                values["role"] = ROLE_CODES[role]
            key = tuple(model.vector(values, f"layer {i} ({layer.get('name', i)})"))
            g = groups.get(kind)
            if g is None:
                g = groups[kind] = {}
            g[key] = g.get(key, 0) + 1
            keys.append(key)

        results = {}  # (kind, key) -> (mean, std)
        total_mean = 0.0
        total_var = []
        for kind, counts in groups.items():
            model = self._models[kind]
            rows = []
            for key, cnt in counts.items():
                mu, var, v, u = model.row(key)
                m, s = model.moments(mu, var)
                results[(kind, key)] = (m, s)
                rows.append((cnt, mu, var, v, u, m))
                total_mean += cnt * m
            total_var.append(self._group_var(model, rows))

        out_layers = []
        for layer, key in zip(layers, keys):
            m, s = results[(layer["kind"], key)]
            out_layers.append({"name": layer.get("name"), "kind": layer["kind"], "role": layer.get("role"),
                               "config": layer["config"], "mean": m, "std": s})
        var = fsum(total_var)
        return {"metric": self.metric, "unit": self.unit, "batch_size": batch_size,
                "total": {"mean": total_mean, "std": sqrt(var) if var > 0.0 else 0.0},
                "layers": out_layers}

    @staticmethod
    def _group_var(model, rows):
        """Variance (original units) of the summed cost of all layers of one kind."""
        c, ys2, is_log = model.constant, model.y_var_scale, model.is_log
        parts = []
        add = parts.append
        n = len(rows)
        for a in range(n):
            ca, _, vara, va, ua, ma = rows[a]
            # the layer with itself (includes the white noise) and with its (ca - 1) identical
            # twins: k(a, a') = constant, no noise
            twin = ys2 * (c - fsum(map(mul, va, va))) if ca > 1 else 0.0
            if is_log:
                mm = ma * ma
                add(ca * mm * expm1(vara))
                if ca > 1:
                    add(ca * (ca - 1) * mm * expm1(twin))
                for b in range(a + 1, n):
                    cb, _, _, vb, ub, mb = rows[b]
                    t = dist(ua, ub) * SQRT5
                    vv = _sumprod(va, vb) if _sumprod is not None else sum(map(mul, va, vb))
                    cov = ys2 * (c * ((1.0 + t + t * t / 3.0) * exp(-t)) - vv)
                    add(2.0 * ca * cb * ma * mb * expm1(cov))
            else:
                add(ca * vara)
                if ca > 1:
                    add(ca * (ca - 1) * twin)
                for b in range(a + 1, n):
                    cb, _, _, vb, ub, _ = rows[b]
                    t = dist(ua, ub) * SQRT5
                    vv = _sumprod(va, vb) if _sumprod is not None else sum(map(mul, va, vb))
                    add(2.0 * ca * cb * ys2 * (c * ((1.0 + t + t * t / 3.0) * exp(-t)) - vv))
        return fsum(parts)


def _reject_constant(name):
    raise FormatError(f"estimator JSON contains {name}, which is not a finite number")


def load_estimator(path_or_dict):
    """An ``Estimator`` from a JSON file path or an already-parsed dict; FormatError if it is corrupt."""
    if isinstance(path_or_dict, dict):
        return Estimator(path_or_dict)
    path = os.fspath(path_or_dict)
    if not os.path.isfile(path):
        raise NotFoundError(f"no such estimator file: {path}")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_constant=_reject_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"{path} is not valid JSON: {e}") from None
    except RecursionError:
        raise FormatError(f"{path} is nested too deeply to be an estimator") from None
    return Estimator(doc)
