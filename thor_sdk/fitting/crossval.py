"""Per-kind k-fold cross-validation: how each layer kind's model reads configs of its kind it never saw.

A held-out *net* tests a sum of layers; this tests each kind apart. The samples are split into seeded folds per
kind (``model_key``); each fold's GP, fitted on the rest exactly as ``fit`` fits a kind (``fit_kind``, the
campaign's drift as extra noise), predicts the held-out samples. Per kind: samples, MAPE, median APE, the median
ln(measured / estimated) (a lean), and the share of held-out samples inside the 95% interval (the GP's std and the
sample's own standard error combined). A sample at or below zero (a subtraction within its noise) has no relative
error and is counted apart. ``thor-sdk fit --cv`` stores it in ``provenance.cross_validation``;
``bench/bench_kind_cv.py`` compares campaigns with it.
"""

import math
import random
import statistics

from thor_sdk.runtime.estimator import Z95
#: folds ``fit --cv`` accepts
MIN_FOLDS, MAX_FOLDS = 2, 20
SIGNIFICANT = 4  # digits kept of each figure in provenance.cross_validation


def check_folds(folds):
    """``folds`` if an integer MIN_FOLDS..MAX_FOLDS, else a UsageError (checked before any fitting)."""
    from thor_sdk.errors import UsageError

    if isinstance(folds, bool) or not isinstance(folds, int) or not MIN_FOLDS <= folds <= MAX_FOLDS:
        raise UsageError(f"cross-validation folds must be an integer {MIN_FOLDS}..{MAX_FOLDS}, got {folds!r}")
    return folds


def cv_kind(key, rows, drift_var=0.0, folds=5, seed=0, with_errors=False):
    """One kind's ``folds``-fold cross-validation (see the module docstring): ``{"n", "heldout", "nonpositive",
    "mape", "median_ape", "median_ln", "covered95"}`` (percentages; ``covered95`` a share), plus the held-out
    samples' absolute relative errors in ``"apes"`` where ``with_errors``; None with fewer than ``2 x folds``
    rows or no positive held-out sample."""
    from thor_sdk.fitting.pipeline import fit_kind, sample_terms
    from thor_sdk.layers.kinds import base_kind, feature_vector

    check_folds(folds)
    if len(rows) < 2 * folds:
        return None
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    kind = base_kind(key)
    apes, lns, covered, nonpositive = [], [], 0, 0
    for f in range(folds):
        held = idx[f::folds]
        out = set(held)
        model = fit_kind(kind, [rows[i] for i in idx if i not in out], extra_log_var=drift_var)
        test = [rows[i] for i in held]
        X = [feature_vector(kind, r["config"], r["batch_size"], r["role"]) for r in test]
        mean, std = model.predict(X, terms=sample_terms(test), return_std=True)
        for r, m, s in zip(test, mean, std):
            m, s, v = float(m), float(s), float(r["value"])
            if v <= 0:
                nonpositive += 1
                continue
            apes.append(abs(m - v) / v)
            lns.append(math.log(v / m))
            covered += abs(m - v) <= Z95 * math.sqrt(s * s + float(r["std"]) ** 2)
    if not apes:
        return None
    got = {"n": len(rows), "heldout": len(apes), "nonpositive": nonpositive, "mape": 100 * statistics.mean(apes),
           "median_ape": 100 * statistics.median(apes), "median_ln": statistics.median(lns),
           "covered95": covered / len(apes)}
    if with_errors:
        got["apes"] = apes
    return got


def cross_validate(samples, drift_var=0.0, folds=5, seed=0, kinds=None, progress=None):
    """``{"folds", "seed", "kinds": {key: cv_kind's}, "pooled"}`` over ``samples`` as ``fit`` fits them
    (``pipeline.fit_samples``'s), every kind with enough samples or only ``kinds``; ``pooled``: MAPE, median APE
    and 95% coverage over every held-out sample (None without any). ``progress(key, n)`` after each kind."""
    from thor_sdk.layers.kinds import model_key

    by_key = {}
    for s in samples:
        by_key.setdefault(model_key(s["kind"], s["config"], s["batch_size"]), []).append(s)
    out, apes = {}, []
    for key in (sorted(by_key) if kinds is None else kinds):
        got = cv_kind(key, by_key.get(key, []), drift_var, folds, seed, with_errors=True)
        if got is not None:
            apes += got.pop("apes")
            out[key] = got
        if progress:
            progress(key, len(by_key.get(key, [])))
    pooled = None
    if apes:
        pooled = {"heldout": len(apes), "mape": 100 * statistics.mean(apes),
                  "median_ape": 100 * statistics.median(apes),
                  "covered95": sum(v["covered95"] * v["heldout"] for v in out.values()) / len(apes)}
    return {"folds": folds, "seed": seed, "kinds": out, "pooled": pooled}


def rounded(cv):
    """``cross_validate``'s result with its figures at SIGNIFICANT digits (the estimator's provenance)."""
    from thor_sdk.fitting.gp import round_sig

    def r(d):
        return None if d is None else {k: round_sig(v, SIGNIFICANT) if isinstance(v, float) else v
                                       for k, v in d.items()}

    return dict(cv, kinds={k: r(v) for k, v in cv["kinds"].items()}, pooled=r(cv["pooled"]))
