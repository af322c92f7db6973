"""One cost model per layer kind: a physical mean (overhead + FLOPs + bytes) times a sparse GP on the log residual.

Model (the math every runtime reproduces is in ``docs/estimator-format.md``, version 4):

- **mean function**, in the metric's unit: ``m(x) = overhead * L(x) + per_flop * F(x) + per_byte * B(x)``
  with ``F``, ``B`` the layer's training FLOPs and bytes moved at its batch size and role and ``L`` its
  sequential launches (time steps x layers for a recurrent kind, else 1; ``thor_sdk.runtime.terms``), plus
  ``per_call`` (version 4) for a kind launched several times per call where that predicts it better,
  the coefficients >= 0, fitted on the ln error (``sum (ln y_i - ln m_i)^2``, what the GP then models:
  non-negative least squares on the relative error, then Gauss-Newton steps; ``fit_mean_function``). Or, where
  it predicts the kind's held-out samples better (``SPLIT_MIN_SAMPLES`` or more; 10-fold, the mean function
  alone), with the bytes moved once per step whatever the batch size (``S``: parameters read, their gradients
  written, the optimizer's update) at a rate of their own: ``per_byte * (B - S) + per_step_byte * S``. Weight
  traffic streams through the cache differently from activations, and one rate for both charged a small-batch
  transformer block's weights as if they were its activations (profile 68: 0.73x its probe at batch 16).
  Far from every sample an estimate falls back to
  this roofline-like law, never to a wild extrapolation, and it moves with batch size by construction;
- **residual**: ``r = ln(y) - ln(m(x))`` is modelled by a Gaussian Process on the standardised
  ``ln(1 + feature)`` inputs -- the kind's features plus the layer's ``train_flops`` and ``train_bytes``
  (how efficiency varies with work size is smooth in those, whatever the config that gives it):
  ``constant * Matern52(length_scale) + noise_level``, prior mean ``r0`` (the precision-weighted
  median residual: a cluster of samples far off the mean function does not lift the rest).
  The target is *always* logarithmic, so every estimate is positive by construction. A sample <= 0
  (a subtraction within its noise) is floored at twice its standard error and given a log-noise of 1,
  so it barely pulls the fit and never flips the kind to another transform;
- **noise**: each sample's log-variance is its measured ``(stderr / y)^2`` plus ``extra_log_var`` (the
  campaign's run-to-run drift), plus the fitted ``noise_level`` (misfit the kernel cannot explain);
- **hyperparameters** (scikit-learn, on at most ``hyper_subset`` samples): length scales bounded to
  ``LENGTH_SCALE_BOUNDS`` in ``ln(1 + x)`` units; a feature that never varied in the samples is not optimised
  (it cannot be) and gets length scale 1 in ``ln(1 + x)`` units, so a new value of it (a role never seen)
  widens the std instead of exploding the mean;
- **sparse posterior** (deterministic training conditional, DTC) on ``m`` inducing points (64, or one
  per 3 samples beyond 192, at most ``max_inducing`` = 256) chosen farthest-first among the samples, with every sample's information:
  ``mu_r(x) = r0 + k_m(x) . alpha``, ``var_r(x) = constant + noise_level - |W k_m(x)|^2``.
  ``W`` (``rank x m``) is stored, so readers do no matrix factorisation; dropping low-information rows
  of ``W`` only ever *raises* the variance (conservative). With every sample as an inducing point and
  no truncation this is the exact GP posterior;
- back-transform: ``mean = m(x) exp(mu_r + var_r / 2)``, ``std = mean sqrt(exp(var_r) - 1)``.

numpy, scipy and scikit-learn are imported inside the methods that need them.
"""

import math
import re
import warnings

from thor_sdk.errors import FormatError, UsageError

SIGNIFICANT_DIGITS = 8
SPLIT_MIN_SAMPLES = 8                  # from this many usable samples, per-step bytes may get their own rate
NU = 2.5
LENGTH_SCALE_BOUNDS = (0.1, 3.0)       # ln(1 + x) units: the residual decorrelates within a factor e^3 = 20
CONSTANT_BOUNDS = (1e-4, 4.0)          # residual variance in (ln units)^2: std 1 % ... factor 7
CONSTANT_FLOOR = 0.02                  # far from data, at least 14 % std: the mean function's reach
FEW_SAMPLES = 5                        # below this, the mean function's error is unknown: constant >= 0.25
NOISE_BOUNDS = (1e-6, 1.0)
FIXED_LENGTH_SCALE = 1.0               # ln(1 + x) units, for a feature that never varied
MIN_SAMPLES_PER_DIM = 3                # below this many samples per varying input, length scales are not fitted
FLOOR_LOG_NOISE = 1.0                  # log-std of a sample floored at twice its standard error
MIN_INDUCING = 64                      # inducing points kept up to 3 x 64 samples (all, when fewer are distinct)
MAX_INDUCING = 256                     # ... and above that one per SAMPLES_PER_INDUCING samples, up to this
SAMPLES_PER_INDUCING = 3
MAX_RANK = 8
DERIVED = ("train_flops", "train_bytes")  # GP inputs taken from the layer's cost terms, after its features
HYPER_SUBSET = 300
KMM_JITTER = 1e-6                      # relative to the kernel constant
MIN_COST = 1e-15                       # s or J: below any measurable layer cost; smaller samples are floored
MAX_RESIDUAL = 20.0                    # ln units: a sample e^20 off the mean function is clipped there
MEAN_FN_STEPS = 20                     # Gauss-Newton steps on the mean function's ln error (fit_mean_function)


def round_sig(x, digits=SIGNIFICANT_DIGITS):
    """``x`` rounded to ``digits`` significant digits (a plain Python float)."""
    return float(f"{float(x):.{digits}g}")


def _round_list(values, digits=SIGNIFICANT_DIGITS):
    return [round_sig(v, digits) for v in values]


def lognormal_moments(mu, var):
    """Mean and std in original units of ``exp(N(mu, var))`` (numpy arrays or floats)."""
    import numpy as np

    mean = np.exp(mu + var / 2.0)
    return mean, mean * np.sqrt(np.expm1(var))


def _matern52(u1, u2):
    """Matern 5/2 correlation between rows of ``u1`` and ``u2`` (already divided by length scales)."""
    import numpy as np

    d = np.sqrt(np.maximum(((u1[:, None, :] - u2[None, :, :]) ** 2).sum(-1), 0.0))
    t = math.sqrt(5.0) * d
    return (1.0 + t + t * t / 3.0) * np.exp(-t)


def _term_rows(terms):
    """An n x 4 array (F, B, L, S) from n rows of (F, B[, L[, S]]): ``L`` launches (1 where absent), ``S`` the
    bytes of ``B`` moved once per step whatever the batch size (0 where absent: every byte per sample)."""
    import numpy as np

    T = np.asarray(terms, dtype=float)
    if T.ndim == 1:
        T = T.reshape(1, -1)
    if T.ndim == 2 and T.shape[1] == 2:
        T = np.hstack([T, np.ones((T.shape[0], 1))])
    if T.ndim == 2 and T.shape[1] == 3:
        T = np.hstack([T, np.zeros((T.shape[0], 1))])
    return T


def _design(terms, split, call=False):
    """The mean function's columns: (L, F, B), or (L, F, B - S, S) where per-step bytes have their own rate; with
    ``call``, one more column of ones (a cost paid once per layer call, whatever its launches)."""
    import numpy as np

    if split:
        cols = [terms[:, 2], terms[:, 0], terms[:, 1] - terms[:, 3], terms[:, 3]]
    else:
        cols = [terms[:, 2], terms[:, 0], terms[:, 1]]
    if call:
        cols.append(np.ones(terms.shape[0]))
    return np.column_stack(cols)


def has_calls(terms):
    """Whether a kind's samples launch their work several times in a call (a recurrent layer: ``L`` = time steps x
    layers, above 1 somewhere): only there is a per-call cost apart from the per-launch overhead (``per_call``). A
    forward-only convolution's share of a launch (below 1, ``runtime.terms.FORWARD_ONLY_SHARED``) is not one."""
    import numpy as np

    return bool(np.any(_term_rows(terms)[:, 2] > 1.0))


def mean_law(terms, coef, split):
    """``m`` of each ``_term_rows`` row from ``fit_mean_function``'s coefficients (four, or five with ``per_call``):
    ``per_step_byte`` charged where ``split``, else every byte at ``per_byte``, plus ``per_call`` where given (what
    the runtimes compute, ``docs/estimator-format.md``)."""
    a, bf, bb, bs = coef[:4]
    call = coef[4] if len(coef) > 4 else 0.0
    if split:
        return call + a * terms[:, 2] + bf * terms[:, 0] + bb * (terms[:, 1] - terms[:, 3]) + bs * terms[:, 3]
    return call + a * terms[:, 2] + bf * terms[:, 0] + bb * terms[:, 1]


def _nnls_scaled(A, b):
    """Non-negative least squares of ``A x = b`` with A's columns scaled to a common size first."""
    import numpy as np
    from scipy.optimize import nnls

    scale = np.maximum(np.abs(A).max(axis=0), 1e-300)
    coef, _ = nnls(A / scale, b, maxiter=200)
    return coef / scale


def fit_mean_function(terms, y, weights=None, split=False, call=False):
    """(overhead, per_flop, per_byte, per_step_byte[, per_call]) >= 0 minimising the weighted squared **ln** error of
    ``m = overhead * L + per_flop * F + per_byte * B`` against positive costs ``y`` (``per_step_byte`` = ``per_byte``),
    or with ``split`` of ``m = overhead * L + per_flop * F + per_byte * (B - S) + per_step_byte * S``: non-negative
    least squares on the relative error ``(m - y) / y`` first, then damped Gauss-Newton steps on ``ln y - ln m``
    (each a non-negative least squares in the coefficients, kept only where the ln error falls; at most
    MEAN_FN_STEPS). ``terms``: rows of ``_term_rows``. With ``call`` (``has_calls``), a fifth coefficient
    ``per_call`` is paid once per layer call (``KindGP.fit`` keeps it where the 10-fold error of the law is lower
    with it than without): an LSTM's training step costs about 0.9 ms on this host at 4 time steps
    as at 1, then 5 us per step (batch 1), so a law paying its fixed cost per step (L = steps x layers) read the short
    sequences of user nets (28-64 steps) at 0.55x their probes when its samples ran 70-340 steps.

    The GP models ``ln y - ln m``, and the relative error alone is lopsided: a sample far *below* the law costs
    its fit without bound (``(m - y) / y``), one far above it at most 1, so a few samples far below it (a frozen
    first layer with no backward pass, a cost floored near zero) pulled the law down and left the kind's other samples
    e^0.9 above it (profile 65's gru, conv2d e^0.46), for the residual's offset and the GP to carry."""
    import numpy as np

    terms = _term_rows(terms)
    y = np.asarray(y, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    A = _design(terms, split, call)
    coef = _nnls_scaled(A / y[:, None] * w[:, None], w)
    if not np.any(coef > 0):
        coef = np.zeros(A.shape[1])
        coef[0] = float(np.median(y))
    low = 1e-6 * float(np.min(y))  # keep m(x) > 0 at zero FLOPs and bytes
    coef[0] = max(coef[0], low)

    def ln_loss(c):
        return float(np.sum((w * (np.log(y) - np.log(A @ c))) ** 2))

    best = ln_loss(coef)
    for _ in range(MEAN_FN_STEPS):
        m = A @ coef
        # linearised at coef: ln(A c') ~ ln m + A (c' - coef) / m, and A coef / m = 1
        step = _nnls_scaled(A / m[:, None] * w[:, None], w * (1.0 + np.log(y / m))) - coef
        for t in (1.0, 0.5, 0.25, 0.125, 0.0625):
            cand = np.maximum(coef + t * step, 0.0)
            cand[0] = max(cand[0], low)
            loss = ln_loss(cand)
            if loss < best * (1.0 - 1e-9):
                break
        else:
            break
        coef, best = cand, loss
    coef = [float(c) for c in coef]
    if not split:  # per_step_byte = per_byte
        coef = coef[:3] + coef[2:3] + coef[3:]
    return coef


def _weighted_median(values, weights):
    """The weighted median of ``values`` (the lower one at an exact tie)."""
    import numpy as np

    order = np.argsort(values)
    v, w = np.asarray(values, dtype=float)[order], np.asarray(weights, dtype=float)[order]
    cum = np.cumsum(w)
    return float(v[int(np.searchsorted(cum, 0.5 * cum[-1]))])


_AT_BOUND = re.compile(r"The optimal value found for dimension (\d+) of parameter (\S+) is close to the "
                       r"specified (lower|upper) bound ([0-9.eE+-]+?)\.?(?: |$)")
_HYPER_NAMES = {"k1__k1__constant_value": "amplitude", "k2__noise_level": "noise level"}


def _summarise_convergence(messages, names):
    """scikit-learn's ConvergenceWarnings in one line: which hyperparameters stopped at which of their
    (deliberate) bounds, the length scales named by their feature; any other message kept as it is.
    (Its own sentence per dimension, advice to widen the bound included, made a device profile's
    estimator 29 KB larger.)"""
    at, other = {}, []
    for m in messages:
        hit = _AT_BOUND.match(m)
        if not hit:
            other.append(m)
            continue
        dim, param, side, bound = int(hit.group(1)), hit.group(2), hit.group(3), float(hit.group(4))
        if param == "k1__k2__length_scale":
            what = "length scale of " + (names[dim] if dim < len(names) else f"input {dim}")
        else:
            what = _HYPER_NAMES.get(param, param)
        at.setdefault((side, f"{bound:.3g}"), []).append(what)
    if at:
        other.insert(0, "hyperparameters at their bounds: " + "; ".join(
            f"{', '.join(whats)} at the {side} bound {bound}" for (side, bound), whats in sorted(at.items())))
    return other


class KindGP:
    """The cost model of one layer kind, scikit-learn style.

    >>> gp = KindGP(features=["numel", "batch_size", "role"]).fit(X, y, terms=T)      # doctest: +SKIP
    >>> mean, std = gp.predict(X_new, terms=T_new, return_std=True)                  # doctest: +SKIP

    ``terms`` are the layers' ``(training FLOPs, bytes moved)`` at their batch size and role.
    """

    def __init__(self, features, random_state=0, n_restarts_optimizer=1, max_inducing=MAX_INDUCING,
                 max_rank=MAX_RANK, hyper_subset=HYPER_SUBSET):
        self.features = [f for f in features if f not in DERIVED]
        self.input_features = self.features + list(DERIVED)
        self.random_state = random_state
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_inducing = int(max_inducing)
        self.max_rank = int(max_rank)
        self.hyper_subset = int(hyper_subset)

    # ------------------------------------------------------------------ input checks
    def _check_X(self, X):
        import numpy as np

        try:
            X = np.asarray(X, dtype=float)
        except (TypeError, ValueError) as e:
            raise UsageError(f"features must be numbers: {e}") from None
        if X.ndim == 1:
            X = X.reshape(1, -1)
        if X.ndim != 2 or X.shape[1] != len(self.features):
            raise UsageError(f"expected rows of {len(self.features)} features ({', '.join(self.features)}), "
                             f"got an array of shape {X.shape}")
        if not np.all(np.isfinite(X)) or np.any(X <= -1.0):
            raise UsageError("features must be finite numbers > -1 (they are transformed with ln(1 + x))")
        return X

    def _check_terms(self, terms, n):
        import numpy as np

        if terms is None:
            return np.hstack([np.zeros((n, 2)), np.ones((n, 1)), np.zeros((n, 1))])
        try:
            T = _term_rows(terms)
        except (TypeError, ValueError) as e:
            raise UsageError(f"terms must be (flops, bytes[, launches[, step bytes]]) rows: {e}") from None
        if (T.ndim != 2 or T.shape != (n, 4) or not np.all(np.isfinite(T)) or np.any(T < 0) or np.any(T[:, 2] <= 0)
                or np.any(T[:, 3] > T[:, 1])):
            raise UsageError(f"need one finite, non-negative (flops, bytes[, launches > 0[, step bytes <= bytes]]) "
                             f"row per feature row ({n}), got shape {T.shape}")
        return T

    def _z(self, X):
        import numpy as np

        return (np.log1p(X) - self.x_mean_) / self.x_scale_

    def _u(self, X):
        return self._z(X) / self.length_scale_

    @staticmethod
    def _inputs(X, T):
        import numpy as np

        return np.hstack([X, T[:, :2]])

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, noise_std=None, terms=None, extra_log_var=0.0):
        """Fit on raw features ``X`` (n x d; role encoded input=1, hidden=0), costs ``y`` (n) and the
        layers' ``terms`` (n rows: training FLOPs, bytes moved[, launches[, of those bytes, the ones moved once per
        step]]). ``noise_std``: standard error of each
        cost as measured; ``extra_log_var``: variance (ln units) added to every sample, e.g. the drift
        of a reference probe re-measured through the campaign."""
        import numpy as np

        X = self._check_X(X)
        y = np.asarray(y, dtype=float).ravel()
        n, d = X.shape
        if n == 0 or len(y) != n:
            raise UsageError(f"need one cost per feature row and at least one row, got {n} rows and {len(y)} costs")
        if not np.all(np.isfinite(y)):
            raise UsageError("costs must be finite numbers")
        T = self._check_terms(terms, n)
        X = self._inputs(X, T)
        d = X.shape[1]
        # where the samples lie, per raw input (an estimate outside says so: docs/estimator-format.md)
        self.feature_range_ = [[round_sig(lo), round_sig(hi)] for lo, hi in zip(X.min(axis=0), X.max(axis=0))]
        s = np.zeros(n) if noise_std is None else np.abs(np.asarray(noise_std, dtype=float).ravel())
        if s.shape != (n,) or not np.all(np.isfinite(s)):
            raise UsageError("noise_std needs one finite standard error per cost")
        if not (math.isfinite(extra_log_var) and extra_log_var >= 0):
            raise UsageError(f"extra_log_var must be a finite number >= 0, got {extra_log_var!r}")
        self.warnings_ = []

        # 1. floor costs at or below their noise (a layer cannot cost < 0); such samples get a wide noise
        pos = y[y > 0]
        tiny = max(1e-9 * (float(np.max(pos)) if len(pos) else 1.0), MIN_COST)
        floor = np.maximum(2.0 * s, tiny)
        floored = y < floor
        y_eff = np.where(floored, floor, y)
        log_noise_var = np.where(floored, FLOOR_LOG_NOISE ** 2, (s / y_eff) ** 2) + extra_log_var
        log_noise_var = np.minimum(log_noise_var, FLOOR_LOG_NOISE ** 2)
        self.n_floored_ = int(floored.sum())
        if self.n_floored_:
            self.warnings_.append(f"{self.n_floored_} sample(s) at or below twice their standard error were floored "
                                  "there with a wide noise (a layer cannot cost less than nothing)")

        # 2. the mean function: floored samples left out; per-step bytes at their own rate where that predicts
        #    held-out samples better; then once more without gross outliers (relative error: one sample 10^6 off
        #    would otherwise own the fit)
        w = np.where(floored, 0.0, 1.0 / np.sqrt(1.0 + log_noise_var / 0.01))
        if not np.any(w > 0):
            w = np.ones(n)
        # a per-call cost where the samples launch several times per call and it predicts held-out samples better
        self.calls_ = has_calls(T)
        self.split_bytes_, loo_err = self._choose_bytes(T, y_eff, w)
        if self.calls_ and loo_err is None:  # too few samples to say it helps: no fifth coefficient
            self.calls_ = False
        elif self.calls_:
            without = self._loo_error(T, y_eff, w, self.split_bytes_, False)
            if without <= loo_err:
                self.calls_, loo_err = False, without
        self.mean_coef_ = fit_mean_function(T, y_eff, weights=w, split=self.split_bytes_, call=self.calls_)
        resid = np.log(y_eff) - np.log(self._mean_fn(T))
        if n >= 8:
            med = np.median(resid[w > 0])
            mad = 1.4826 * np.median(np.abs(resid[w > 0] - med)) + 1e-3
            keep = (np.abs(resid - med) <= 4.0 * mad) & (w > 0)
            if keep.sum() >= max(3, n // 2) and keep.sum() < (w > 0).sum():
                self.mean_coef_ = fit_mean_function(T, y_eff, weights=np.where(keep, w, 0.0), split=self.split_bytes_,
                                                    call=self.calls_)
                resid = np.log(y_eff) - np.log(self._mean_fn(T))
        wild = np.abs(resid) > MAX_RESIDUAL
        if wild.any():  # a "layer" e^20 off its FLOPs-and-bytes law is not a layer cost: keep it, barely
            self.warnings_.append(f"{int(wild.sum())} sample(s) more than e^{MAX_RESIDUAL:g} off the mean function "
                                  "were clipped there with a wide noise")
            resid = np.clip(resid, -MAX_RESIDUAL, MAX_RESIDUAL)
            log_noise_var = np.where(wild, FLOOR_LOG_NOISE ** 2, log_noise_var)

        # 3. centre the ln(1 + x) features (scale 1: length scales are in ln units, bounded, so a few
        #    samples cannot make a far config look near); constant columns get a fixed length scale
        Xl = np.log1p(X)
        self.x_mean_ = np.array(_round_list(Xl.mean(axis=0)))
        sd = Xl.std(axis=0)
        varies = sd > 1e-9 * np.maximum(1.0, np.abs(self.x_mean_))
        self.x_scale_ = np.ones(d)
        Z = self._z(X)
        # the prior variance of the residual is at least the mean function's own out-of-sample error
        self.constant_floor_ = 0.25 if loo_err is None else float(np.clip(loo_err, CONSTANT_FLOOR, 1.0))

        # 4. hyperparameters on a subset (scikit-learn), residual offset r0 = precision-weighted mean
        prec = 1.0 / (log_noise_var + 1e-4)
        self.residual_offset_ = _weighted_median(resid, prec)
        rt = resid - self.residual_offset_
        self.constant_, ls, self.noise_level_, self.log_marginal_likelihood_ = self._hyper(
            Z[:, varies], rt, log_noise_var, names=[f for f, v in zip(self.input_features, varies) if v])
        length = np.full(d, FIXED_LENGTH_SCALE)
        length[varies] = ls
        # a fixed length scale is given in ln(1 + x) units; x_scale is 1 for those columns
        self.length_scale_ = np.array(_round_list(length))
        self.x_mean_, self.x_scale_ = np.array(self.x_mean_), np.array(self.x_scale_)

        # 5. sparse posterior on farthest-first inducing points
        U = Z / self.length_scale_
        idx = self._inducing(U)
        self.inducing_ = np.array([_round_list(r, 6) for r in Z[idx]])
        self.alpha_, self.var_factor_ = self._dtc(U, rt, log_noise_var)
        self.n_samples_ = n
        ok = ~floored if (~floored).any() else np.ones(n, dtype=bool)
        self.sample_stats_ = {"n": n, "floored": self.n_floored_,
                              "residual_rms": float(np.sqrt(np.mean(resid[ok] ** 2))),
                              "mean_function_mape": float(np.mean(np.abs(np.expm1(-resid[ok]))))}
        return self

    @staticmethod
    def _loo_error(T, y, w, split, call=False):
        """The mean function's leave-one-out (or 10-fold) mean squared ln error over the samples of weight > 0,
        centred (the residual offset absorbs a common shift); None with fewer than FEW_SAMPLES of them."""
        import numpy as np

        use = np.flatnonzero(w > 0)
        if len(use) < FEW_SAMPLES:
            return None
        errs = []
        for f in np.array_split(use, min(len(use), 10)):
            wt = w.copy()
            wt[f] = 0.0
            coef = fit_mean_function(T, y, weights=wt, split=split, call=call)
            errs.append(np.log(y[f]) - np.log(mean_law(T[f], coef, split)))
        e = np.concatenate(errs)
        return float(np.mean((e - np.median(e)) ** 2))

    def _choose_bytes(self, T, y, w):
        """(whether per-step bytes get their own rate, the chosen mean function's held-out error): split where
        SPLIT_MIN_SAMPLES or more usable samples move both kinds of bytes and the split form's 10-fold error
        is lower (``_loo_error``; the chosen one also bounds the kernel constant from below)."""
        import numpy as np

        tied = self._loo_error(T, y, w, False, self.calls_)
        use = w > 0
        if (tied is None or use.sum() < SPLIT_MIN_SAMPLES or not np.any(T[use, 3] > 0)
                or not np.any(T[use, 1] > T[use, 3])):
            return False, tied
        split = self._loo_error(T, y, w, True, self.calls_)
        return (True, split) if split < tied else (False, tied)

    def _mean_fn(self, T):
        return mean_law(T, self.mean_coef_, self.split_bytes_)

    def _hyper(self, Zv, rt, noise_var, names=None):
        """(constant, length scales of the varying columns, noise_level, log marginal likelihood).
        ``names``: the varying columns' feature names (for the warnings)."""
        import numpy as np
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        n, dv = Zv.shape
        floor = self.constant_floor_
        c0 = float(np.clip(np.var(rt) if n > 1 else 0.05, floor, max(1.0, floor)))
        if n < 3 or dv == 0:
            self.warnings_.append(f"{n} sample(s): kernel hyperparameters not optimised")
            return c0, np.ones(dv), 1e-3, float("nan")
        few = n < MIN_SAMPLES_PER_DIM * dv
        if few:
            self.warnings_.append(f"{n} sample(s) for {dv} varying inputs: length scales fixed at "
                                  f"{FIXED_LENGTH_SCALE:g}, only amplitude and noise fitted")
        rng = np.random.default_rng(self.random_state)
        sub = np.arange(n) if n <= self.hyper_subset else np.sort(rng.choice(n, self.hyper_subset, replace=False))
        kernel = (ConstantKernel(c0, (floor, max(CONSTANT_BOUNDS[1], floor)))
                  * Matern(length_scale=np.full(dv, FIXED_LENGTH_SCALE),
                           length_scale_bounds="fixed" if few else LENGTH_SCALE_BOUNDS, nu=NU)
                  + WhiteKernel(1e-3, NOISE_BOUNDS))
        gpr = GaussianProcessRegressor(kernel=kernel, alpha=noise_var[sub] + 1e-10, normalize_y=False,
                                       n_restarts_optimizer=self.n_restarts_optimizer,
                                       random_state=self.random_state)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gpr.fit(Zv[sub], rt[sub])
        self.warnings_ += _summarise_convergence(
            [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)], names or [])
        k = gpr.kernel_
        return (round_sig(k.k1.k1.constant_value), np.atleast_1d(k.k1.k2.length_scale),
                round_sig(k.k2.noise_level), float(gpr.log_marginal_likelihood_value_))

    def n_inducing(self, n):
        """Inducing points for ``n`` samples: MIN_INDUCING, and one per SAMPLES_PER_INDUCING samples beyond
        that, at most ``max_inducing`` (a device profile's 100-200 probes of its largest kinds keep 64; a
        sweep of 1,000 per-layer measurements keeps 256, where 128 lost accuracy: willowec conv 11.0%
        against 9.75% in 5-fold CV). 64 rather than 128 below 384 samples (``bench/bench_inducing.py``,
        ``bench/results/inducing-host-20261127-103*``): estimates 1.25x faster and the file 13% smaller;
        held-out MAPE on 5 evaluations within 0.1 point for profile 16, 0.1-1.5 points worse for profile
        14 (its conv2d: 128 -> 69 points), per-layer 5-fold CV within 0.6 point on both."""
        return min(self.max_inducing, max(MIN_INDUCING, n // SAMPLES_PER_INDUCING))

    def _inducing(self, U):
        """Indices of at most ``n_inducing(n)`` distinct rows, farthest-first from the one nearest the centre."""
        import numpy as np

        m = self.n_inducing(len(U))
        _, first = np.unique(np.round(U, 9), axis=0, return_index=True)
        cand = np.sort(first)
        if len(cand) <= m:
            return cand
        P = U[cand]
        chosen = [int(np.argmin(((P - P.mean(0)) ** 2).sum(1)))]
        dmin = ((P - P[chosen[0]]) ** 2).sum(1)
        while len(chosen) < m:
            j = int(np.argmax(dmin))
            chosen.append(j)
            dmin = np.minimum(dmin, ((P - P[j]) ** 2).sum(1))
        return cand[np.array(sorted(chosen))]

    def _dtc(self, U, rt, noise_var):
        """alpha (m) and the variance factor W (rank x m) of the DTC posterior (see the module doc)."""
        import numpy as np
        from scipy.linalg import cho_solve, cholesky, eigh, solve_triangular

        c = self.constant_
        Um = self.inducing_ / self.length_scale_
        m = len(Um)
        Kmm = c * _matern52(Um, Um) + KMM_JITTER * c * np.eye(m)
        Kmn = c * _matern52(Um, U)
        lam = noise_var + self.noise_level_
        Lm = cholesky(Kmm, lower=True)
        V = solve_triangular(Lm, Kmn, lower=True)            # m x n  (Lm^-1 Kmn)
        B = np.eye(m) + (V / lam) @ V.T                        # I + Lm^-1 Kmn Lam^-1 Knm Lm^-T
        B = (B + B.T) / 2.0
        LB = cholesky(B, lower=True)
        # alpha = Lm^-T B^-1 Lm^-1 Kmn Lam^-1 r
        alpha = solve_triangular(Lm.T, cho_solve((LB, True), V @ (rt / lam)), lower=False)
        beta, Ub = eigh(B)                                     # B = Ub diag(beta) Ub^T, beta >= 1
        # an eigenvector's sign is LAPACK's choice: fix it (largest entry positive) so that one fit writes
        # one file on every machine; only |W k| is ever used, which the sign does not change
        peak = Ub[np.argmax(np.abs(Ub), axis=0), np.arange(m)]
        Ub = Ub * np.where(peak < 0, -1.0, 1.0)
        gain = np.clip(1.0 - 1.0 / beta, 0.0, 1.0)             # I - B^-1 = Ub diag(gain) Ub^T
        order = np.argsort(gain)[::-1][: self.max_rank]
        order = order[gain[order] > 1e-9]
        G = solve_triangular(Lm.T, Ub[:, order], lower=False)  # m x r:  Q = G diag(gain) G^T
        W = (G * np.sqrt(gain[order])).T                       # r x m:  |W k|^2 = k^T Q_r k <= k^T Q k
        if W.shape[0] == 0:
            W = np.zeros((1, m))
        self.rank_dropped_gain_ = float(gain.sum() - gain[order].sum())
        return np.array(_round_list(alpha)), np.array([_round_list(r, 6) for r in W])

    def _check_fitted(self):
        if not hasattr(self, "alpha_"):
            raise UsageError("this KindGP is not fitted yet; call fit(X, y) first")

    # ---------------------------------------------------------------- predicting
    def predict_log(self, X, terms=None):
        """(ln of the mean function, residual posterior mean, residual variance incl. noise_level, k_m)."""
        import numpy as np

        self._check_fitted()
        X = self._check_X(X)
        T = self._check_terms(terms, X.shape[0])
        K = self.constant_ * _matern52(self._u(self._inputs(X, T)), self.inducing_ / self.length_scale_)
        mu = self.residual_offset_ + K @ self.alpha_
        v = K @ self.var_factor_.T
        var = np.maximum(self.constant_ + self.noise_level_ - (v * v).sum(1), 1e-12)
        return np.log(self._mean_fn(T)), mu, var, v

    def predict(self, X, terms=None, return_std=False, return_cov=False):
        """Mean (and std, or joint covariance) of the cost of each row, in the metric's unit."""
        import numpy as np

        if return_std and return_cov:
            raise UsageError("ask for return_std or return_cov, not both")
        logm, mu, var, v = self.predict_log(X, terms)
        mean, std = lognormal_moments(logm + mu, var)
        if return_cov:
            X = self._check_X(X)
            U = self._u(self._inputs(X, self._check_terms(terms, X.shape[0])))
            cov_log = self.constant_ * _matern52(U, U) - v @ v.T
            np.fill_diagonal(cov_log, var)
            return mean, np.outer(mean, mean) * np.expm1(cov_log)
        if return_std:
            return mean, std
        return mean

    def latent_cov(self, X1, X2, T1, T2):
        """Posterior covariance (ln units, no white noise) of the residual between rows of X1 and X2
        (with their cost terms T1, T2)."""
        self._check_fitted()
        X1, X2 = self._check_X(X1), self._check_X(X2)
        U1 = self._u(self._inputs(X1, self._check_terms(T1, X1.shape[0])))
        U2 = self._u(self._inputs(X2, self._check_terms(T2, X2.shape[0])))
        Um = self.inducing_ / self.length_scale_
        c = self.constant_
        v1 = (c * _matern52(U1, Um)) @ self.var_factor_.T
        v2 = (c * _matern52(U2, Um)) @ self.var_factor_.T
        return c * _matern52(U1, U2) - v1 @ v2.T

    # ------------------------------------------------------------------ export
    def to_dict(self):
        """The JSON-able per-kind entry of an estimator (version 4; floats to 8 significant digits)."""
        self._check_fitted()
        a, bf, bb, bs = self.mean_coef_[:4]
        mean_function = {"overhead": round_sig(a), "per_flop": round_sig(bf), "per_byte": round_sig(bb)}
        if self.split_bytes_:
            mean_function["per_step_byte"] = round_sig(bs)
        if len(self.mean_coef_) > 4:
            mean_function["per_call"] = round_sig(self.mean_coef_[4])
        return {
            "features": list(self.input_features),
            "feature_transform": "log1p",
            "x_mean": _round_list(self.x_mean_),
            "x_scale": _round_list(self.x_scale_),
            "mean_function": mean_function,
            "residual_offset": round_sig(self.residual_offset_),
            "kernel": {"constant": round_sig(self.constant_), "length_scale": _round_list(self.length_scale_),
                       "nu": NU, "noise_level": round_sig(self.noise_level_)},
            "inducing": [_round_list(r, 6) for r in self.inducing_],
            "alpha": _round_list(self.alpha_),
            "var_factor": [_round_list(r, 6) for r in self.var_factor_],
            "n_samples": int(self.n_samples_),
            **({"feature_range": [list(r) for r in self.feature_range_]} if self.feature_range_ is not None else {}),
            "fit": {"log_marginal_likelihood": (round_sig(self.log_marginal_likelihood_)
                                                if math.isfinite(self.log_marginal_likelihood_) else None),
                    "floored_samples": self.n_floored_,
                    "residual_rms": round_sig(self.sample_stats_["residual_rms"], 4),
                    "mean_function_mape": round_sig(self.sample_stats_["mean_function_mape"], 4),
                    "warnings": list(self.warnings_)},
        }

    @classmethod
    def from_dict(cls, d):
        """Rebuild a fitted KindGP from ``to_dict()`` output (exactly the stored, rounded numbers)."""
        import numpy as np

        try:
            self = cls(features=d["features"])
            if d["feature_transform"] != "log1p":
                raise FormatError(f"unknown feature transform {d['feature_transform']!r}")
            mf, k = d["mean_function"], d["kernel"]
            self.split_bytes_ = "per_step_byte" in mf
            self.mean_coef_ = [float(mf["overhead"]), float(mf["per_flop"]), float(mf["per_byte"]),
                               float(mf["per_step_byte" if self.split_bytes_ else "per_byte"])]
            self.calls_ = "per_call" in mf
            if self.calls_:
                self.mean_coef_.append(float(mf["per_call"]))
            self.x_mean_ = np.array(d["x_mean"], dtype=float)
            self.x_scale_ = np.array(d["x_scale"], dtype=float)
            self.residual_offset_ = float(d["residual_offset"])
            self.constant_ = float(k["constant"])
            self.length_scale_ = np.array(k["length_scale"], dtype=float)
            self.noise_level_ = float(k["noise_level"])
            self.inducing_ = np.array(d["inducing"], dtype=float)
            self.alpha_ = np.array(d["alpha"], dtype=float)
            self.var_factor_ = np.array(d["var_factor"], dtype=float)
            self.n_samples_ = int(d["n_samples"])
            fr = d.get("feature_range")
            self.feature_range_ = [[float(lo), float(hi)] for lo, hi in fr] if fr is not None else None
            fit = d.get("fit") or {}
            lml = fit.get("log_marginal_likelihood")
            self.log_marginal_likelihood_ = float("nan") if lml is None else float(lml)
            self.n_floored_ = int(fit.get("floored_samples", 0))
            self.warnings_ = list(fit.get("warnings", []))
            self.sample_stats_ = {"n": self.n_samples_, "floored": self.n_floored_,
                                  "residual_rms": float(fit.get("residual_rms", float("nan"))),
                                  "mean_function_mape": float(fit.get("mean_function_mape", float("nan")))}
            if self.var_factor_.ndim != 2 or self.var_factor_.shape[1] != len(self.alpha_):
                raise ValueError("var_factor must have one column per inducing point")
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"kind entry is malformed: {type(e).__name__}: {e}") from None
        return self
