"""Load an estimator JSON (versions 2-5) and predict per-layer and whole-model costs with the Python standard library.

No numpy, no scikit-learn, no torch: this module, ``thor_sdk.runtime.terms``, the plain-data
``thor_sdk.layers.kinds`` and the strict reader ``thor_sdk.store.files`` are all an app needs. Loading
does no matrix factorisation: the file carries the sparse GP's factors. Math (``docs/estimator-format.md``), per layer with raw features ``x`` and cost
terms ``F`` (training FLOPs), ``B`` (bytes moved) at the batch size:

- ``z = (ln(1 + x) - x_mean) / x_scale``, ``u = z / length_scale``; likewise ``t_i`` for the inducing rows
  (held pre-multiplied by sqrt(5) after loading, with the constant folded into ``alpha`` and ``W``: same math);
- ``k_i = constant * matern52(|u - t_i|)``; ``mu = residual_offset + k . alpha``; ``v = W k``;
  ``var = max(constant + noise_level - v . v, 1e-12)`` (ln units);
- ``m = overhead * L + per_flop * F + per_byte * B`` (``L``: sequential launches, 1 but for recurrent
  kinds, and a quarter for a forward-only convolution or dense layer in version 5, ``thor_sdk.runtime.terms``), or
  where the entry has ``per_step_byte`` (version 3) ``... + per_byte * (B - S) + per_step_byte * S``
  with ``S`` the bytes moved once per step (``bytes_fixed``), plus ``per_call`` where the entry has it (version 4:
  a recurrent kind's cost paid once per layer call, apart from its per-launch overhead); ``mean = m exp(mu + var/2)``,
  ``std = mean sqrt(exp(var) - 1)``.

A layer is costed by its kind's entry, or by its structural variant's (``conv2d:grouped`` for a
depthwise convolution, ``conv2d:gemm`` for one PyTorch runs off oneDNN at that batch size,
``thor_sdk.layers.kinds.model_key``) where the estimator has one.
Whole model: layers of different entries are independent; two distinct layers ``a``, ``b`` of one entry
have ``Cov_ln(a, b) = constant * matern52(|u_a - u_b|) - v_a . v_b`` (identical layers: ``constant - v . v``,
no white noise), converted with ``Cov(a, b) = mean_a mean_b (exp(Cov_ln) - 1)``; then the whole-model
term ``(whole_model.rel_std * total)^2`` (composition and drift error measured on whole models) is added.
Device level (optional): the profile's reference probe measured again, ``level = median(readings) /
whole_model.reference.median_value`` (``device_level``); every mean and std times it, and the total's variance
gains ``(total x level x log_std)^2`` (``at_level``).
"""

import math
from itertools import repeat
from math import ceil, dist, exp, expm1, fsum, hypot, log, log1p, sqrt
from operator import le, mul, sub

from thor_sdk.errors import FormatError, NotFoundError, NotOurFileError, UsageError
from thor_sdk.layers.kinds import DEFAULT_FEATURES, entry_key, padded_value, parse_padded

from .terms import at_batch, at_least_one_launch, cost_terms, layer_terms

ESTIMATOR_FORMAT = "thor-sdk/estimator"
ESTIMATOR_VERSION = 5
#: versions this reader reads: 2 is 3 without ``per_step_byte`` (every byte at ``per_byte``); 3 is 4 without
#: ``per_call``; 4 is 5 with every layer counted at least one launch (5's kinds were fitted with a forward-only
#: convolution or dense layer at a share of one: ``terms.FORWARD_ONLY_SHARED``). A writer marks every file 5
READ_VERSIONS = (2, 3, 4, 5)
METRIC_UNITS = {"time": "s", "energy": "J"}  # the one metric -> unit map: the rest of thor_sdk imports it from here
SQRT5 = math.sqrt(5.0)
ROLE_CODES = {"input": 1.0, "hidden": 0.0}
DERIVED = ("train_flops", "train_bytes")  # inputs taken from the layer's cost terms, not its config
#: a residual beyond e^60 or a variance beyond 25 (ln units) is not a cost model but a corrupt file (the
#: variance is checked on load; the residual where it is computed, since |k_i| <= constant bounds it)
MAX_LOG_RESIDUAL = 60.0
MAX_LOG_VAR = 25.0
#: rows read per kind: inducing points (the fit keeps at most 256) and rows of the variance factor
#: (its rank: at most 8); loading and predicting are linear in their product, so these bound both
MAX_INDUCING = 512
MAX_VAR_ROWS = 64
#: kinds read from one estimator, and numbers in all their inducing, alpha and var_factor arrays
#: together (a 35-kind device profile holds about 150,000; loading 1,000,000 takes about half a second)
MAX_KINDS = 256
MAX_MODEL_NUMBERS = 1_000_000
#: layers estimated at once: the whole-model variance sums covariances over pairs of distinct layers of
#: one kind (quadratic: 2,000 distinct layers of one kind take about 1.4 s here)
MAX_LAYERS = 4096
VAR_FLOOR = 1e-12
#: ``a . k`` as ``(|a|^2 + |k|^2 - dist(a, k)^2) / 2`` (``KindModel.row``): math.dist runs its sum in C, 2-4x
#: faster than ``sum(map(mul, a, k))`` before Python 3.12, with an absolute error of a few ulps of
#: ``|a|^2 + |k|^2`` (``|k|^2 <= m <= 512``). Taken where ``|a|^2`` is at most these: alpha (the ln mean,
#: error below about 1e-11) and each row of the variance factor (error below about 1e-12 in a v whose square
#: is subtracted from the variance); the kernel constant is folded into both. Fitted files hold about 0.1-100
#: and 0.01-1
DIST_DOT_MAX_NORM2_MEAN = 1e4
DIST_DOT_MAX_NORM2_VAR = 64.0
RANGE_TOLERANCE = 1e-6  # relative slack when a layer's input is compared with the samples' stored range
UNKNOWN = ("error", "approx")
PLAIN_NUMBER = frozenset((int, float))  # types ``KindModel.vector`` reads at C speed (bool is not one of them)
#: relative std of a layer the estimator has no model for, estimated from its FLOPs and bytes (approx); over
#: the layers of one such kind these stds add up linearly in the total (one kind, one error)
APPROX_MISSING_REL_STD = 1.0
#: relative std added to a layer marked ``approx`` by the layer extraction (a stand-in for an operator
#: without a kind of its own, or the generic ``elementwise`` kind): its operator may cost more or less than
#: the probes of its kind. The added std of the layers of one operator type (one ``op``) adds up linearly:
#: the operator's implementation differs from its stand-in the same way wherever the net uses it (the parts
#: of one nn.MultiheadAttention, or every ``x / y``), so their errors are one error, not independent ones
APPROX_OP_REL_STD = 0.5
#: a device level (the reference probe now over its median during the profile) outside this range is not the
#: profiled device in another state but another device, or readings in another unit: refused
LEVEL_RANGE = (0.02, 50.0)
#: the largest ln-std a level may carry, and the most reference readings one level is computed from
MAX_LEVEL_LOG_STD = 5.0
MAX_LEVEL_READINGS = 10_000
#: the least ln-std of the device's level a profile's own drift is taken to allow for (a quiet profile's
#: drift can be 1-2%), and the normal quantile of its two-sided 95% band
MIN_DRIFT_LOG_STD = 0.025
Z95 = 1.959964


# ----------------------------------------------------------------------------- validation helpers
#: the largest integer every float between it and zero holds exactly (2**53)
EXACT_INT = 2 ** 53


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _finite_float(v):
    """A number as a finite float, or None (infinite, NaN, or an integer too large for a float)."""
    try:
        v = float(v)
    except OverflowError:
        return None
    return v if math.isfinite(v) else None


def _num(v, where, positive=False, nonneg=False):
    if not _is_num(v):
        raise FormatError(f"estimator: {where} must be a number, got {type(v).__name__}")
    try:
        v = float(v)
    except OverflowError:
        raise FormatError(f"estimator: {where} is too large for a float") from None
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


def _rows(v, where, ncols, max_rows):
    if not isinstance(v, list) or not v:
        raise FormatError(f"estimator: {where} must be a non-empty array of rows")
    if len(v) > max_rows:
        raise FormatError(f"estimator: {where} has {len(v)} rows; at most {max_rows} are read "
                          "(docs/estimator-format.md)")
    return tuple(_nums(r, f"{where}[{i}]", ncols) for i, r in enumerate(v))


def _field(d, key, where, typ=None):
    if key not in d:
        raise FormatError(f"estimator: {where} lacks field {key!r}")
    v = d[key]
    if typ is not None and not isinstance(v, typ):
        raise FormatError(f"estimator: {where}.{key} must be {typ.__name__ if isinstance(typ, type) else typ}, "
                          f"got {type(v).__name__}")
    return v


# ----------------------------------------------------------------------------- one kind
def _unread_feature(layer, model):
    """Why a layer is estimated approximately by a model fitted before one of its kind's defaulted features existed
    (``DEFAULT_FEATURES``: a conv's dilation, a layer's ``frozen``), where the layer sets it to another value than
    its default; else None. Such a model reads the layer as its twin at the default (an undilated conv of the same
    output, a trained layer) through the layer's own FLOPs and bytes (a dilated conv's are its twin's, a frozen
    layer's lack the weight gradient and update), so the layer is marked approx and its std widened, as a
    stand-in's."""
    defaults = DEFAULT_FEATURES.get(layer["kind"])
    config = layer.get("config")
    if not defaults or not isinstance(config, dict) or model.index.keys() >= defaults.keys():
        return None  # no defaulted feature, or the model reads every one
    off = [f"{f} {config[f]:g}" for f, d in defaults.items()
           if f not in model.index and _is_num(config.get(f)) and config[f] != d]
    if not off:
        return None
    return (f"the estimator's {layer['kind']} model predates its feature(s) {', '.join(off)}: estimated as the same "
            f"layer at {', '.join(f'{f} {d:g}' for f, d in defaults.items())} (through its own FLOPs and bytes); "
            "refit the campaign with this thor-sdk, or profile such layers, for their own cost")


def _defaults(d, given, where):
    """An entry's optional ``defaults`` (``{feature: number}``): features a layer may leave out, each one the caller
    gives (not derived, not padded), its value a finite number >= 0. ``{}`` when the entry has none."""
    if d is None:
        return {}
    if not isinstance(d, dict) or len(d) > len(given):
        raise FormatError(f"estimator: {where}.defaults must be an object of feature -> number")
    for f, v in d.items():
        if f not in given or f in ("batch_size", "role"):
            raise FormatError(f"estimator: {where}.defaults names {f!r}, not a config feature a layer gives "
                              f"({', '.join(given)})")
        if not _is_num(v) or not 0 <= v < math.inf:
            raise FormatError(f"estimator: {where}.defaults[{f!r}] must be a finite number >= 0, got {v!r}")
    return dict(d)


class KindModel:
    """The exported cost model of one layer kind."""

    __slots__ = ("kind", "features", "index", "role_index", "x_mean", "x_scale", "length_scale", "overhead",
                 "per_flop", "per_byte", "per_step_byte", "per_call", "offset", "constant", "noise", "u_scale", "inducing_u",
                 "alpha_c", "W_c",
                 "alpha_norm2", "W_norm2", "alpha_by_dist", "W_by_dist", "n_samples", "feature_range",
                 "range_low", "range_high", "padded", "source", "padded_at", "given", "defaults",
                 "source_defaults")

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
        mf = _field(d, "mean_function", where, dict)
        self.overhead = _num(_field(mf, "overhead", f"{where}.mean_function"), f"{where}.mean_function.overhead",
                             positive=True)
        self.per_flop = _num(_field(mf, "per_flop", f"{where}.mean_function"), f"{where}.mean_function.per_flop",
                             nonneg=True)
        self.per_byte = _num(_field(mf, "per_byte", f"{where}.mean_function"), f"{where}.mean_function.per_byte",
                             nonneg=True)
        # optional (version 3): the bytes moved once per step at a rate of their own; None: at per_byte
        self.per_step_byte = (None if mf.get("per_step_byte") is None else
                              _num(mf["per_step_byte"], f"{where}.mean_function.per_step_byte", nonneg=True))
        # optional (version 4): paid once per layer call (a recurrent layer's fixed cost); 0 where absent
        self.per_call = (0.0 if mf.get("per_call") is None else
                         _num(mf["per_call"], f"{where}.mean_function.per_call", nonneg=True))
        k = _field(d, "kernel", where, dict)
        if _num(_field(k, "nu", f"{where}.kernel"), f"{where}.kernel.nu") != 2.5:
            raise FormatError(f"estimator: {where}.kernel.nu must be 2.5 (Matern 5/2), got {k['nu']}")
        self.kind = kind
        self.features = tuple(feats)
        # per feature, (base, block) where it is padded from another (None else), and the features a caller
        # gives: all but those derived from cost terms or padded (as their base), in order, each once
        self.padded = tuple(parse_padded(f) for f in feats)
        self.source = tuple(p[0] if p else f for f, p in zip(feats, self.padded))  # the name each is read from
        self.padded_at = tuple((i, p[1]) for i, p in enumerate(self.padded) if p)
        given = []
        for f, p in zip(feats, self.padded):
            g = p[0] if p else f
            if g not in DERIVED and g not in given:
                given.append(g)
        self.given = tuple(given)
        self.defaults = _defaults(d.get("defaults"), given, where)
        self.source_defaults = tuple(self.defaults.get(f) for f in self.source)  # what vector reads where one is absent
        self.index = {f: i for i, f in enumerate(feats)}
        self.role_index = self.index.get("role")
        self.x_mean = _nums(_field(d, "x_mean", where), f"{where}.x_mean", nd)
        self.x_scale = _nums(_field(d, "x_scale", where), f"{where}.x_scale", nd, positive=True)
        self.length_scale = _nums(_field(k, "length_scale", f"{where}.kernel"), f"{where}.kernel.length_scale",
                                  nd, positive=True)
        self.constant = _num(_field(k, "constant", f"{where}.kernel"), f"{where}.kernel.constant", positive=True)
        self.noise = _num(_field(k, "noise_level", f"{where}.kernel"), f"{where}.kernel.noise_level", nonneg=True)
        self.offset = _num(_field(d, "residual_offset", where), f"{where}.residual_offset")
        ls = self.length_scale
        if min(ls) < 1e-6:
            raise FormatError(f"estimator: {where}.kernel.length_scale below 1e-6 is not a usable kernel")
        inducing = _rows(_field(d, "inducing", where), f"{where}.inducing", nd, MAX_INDUCING)
        m = len(inducing)
        # stored pre-scaled for speed (same math): inputs and inducing rows in units of length_scale / sqrt(5),
        # so |u - t_i| is the Matern argument itself; alpha and W carry the kernel constant
        self.u_scale = tuple(SQRT5 / (s * l) for s, l in zip(self.x_scale, ls))
        self.inducing_u = tuple(tuple(z * SQRT5 / l for z, l in zip(row, ls)) for row in inducing)
        c = self.constant
        self.alpha_c = tuple(a * c for a in _nums(_field(d, "alpha", where), f"{where}.alpha", m))
        self.W_c = tuple(tuple(w * c for w in row)
                         for row in _rows(_field(d, "var_factor", where), f"{where}.var_factor", m, MAX_VAR_ROWS))
        # alpha . k and each row of W k from math.dist where their norms are small enough for its rounding
        # (DIST_DOT_MAX_NORM2_*), the direct sums otherwise
        self.alpha_norm2 = fsum(a * a for a in self.alpha_c)
        self.W_norm2 = tuple(fsum(w * w for w in row) for row in self.W_c)
        self.alpha_by_dist = self.alpha_norm2 <= DIST_DOT_MAX_NORM2_MEAN
        self.W_by_dist = max(self.W_norm2) <= DIST_DOT_MAX_NORM2_VAR
        n_samples = _field(d, "n_samples", where)
        if not isinstance(n_samples, int) or isinstance(n_samples, bool) or n_samples < 1:
            raise FormatError(f"estimator: {where}.n_samples must be a positive integer, got {n_samples!r}")
        self.n_samples = n_samples
        self.feature_range = None  # optional: (lo, hi) of each raw input over the samples
        if d.get("feature_range") is not None:
            fr = _rows(d["feature_range"], f"{where}.feature_range", 2, nd)
            if len(fr) != nd or any(not lo <= hi for lo, hi in fr):
                raise FormatError(f"estimator: {where}.feature_range must hold one [low, high] pair (low <= high) "
                                  f"per feature ({nd})")
            self.feature_range = fr
        # the stored range is rounded to 8 digits: a value within RANGE_TOLERANCE of its ends is inside
        self.range_low = self.range_high = None
        if self.feature_range is not None:
            slack = [RANGE_TOLERANCE * max(abs(lo), abs(hi), 1.0) for lo, hi in self.feature_range]
            self.range_low = tuple(lo - e for (lo, _), e in zip(self.feature_range, slack))
            self.range_high = tuple(hi + e for (_, hi), e in zip(self.feature_range, slack))
        if abs(self.offset) > MAX_LOG_RESIDUAL:
            raise FormatError(f"estimator: {where}: |residual_offset| above {MAX_LOG_RESIDUAL:g} is not a cost model")
        if self.constant + self.noise > MAX_LOG_VAR:
            raise FormatError(f"estimator: {where}: kernel constant + noise_level exceeds {MAX_LOG_VAR:g} (ln units)")

    def row(self, raw, flops, nbytes, launches=1.0, step_bytes=0.0):
        """(ln mean, ln variance incl. white noise, v = W k, scaled input u) of one layer; ``step_bytes``: of
        ``nbytes``, those moved once per step (``at_batch``'s last)."""
        # tuples, not lists: math.dist copies a list argument into a tuple on every call (3.11)
        u = tuple(map(mul, map(sub, map(log1p, raw), self.x_mean), self.u_scale))  # (ln(1 + x) - x_mean) * u_scale
        ks = tuple([(1.0 + t + t * t / 3.0) * exp(-t) for t in map(dist, repeat(u), self.inducing_u)])  # k_i / c
        h = hypot(*ks)
        kk = h * h  # |k|^2 <= m, as each k_i <= 1
        if self.alpha_by_dist:  # a . k = (|a|^2 + |k|^2 - dist(a, k)^2) / 2: the sums run in C
            mu = self.offset + 0.5 * ((self.alpha_norm2 + kk) - dist(self.alpha_c, ks) ** 2)
        else:
            try:
                mu = self.offset + sum(map(mul, ks, self.alpha_c))
            except OverflowError:
                mu = math.inf
        if not abs(mu) <= MAX_LOG_RESIDUAL:  # |k_i| <= constant: only a corrupt alpha gets here
            raise FormatError(f"estimator: kinds[{self.kind!r}]: the residual model gives e^{mu:.3g} for this layer; "
                              "the file is corrupt")
        if self.W_by_dist:
            v = [0.5 * ((n + kk) - d * d) for n, d in zip(self.W_norm2, map(dist, self.W_c, repeat(ks)))]
        else:
            v = [sum(map(mul, w, ks)) for w in self.W_c]
        var = self.constant + self.noise - fsum(map(mul, v, v))
        if var < VAR_FLOOR:
            var = VAR_FLOOR
        if self.per_step_byte is None:
            m = self.per_call + self.overhead * launches + self.per_flop * flops + self.per_byte * nbytes
        else:
            m = (self.per_call + self.overhead * launches + self.per_flop * flops + self.per_byte * (nbytes - step_bytes)
                 + self.per_step_byte * step_bytes)
        if not (m > 0.0 and math.isfinite(m)):
            raise UsageError(f"kind {self.kind!r}: the mean function is not finite for these layer terms "
                             f"(flops {flops:g}, bytes {nbytes:g})")
        return log(m) + mu, var, v, u

    @staticmethod
    def moments(lmu, var):
        """Mean and std in the metric's unit of a lognormal with ln-mean ``lmu`` and ln-variance ``var``."""
        try:
            m = exp(lmu + var / 2.0)
        except OverflowError:
            raise UsageError("the estimate is too large to represent (far outside what the estimator covers)") from None
        return m, m * sqrt(expm1(var))

    def outside(self, raw):
        """``[(feature, value, low, high)]`` for each raw input outside the range the samples covered (none
        without ``feature_range``): there the estimate extrapolates."""
        if self.feature_range is None or (all(map(le, self.range_low, raw)) and all(map(le, raw, self.range_high))):
            return []  # the common case, at C speed
        return [(f, x, lo, hi) for f, x, a, b, (lo, hi) in
                zip(self.features, raw, self.range_low, self.range_high, self.feature_range) if x < a or x > b]

    def vector(self, values, where):
        """Raw feature vector from a mapping of feature names to numbers (role may be a string); a feature the
        mapping leaves out reads as its default (``defaults``) where the entry has one."""
        # the common case at C speed: every input an int or a float, finite, > -1 (a padded one's base >= 1);
        # anything else is read one input at a time with every check spelled out (_value)
        xs = list(map(values.get, self.source, self.source_defaults))
        try:
            out = list(map(float, xs)) if all(map(PLAIN_NUMBER.__contains__, map(type, xs))) else None
        except OverflowError:  # an int too large for a float
            out = None
        # no inf or NaN (their sum is not finite), every input > -1, a padded one's base >= 1
        if out is not None and (total := sum(out)) - total == 0.0 and min(out) > -1.0:
            for i, block in self.padded_at:
                x = out[i]
                if not x >= 1.0:
                    break  # refused below, with its reason
                out[i] = ceil(x / block) * block / x  # padded_value(x, block), its checks made above
            else:
                return out
        if self.defaults and not self.defaults.keys() <= values.keys():
            values = {**self.defaults, **values}
        return [self._value(f, padded, values, where) for f, padded in zip(self.features, self.padded)]

    def _value(self, f, padded, values, where):
        """One raw input, every check spelled out (what ``vector`` falls back to)."""
        try:
            x = values[padded[0] if padded else f]
        except KeyError:
            raise UsageError(f"{where}: kind {self.kind!r} needs feature {padded[0] if padded else f!r} "
                             f"(features: {', '.join(self.given)})") from None
        if padded:  # derived from its base feature, never read from the values (docs/estimator-format.md)
            if not _is_num(x) or not (x >= 1) or not math.isfinite(x):
                raise UsageError(f"{where}: feature {padded[0]!r} must be a finite number >= 1 "
                                 f"(it gives {f!r}), got {x!r}")
            x = padded_value(x, padded[1])
        if f == "role" and isinstance(x, str):
            try:
                x = ROLE_CODES[x]
            except KeyError:
                raise UsageError(f"{where}: role must be 'input' or 'hidden' for kind {self.kind!r}, "
                                 f"got {x!r}") from None
        if not _is_num(x):
            raise UsageError(f"{where}: feature {f!r} must be a number, got {x!r}")
        v = _finite_float(x)
        if v is None or not v > -1.0:
            raise UsageError(f"{where}: feature {f!r} must be a finite number > -1 (a float), got {x!r}")
        return v


# ----------------------------------------------------------------------------- the estimator
class Estimator:
    """A loaded estimator: one cost model per layer kind, for one device, runtime and metric."""

    def __init__(self, doc):
        if not isinstance(doc, dict):
            raise FormatError("estimator: top level must be a JSON object")
        fmt = doc.get("format")
        if fmt != ESTIMATOR_FORMAT:
            raise NotOurFileError(f"not a thor-sdk estimator: format is {fmt!r}, expected {ESTIMATOR_FORMAT!r}")
        version = doc.get("version")
        if version not in READ_VERSIONS or isinstance(version, bool):
            hint = " (version 1 files predate device profiles: refit the campaign with `thor-sdk fit`)" \
                if version == 1 else ""
            raise FormatError(f"unsupported estimator version {version!r}; this thor-sdk reads versions "
                              f"{', '.join(map(str, READ_VERSIONS))}{hint}")
        #: the file's version: one before 5 counts every layer at least one launch (``terms.at_least_one_launch``)
        self.version = version
        metric = _field(doc, "metric", "top level", str)
        if metric not in METRIC_UNITS:
            raise FormatError(f"estimator: metric must be 'time' or 'energy', got {metric!r}")
        unit = _field(doc, "unit", "top level", str)
        if unit != METRIC_UNITS[metric]:
            raise FormatError(f"estimator: unit of metric {metric!r} must be {METRIC_UNITS[metric]!r}, got {unit!r}")
        self.device = dict(_field(doc, "device", "top level", dict))
        self.runtime = _field(doc, "runtime", "top level", str)
        self.flops_baseline = dict(_field(doc, "flops_baseline", "top level", dict))
        _num(_field(self.flops_baseline, "unit_per_flop", "flops_baseline"), "flops_baseline.unit_per_flop")
        wm = doc.get("whole_model") or {}
        if not isinstance(wm, dict):
            raise FormatError("estimator: whole_model must be an object")
        self.whole_model_rel_std = _num(wm.get("rel_std", 0.0), "whole_model.rel_std", nonneg=True)
        if self.whole_model_rel_std > 10:
            raise FormatError("estimator: whole_model.rel_std above 10 is not a calibration")
        self.whole_model_log_bias = _num(wm.get("log_bias", 0.0), "whole_model.log_bias")
        if abs(self.whole_model_log_bias) > 5:
            raise FormatError("estimator: whole_model.log_bias beyond +-5 is not a calibration")
        kb = wm.get("kind_log_bias") or {}
        if not isinstance(kb, dict):
            raise FormatError("estimator: whole_model.kind_log_bias must be an object {kind: ln bias}")
        self.whole_model_kind_log_bias = {}
        for k, v in kb.items():
            b = _num(v, f"whole_model.kind_log_bias[{k!r}]")
            if abs(b) > 5:
                raise FormatError(f"estimator: whole_model.kind_log_bias[{k!r}] beyond +-5 is not a calibration")
            self.whole_model_kind_log_bias[str(k)] = b
        drift = wm.get("drift_log_std")
        self.drift_log_std = 0.0 if drift is None else _num(drift, "whole_model.drift_log_std", nonneg=True)
        if self.drift_log_std > MAX_LEVEL_LOG_STD:
            raise FormatError(f"estimator: whole_model.drift_log_std above {MAX_LEVEL_LOG_STD} is not a drift")
        ref = wm.get("reference")
        if ref is not None:
            if not isinstance(ref, dict):
                raise FormatError("estimator: whole_model.reference must be an object")
            _num(_field(ref, "median_value", "whole_model.reference"), "whole_model.reference.median_value",
                 positive=True)
            _field(ref, "probe", "whole_model.reference", dict)
        self.reference = dict(ref) if ref is not None else None
        canary = wm.get("canary")
        if canary is not None:  # validated where present; read by thor-sdk evaluate only (truth at this level)
            if not isinstance(canary, dict):
                raise FormatError("estimator: whole_model.canary must be an object")
            _num(_field(canary, "canary_s", "whole_model.canary"), "whole_model.canary.canary_s", positive=True)
            v = _field(canary, "version", "whole_model.canary")
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise FormatError("estimator: whole_model.canary.version must be a positive integer")
        #: the machine speed the estimates describe as the host's canary reads it ({"canary_s", "version"}), or None
        self.canary = dict(canary) if canary is not None else None
        self.provenance = dict(doc.get("provenance") or {})
        self.created_utc = doc.get("created_utc")
        self.producer = doc.get("producer")
        kinds = _field(doc, "kinds", "top level", dict)
        if not kinds:
            raise FormatError("estimator: kinds is empty")
        if len(kinds) > MAX_KINDS:
            raise FormatError(f"estimator: {len(kinds)} kinds; at most {MAX_KINDS} are read")
        n = _model_numbers(kinds)
        if n > MAX_MODEL_NUMBERS:
            raise FormatError(f"estimator: its kinds hold {n} numbers in inducing, alpha and var_factor; at most "
                              f"{MAX_MODEL_NUMBERS} are read (docs/estimator-format.md)")
        self.metric = metric
        self.unit = unit
        self._models = {str(name): KindModel(str(name), d) for name, d in kinds.items()}
        self.doc = doc

    @property
    def kinds(self):
        """``{kind: [feature names]}`` of every kind this estimator has a model for."""
        return {k: list(m.features) for k, m in self._models.items()}

    def log_bias_of(self, key):
        """The calibration's ln bias folded into the entry ``key`` (a kind, or a structural variant): its own from
        ``whole_model.kind_log_bias``, else ``whole_model.log_bias``. A layer alone, as its probe measures it,
        costs about its estimate times ``exp(-log_bias_of(key))``."""
        return self.whole_model_kind_log_bias.get(key, self.whole_model_log_bias)

    def require_reference(self):
        """``whole_model.reference`` (the profile's reference probe and its median); NotFoundError for an
        estimator without one (fitted from ``--samples``, or a campaign that never measured it)."""
        if self.reference is None:
            raise NotFoundError("this estimator has no reference probe (whole_model.reference): it was fitted "
                                "from samples or a campaign that never measured one, so its level cannot be "
                                "measured; profile the device with `thor-sdk profile`")
        return self.reference

    def level(self, readings):
        """The device's level now (``device_level``) from ``readings`` of this estimator's reference probe
        (``whole_model.reference``: its ``part``'s cost per step, in the estimator's unit) measured now;
        NotFoundError without one (``require_reference``)."""
        return device_level(readings, self.require_reference()["median_value"], self.drift_log_std)

    def _model_for(self, kind, config, batch_size=None):
        """(entry name, model) costing a layer at ``batch_size``: its structural variant's (``conv2d:grouped``,
        ``conv2d:gemm``) where the estimator has one, else its kind's; (None, None) when it has neither."""
        key = entry_key(kind, config, batch_size, self._models) if isinstance(kind, str) else kind
        model = self._models.get(key)
        return (key, model) if model is not None else (None, None)

    def _model(self, kind, config=None):
        try:
            _, model = self._model_for(kind, config or {}, (config or {}).get("batch_size"))
        except TypeError:
            model = None
        if model is None:
            raise NotFoundError(f"estimator has no model for kind {kind!r}; probe it on this device")
        return model

    def predict_layer(self, kind, features, cost=None):
        """(mean, std) of one layer's cost in ``self.unit``; ``features`` maps the kind's feature
        names (config features, ``batch_size``, ``role`` as 'input'/'hidden' or 1/0) to numbers;
        ``cost``: the layer's cost terms (computed from the config when None)."""
        if not isinstance(features, dict):
            raise UsageError("features must be a dict of feature name -> number")
        model = self._model(kind, features)
        missing = [f for f in model.given if f not in features and f not in model.defaults]
        if missing:
            raise UsageError(f"layer of kind {kind!r}: kind {kind!r} needs feature {missing[0]!r} "
                             f"(features: {', '.join(model.given)})")
        batch = features.get("batch_size")
        if not _is_num(batch) or batch < 1:
            raise UsageError(f"layer of kind {kind!r}: batch_size must be a number >= 1")
        role = features.get("role", "hidden") if kind != "output" else "output"
        if not isinstance(role, str):
            role = "input" if role == 1 else "hidden"
        if cost is None:
            config = {f: features[f] for f in features if f not in ("batch_size", "role")}
            try:
                terms = cost_terms(kind, config, role)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise UsageError(f"layer of kind {kind!r}: cannot compute its FLOPs and bytes from these features: "
                                 f"{type(e).__name__}: {e}") from None
        else:
            terms = layer_terms({"cost": cost}, f"layer of kind {kind!r}")
        flops, nbytes, launches, step_bytes = self._at_batch(terms, batch)
        raw = model.vector(dict(features, train_flops=flops, train_bytes=nbytes), f"layer of kind {kind!r}")
        lmu, var, _, _ = model.row(raw, flops, nbytes, launches, step_bytes)
        return model.moments(lmu, var)

    def _generic_coefficients(self):
        """(overhead, per_byte, per_flop) for a layer of a kind the estimator lacks: the generic
        ``elementwise`` kind's mean function where the estimator has it (else the median over its
        kinds), and the FLOPs baseline's cost per FLOP."""
        ew = self._models.get("elementwise")
        if ew is not None:
            overhead, per_byte = ew.overhead, ew.per_byte
        else:
            def median(xs):
                xs = sorted(xs)
                n = len(xs)
                return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])

            overhead = median([m.overhead for m in self._models.values()])
            per_byte = median([m.per_byte for m in self._models.values()])
        per_flop = self.flops_baseline.get("unit_per_flop")
        per_flop = float(per_flop) if _is_num(per_flop) and math.isfinite(per_flop) and per_flop > 0 else 0.0
        return overhead, per_byte, per_flop

    def _at_batch(self, terms, batch_size):
        """``terms.at_batch`` of a layer's terms as this file's version reads them (``terms.at_least_one_launch``: a
        file before version 5 counts every layer at least one launch): every cost this estimator computes reads them
        here."""
        return at_batch(at_least_one_launch(terms, self.version), batch_size)

    def _approx_missing(self, terms, batch_size):
        """(mean, std) of a layer whose kind the estimator lacks, from its FLOPs, bytes and launches."""
        flops, nbytes, launches, _ = self._at_batch(terms, batch_size)
        overhead, per_byte, per_flop = self._generic_coefficients()
        m = overhead * launches + per_byte * nbytes + per_flop * flops
        if not (m > 0.0 and math.isfinite(m)):
            raise UsageError("the approximate estimate is not finite for this layer")
        return m, APPROX_MISSING_REL_STD * m

    def estimate(self, layers, batch_size, unknown="error", level=None):
        """Per-layer and whole-model cost of one training step at ``batch_size``.

        ``layers``: ``[{"name", "kind", "role", "config"[, "cost", "op", "approx"]}]``
        (``thor_sdk.layers_of(...).layers``). Returns ``{"metric", "unit", "device", "runtime",
        "batch_size", "total": {"mean", "std"}, "layers_total": {...}, "layers": [...],
        "approximated": [{"index", "name", "op", "kind", "missing_kind", "reason"}]}`` (``layers_total`` without the
        whole-model term; ``missing_kind``: the estimator lacks the layer's kind).

        ``unknown``: ``"error"`` raises NotFoundError naming every layer whose kind the estimator
        lacks; ``"approx"`` estimates such a layer from its FLOPs and bytes (the generic elementwise
        kind's overhead and cost per byte, the FLOPs baseline's cost per FLOP) with a std equal to its
        mean (added up linearly over the layers of one such kind in the total), and lists it in
        ``approximated``. A layer marked ``approx`` by the extraction (a stand-in
        for an operator without a kind, or the generic ``elementwise`` kind) gets APPROX_OP_REL_STD of its
        mean more std, added up linearly over the layers of one ``op`` in the total, and is listed too.

        ``level``: the device's level now (``level(readings)``'s dict, or a bare number with no std of
        its own), or None for the device as it was profiled. Every mean and std is multiplied by it and
        the total's variance gains ``(total x level x log_std)^2``; the result carries ``level``.
        """
        lvl = _check_level(level)
        if unknown not in UNKNOWN:
            raise UsageError(f"unknown must be one of {', '.join(UNKNOWN)}, got {unknown!r}")
        if not _is_num(batch_size) or not (1 <= batch_size <= 1e9) or batch_size != int(batch_size):
            raise UsageError(f"batch size must be a positive integer (at most 1e9), got {batch_size!r}")
        batch_size = int(batch_size)
        if not isinstance(layers, (list, tuple)):
            raise UsageError("layers must be a list of layer dicts")
        if len(layers) > MAX_LAYERS:
            raise UsageError(f"{len(layers)} layers; at most {MAX_LAYERS} are estimated at once")
        # the distinct layers, each read once: (entry, raw inputs, (flops, bytes, launches), recompute scale), and
        # how many layers each stands for; layers refer to them by index (a tuple's hash is not cached: a nested
        # key hashed at every lookup costs more than the lookups)
        distinct, counts, index = [], [], {}
        groups = {}  # estimator entry (kind or structural variant) -> [its distinct layers' indices, in order]
        keys = []  # per layer, its distinct layer's index, None for a kind the estimator lacks
        unreads = []  # per layer, _unread_feature's reason or None
        missing = []  # (index, layer) of kinds the estimator lacks
        seen = {}  # a layer's (kind, role, config, cost, scale) -> (its distinct index, unread): read once
        for i, layer in enumerate(layers):
            try:
                kind, config = layer["kind"], layer["config"]
            except (KeyError, TypeError):
                raise UsageError(f"layer {i} must be a dict with 'kind' and 'config'") from None
            if not isinstance(kind, str):
                raise UsageError(f"layer {i}: kind must be a string")
            if not isinstance(config, dict):
                raise UsageError(f"layer {i} ({kind}): config must be a dict")
            cost = layer.get("cost")
            scale = 1.0 + _recompute(layer, i) if "recompute" in layer else 1.0
            try:  # unhashable parts (a list in a config, a malformed cost) are read the long way; the types are
                # part of it, as True == 1 and 1 == 1.0 hash alike but are not read alike (True is refused)
                ident = (kind, layer.get("role"), tuple(config.items()), tuple(map(type, config.values())),
                         (tuple(cost.items()), tuple(map(type, cost.values()))) if isinstance(cost, dict) else cost,
                         scale)
                hit = seen.get(ident)
            except TypeError:
                ident = hit = None
            if hit is not None:
                j, unread = hit
                counts[j] += 1
                keys.append(j)
                unreads.append(unread)
                continue
            name, model = self._model_for(kind, config, batch_size)
            if model is None:
                missing.append(i)
                keys.append(None)
                unreads.append(None)
                continue
            values = dict(config)
            values["batch_size"] = batch_size
            role = layer.get("role")
            if model.role_index is not None:
                if role not in ROLE_CODES:
                    raise UsageError(f"layer {i} ({kind}): role must be 'input' or 'hidden', got {role!r}")
                values["role"] = ROLE_CODES[role]
            where = f"layer {i} ({layer.get('name', i)})"
            try:
                terms = layer_terms(layer, where)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise UsageError(f"{where}: cannot compute its FLOPs and bytes: {type(e).__name__}: {e}") from None
            flops_bytes = self._at_batch(terms, batch_size)
            values["train_flops"], values["train_bytes"] = flops_bytes[:2]
            raw = tuple(model.vector(values, where))
            dkey = (name, raw, flops_bytes, scale)
            j = index.get(dkey)
            if j is None:
                j = index[dkey] = len(distinct)
                distinct.append(dkey)
                counts.append(0)
                groups.setdefault(name, []).append(j)
            counts[j] += 1
            keys.append(j)
            unread = _unread_feature(layer, model)
            unreads.append(unread)
            if ident is not None:
                seen[ident] = (j, unread)
        if missing and unknown == "error":
            what = "; ".join(sorted({f"{layers[i]['kind']} ({_layer_label(layers[i], i)})" for i in missing}))
            raise NotFoundError(f"the estimator has no model for these layers' kinds: {what}; probe them on this "
                                "device (thor-sdk probe --model ...), or estimate them approximately from their "
                                "FLOPs and bytes with --unknown-ops approx")
        approx_rows = {}
        for i in missing:
            where = f"layer {i} ({layers[i].get('name', i)})"
            try:
                terms = layer_terms(layers[i], where)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as e:
                raise UsageError(f"{where}: cannot compute its FLOPs and bytes: {type(e).__name__}: {e}") from None
            m, s = self._approx_missing(terms, batch_size)
            scale = 1.0 + _recompute(layers[i], i)
            approx_rows[i] = (m * scale, s * scale)

        results = [None] * len(distinct)
        total_mean = 0.0
        total_var = []
        for name, js in groups.items():
            model = self._models[name]
            rows = []
            for j in js:
                _, raw, flops_bytes, scale = distinct[j]
                lmu, var, v, u = model.row(raw, *flops_bytes)
                m, s = model.moments(lmu, var)
                m, s = m * scale, s * scale  # a recomputed forward: a share of the layer's step more
                results[j] = (m, s, model.outside(raw))
                cnt = counts[j]
                rows.append((cnt, var, v, u, m))
                total_mean += cnt * m
            total_var.append(self._group_var(model, rows))
        out_layers, approximated = [], []
        op_extra = {}  # operator type, missing kind, or a layer's own index -> [the added std of each of its layers]
        for i, (layer, key, unread) in enumerate(zip(layers, keys, unreads)):
            if key is None:  # a kind the estimator lacks (unknown="approx")
                m, s = approx_rows[i]
                why = (f"the estimator has no model for kind {layer['kind']!r}: estimated from its FLOPs and "
                       f"bytes, std {APPROX_MISSING_REL_STD:.0%} of the mean")
                total_mean += m
                # the layers of one missing kind share one error (the generic coefficients miss that kind's
                # cost the same way in each): their stds add up linearly, as a stand-in operator's
                op_extra.setdefault(("missing kind", layer["kind"]), []).append(s)
            else:
                m, s, outside = results[key]
                why = layer.get("approx")
                if isinstance(why, str) and why:
                    unread = None  # a stand-in's own reason, not the feature its model never read
                else:
                    why = unread
                if why:  # a stand-in, the generic kind, or a feature the model never read: its own cost may differ
                    extra = APPROX_OP_REL_STD * m
                    s = sqrt(s * s + extra * extra)
                    op = layer.get("op")
                    op_extra.setdefault(op if isinstance(op, str) else i, []).append(extra)
            row = {"name": layer.get("name"), "kind": layer["kind"], "role": layer.get("role"),
                   "config": layer["config"], "mean": m, "std": s}
            if key is not None and outside:  # the layer lies where the samples did not: it extrapolates
                row["outside"] = [{"feature": f, "value": x, "probed": [lo, hi]} for f, x, lo, hi in outside]
            if why:
                row["approx"] = why
                approximated.append({"index": i, "name": layer.get("name"), "op": layer.get("op"),
                                     "kind": layer["kind"], "missing_kind": key is None, "reason": why,
                                     **({"unread_feature": True} if key is not None and unread else {}),
                                     **({"recompute": float(layer["recompute"])} if layer.get("recompute") else {})})
            out_layers.append(row)
        # squares as products: a float ** 2 beyond the range raises OverflowError, a product gives inf (refused below)
        total_var += [e * e for e in (fsum(extras) for extras in op_extra.values())]
        layers_var = fsum(total_var)
        if layers_var < 0.0:  # covariances of one kind summed below zero: rounding, or a W the kernel cannot give
            if layers_var < -1e-6 * total_mean * total_mean:
                raise FormatError("estimator: the variance factor and the kernel give this model a negative "
                                  "variance; the file is corrupt")
            layers_var = 0.0
        whole = (self.whole_model_rel_std * total_mean) * (self.whole_model_rel_std * total_mean)
        if not math.isfinite(total_mean) or not math.isfinite(layers_var + whole):
            raise UsageError("the estimate is too large to represent (far outside what the estimator covers)")
        result = {"metric": self.metric, "unit": self.unit, "device": self.device.get("name"),
                  "runtime": self.runtime, "batch_size": batch_size,
                  "total": {"mean": total_mean, "std": sqrt(layers_var + whole)},
                  "layers_total": {"mean": total_mean, "std": sqrt(layers_var)},
                  "layers": out_layers, "approximated": approximated}
        if lvl is not None:
            at_level(result, lvl)
        return result

    @staticmethod
    def _group_var(model, rows):
        """Variance (metric's unit squared) of the summed cost of all layers of one kind."""
        c = model.constant
        parts = []
        add = parts.append
        for a, (ca, vara, va, ua, ma) in enumerate(rows):
            mm = ma * ma
            add(ca * mm * expm1(vara))
            if ca > 1:  # identical twins share the latent cost: constant - v.v, no white noise
                twin = c - fsum(map(mul, va, va))
                add(ca * (ca - 1) * mm * expm1(max(twin, 0.0)))
            for cb, _, vb, ub, mb in rows[a + 1:]:
                t = dist(ua, ub)  # c x Matern 5/2 at t = sqrt(5) r, as in row
                add(2.0 * ca * cb * ma * mb * expm1(c * ((1.0 + t + t * t / 3.0) * exp(-t)) - sum(map(mul, va, vb))))
        return fsum(parts)


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def device_level(readings, reference_value, drift_log_std=0.0):
    """The device's speed now against during its profile, from its reference probe measured now.

    ``readings``: the reference probe's cost per step, one number per measurement (1 to
    MAX_LEVEL_READINGS, each finite and > 0, in the unit of ``reference_value``, the probe's median
    during the profile). ``level = median(readings) / reference_value``; its ln-std is
    ``max(s, drift_log_std) / sqrt(n)``, with ``s`` the sample std of the readings' logs (0 for one
    reading) and ``drift_log_std`` the profile's own spread of one reading, so one or two lucky readings
    do not claim a precision the device never showed. A level outside LEVEL_RANGE is refused
    (UsageError). Returns ``{"level", "log_std", "readings"}``.
    """
    if isinstance(readings, (str, bytes)) or not hasattr(readings, "__iter__"):
        raise UsageError("readings must be a list of numbers")
    readings = list(readings)
    if not 1 <= len(readings) <= MAX_LEVEL_READINGS:
        raise UsageError(f"readings: 1 to {MAX_LEVEL_READINGS} numbers, got {len(readings)}")
    for i, v in enumerate(readings):
        if not _is_num(v) or not (math.isfinite(v) and v > 0):
            raise UsageError(f"readings[{i}] must be a finite number > 0, got {v!r}")
    for what, v in (("reference_value", reference_value), ("drift_log_std", drift_log_std)):
        if not _is_num(v) or not math.isfinite(v) or v < 0 or (what == "reference_value" and v == 0):
            raise UsageError(f"{what} must be a finite number {'> 0' if what == 'reference_value' else '>= 0'}, "
                             f"got {v!r}")
    logs = [log(float(v)) for v in readings]
    n = len(logs)
    spread = 0.0
    if n > 1:
        mu = fsum(logs) / n
        spread = sqrt(fsum((x - mu) ** 2 for x in logs) / (n - 1))
    level = _median([float(v) for v in readings]) / float(reference_value)
    out = {"level": level, "log_std": min(max(spread, float(drift_log_std)) / sqrt(n), MAX_LEVEL_LOG_STD),
           "readings": n}
    _check_level(out)
    return out


def _check_level(level):
    """``{"level", "log_std"}`` from a level dict or a bare number (log_std 0); None stays None."""
    if level is None:
        return None
    if isinstance(level, dict):
        value, log_std = level.get("level"), level.get("log_std", 0.0)
    else:
        value, log_std = level, 0.0
    if not _is_num(value) or not math.isfinite(value):
        raise UsageError(f"level must be a finite number, got {value!r}")
    lo, hi = LEVEL_RANGE
    if not lo <= value <= hi:
        raise UsageError(f"level {value:g} is outside {lo:g}-{hi:g} of the profile's: not the profiled device "
                         "in another state (another device, or readings in another unit)")
    if not _is_num(log_std) or not math.isfinite(log_std) or not 0 <= log_std <= MAX_LEVEL_LOG_STD:
        raise UsageError(f"level log_std must be a finite number from 0 to {MAX_LEVEL_LOG_STD:g}, got {log_std!r}")
    return {"level": float(value), "log_std": float(log_std)}


def level_band(drift_log_std):
    """The ln half-width of the levels a profile's own drift explains: ``Z95 x max(drift_log_std,
    MIN_DRIFT_LOG_STD)``; a level beyond ``exp(+-band)`` is the device in another state."""
    return Z95 * max(drift_log_std or 0.0, MIN_DRIFT_LOG_STD)


def at_level(result, level):
    """Put an ``estimate`` result at the device's level (in place, and returned): every mean and std times
    ``level["level"]``; the total's variance gains ``(total x level x log_std)^2``, one term for the whole
    model since every layer shares the level."""
    lvl = _check_level(level)
    if result.get("level") is not None:
        raise UsageError("the estimate is already at a level")
    f, s = lvl["level"], lvl["log_std"]
    for row in result["layers"]:
        row["mean"] *= f
        row["std"] *= f
    lt, t = result["layers_total"], result["total"]
    lt["mean"] *= f
    lt["std"] *= f
    mean = t["mean"] * f
    a, b = t["std"] * f, mean * s
    std = sqrt(a * a + b * b)
    if not (math.isfinite(mean) and math.isfinite(std)):
        raise UsageError("the estimate at this level is too large to represent (far outside what the estimator covers)")
    t["std"] = std
    t["mean"] = mean
    result["level"] = lvl
    return result


def _model_numbers(kinds):
    """How many numbers the kinds' inducing, alpha and var_factor arrays hold (rows beyond the per-kind caps
    not counted: they are refused anyway)."""
    n = 0
    for d in kinds.values():
        if not isinstance(d, dict):
            continue
        for key, cap in (("inducing", MAX_INDUCING), ("var_factor", MAX_VAR_ROWS), ("alpha", None)):
            v = d.get(key)
            if isinstance(v, list):
                n += len(v) if cap is None else sum(len(r) if isinstance(r, list) else 1 for r in v[:cap + 1])
    return n


def _recompute(layer, i):
    """A layer's ``recompute``: the share of its training step run again in backward (its forward, under
    ``torch.utils.checkpoint``), 0 when absent; UsageError unless a number in [0, 1]."""
    r = layer.get("recompute", 0.0)
    if not _is_num(r) or not 0.0 <= r <= 1.0:
        raise UsageError(f"layer {i} ({layer.get('name', i)}): recompute must be a number in [0, 1], got {r!r}")
    return float(r)


def _layer_label(layer, i):
    name = layer.get("name", i)
    op = layer.get("op")
    return f"layer {name}: {op}" if isinstance(op, str) and op else f"layer {name}"


#: the most ``load_estimator`` reads (an estimator is about 100 KB; at this cap loading takes about a second)
MAX_FILE_BYTES = 8 * 1024 * 1024


def read_json_file(path, what="estimator"):
    """A parsed JSON file, strictly (``thor_sdk.store.files.read_json``, standard library only like this
    package): at most MAX_FILE_BYTES, UTF-8, no NaN/Infinity or out-of-range numbers, no key twice in one
    object, nesting capped. One FormatError naming the file otherwise."""
    from thor_sdk.store.files import read_json

    return read_json(path, f"{what} file", MAX_FILE_BYTES)


def load_estimator(path_or_dict):
    """An ``Estimator`` from a JSON file path or an already-parsed dict; FormatError if it is corrupt."""
    if isinstance(path_or_dict, dict):
        return Estimator(path_or_dict)
    return Estimator(read_json_file(path_or_dict))
