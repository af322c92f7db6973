"""Target-driven campaigns (``thor-sdk probe``): measure the layer configs that given models need.

``run_campaign`` measures the layer configs that the target model(s) need. After each probe it
refits that kind's cost model and picks the next probe where it is least certain,
weighted by how often the config occurs in the targets (a config used 8 times counts 8 times).
Kinds without a model yet come first, largest FLOPs first, so a tight budget still covers the costly
layers. It stops when every target config is measured, on a probe budget, on a time budget, or when
the targets' estimated relative uncertainty falls below ``target_rel_std``.
"""

import math
import time

from thor_sdk.errors import UsageError
from thor_sdk.harness.protocol import CANARY_VERSION, ProtocolSettings
from thor_sdk.layers.kinds import get_kind
from thor_sdk.probes import Probe

from .gpcache import GPCache
from .measure import budget_reached, is_probe_failure, measure_and_store, sample_summary


def target_points(model_layers, batch_sizes):
    """{probe id: (Probe, weight)} for every layer config the targets need, at every batch size."""
    points = {}
    for ml in model_layers:
        for b in batch_sizes:
            for layer in ml.layers:
                p = Probe(layer["kind"], layer["config"], int(b), layer["role"])
                prev = points.get(p.id)
                points[p.id] = (p, (prev[1] if prev else 0) + 1)
    return points


def _train_flops(p):
    return get_kind(p.kind).train_flops(p.config, p.batch_size, p.role)


def _relative_std(points, cache):
    """Estimated relative std of the targets' summed cost (None while a kind has no GP)."""
    total, var = 0.0, 0.0
    for p, w in points.values():
        got = cache.predict(p)
        if got is None:
            return None
        total += w * got[0]
        var += (w * got[1]) ** 2
    return math.sqrt(var) / total if total > 0 else None


def run_campaign(campaign, device, model_layers, batch_sizes, metric="time", settings=None, runtime="torch",
                 max_probes=None, max_seconds=None, target_rel_std=None, progress=None, clock=time.monotonic):
    """Probe ``device`` for the layer configs of ``model_layers`` until a stop condition holds.

    ``progress(event, info)`` is called with ("start", {"total"}), ("probe", {...}) after each
    probe and ("stop", {"reason"}). Returns a summary dict.
    """
    if campaign.meta.get("planned_offline"):
        raise UsageError(f"{campaign.path} was planned for a device thor-sdk cannot drive (thor-sdk bundle --model): "
                         f"bundle its remaining probes with `thor-sdk bundle --campaign {campaign.path} --out DIR` and "
                         "ingest the harness's results")
    settings = settings or ProtocolSettings()
    t0 = clock()
    points = target_points(model_layers, batch_sizes)
    done_ids = {p.id for p in campaign.probes("done")} | {p.id for p in campaign.probes("failed")}
    planned = campaign.probes("planned")
    if progress:
        progress("start", {"total": len(points), "done": len(done_ids)})
    measured_now = 0

    def emit(p, samples):
        if progress:
            progress("probe", {"probe": p.to_dict(), "samples": samples, "done": len(done_ids)})

    def measure(p):
        """Measure one planned probe; one that cannot be built or run is stored ``failed`` with the
        reason (never retried, never blocking the rest or a later --resume)."""
        nonlocal measured_now
        try:
            samples = measure_and_store(campaign, device, p, metric, settings, runtime)
        except Exception as e:
            if not is_probe_failure(e):
                raise
            campaign.fail(p.id, f"{type(e).__name__}: {e}")
            samples = []
        done_ids.add(p.id)
        measured_now += 1
        emit(p, samples)

    # 1. probes planned before a crash: measure exactly those first
    for p in planned:
        measure(p)

    cache = GPCache(metric)
    reason = None
    while True:
        remaining = [(p, w) for pid, (p, w) in points.items() if pid not in done_ids]
        if not remaining:
            reason = "every layer config of the target model(s) is measured"
            break
        reason = budget_reached(len(done_ids), max_probes, clock() - t0, max_seconds, max_seconds)
        if reason:
            break
        cache.update(campaign.samples(metric))
        if target_rel_std is not None:
            rel = _relative_std(points, cache)
            if rel is not None and rel <= target_rel_std:
                reason = f"target relative uncertainty {target_rel_std:g} reached ({rel:.3g})"
                break

        def score(pw):
            p, w = pw
            got = cache.predict(p)
            if got is None:  # no GP for this kind yet: first, costliest first
                return (1, w * _train_flops(p))
            return (0, w * got[1])

        p, _ = max(remaining, key=score)
        campaign.plan(p)
        measure(p)
    if progress:
        progress("stop", {"reason": reason})
    counts = campaign.status_counts()
    return {"stop_reason": reason, "probes_done": counts.get("done", 0), "probes_failed": counts.get("failed", 0),
            "probes_measured_now": measured_now,
            "target_configs": len(points), "seconds": clock() - t0,
            **sample_summary(campaign)}


def plan_campaign(out, models, batch_sizes, *, metric="time", settings=None, runtime="onnxruntime", device=None,
                  input_shape=None, unknown_ops="error", producer=None, trainable=None):
    """A new campaign at ``out`` with every layer config of ``models`` planned at every batch size, nothing
    measured (``thor-sdk bundle --model``: for a device thor-sdk cannot drive; its harness's results are
    ingested later). The same targets and probes ``thor-sdk probe`` would measure; ``device`` = the
    campaign's device description (``{"name": ..., "kind": "offline"}`` by default); ``trainable``: name patterns
    making each model that fine-tune (``thor_sdk.layers.target_layers``). Returns
    ``{"campaign", "probes", "target_configs"}``."""
    from thor_sdk.layers import target_layers
    from thor_sdk.layers.trainable import check_patterns
    from thor_sdk.runtime.estimator import METRIC_UNITS
    from thor_sdk.store import Campaign
    from thor_sdk.store.campaign import check_new

    if metric not in METRIC_UNITS:
        raise UsageError(f"unknown metric {metric!r} (time or energy)")
    models = [models] if isinstance(models, str) else list(models or ())
    if not models:
        raise UsageError("give at least one --model to plan")
    trainable = check_patterns(trainable)
    check_new(out)  # a bad campaign path is refused before any model is built
    targets = [target_layers(m, input_shape=input_shape, unknown_ops=unknown_ops, trainable=trainable) for m in models]
    points = target_points(targets, batch_sizes)
    settings = settings or ProtocolSettings()
    meta = {"device": dict(device or {"name": "offline", "kind": "offline"}), "metric": metric,
            "unit": METRIC_UNITS[metric], "batch_sizes": [int(b) for b in batch_sizes], "runtime": runtime,
            "protocol": settings.to_dict(), "targets": [t.to_dict() for t in targets], "producer": producer,
            "planned_offline": True, "canary_version": CANARY_VERSION}
    with Campaign.create(out, meta) as c:
        with c.batch():  # every probe planned, or none
            for p, _w in sorted(points.values(), key=lambda pw: -pw[1] * _train_flops(pw[0])):
                c.plan(p)
    return {"campaign": out, "probes": len(points), "target_configs": len(points)}
