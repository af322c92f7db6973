"""Per-model accuracy benchmark: a THOR campaign per model, its estimate and the FLOPs baseline vs direct measurement.

For each model: measure the whole training step, run a THOR campaign for that model alone
(measuring the whole model again after every third of the probes), fit, estimate, and measure
once more; the measured value is the median over all those runs' windows, so the reference sees
the same spread of machine load as the probes (and the per-run medians show the drift). Absolute percentage
errors of THOR and of the FLOPs baseline are reported side by side from one run. Where the host read its canary
(``harness.canary``) and the campaign's estimator records its level, each run is also put at that level (its
median over its canary reading's ratio to the campaign's) and both are scored against the median of those too
(``canary``).
"""

import os
import statistics
import time

from thor_sdk.runtime.estimator import METRIC_UNITS


def _ape(est, true):
    return abs(est - true) / abs(true) * 100.0 if est is not None and true else None


def evaluate(models, device="host", batch_size=32, metric="time", out_dir="thor-evaluate", runtime="torch",
             settings=None, max_probes=None, max_seconds=None, progress=None, threads=None):
    from thor_sdk.api import _device, estimate, fit, probe
    from thor_sdk.campaign.measure import at_canary_level
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
        canary = fit(db, out=est_path)["whole_model"].get("canary")
        est = estimate(est_path, name, batch_size=batch_size)
        runs.append(dev.measure_model(name, batch_size, metric=metric, settings=settings, runtime=runtime))
        values = [v for r in runs for v in r.values(metric)]
        measured = statistics.median(values)
        before, after = runs[0], runs[-1]
        thor, flops = est["total"]["mean"], est["flops_baseline"]["total"]
        on_canary = [at_canary_level(r, canary, metric) for r in runs]
        on_canary = on_canary if None not in on_canary else []
        rows.append({
            "model": name, "batch_size": batch_size, "measured": measured,
            "measured_before": statistics.median(before.values(metric)),
            "measured_after": statistics.median(after.values(metric)),
            "measured_runs": [statistics.median(r.values(metric)) for r in runs],
            "thor": thor, "thor_std": est["total"]["std"], "thor_ape": _ape(thor, measured),
            "flops": flops, "flops_ape": _ape(flops, measured),
            "probes": summary["probes_done"], "probe_seconds": probe_s, "flagged": summary["flagged"],
            "estimator_bytes": os.path.getsize(est_path),
            "canary": {"measured": statistics.median(on_canary), "measured_runs": on_canary,
                       "thor_ape": _ape(thor, statistics.median(on_canary)),
                       "flops_ape": _ape(flops, statistics.median(on_canary))} if on_canary else None,
        })
    thor_apes = [r["thor_ape"] for r in rows]
    flops_apes = [r["flops_ape"] for r in rows if r["flops_ape"] is not None]
    mean_thor = statistics.fmean(thor_apes) if thor_apes else None
    mean_flops = statistics.fmean(flops_apes) if flops_apes else None
    can = [r["canary"] for r in rows if r["canary"]]
    return {
        "canary": {"n": len(can), "thor_mape": statistics.fmean(c["thor_ape"] for c in can),
                   "flops_mape": statistics.fmean(c["flops_ape"] for c in can if c["flops_ape"] is not None),
                   "within_10": sum(c["thor_ape"] <= 10.0 for c in can)} if can and len(can) == len(rows) else None,
        "device": dev.name, "metric": metric, "unit": METRIC_UNITS[metric], "runtime": runtime,
        "batch_size": batch_size, "rows": rows, "thor_mape": mean_thor, "flops_mape": mean_flops,
        "flops_over_thor": (mean_flops / mean_thor) if mean_thor and mean_flops else None,
        "thor_max_ape": max(thor_apes) if thor_apes else None,
        "command": None,  # set by the caller that knows it (thor-sdk evaluate, bench/bench_accuracy.py)
        "settings": settings.to_dict(), "device_info": dev.info(),
    }
