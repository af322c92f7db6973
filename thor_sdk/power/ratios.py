"""Batch-size efficiency on an offline proxy: samples to a target accuracy, as a ratio to the largest batch.

For each batch size b and seed s the network is trained from scratch with SGD (momentum 0.9) at
``lr(b) = base_lr * sqrt(b / b_max)`` (square-root scaling from the largest batch) until the
validation accuracy first reaches the target; validation runs every ``eval_every_samples`` samples
(default: the largest batch size, so every batch size is judged at the same sample resolution).
The expected samples per batch size come from an ``EfficiencyModel`` fitted on all batch sizes' runs
(``ratio_model``: ``unimodal`` by default, the estimator the Zeus-trace replay validated; ``mean`` is
the plain per-batch mean) and ``ratio(b) = expected(b) / expected(b_max)``. A batch size that misses
the target within ``max_epochs`` in any seed gets no ratio (``ratio: null``, with how many seeds
reached it).
The document (format ``thor-sdk/batch-ratios``) is checked against ``$defs/ratios`` of
``thor_sdk/schemas/table.schema.json``.
"""

import math
import statistics

from thor_sdk.errors import MeasurementError, UsageError

RATIOS_FORMAT = "thor-sdk/batch-ratios"
RATIOS_VERSION = 1


def parse_batch_sizes(text):
    """Sorted distinct batch sizes from ``8,16,32``: integers in [1, MAX_RUN_BATCH_SIZE], none twice."""
    from thor_sdk.bounds import batch_sizes

    try:
        out = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"batch sizes must be comma-separated integers, got {text!r}") from None
    if not out:
        raise UsageError(f"batch sizes must be positive integers, got {text!r}")
    return sorted(batch_sizes(out))


def estimate_ratios(model="mlp", proxy="digits", batch_sizes=(16, 32, 64, 128), target_accuracy=0.9,
                    seeds=(0, 1, 2), base_lr=0.1, max_epochs=30, eval_every_samples=None, progress=None,
                    ratio_model="unimodal"):
    """Train on the proxy per batch size and seed; return the ratios document (a dict)."""
    if ratio_model not in EFFICIENCY_MODELS:
        raise UsageError(f"ratio model must be one of {', '.join(EFFICIENCY_MODELS)}, got {ratio_model!r}")
    from thor_sdk.bounds import MAX_EPOCHS, MAX_LR, number

    number("target accuracy", target_accuracy, low=0, low_open=True, high=1)
    number("base learning rate", base_lr, low=0, low_open=True, high=MAX_LR)
    number("max epochs", max_epochs, low=1, high=MAX_EPOCHS, integer=True)
    for s in seeds:
        number("seed", s, low=0, high=2 ** 32 - 1, integer=True)
    batch_sizes = sorted(set(int(b) for b in batch_sizes))
    if not batch_sizes or batch_sizes[0] < 1:
        raise UsageError("give at least one positive batch size")
    if not 0 < target_accuracy <= 1:
        raise UsageError(f"target accuracy must be in (0, 1], got {target_accuracy}")
    if not seeds:
        raise UsageError("give at least one seed")
    import torch  # after every check: a bad input is refused without the 2-4 s of importing torch

    from .data import Trainer, adapt, build_net, load_proxy, split

    X, y, info = load_proxy(proxy)
    Xtr, Xv, ytr, yv = split(X, y)
    n_classes = int(y.max()) + 1
    xt, xv = adapt(Xtr, model, info), adapt(Xv, model, info)
    yt, yvt = torch.as_tensor(ytr), torch.as_tensor(yv)
    b_max = batch_sizes[-1]
    if b_max > len(xt):
        raise UsageError(f"largest batch {b_max} exceeds the proxy's {len(xt)} training samples")
    every = int(eval_every_samples or b_max)
    max_samples = max_epochs * len(xt)
    n_features = xt[0].numel() if model == "mlp" else None
    total, done = len(batch_sizes) * len(seeds), 0
    entries = []
    for b in batch_sizes:
        lr = base_lr * math.sqrt(b / b_max)
        per_seed = []
        for s in seeds:
            if progress:
                progress(done, total, f"batch {b} seed {s}")
            net = build_net(model, n_features or 64, n_classes, seed=s)
            tr = Trainer(net, xt, yt, xv, yvt, b, lr, seed=s)
            per_seed.append(tr.samples_to_target(target_accuracy, max_samples, every))
            done += 1
        reached = [v for v in per_seed if math.isfinite(v)]
        entries.append({"batch_size": b, "lr": lr, "samples_to_target": [v if math.isfinite(v) else None
                                                                          for v in per_seed],
                        "reached": len(reached), "mean_samples": statistics.fmean(reached) if
                        len(reached) == len(per_seed) else None})
    if progress:
        progress(total, total, "done")
    ref = entries[-1]
    if ref["mean_samples"] is None:
        raise MeasurementError(
            f"the largest batch ({b_max}) did not reach {target_accuracy} in every seed within {max_epochs} "
            "epochs: lower --target-accuracy, raise --max-epochs or --base-lr")
    fitted = EfficiencyModel(ratio_model).fit({e["batch_size"]: e["samples_to_target"] for e in entries})
    ratios = fitted.ratios(b_max)
    for e in entries:
        e["expected_samples"] = fitted.expected_.get(e["batch_size"])
        e["ratio"] = ratios.get(e["batch_size"])
    return {"format": RATIOS_FORMAT, "version": RATIOS_VERSION, "model": model, "proxy": info["name"],
            "proxy_source": info["source"], "target_accuracy": target_accuracy, "seeds": list(seeds),
            "lr_rule": "sqrt", "base_lr": base_lr, "optimizer": "sgd momentum 0.9",
            "ratio_model": ratio_model, "ratio_model_definition": EFFICIENCY_DEFINITIONS[ratio_model],
            "reference_batch_size": b_max, "reference_samples_to_target": fitted.expected_[b_max],
            "eval_every_samples": every, "max_epochs": max_epochs, "train_samples": len(xt),
            "val_samples": len(xv), "ratios": entries}


# --- batch-size efficiency models: expected samples-to-target per batch size from repeated runs ---------

EFFICIENCY_MODELS = ("unimodal", "mccandlish", "mean")
EFFICIENCY_DEFINITIONS = {
    "mean": "per-batch arithmetic mean of the runs' samples (or epochs) to the target",
    "unimodal": ("least-squares unimodal regression of log(mean samples) over sorted batch sizes, weighted by "
                 "the number of runs: non-increasing up to the most efficient batch, non-decreasing after it"),
    "mccandlish": ("E(B) = E_min (1 + B / B_crit) (McCandlish et al. 2018), least squares on log(mean samples) "
                   "weighted by the number of runs"),
}


def _pava_increasing(y, w):
    """Weighted least-squares non-decreasing fit (pool adjacent violators)."""
    blocks = []  # [value, weight, count]
    for yi, wi in zip(y, w):
        blocks.append([yi, wi, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, c2 = blocks.pop()
            v1, w1, c1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return [v for v, _, c in blocks for _ in range(c)]


def unimodal_fit(y, w):
    """Weighted least-squares fit of ``y`` that is non-increasing, then non-decreasing (a valley).

    Every split point ``k`` is tried: ``y[:k]`` fitted non-increasing, ``y[k:]`` non-decreasing (PAVA);
    the split with the smallest weighted residual wins (the first one on ties). Returns the fitted list.
    """
    best, best_sse = None, math.inf
    for k in range(len(y) + 1):
        left = _pava_increasing(y[:k][::-1], w[:k][::-1])[::-1]
        fit = left + _pava_increasing(y[k:], w[k:])
        sse = math.fsum(wi * (yi - fi) ** 2 for yi, fi, wi in zip(y, fit, w))
        if sse < best_sse - 1e-12:
            best, best_sse = fit, sse
    return best


def mccandlish_fit(batch_sizes, y, w):
    """Fit ``log E(B) = log E_min + log(1 + B / B_crit)`` to ``y = log(mean samples)`` (weights ``w``).

    ``E_min`` is profiled out in closed form; ``log B_crit`` is searched on a grid from 1/1000 of the
    smallest to 1000x the largest batch size, refined by golden section; ``B_crit = inf`` (no growth)
    is a candidate too. Returns ``(E_min, B_crit)`` (``B_crit`` may be ``math.inf``).
    """
    sw = math.fsum(w)

    def profile(b_crit):
        g = [0.0 if math.isinf(b_crit) else math.log1p(b / b_crit) for b in batch_sizes]
        a = math.fsum(wi * (yi - gi) for yi, gi, wi in zip(y, g, w)) / sw
        return math.fsum(wi * (yi - a - gi) ** 2 for yi, gi, wi in zip(y, g, w)), a

    lo, hi = math.log(min(batch_sizes) / 1e3), math.log(max(batch_sizes) * 1e3)
    n = 240
    grid = [lo + (hi - lo) * i / n for i in range(n + 1)]
    sses = [profile(math.exp(u))[0] for u in grid]
    i = min(range(len(grid)), key=lambda j: sses[j])
    a_u, b_u = grid[max(i - 1, 0)], grid[min(i + 1, n)]
    phi = (math.sqrt(5) - 1) / 2
    for _ in range(60):  # golden section on log B_crit
        c, d = b_u - phi * (b_u - a_u), a_u + phi * (b_u - a_u)
        if profile(math.exp(c))[0] < profile(math.exp(d))[0]:
            b_u = d
        else:
            a_u = c
    u = (a_u + b_u) / 2
    sse, a = profile(math.exp(u))
    sse_flat, a_flat = profile(math.inf)
    if sse_flat <= sse + 1e-12:
        return math.exp(a_flat), math.inf
    return math.exp(a), math.exp(u)


class EfficiencyModel:
    """Expected samples (or epochs) to the target per batch size, estimated from repeated runs.

    ``kind``: ``"unimodal"`` (default), ``"mccandlish"`` or ``"mean"`` (see ``EFFICIENCY_DEFINITIONS``).
    ``fit(runs_by_batch)`` takes ``{batch_size: [samples per run; inf or None = never reached]}``. A batch
    size with any run that missed the target is left out of the fit (its successful runs alone would be
    survivor-biased) and listed in ``failed_batch_sizes_``; it has no expected value. Fitted state:
    ``batch_sizes_``, ``n_runs_``, ``means_`` and ``expected_`` (``{batch: samples}``), ``params_``.
    """

    def __init__(self, kind="unimodal"):
        if kind not in EFFICIENCY_MODELS:
            raise UsageError(f"efficiency model must be one of {', '.join(EFFICIENCY_MODELS)}, got {kind!r}")
        self.kind = kind

    def fit(self, runs_by_batch):
        ok, failed = {}, []
        for b, runs in runs_by_batch.items():
            runs = [math.inf if r is None else float(r) for r in runs]
            if not runs:
                continue
            if any(math.isfinite(r) and r <= 0 for r in runs):
                raise UsageError(f"batch {b}: samples to target must be > 0, got {runs}")
            if all(math.isfinite(r) for r in runs):
                ok[int(b)] = runs
            else:
                failed.append(int(b))
        if not ok:
            raise MeasurementError("no batch size reached the target in every run")
        bs = sorted(ok)
        n = [len(ok[b]) for b in bs]
        m = [math.fsum(ok[b]) / len(ok[b]) for b in bs]
        logs = [math.log(x) for x in m]
        self.params_ = {}
        if self.kind == "mean":
            fitted = m
        elif self.kind == "unimodal":
            fitted = [math.exp(v) for v in unimodal_fit(logs, n)]
        else:
            e_min, b_crit = mccandlish_fit(bs, logs, n)
            self.params_ = {"e_min": e_min, "b_crit": b_crit}
            fitted = [self._law(b) for b in bs]
        self.batch_sizes_, self.n_runs_ = bs, dict(zip(bs, n))
        self.means_, self.expected_ = dict(zip(bs, m)), dict(zip(bs, fitted))
        self.failed_batch_sizes_ = sorted(failed)
        return self

    def _law(self, b):
        p = self.params_
        return p["e_min"] * (1.0 if math.isinf(p["b_crit"]) else 1.0 + b / p["b_crit"])

    def predict(self, batch_sizes):
        """Expected samples per batch size: ``inf`` for a failed one; the law's value for an unseen one
        (``mccandlish`` only: the other kinds know only the batch sizes they were fitted on)."""
        out = []
        for b in batch_sizes:
            b = int(b)
            if b in self.expected_:
                out.append(self.expected_[b])
            elif b in self.failed_batch_sizes_:
                out.append(math.inf)
            elif self.kind == "mccandlish":
                out.append(self._law(b))
            else:
                raise UsageError(f"batch {b} was not among the fitted batch sizes {self.batch_sizes_}")
        return out

    def ratios(self, reference_batch_size=None):
        """``{batch: expected samples / the reference's}``; the reference defaults to the largest fitted."""
        ref = max(self.expected_) if reference_batch_size is None else int(reference_batch_size)
        if ref not in self.expected_:
            raise UsageError(f"reference batch {ref} has no fitted value")
        return {b: e / self.expected_[ref] for b, e in self.expected_.items()}
