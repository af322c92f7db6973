"""FLOPs baseline: per layer kind, cost = (cost per FLOP) x training FLOPs + a per-step overhead, both fitted >= 0.

Fitted from the same probe samples as THOR's GPs, so the comparison is fair: for each kind, the rate
``unit_per_flop`` and the per-layer, per-step ``overhead`` minimise the RELATIVE squared error
``sum(((rate * flops_i + overhead) / cost_i - 1)^2)`` (weights ``1 / cost_i``, so a small layer counts as
much as a large one), under ``rate >= 0`` and ``overhead >= 0`` (non-negative least squares in two
unknowns: the best of the four active sets). One rate for every kind, through the origin, gave 98.8%
error on pooling layers in real energy data (42.6% with their own rate; issue 10): a weak baseline
would flatter THOR. FLOPs are the layer's training FLOPs (forward, backward and SGD update: ``Kind.train_flops``).

- A sample at or below twice its standard error (a subtraction within noise, possibly <= 0) counts at a
  small floor, twice its standard error (at least 1e-15), its error taken relative to the smallest cost
  resolved for its kind (else overall) where that is larger: it pulls the fit towards nothing without
  owning it. A layer cannot cost less than nothing, so nothing fitted is ever negative.
- A kind with one sample, or one FLOPs value, cannot separate rate from overhead: its rate goes through
  the origin (overhead 0); a kind whose layers have no FLOPs at all (flatten, ...) gets an overhead only,
  with the global rate.
- The global ``unit_per_flop`` and ``overhead``, fitted the same way over all samples pooled, stand in
  for kinds without samples (and for estimators written before per-kind rates: rate only, overhead 0).

It is shown beside every THOR estimate so users see how far a FLOPs guess is off.
"""

import math

from thor_sdk.layers.kinds import get_kind

MIN_COST = 1e-15  # s or J: below any measurable layer cost (thor_sdk.fitting.gp.MIN_COST)
SAME_FLOPS_REL = 1e-9  # FLOPs this close (relative) are one value: rate and overhead cannot be told apart
METHOD = ("per kind: cost = unit_per_flop * train_flops + overhead, both >= 0, non-negative least squares on "
          "the relative error (weights 1 / cost); samples at or below twice their standard error counted at "
          "twice that error, relative to the kind's smallest resolved cost if larger; one sample or one FLOPs "
          "value: rate through the origin; no FLOPs: overhead only; kinds without samples: the global "
          "unit_per_flop and overhead, fitted the same way over all samples")


def layer_train_flops(layer, batch_size):
    """Training FLOPs (forward + backward + update) of one layer dict (kind, config, role) at ``batch_size``."""
    return get_kind(layer["kind"]).train_flops(layer["config"], batch_size, layer.get("role", "hidden"))


def _num(x):
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _nonneg(x):
    """``x`` as a float when it is a finite number > 0, else 0.0 (a stored cost term is never used negative)."""
    return float(x) if _num(x) and x > 0 else 0.0


def fit_rate_overhead(flops, costs, scales=None):
    """``(rate, overhead, how)`` minimising ``sum(((rate * f + overhead - c) / scale)^2)`` with both >= 0.

    ``flops``: training FLOPs (>= 0) per sample; ``costs``: their costs, already floored (> 0);
    ``scales``: what each error is relative to (default: the cost itself, i.e. relative error). Samples
    that are not finite, with a cost or scale <= 0, or whose weighted terms overflow, are left out.
    ``rate`` is None where no sample has FLOPs (nothing to fit it from); ``how``: ``"nnls"`` (rate and
    overhead, the best of the four active sets), ``"origin"`` (one FLOPs value: rate only),
    ``"overhead only"`` (no FLOPs), ``"none"``.
    """
    import numpy as np

    scales = costs if scales is None else scales
    # a layer does at least one FLOP or none: fewer (a subnormal from a corrupt input) counts as none
    rows = [(float(f) if f >= 1.0 else 0.0, float(c), float(d)) for f, c, d in zip(flops, costs, scales)
            if _num(f) and _num(c) and _num(d) and c > 0 and d > 0]
    if not rows:
        return None, 0.0, "none"
    f, c, d = (np.array(col) for col in zip(*rows))
    with np.errstate(over="ignore"):
        a, b, t = f / d, 1.0 / d, c / d  # the weighted design: rate * a_i + overhead * b_i ~ t_i
    ok = np.isfinite(a) & np.isfinite(b) & np.isfinite(t)  # a scale too small for a float: left out
    if not ok.any():
        return None, 0.0, "none"
    f, a, b, t = f[ok], a[ok], b[ok], t[ok]
    a_max, b_max = float(a.max()), float(b.max())
    b_s = b / b_max  # scaled to <= 1: no overflow, a well-conditioned solve
    if a_max <= 0.0:  # no FLOPs at all: a constant cost per layer
        return None, _nonneg(float((b_s @ t) / (b_s @ b_s)) / b_max), "overhead only"
    a_s = a / a_max
    origin = (float((a_s @ t) / (a_s @ a_s)), 0.0)
    if float(f.max() - f.min()) <= SAME_FLOPS_REL * float(f.max()):
        return _nonneg(origin[0] / a_max), 0.0, "origin"
    candidates = [origin, (0.0, float((b_s @ t) / (b_s @ b_s)))]
    sol, *_ = np.linalg.lstsq(np.column_stack([a_s, b_s]), t, rcond=None)
    if np.all(np.isfinite(sol)) and sol[0] >= 0 and sol[1] >= 0:
        candidates.insert(0, (float(sol[0]), float(sol[1])))
    r, o = min(candidates, key=lambda x: float(np.sum((x[0] * a_s + x[1] * b_s - t) ** 2)))
    return _nonneg(r / a_max), _nonneg(o / b_max), "nnls"


def fit_baseline(rows):
    """The ``flops_baseline`` document from ``rows`` of ``(kind, train_flops, value, std)``.

    Returns ``{"unit_per_flop", "overhead", "n_samples", "n_floored", "method", "per_kind": {kind:
    {"unit_per_flop", "overhead", "n_samples"}}}``: every number finite and >= 0.
    """
    clean = []
    for kind, f, v, s in rows:
        if _num(f) and _num(v):
            clean.append((kind, max(float(f), 0.0), float(v), abs(float(s)) if _num(s) else 0.0))
    resolved = {}
    for kind, _, v, s in clean:
        if v > 2.0 * s and v >= MIN_COST:
            resolved[kind] = min(v, resolved.get(kind, math.inf))
    smallest = min(resolved.values(), default=MIN_COST)
    by_kind, n_floored = {}, 0
    for kind, f, v, s in clean:
        if v > 2.0 * s and v >= MIN_COST:
            y = d = v  # relative error
        else:  # within noise of nothing: at a small floor, weighed like the kind's smallest resolved cost
            y = max(2.0 * s, MIN_COST)
            d, n_floored = max(y, resolved.get(kind, smallest)), n_floored + 1
        cols = by_kind.setdefault(kind, ([], [], []))
        for col, x in zip(cols, (f, y, d)):
            col.append(x)
    pooled = [[x for cols in by_kind.values() for x in cols[i]] for i in range(3)]
    rate, overhead, _ = fit_rate_overhead(*pooled)
    rate = 0.0 if rate is None else rate
    per_kind = {}
    for kind in sorted(by_kind):
        r, o, _ = fit_rate_overhead(*by_kind[kind])
        per_kind[str(kind)] = {"unit_per_flop": rate if r is None else r, "overhead": o,
                               "n_samples": len(by_kind[kind][0])}
    return {"unit_per_flop": rate, "overhead": overhead, "n_samples": len(clean), "n_floored": n_floored,
            "method": METHOD, "per_kind": per_kind}


def fit_unit_per_flop(samples):
    """The FLOPs baseline (``fit_baseline``'s document) from probe samples: dicts with kind, role,
    batch_size, config, value and (optional) std, non-flagged, of one metric."""
    return fit_baseline([(s["kind"], layer_train_flops(s, s["batch_size"]), s["value"], s.get("std", 0.0))
                         for s in samples])


def baseline_cost(baseline, kind, train_flops):
    """One layer's FLOPs-baseline cost (>= 0): its kind's rate and overhead, else the global ones.

    ``baseline``: the estimator's ``flops_baseline`` object, or a bare cost per FLOP (rate only, as
    estimators before per-kind rates); None where there is no fitted baseline (no ``unit_per_flop``).
    """
    if _num(baseline):
        return _nonneg(baseline) * max(float(train_flops), 0.0)
    if not isinstance(baseline, dict) or not _num(baseline.get("unit_per_flop")):
        return None
    per_kind = baseline.get("per_kind")
    entry = per_kind.get(kind) if isinstance(per_kind, dict) else None
    src = entry if isinstance(entry, dict) and _num(entry.get("unit_per_flop")) else baseline
    return _nonneg(src["unit_per_flop"]) * max(float(train_flops), 0.0) + _nonneg(src.get("overhead"))


def flops_estimate(layers, batch_size, baseline):
    """``{"total", "flops", "layers"}``: the FLOPs baseline of one training step of ``layers`` (layer
    dicts) at ``batch_size``; ``baseline`` as in ``baseline_cost``. ``total`` and each layer's value
    are >= 0, or None without a fitted baseline; ``flops`` is the total training FLOPs."""
    per_layer = [layer_train_flops(layer, batch_size) for layer in layers]
    costs = [baseline_cost(baseline, layer["kind"], f) for layer, f in zip(layers, per_layer)]
    total_flops = sum(per_layer)
    if any(c is None for c in costs):
        return {"total": None, "flops": total_flops, "layers": [None] * len(layers)}
    return {"total": sum(costs), "flops": total_flops, "layers": costs}
