"""THOR campaigns: per-layer costs by subtraction, and active selection of the next probe.

``run_campaign`` measures the layer configs that the target model(s) need. After each probe it
refits that kind's Gaussian Process and picks the next probe where the GP is least certain,
weighted by how often the config occurs in the targets (a config used 8 times counts 8 times).
Kinds without a GP yet come first, largest FLOPs first, so a tight budget still covers the costly
layers. It stops when every target config is measured, on a probe budget, on a time budget, or when
the targets' estimated relative uncertainty falls below ``target_rel_std``.

Noise is handled in the open: a difference that is negative beyond its own noise is re-measured
with more rounds; if it stays so, the sample is stored *flagged* (with the reason) and left out of
the fit, and ``fit`` reports it. Nothing is clipped.
"""

import math
import time

from thor_sdk.harness.protocol import ProtocolSettings, paired_difference, robust_summary
from thor_sdk.layers.kinds import feature_vector, get_kind
from thor_sdk.probes import Probe

#: a difference below -FLAG_SIGMAS standard errors is implausible (a layer cannot cost < 0)
FLAG_SIGMAS = 3.0


def _part_summaries(results_by_part, metric):
    out = {}
    for part, r in results_by_part.items():
        s = robust_summary(r.values(metric))
        out[part] = {"median": s["median"], "std": s["std"], "n": s["n"], "steps_per_window": r.steps_per_window}
    return out


def derive_samples(probe, results_by_part, metric="time"):
    """Per-layer cost samples from one probe's measured parts: THOR's subtraction.

    Returns a list of sample dicts (``metric, value, std, n, flagged, flag_reason, parts``) for
    ``Campaign.complete``: one for time, plus one for energy when energy was measured. ``value`` is
    the median over rounds of the per-round difference (part - head); ``std`` its standard error.
    """
    metrics = ["time"]
    if all(r.energy_j for r in results_by_part.values()):
        metrics.append("energy")
    samples = []
    for m in metrics:
        if probe.role == "output":
            s = robust_summary(results_by_part["head"].values(m))
        else:
            s = paired_difference(results_by_part, probe.parts()[-1], "head", m)
        n = max(s["n"], 1)
        stderr = s["std"] / math.sqrt(n)
        flagged, why = False, None
        if not math.isfinite(s["median"]):
            flagged, why = True, "no finite measurement"
        elif s["median"] < -FLAG_SIGMAS * max(stderr, 1e-12):
            flagged = True
            why = f"negative difference {s['median']:.3g} beyond noise (stderr {stderr:.3g})"
        samples.append({"metric": m, "value": s["median"], "std": stderr, "n": s["n"], "flagged": flagged,
                        "flag_reason": why, "parts": _part_summaries(results_by_part, m)})
    return samples


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


class GPCache:
    """One fitted ``KindGP`` per kind, refitted only when that kind gets a new sample."""

    def __init__(self, metric="time", random_state=0):
        self.metric = metric
        self.random_state = random_state
        self.gps = {}
        self._n = {}

    def update(self, samples):
        from thor_sdk.fit.gp import KindGP
        from thor_sdk.layers.kinds import gp_features

        by_kind = {}
        for s in samples:
            if s["metric"] == self.metric and not s["flagged"]:
                by_kind.setdefault(s["kind"], []).append(s)
        for kind, rows in by_kind.items():
            if self._n.get(kind) == len(rows):
                continue
            X = [feature_vector(kind, r["config"], r["batch_size"], r["role"]) for r in rows]
            y = [r["value"] for r in rows]
            self.gps[kind] = KindGP(gp_features(kind), random_state=self.random_state).fit(
                X, y, noise_std=[r["std"] for r in rows])
            self._n[kind] = len(rows)
        return self

    def predict(self, probe):
        gp = self.gps.get(probe.kind)
        if gp is None:
            return None
        mean, std = gp.predict([feature_vector(probe.kind, probe.config, probe.batch_size, probe.role)],
                               return_std=True)
        return float(mean[0]), float(std[0])


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


def measure_and_store(campaign, device, probe, metric, settings, runtime, on_progress=None):
    """Measure one planned probe, re-measuring once if its difference is implausible; commit it."""
    campaign.discard_partial(probe.id)
    offset = 0
    merged = None
    for attempt in range(2):
        def on_round(rnd, row, _off=offset):
            for part, (t, e) in row.items():
                campaign.add_window(probe.id, part, _off + rnd, t, e)
            if on_progress:
                on_progress(probe, rnd)

        s = settings if attempt == 0 else ProtocolSettings(**dict(settings.to_dict(),
                                                                   max_rounds=2 * settings.max_rounds,
                                                                   min_rounds=settings.max_rounds))
        res = device.measure_probe(probe, metric=metric, settings=s, runtime=runtime, on_round=on_round)
        if merged is None:
            merged = res
        else:
            for part, r in res.items():
                m = merged[part]
                n_before = len(m.time_s)
                m.time_s += r.time_s
                m.energy_j += r.energy_j
                m.net_energy_j += r.net_energy_j
                # states and window times are indexed by window: pad a part that lacked them
                m.states += [None] * (n_before - len(m.states)) + list(r.states)
                m.window_times_s += [None] * (n_before - len(m.window_times_s)) + list(r.window_times_s)
        offset += max(len(r.time_s) for r in res.values())
        samples = derive_samples(probe, merged, metric)
        if not any(x["flagged"] for x in samples):
            break
    campaign.complete(probe.id, samples, window_detail=window_detail(merged))
    return samples


def window_detail(results_by_part):
    """Per-window rows for ``Campaign.complete``: net energy, wall-clock start/end and device state,
    where the device recorded them (window ``i`` of a part is round ``i``)."""
    out = []
    for part, r in results_by_part.items():
        nets = r.net_energy_j if len(r.net_energy_j) == len(r.time_s) else []
        for i in range(len(r.time_s)):
            w = r.window_times_s[i] if i < len(r.window_times_s) else None
            d = {"part": part, "round": i, "net_energy_j": nets[i] if nets else None,
                 "start_s": w[0] if w else None, "end_s": w[1] if w else None,
                 "state": r.states[i] if i < len(r.states) else None}
            if any(d[k] is not None for k in ("net_energy_j", "start_s", "state")):
                out.append(d)
    return out


def run_campaign(campaign, device, model_layers, batch_sizes, metric="time", settings=None, runtime="torch",
                 max_probes=None, max_seconds=None, target_rel_std=None, progress=None, clock=time.monotonic):
    """Probe ``device`` for the layer configs of ``model_layers`` until a stop condition holds.

    ``progress(event, info)`` is called with ("start", {"total"}), ("probe", {...}) after each
    probe and ("stop", {"reason"}). Returns a summary dict.
    """
    settings = settings or ProtocolSettings()
    t0 = clock()
    points = target_points(model_layers, batch_sizes)
    done_ids = {p.id for p in campaign.probes("done")}
    planned = campaign.probes("planned")
    if progress:
        progress("start", {"total": len(points), "done": len(done_ids)})
    measured_now = 0

    def emit(p, samples):
        if progress:
            progress("probe", {"probe": p.to_dict(), "samples": samples, "done": len(done_ids)})

    # 1. probes planned before a crash: measure exactly those first
    for p in planned:
        samples = measure_and_store(campaign, device, p, metric, settings, runtime)
        done_ids.add(p.id)
        measured_now += 1
        emit(p, samples)

    cache = GPCache(metric)
    reason = None
    while True:
        remaining = [(p, w) for pid, (p, w) in points.items() if pid not in done_ids]
        if not remaining:
            reason = "every layer config of the target model(s) is measured"
            break
        if max_probes is not None and len(done_ids) >= max_probes:
            reason = f"probe budget of {max_probes} reached"
            break
        if max_seconds is not None and clock() - t0 >= max_seconds:
            reason = f"time budget of {max_seconds:g} s reached"
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
        samples = measure_and_store(campaign, device, p, metric, settings, runtime)
        done_ids.add(p.id)
        measured_now += 1
        emit(p, samples)
    if progress:
        progress("stop", {"reason": reason})
    counts = campaign.status_counts()
    return {"stop_reason": reason, "probes_done": counts.get("done", 0), "probes_measured_now": measured_now,
            "target_configs": len(points), "seconds": clock() - t0,
            "flagged": sum(1 for s in campaign.samples() if s["flagged"])}
