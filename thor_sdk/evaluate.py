"""Accuracy benchmark: THOR's estimate and the FLOPs baseline against direct measurement.

For each model: measure the whole training step, run a THOR campaign for that model alone
(measuring the whole model again after every third of the probes), fit, estimate, and measure
once more; the measured value is the median over all those runs' windows, so the reference sees
the same spread of machine load as the probes (and the per-run medians show the drift). Absolute percentage
errors of THOR and of the FLOPs baseline are reported side by side from one run.
"""

import math
import os
import statistics
import time


def _ape(est, true):
    return abs(est - true) / abs(true) * 100.0 if est is not None and true else None


def evaluate(models, device="host", batch_size=32, metric="time", out_dir="thor-evaluate", runtime="torch",
             settings=None, max_probes=None, max_seconds=None, progress=None, threads=None):
    from thor_sdk.api import _device, estimate, fit, probe
    from thor_sdk.harness.protocol import ProtocolSettings

    settings = settings or ProtocolSettings()
    dev = _device(device, threads=threads)
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for name in models:
        if progress:
            progress("model", name)
        db = os.path.join(out_dir, f"{name}-b{batch_size}.db")
        est_path = os.path.join(out_dir, f"{name}-b{batch_size}-estimator.json")
        if os.path.exists(db):
            os.remove(db)
        runs = [dev.measure_model(name, batch_size, metric=metric, settings=settings, runtime=runtime)]
        probe_s = 0.0
        state = {"since": 0}

        def during(event, info, _name=name):
            # measure the whole model again every few probes, so the reference sees the same
            # spread of machine load as the probes (timed separately from probing)
            nonlocal probe_s
            if event == "start":
                state["every"] = max(1, (info["total"] - info["done"]) // 3)
            elif event == "probe":
                state["since"] += 1
                if state["since"] >= state["every"]:
                    state["since"] = 0
                    t = time.monotonic()
                    runs.append(dev.measure_model(_name, batch_size, metric=metric, settings=settings,
                                                  runtime=runtime))
                    probe_s -= time.monotonic() - t

        t0 = time.monotonic()
        summary = probe([name], device=dev, batch_sizes=[batch_size], metric=metric, out=db, runtime=runtime,
                        settings=settings, max_probes=max_probes, max_seconds=max_seconds, progress=during)
        probe_s += time.monotonic() - t0
        fit(db, out=est_path)
        est = estimate(est_path, name, batch_size=batch_size)
        runs.append(dev.measure_model(name, batch_size, metric=metric, settings=settings, runtime=runtime))
        values = [v for r in runs for v in r.values(metric)]
        measured = statistics.median(values)
        before, after = runs[0], runs[-1]
        thor, flops = est["total"]["mean"], est["flops_baseline"]["total"]
        rows.append({
            "model": name, "batch_size": batch_size, "measured": measured,
            "measured_before": statistics.median(before.values(metric)),
            "measured_after": statistics.median(after.values(metric)),
            "measured_runs": [statistics.median(r.values(metric)) for r in runs],
            "thor": thor, "thor_std": est["total"]["std"], "thor_ape": _ape(thor, measured),
            "flops": flops, "flops_ape": _ape(flops, measured),
            "probes": summary["probes_done"], "probe_seconds": probe_s, "flagged": summary["flagged"],
            "estimator_bytes": os.path.getsize(est_path),
        })
    thor_apes = [r["thor_ape"] for r in rows]
    flops_apes = [r["flops_ape"] for r in rows if r["flops_ape"] is not None]
    mean_thor = statistics.fmean(thor_apes) if thor_apes else None
    mean_flops = statistics.fmean(flops_apes) if flops_apes else None
    return {
        "device": dev.name, "metric": metric, "unit": "s" if metric == "time" else "J", "runtime": runtime,
        "batch_size": batch_size, "rows": rows, "thor_mape": mean_thor, "flops_mape": mean_flops,
        "flops_over_thor": (mean_flops / mean_thor) if mean_thor and mean_flops else None,
        "thor_max_ape": max(thor_apes) if thor_apes else None,
        "command": None,  # set by the caller that knows it (thor-sdk evaluate, bench/bench_accuracy.py)
        "settings": settings.to_dict(), "device_info": dev.info(),
    }


def evaluate_unseen(estimator, models, device="host", batch_sizes=(16,), metric="time", runtime=None, settings=None,
                    threads=None, reference="lenet5", progress=None):
    """Generalization: estimate models the estimator never saw and measure them directly, side by side.

    ``estimator``: a path or a loaded estimator (from ``thor-sdk profile`` + ``fit``). For every model
    and batch size: a reference model is measured first (its drift across the run is reported), then
    the model itself, then THOR's estimate (mean, std) and the FLOPs baseline of the same estimator.
    Reports APE, whether the 95% interval (mean +- 1.96 std) covers the measurement, and z-scores.
    """
    from thor_sdk.api import _device, estimate
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.runtime import load_estimator

    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    runtime = runtime or est.runtime
    if runtime != est.runtime:
        from thor_sdk.errors import UsageError

        raise UsageError(f"the estimator was fitted on runtime {est.runtime!r}; measuring with {runtime!r} "
                         "would compare different things")
    settings = settings or ProtocolSettings()
    dev = _device(device, threads=threads)
    from thor_sdk.errors import NotFoundError

    rows, refs, skipped = [], [], []
    t_start = time.monotonic()
    probe_ref = (est.doc.get("whole_model") or {}).get("reference")

    def device_level():
        """The profile's reference probe measured now, over its level during the profile."""
        from thor_sdk.probes import Probe

        p = Probe.from_dict(probe_ref["probe"])
        res = dev.measure_probe(p, metric=metric, settings=settings, runtime=runtime)
        return statistics.median(res[probe_ref.get("part") or p.role].values(metric)) / probe_ref["median_value"]

    for name in models:
        for b in batch_sizes:
            if progress:
                progress("model", f"{name} b{b}")
            try:
                e = estimate(est, name, batch_size=b)
            except NotFoundError as err:  # a kind the profile never reached: said, not averaged in
                skipped.append({"model": name, "batch_size": b, "reason": str(err)})
                continue
            if reference:
                r = dev.measure_model(reference, 16, metric=metric, settings=settings, runtime=runtime)
                refs.append({"t_s": time.monotonic() - t_start, "value": statistics.median(r.values(metric))})
            level = device_level() if probe_ref else None
            m = dev.measure_model(name, b, metric=metric, settings=settings, runtime=runtime)
            vals = m.values(metric)
            measured = statistics.median(vals)
            if probe_ref:
                level = math.sqrt(level * device_level())  # before and after the model
            mean, std = e["total"]["mean"], e["total"]["std"]
            flops = e["flops_baseline"]["total"]
            z = (measured - mean) / std if std > 0 else float("inf")
            rows.append({"model": name, "batch_size": b, "measured": measured,
                         "measured_cv": (statistics.stdev(vals) / statistics.fmean(vals)) if len(vals) > 1 else None,
                         "thor": mean, "thor_std": std, "thor_layers_std": e["layers_total"]["std"],
                         "thor_ape": _ape(mean, measured), "z": z, "covered95": abs(z) <= 1.959964,
                         "flops": flops, "flops_ape": _ape(flops, measured), "layers": len(e["layers"]),
                         "device_level": level,
                         "thor_level_adjusted": mean * level if level else None,
                         "thor_level_adjusted_ape": _ape(mean * level, measured) if level else None,
                         "covered95_level_adjusted": (abs(measured - mean * level) <= 1.959964 * std * level)
                         if level else None})
    thor = [r["thor_ape"] for r in rows]
    fl = [r["flops_ape"] for r in rows if r["flops_ape"] is not None]
    ref_vals = [r["value"] for r in refs]
    adj = [r["thor_level_adjusted_ape"] for r in rows if r["thor_level_adjusted_ape"] is not None]
    return {
        "device": dev.name, "runtime": runtime, "metric": metric, "unit": est.unit, "batch_sizes": list(batch_sizes),
        "rows": rows, "skipped": skipped, "thor_mape": statistics.fmean(thor) if thor else None,
        "thor_max_ape": max(thor) if thor else None,
        "flops_mape": statistics.fmean(fl) if fl else None,
        "flops_over_thor": (statistics.fmean(fl) / statistics.fmean(thor)) if thor and fl else None,
        "coverage95": sum(r["covered95"] for r in rows) / len(rows) if rows else None,
        "thor_level_adjusted_mape": statistics.fmean(adj) if adj else None,
        "coverage95_level_adjusted": (sum(r["covered95_level_adjusted"] for r in rows if r["device_level"])
                                      / len(adj)) if adj else None,
        "median_abs_z": statistics.median(abs(r["z"]) for r in rows) if rows else None,
        "reference": {"model": reference, "batch_size": 16, "runs": refs,
                      "spread": (max(ref_vals) / min(ref_vals) - 1.0) if len(ref_vals) > 1 else None},
        "estimator": {"device": est.device.get("name"), "runtime": est.runtime,
                      "whole_model_rel_std": est.whole_model_rel_std, "kinds": sorted(est.kinds)},
        "settings": settings.to_dict(), "device_info": dev.info(), "command": None,
    }
