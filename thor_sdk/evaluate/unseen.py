"""Generalization: a device profile's estimator against direct measurement of models it never saw, beside every baseline.

For each model and batch size: a reference net is measured first (the machine's drift across the run is
reported), then the profile's reference probe around the model (the device's speed now against during its
profile), then the model itself; THOR's estimate (mean, std, 95% interval) and each baseline's estimate of
the same model are put beside the measurement. Baselines are fitted only on what they are allowed to see:
the FLOPs and TDP baselines on the profile's probes (through the estimator), PRE on whole-model runs of
*other* models (leave one model out), so no method is scored on a model it was fitted on.
"""

import math
import statistics
import time

from thor_sdk.errors import NotFoundError, UsageError
from thor_sdk.runtime.estimator import Z95, level_band

MAX_PASSES = 20


def level_warning(levels, drift_log_std):
    """A sentence when the device ran outside its profile's own drift while it was evaluated (the reference
    probe's level beyond ``exp(+-level_band(drift_log_std))``), else None: the estimates and their intervals
    are for the device as it was profiled."""
    levels = [x for x in levels if x]
    if not levels:
        return None
    band = level_band(drift_log_std)
    off = [x for x in levels if abs(math.log(x)) > band]
    if not off:
        return None
    return (f"the device ran at {min(levels):.2f}-{max(levels):.2f} of its profile's level ({len(off)} of "
            f"{len(levels)} models beyond the profile's own drift, x{math.exp(-band):.2f}-{math.exp(band):.2f}): "
            "the estimates and their intervals are for the device as it was profiled")


def _extrapolated_share(layers):
    """The share of the layers' summed estimate from layers outside the profile's sampled range, in [0, 1]
    (a share of the layer sum, so every layer outside gives exactly 1, not 1 + a rounding error)."""
    total = math.fsum(l["mean"] for l in layers)
    if not total > 0:
        return 0.0
    return min(1.0, math.fsum(l["mean"] for l in layers if l.get("outside")) / total)


def _z(measured, mean, std):
    """How many stds the measurement lies from the estimate; None without a std (no interval: JSON has no
    infinity)."""
    return (measured - mean) / std if std > 0 else None


def _ape(est, true):
    return abs(est - true) / abs(true) * 100.0 if est is not None and true else None


#: the scales best_scale_mape tries: 0.5x to 2x in steps of 0.005
BEST_SCALES = tuple(x / 200 for x in range(100, 401))


def best_scale_mape(pairs):
    """The least MAPE % of ``pairs`` ``[(measured, estimated)]`` over one common scale of every estimate (0.5-2x),
    None without pairs: what is left of the errors once a machine that ran uniformly faster or slower than when it
    was profiled is taken out. For comparing methods or estimators on one run's measurements; never a figure of
    the estimate an app gets."""
    pairs = [(m, e) for m, e in pairs if m and m > 0 and e is not None and math.isfinite(e)]
    if not pairs:
        return None
    return min(100.0 * statistics.fmean(abs(k * e / m - 1.0) for m, e in pairs) for k in BEST_SCALES)


#: variance of the median of n standard normal draws, n = 1..10 (beyond, pi / 2n); the median of an even count is the
#: mean of its middle two, as ``statistics.median`` takes it
MEDIAN_VAR = (1.0, 0.5, 0.4487, 0.2982, 0.2868, 0.2147, 0.2104, 0.1682, 0.1661, 0.1383)


def _perfect_ape(spread, passes):
    """E|exp(-m) - 1| (a fraction) for m the median of ``passes`` normal draws of std ``spread``."""
    s = spread * math.sqrt(MEDIAN_VAR[passes - 1] if passes <= len(MEDIAN_VAR) else math.pi / (2 * passes))
    zs = [i / 100.0 for i in range(-800, 801)]
    w = [math.exp(-z * z / 2.0) for z in zs]
    return math.fsum(wi * abs(math.expm1(-s * z)) for wi, z in zip(w, zs)) / math.fsum(w)


def kind_cv_summary(provenance):
    """``{"folds", "kinds", "heldout", "mape", "median_ape", "covered95"}`` from an estimator's
    ``provenance.cross_validation`` (``thor-sdk fit --cv``): its layer kinds read on configs they never saw, beside
    the nets of an evaluation; None where the estimator has none or it does not read as one (provenance is
    free-form: every figure is checked)."""
    cv = provenance.get("cross_validation") if isinstance(provenance, dict) else None
    pooled = cv.get("pooled") if isinstance(cv, dict) else None
    if not isinstance(pooled, dict) or not isinstance(cv.get("kinds"), dict):
        return None
    out = {"folds": cv.get("folds"), "kinds": len(cv["kinds"])}
    for k in ("heldout", "mape", "median_ape", "covered95"):
        v = pooled.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            return None
        out[k] = v
    if not (isinstance(out["folds"], int) and not isinstance(out["folds"], bool) and out["covered95"] <= 1):
        return None
    return out


def measurement_floor(rows):
    """What the measurements themselves allow: ``{"log_std", "dof", "mape"}``, or None where no row has two passes.

    Each row is scored on the median of its passes (``measured_passes``), which lies off the model's long-run median
    by what its passes spread. ``log_std``: the passes' ln-spread pooled over the rows (each row's deviations from
    its own mean, ``dof`` = the sum of passes - 1); ``mape``: the MAPE (%) an estimator that knew every model's
    long-run median exactly would score against these medians, for lognormal passes of that spread (the mean over
    the rows of E|exp(-m) - 1|, m the median of its passes). An estimator's MAPE near it cannot be told from the
    noise of its measurement. On a machine that flips between speed states the passes are not lognormal and this
    reads low: on this project's AMD VM, 20 rounds of seven nets gave a perfect estimate's MAPE directly, 9.5%, and
    this from three passes at a time 8.1% (``bench/bench_host_noise.py``, ``host-noise-20261129-1339.md``)."""
    sq, dof, counts = 0.0, 0, []
    for r in rows:
        p = [x for x in r.get("measured_passes") or () if x and x > 0]
        if len(p) < 2:
            continue
        logs = [math.log(x) for x in p]
        m = statistics.fmean(logs)
        sq += math.fsum((x - m) ** 2 for x in logs)
        dof += len(logs) - 1
        counts.append(len(p))
    if not dof:
        return None
    spread = math.sqrt(sq / dof)
    ape = {n: _perfect_ape(spread, n) for n in set(counts)}
    return {"log_std": spread, "dof": dof, "mape": 100.0 * statistics.fmean(ape[n] for n in counts)}


def floor_mape(rows):
    """``measurement_floor(rows)``'s MAPE (%), or None where it has none: the figure a summary of rows carries."""
    floor = measurement_floor(rows)
    return floor["mape"] if floor else None


def floor_line(floor):
    """``measurement_floor``'s dict in words: what the measurements allow any estimator."""
    return (f"measurement floor: the models' passes spread ln-std {floor['log_std']:.3f}; an estimator that knew each "
            f"model's long-run cost exactly would score about {floor['mape']:.1f}% MAPE against these measurements "
            "(lognormal passes assumed; a machine flipping between speed states reads higher)")


def cv_line(cv):
    """``kind_cv_summary``'s dict in words: the estimator's layer kinds on configs their fit left out."""
    return (f"layer kinds on configs they never saw ({cv['folds']}-fold cross-validation at fit, {cv['kinds']} kinds, "
            f"{cv['heldout']} held-out samples): MAPE {cv['mape']:.1f}% (median APE {cv['median_ape']:.1f}%), "
            f"{100 * cv['covered95']:.1f}% inside their 95% intervals")


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def method_summary(rows, method):
    """MAPE, max APE, n and (where the method has a std) the 95% coverage of one method over the rows."""
    got = [r["estimates"][method] for r in rows if r["estimates"].get(method, {}).get("ape") is not None]
    apes = [g["ape"] for g in got]
    cov = [g["covered95"] for g in got if g.get("covered95") is not None]
    return {"n": len(apes), "mape": _mean(apes), "max_ape": max(apes) if apes else None,
            "median_ape": statistics.median(apes) if apes else None,
            "coverage95": (sum(cov) / len(cov)) if cov else None}


def thor_summary(rows):
    """``{n, thor_mape, measurement_floor_mape, flops_mape, flops_over_thor, coverage95, thor_level_adjusted_mape}``
    over ``rows`` (None where nothing was scored): what the result says for all models and for each group
    (``measurement_floor_mape``: ``measurement_floor``'s MAPE over these rows)."""
    thor = [r["thor_ape"] for r in rows]
    fl = [r["flops_ape"] for r in rows if r["flops_ape"] is not None]
    adj = [r["thor_level_adjusted_ape"] for r in rows if r["thor_level_adjusted_ape"] is not None]
    can = [r["canary"] for r in rows if r.get("canary")]
    can_fl = [c["flops_ape"] for c in can if c["flops_ape"] is not None]
    return {"n": len(rows), "thor_mape": statistics.fmean(thor) if thor else None,
            "measurement_floor_mape": floor_mape(rows),
            "flops_mape": statistics.fmean(fl) if fl else None,
            "flops_over_thor": statistics.fmean(fl) / statistics.fmean(thor) if fl and any(thor) else None,
            "coverage95": sum(r["covered95"] for r in rows) / len(rows) if rows else None,
            "thor_level_adjusted_mape": statistics.fmean(adj) if adj else None,
            # the measurements put at the profile's canary level (rows' ``canary``), where every row has one
            "canary": {"n": len(can), "thor_mape": statistics.fmean(c["thor_ape"] for c in can),
                       "flops_mape": statistics.fmean(can_fl) if can_fl else None,
                       "coverage95": sum(c["covered95"] for c in can) / len(can)}
            if can and len(can) == len(rows) else None}


def group_summaries(rows):
    """``{group: thor_summary(its rows)}`` (``reference``, ``zoo``, ``heldout``; ``other`` for a model outside
    the zoo): the held-out nets, which never fed the profile's prior, are what a generalization claim rests on."""
    out = {}
    for r in rows:
        out.setdefault(r.get("group") or "other", []).append(r)
    return {g: thor_summary(rs) for g, rs in out.items()}


def evaluate_unseen(estimator, models, device="host", batch_sizes=(16,), metric=None, runtime=None, settings=None,
                    threads=None, reference="lenet5", progress=None, input_shape=None, tdp=None, pre_variants=(),
                    pre_runs=None, step_logs=(), passes=1, relevel=False, unknown_ops="error", trainable=None):
    """Estimate models and measure them directly, side by side, for THOR and every baseline.

    ``estimator``: a path or a loaded estimator (``thor-sdk profile`` + ``fit``). ``models``: any form
    ``estimate`` takes (reference or zoo names, ``file.py:Class`` with ``input_shape``, layer-list JSON,
    ONNX). Beside THOR and the estimator's FLOPs baseline (always there): ``tdp`` (None, or keyword
    arguments of ``TdpBaseline``: ``{}`` fits its throughput), ``pre_variants`` (PRE's variants) with
    ``pre_runs`` (more training runs: a runs CSV or campaign path), ``step_logs`` (per-epoch logs STEP is
    scored on); see ``thor_sdk.evaluate.methods``. ``passes``: every model is measured this many times,
    every other pass in reverse order, and scored on the median of its passes (on a machine that drifts,
    one pass reads the machine as much as the model). ``relevel``: measure the device's level once before
    anything else (``thor_sdk.measure_level``: the profile's reference probe, LEVEL_READINGS times) and, where
    it lies beyond the profile's own drift (``applied``), score THOR and the FLOPs baseline at it, as an app
    that measures its device first would; every row keeps its estimates at the profile's level in
    ``unleveled``, and the result their summary. ``unknown_ops``: as ``estimate`` (``"approx"``: operators
    without a kind are estimated through stand-in kinds or as generic ops, and each row lists them in
    ``approximated``). ``trainable``: parameter name patterns of a fine-tune (``thor_sdk.layers.trainable``),
    applied to every model, estimated and measured so (each row's ``model`` says ``[trainable ...]``). ``progress``:
    called ``("start", total)`` then ``("step", label)`` after each measurement. Where the estimator records the
    profile's canary level (``whole_model.canary``) and the device reads the canary (the host's CPU), every row also
    has ``canary``: each pass's median put at that level (over its own median canary reading over the profile's,
    ``harness.canary``), their median, and THOR's (at the profile's level) and FLOPs' errors against it; the
    result's ``canary`` summarises them.
    Returns a plain dict (JSON-ready): one row per measured model and batch size with ``estimates`` per
    method (value, APE, and for THOR the std, z and whether the 95% interval covers the measurement),
    ``methods`` (MAPE, max APE, coverage per method), skipped models with the reason, the reference net's
    drift, and what each method assumed.
    """
    from thor_sdk.api import _check_batch_sizes, _device, estimate_layers, measure_level, reference_reading
    from thor_sdk.campaign.measure import at_canary_level
    from thor_sdk.baselines.pre import features_of, load_runs
    from thor_sdk.devices.state import identity_warning
    from thor_sdk.evaluate.methods import finish_methods, row_context, score_step_logs
    from thor_sdk.layers import layers_of
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.harness.whole_model import resolve_model
    from thor_sdk.models import group_of
    from thor_sdk.runtime import load_estimator

    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    runtime = runtime or est.runtime
    metric = metric or est.metric
    if runtime != est.runtime:
        raise UsageError(f"the estimator was fitted on runtime {est.runtime!r}; measuring with {runtime!r} "
                         "would compare different things")
    if metric != est.metric:
        raise UsageError(f"the estimator estimates {est.metric}; measuring {metric} would compare different things")
    if isinstance(passes, bool) or not isinstance(passes, int) or not 1 <= passes <= MAX_PASSES:
        raise UsageError(f"passes must be an integer from 1 to {MAX_PASSES}, got {passes!r}")
    settings = settings or ProtocolSettings()
    # unknown names, missing files, patterns matching no ONNX initializer fail before any work
    sources = [resolve_model(m, input_shape, trainable=trainable) for m in models]
    for b in batch_sizes:
        _check_batch_sizes([b])
    dev = _device(device, threads=threads)
    extra_runs = list(load_runs(pre_runs, metric)) if pre_runs else []  # a bad file fails before any work
    step = score_step_logs(step_logs) if step_logs else []
    info = dev.info()
    rows, refs, skipped, layers = [], [], [], []
    t_start = time.monotonic()
    probe_ref = est.require_reference() if relevel else est.reference  # no reference: refused before measuring

    def device_level():
        """The profile's reference probe measured now, over its level during the profile."""
        return reference_reading(dev, probe_ref, metric=metric, settings=settings,
                                 runtime=runtime) / probe_ref["median_value"]

    relevel_info = measure_level(est, dev, settings=settings) if relevel else None
    applied = relevel_info if relevel_info and relevel_info["applied"] else None
    items = []  # (source, layer list, batch size, estimate, label, estimate at the profile's level)
    for model, source in zip(models, sources):
        # traced once, for every batch size
        ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops, trainable=trainable)
        for b in batch_sizes:
            label = f"{source.label} b{b}"
            try:
                raw = estimate_layers(est, ml, b, unknown_ops=unknown_ops)
                items.append((source, ml, b, estimate_layers(est, ml, b, unknown_ops=unknown_ops, level=applied)
                              if applied else raw,
                              label, raw))
            except NotFoundError as err:  # a kind the profile never reached: said, not averaged in
                skipped.append({"model": source.label, "batch_size": b, "reason": str(err)})
    if progress:
        progress("start", len(items) * passes)
    measured_by = [{"medians": [], "values": [], "levels": [], "canary": []} for _ in items]
    canary = getattr(est, "canary", None)  # the profile's canary level, where the estimator records one
    for p in range(passes):  # every other pass in reverse order: a drift in time falls on both ends alike
        order = range(len(items)) if p % 2 == 0 else range(len(items) - 1, -1, -1)
        for i in order:
            source, _, b, _, label, _ = items[i]
            if reference:
                r = dev.measure_model(reference, 16, metric=metric, settings=settings, runtime=runtime)
                refs.append({"t_s": time.monotonic() - t_start, "value": statistics.median(r.values(metric))})
            level = device_level() if probe_ref else None
            m = dev.measure_model(source.name or source, b, metric=metric, settings=settings, runtime=runtime)
            vals = m.values(metric)
            if probe_ref:
                measured_by[i]["levels"].append(math.sqrt(level * device_level()))  # before and after the model
            at = at_canary_level(m, canary, metric)
            if at is not None:  # this pass at the profile's canary level: over the machine's speed now
                measured_by[i]["canary"].append(at)
            measured_by[i]["medians"].append(statistics.median(vals))
            measured_by[i]["values"].extend(vals)
            if progress:
                progress("step", label)
    for i, (source, ml, b, e, label, raw) in enumerate(items):
        got = measured_by[i]
        measured = statistics.median(got["medians"])
        vals = got["values"]
        levels = got["levels"]
        level = math.exp(statistics.fmean(math.log(x) for x in levels)) if levels else None
        mean, std = e["total"]["mean"], e["total"]["std"]
        flops = e["flops_baseline"]["total"]
        z = _z(measured, mean, std)
        row = {"model": source.label, "group": group_of(source.name) if source.name else None, "batch_size": b,
               "measured": measured, "measured_passes": list(got["medians"]),
               "measured_cv": (statistics.stdev(vals) / statistics.fmean(vals)) if len(vals) > 1 else None,
               "thor": mean, "thor_std": std, "thor_layers_std": e["layers_total"]["std"],
               "thor_ape": _ape(mean, measured), "z": z, "covered95": z is not None and abs(z) <= Z95,
               "flops": flops, "flops_ape": _ape(flops, measured), "layers": len(e["layers"]),
               "approximated": e.get("approximated") or [],
               # how much of the estimate extrapolates: layers outside the range the profile's samples cover
               "extrapolated_share": _extrapolated_share(e["layers"]),
               "device_level": level}
        # diagnostic: the estimate at the profile's level times the level measured around this model
        raw_mean, raw_std = raw["total"]["mean"], raw["total"]["std"]
        row.update(thor_level_adjusted=raw_mean * level if level else None,
                   thor_level_adjusted_ape=_ape(raw_mean * level, measured) if level else None,
                   covered95_level_adjusted=(abs(measured - raw_mean * level) <= Z95 * raw_std * level)
                   if level else None)
        can = got["canary"]
        if can and len(can) == len(got["medians"]):
            m_c = statistics.median(can)
            z_c = _z(m_c, raw_mean, raw_std)
            row["canary"] = {"measured": m_c, "measured_passes": list(can), "thor_ape": _ape(raw_mean, m_c), "z": z_c,
                             "covered95": z_c is not None and abs(z_c) <= Z95,
                             "flops_ape": _ape(raw["flops_baseline"]["total"], m_c)}
        if relevel:
            raw_z = _z(measured, raw_mean, raw_std)
            raw_flops = raw["flops_baseline"]["total"]
            row["unleveled"] = {"thor": raw_mean, "thor_std": raw_std, "thor_ape": _ape(raw_mean, measured),
                                "z": raw_z, "covered95": raw_z is not None and abs(raw_z) <= Z95,
                                "flops": raw_flops, "flops_ape": _ape(raw_flops, measured)}
        row["estimates"] = {
            "THOR": {"value": mean, "std": std, "ape": row["thor_ape"], "z": z, "covered95": row["covered95"],
                     "low95": max(0.0, mean - Z95 * std), "high95": mean + Z95 * std},
            "FLOPs": {"value": flops, "ape": row["flops_ape"]},
        }
        feats = features_of(ml, b, device=info) if pre_variants else None
        row["_context"] = row_context(e, b, feats)  # what the baselines need (dropped from the result)
        rows.append(row)
        layers.extend(dict(l, batch_size=b) for l in row["_context"]["layers"])
    # every baseline's estimates, each fitted without the model it estimates (leave one model out)
    notes, method_names = finish_methods(rows, metric, tdp=tdp, pre_variants=pre_variants, pre_runs=extra_runs)
    for r in rows:
        r.pop("_context", None)
    methods = {n: dict(method_summary(rows, n), note=notes.get(n)) for n in method_names}
    ref_vals = [r["value"] for r in refs]
    overall = thor_summary(rows)
    unleveled = None
    if relevel:
        shadow = [dict(r, **r["unleveled"]) for r in rows]
        unleveled = dict(thor_summary(shadow), groups=group_summaries(shadow))
    adj = [r for r in rows if r["thor_level_adjusted_ape"] is not None]
    return {
        "device": dev.name, "runtime": runtime, "metric": metric, "unit": est.unit, "batch_sizes": list(batch_sizes),
        "rows": rows, "skipped": skipped, "methods": methods, "step": step, "groups": group_summaries(rows),
        **{k: overall[k] for k in ("thor_mape", "flops_mape", "flops_over_thor", "coverage95",
                                   "thor_level_adjusted_mape", "canary")},
        "measurement_floor": measurement_floor(rows),
        "thor_max_ape": max(r["thor_ape"] for r in rows) if rows else None,
        "coverage95_level_adjusted": (sum(r["covered95_level_adjusted"] for r in adj) / len(adj)) if adj else None,
        "level_warning": level_warning([r["device_level"] for r in rows], est.drift_log_std),
        "device_warning": identity_warning(est.device, info),
        "relevel": relevel_info, "unleveled": unleveled,
        "median_abs_z": statistics.median(abs(r["z"]) for r in rows if r["z"] is not None)
        if any(r["z"] is not None for r in rows) else None,
        "reference": {"model": reference, "batch_size": 16, "runs": refs,
                      "spread": (max(ref_vals) / min(ref_vals) - 1.0) if len(ref_vals) > 1 else None},
        "estimator": {"device": est.device.get("name"), "runtime": est.runtime,
                      "whole_model_rel_std": est.whole_model_rel_std, "kinds": sorted(est.kinds),
                      "cross_validation": kind_cv_summary(est.provenance)},
        "elapsed_s": time.monotonic() - t_start,
        "layers": layers,  # every evaluated layer at its batch size (the report's per-kind figure; not in JSON)
        "passes": passes, "settings": settings.to_dict(), "device_info": dev.info(), "command": None,
    }
