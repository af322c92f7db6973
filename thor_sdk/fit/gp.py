"""One Gaussian Process per layer kind: raw layer features -> per-layer cost (seconds or joules).

Model (documented with the estimator format in ``docs/estimator-format.md``):

- features: ``x' = ln(1 + x)``, then standardised per column (``(x' - x_mean) / x_scale``; the scale
  is 1 where a column is constant in the training data);
- target: ``"log"`` (``y' = ln y``) when every training cost is > 0, else ``"linear"`` (``y' = y``;
  per-layer costs obtained by subtracting two noisy measurements can be zero or negative);
- scikit-learn ``GaussianProcessRegressor`` with kernel
  ``ConstantKernel * Matern(length_scale=ones(d), nu=2.5) + WhiteKernel`` and ``normalize_y=True``;
- back-transform of a ``"log"`` target: the GP posterior ``N(mu, s^2)`` in log space is a lognormal
  in original units, so ``mean = exp(mu + s^2/2)`` and ``std = mean * sqrt(exp(s^2) - 1)``;
  ``"linear"``: mean and std as they are.

``to_dict()`` exports everything needed to predict without scikit-learn; the runtimes in
``thor_sdk/runtime``, ``android_harness/runtime`` and ``ios_harness/Runtime`` read it. The Cholesky
factor ``L_`` is not stored (it would triple the file) but recomputed from ``x_train`` and the
kernel when loading, exactly as ``GaussianProcessRegressor.fit`` computes it.
``from_dict()`` rebuilds a scikit-learn regressor from such a dict without refitting, so tests can
check that a runtime reproduces scikit-learn on exactly the exported numbers.

scikit-learn and numpy are imported inside the methods that need them.
"""

import math
import warnings

from thor_sdk.errors import FormatError, UsageError

TARGET_TRANSFORMS = ("log", "linear")
SIGNIFICANT_DIGITS = 10

# hyperparameter bounds, in standardised feature units and normalised target units
CONSTANT_BOUNDS = (1e-3, 1e3)
LENGTH_SCALE_BOUNDS = (1e-2, 1e3)
# noise >= 1e-6 (normalised units, i.e. a noise std of 0.1 % of the targets' spread): keeps
# K + noise * I well conditioned with duplicated rows, so every runtime's Cholesky agrees closely
NOISE_BOUNDS = (1e-6, 1e0)
NOISE_INIT = 1e-2
NU = 2.5
JITTER = 1e-10  # scikit-learn's GaussianProcessRegressor(alpha=...): added to K's diagonal


def round_sig(x, digits=SIGNIFICANT_DIGITS):
    """``x`` rounded to ``digits`` significant digits (a plain Python float)."""
    return float(f"{float(x):.{digits}g}")


def _round_list(values):
    return [round_sig(v) for v in values]


def lognormal_moments(mu, var):
    """Mean and std in original units of ``exp(N(mu, var))`` (numpy arrays or floats)."""
    import numpy as np

    mean = np.exp(mu + var / 2.0)
    return mean, mean * np.sqrt(np.expm1(var))


class KindGP:
    """A Gaussian Process for one layer kind, scikit-learn style.

    >>> gp = KindGP(features=["numel", "batch_size", "role"]).fit(X, y)      # doctest: +SKIP
    >>> mean, std = gp.predict(X_new, return_std=True)                        # doctest: +SKIP
    """

    def __init__(self, features, random_state=0, n_restarts_optimizer=2):
        self.features = list(features)
        self.random_state = random_state
        self.n_restarts_optimizer = n_restarts_optimizer

    # ------------------------------------------------------------------ fitting
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

    def _transform_X(self, X):
        import numpy as np

        return (np.log1p(X) - self.x_mean_) / self.x_scale_

    def fit(self, X, y, noise_std=None):
        """Fit on raw features ``X`` (n x d; role encoded input=1, hidden=0) and costs ``y`` (n).

        ``noise_std``: optional standard error of each cost as measured (repeat rounds). When given,
        the white-noise level may not exceed 4x the mean measured noise variance (in the GP's
        normalised target units): with few samples, maximum likelihood otherwise likes to explain
        real differences between layers as noise and returns the average for every config.
        """
        import numpy as np
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        X = self._check_X(X)
        y = np.asarray(y, dtype=float).ravel()
        if len(y) == 0 or len(y) != X.shape[0]:
            raise UsageError(f"need one cost per feature row and at least one row, got {X.shape[0]} rows "
                             f"and {len(y)} costs")
        if not np.all(np.isfinite(y)):
            raise UsageError("costs must be finite numbers")
        n, d = X.shape

        Xl = np.log1p(X)
        self.x_mean_ = np.array(_round_list(Xl.mean(axis=0)))
        std = Xl.std(axis=0)
        self.x_scale_ = np.array(_round_list(np.where(std > 1e-12 * np.maximum(1.0, np.abs(self.x_mean_)), std, 1.0)))
        Z = self._transform_X(X)

        self.target_transform_ = "log" if np.all(y > 0) else "linear"
        yt = np.log(y) if self.target_transform_ == "log" else y

        noise_bounds, noise_init = NOISE_BOUNDS, NOISE_INIT
        self.measured_noise_var_ = None
        if noise_std is not None:
            s_ = np.abs(np.asarray(noise_std, dtype=float).ravel())
            if s_.shape != y.shape or not np.all(np.isfinite(s_)):
                raise UsageError("noise_std needs one finite standard error per cost")
            var_t = (s_ / y) ** 2 if self.target_transform_ == "log" else s_ ** 2
            y_var = float(np.var(yt)) if n > 1 and np.var(yt) > 0 else 1.0
            measured = float(np.mean(var_t)) / y_var
            if measured > 0:
                self.measured_noise_var_ = measured
                upper = min(NOISE_BOUNDS[1], max(4.0 * measured, 10.0 * NOISE_BOUNDS[0]))
                noise_bounds = (NOISE_BOUNDS[0], upper)
                noise_init = min(max(measured, NOISE_BOUNDS[0]), upper)
        kernel = (ConstantKernel(1.0, CONSTANT_BOUNDS)
                  * Matern(length_scale=np.ones(d), length_scale_bounds=LENGTH_SCALE_BOUNDS, nu=NU)
                  + WhiteKernel(noise_init, noise_bounds))
        self.warnings_ = []
        if n < 2:
            # one point says nothing about length scales or noise: keep the initial hyperparameters
            optimizer, restarts = None, 0
            self.warnings_.append("only one sample: kernel hyperparameters not optimised")
        else:
            optimizer, restarts = "fmin_l_bfgs_b", self.n_restarts_optimizer
        gpr = GaussianProcessRegressor(kernel=kernel, normalize_y=True, optimizer=optimizer,
                                       n_restarts_optimizer=restarts, random_state=self.random_state, alpha=JITTER)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gpr.fit(Z, yt)
        for w in caught:
            if issubclass(w.category, ConvergenceWarning):
                self.warnings_.append(str(w.message))
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        self.gpr_ = gpr
        self.n_samples_ = n
        self.log_marginal_likelihood_ = float(gpr.log_marginal_likelihood_value_)
        return self

    def _check_fitted(self):
        if not hasattr(self, "gpr_"):
            raise UsageError("this KindGP is not fitted yet; call fit(X, y) first")

    # ---------------------------------------------------------------- predicting
    def predict(self, X, return_std=False, return_cov=False):
        """Mean (and std, or covariance) of the cost of each row of raw features, in ORIGINAL units.

        ``return_cov=True`` gives the joint covariance of the rows (white noise only on the
        diagonal, as scikit-learn's ``predict(return_cov=True)``), converted to original units with
        the lognormal identity ``Cov(a, b) = m_a m_b (exp(Cov_log(a, b)) - 1)`` for a ``"log"`` target.
        """
        import numpy as np

        if return_std and return_cov:
            raise UsageError("ask for return_std or return_cov, not both")
        self._check_fitted()
        Z = self._transform_X(self._check_X(X))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Predicted variances smaller than 0")
            if return_cov:
                mu, cov = self.gpr_.predict(Z, return_cov=True)
            elif return_std:
                mu, std = self.gpr_.predict(Z, return_std=True)
            else:
                mu = self.gpr_.predict(Z)
        if return_cov:
            cov = np.array(cov, dtype=float)
            var = np.maximum(np.diag(cov), 0.0)
            np.fill_diagonal(cov, var)
            if self.target_transform_ == "log":
                mean, _ = lognormal_moments(mu, var)
                return mean, np.outer(mean, mean) * np.expm1(cov)
            return mu, cov
        if not return_std:
            if self.target_transform_ == "log":
                # the mean of the lognormal needs the variance too
                mu, std = self.gpr_.predict(Z, return_std=True)
                return lognormal_moments(mu, std ** 2)[0]
            return mu
        if self.target_transform_ == "log":
            return lognormal_moments(mu, std ** 2)
        return mu, std

    # ------------------------------------------------------------------ export
    def to_dict(self):
        """The JSON-able per-kind entry of an estimator (floats rounded to 10 significant digits)."""
        import numpy as np

        self._check_fitted()
        g = self.gpr_
        k = g.kernel_
        return {
            "features": list(self.features),
            "feature_transform": "log1p",
            "x_mean": [float(v) for v in self.x_mean_],
            "x_scale": [float(v) for v in self.x_scale_],
            "target_transform": self.target_transform_,
            "y_mean": round_sig(np.ravel(g._y_train_mean)[0]),
            "y_scale": round_sig(np.ravel(g._y_train_std)[0]),
            "kernel": {
                "constant": round_sig(k.k1.k1.constant_value),
                "length_scale": _round_list(np.atleast_1d(k.k1.k2.length_scale)),
                "nu": NU,
                "noise_level": round_sig(k.k2.noise_level),
            },
            "x_train": [_round_list(row) for row in np.asarray(g.X_train_)],
            "jitter": float(g.alpha),
            "alpha": _round_list(np.ravel(g.alpha_)),
            "n_samples": int(self.n_samples_),
            "log_marginal_likelihood": round_sig(self.log_marginal_likelihood_),
            "fit_warnings": list(self.warnings_),
        }

    @classmethod
    def from_dict(cls, d):
        """Rebuild a fitted KindGP from ``to_dict()`` output without refitting (predictions use
        exactly the stored, rounded numbers, as the runtimes do)."""
        import numpy as np
        from scipy.linalg import LinAlgError, cholesky
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        try:
            self = cls(features=d["features"])
            kd = d["kernel"]
            if d["target_transform"] not in TARGET_TRANSFORMS or d["feature_transform"] != "log1p":
                raise FormatError(f"unknown transform in GP entry: {d['target_transform']!r} / {d['feature_transform']!r}")
            kernel = (ConstantKernel(kd["constant"], "fixed")
                      * Matern(length_scale=np.array(kd["length_scale"], dtype=float), length_scale_bounds="fixed",
                               nu=float(kd["nu"]))
                      + WhiteKernel(kd["noise_level"], "fixed"))
            X_train = np.array(d["x_train"], dtype=float)
            n = X_train.shape[0]
            jitter = float(d["jitter"])
            # exactly what GaussianProcessRegressor.fit factorises: K(X_train) + jitter * I
            K = kernel(X_train)
            K[np.diag_indices_from(K)] += jitter
            L = cholesky(K, lower=True, check_finite=False)
            gpr = GaussianProcessRegressor(kernel=kernel, normalize_y=True, optimizer=None, alpha=jitter)
            gpr.kernel_ = kernel
            gpr.X_train_ = X_train
            gpr.y_train_ = np.zeros(n)
            gpr.alpha_ = np.array(d["alpha"], dtype=float)
            gpr.L_ = L
            gpr._y_train_mean = np.array(float(d["y_mean"]))
            gpr._y_train_std = np.array(float(d["y_scale"]))
            gpr.n_features_in_ = X_train.shape[1]
            self.x_mean_ = np.array(d["x_mean"], dtype=float)
            self.x_scale_ = np.array(d["x_scale"], dtype=float)
            self.target_transform_ = d["target_transform"]
            self.n_samples_ = int(d["n_samples"])
            self.log_marginal_likelihood_ = float(d.get("log_marginal_likelihood", math.nan))
            self.warnings_ = list(d.get("fit_warnings", []))
        except LinAlgError as e:
            raise FormatError(f"GP entry is malformed: its kernel matrix is not positive definite ({e})") from None
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"GP entry is malformed: {type(e).__name__}: {e}") from None
        self.gpr_ = gpr
        return self
