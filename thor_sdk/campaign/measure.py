"""Probe campaigns: per-layer costs by subtraction, measured, checked and committed one probe at a time.

``derive_samples`` is THOR's subtraction; ``measure_and_store`` measures one planned probe, re-measures
it once if its difference is implausible, and commits it with its per-window detail. Both the
target-driven campaign (``targets.py``) and the device profile (``profile.py``) use them.

Noise is handled in the open: a difference that is negative beyond its own noise is re-measured
with more rounds; if it stays so, the sample is stored *flagged* (with the reason) and left out of
the fit, and ``fit`` reports it. Nothing is clipped. A probe whose parts still vary by more than the
protocol's ``cv_target`` after its rounds, or that was measured while other work kept the machine
busy (the load recorded with every window), is stored *noisy* (with the reason): it stays in the fit,
weighed by its own spread, and ``fit`` and ``estimate`` name the kinds that rest on noisy samples.

Where every window carries a canary reading (``harness.canary``: the host's CPU), the time sample keeps their median
(``canary_s``, ``probe_canary``): the machine's speed state while the probe ran (states that switch every few seconds
on this project's VMs), by which ``fit`` puts the sample at the campaign's speed.
"""

import math
import statistics

from thor_sdk.devices.state import load_summary
from thor_sdk.harness.protocol import ProtocolSettings, paired_difference, robust_summary
from thor_sdk.errors import DeviceError, NoMeterError, StoreError, ThorError, UsageError

#: a difference below -FLAG_SIGMAS standard errors is implausible (a layer cannot cost < 0)
FLAG_SIGMAS = 3.0


def _part_summaries(results_by_part, metric):
    out = {}
    for part, r in results_by_part.items():
        s = robust_summary(r.values(metric))
        out[part] = {"median": s["median"], "std": s["std"], "n": s["n"], "steps_per_window": r.steps_per_window}
    return out


def noise_reason(results_by_part, metric, cv_target=None, load=None):
    """Why a probe's measurement is noisy (parts' CV above ``cv_target``; a busy machine), or None."""
    why = []
    if cv_target is not None:
        cvs = {p: robust_summary(r.values(metric))["cv"] for p, r in results_by_part.items() if r.values(metric)}
        over = {p: cv for p, cv in cvs.items() if not cv <= cv_target}
        if over:
            why.append("CV " + ", ".join(f"{p} {cv:.1%}" for p, cv in sorted(over.items()))
                       + f" above the {cv_target:.1%} target after {max(len(r.time_s) for r in results_by_part.values())}"
                       " rounds")
    if load and load.get("busy"):
        why.append(f"machine busy (other runnable threads: median {load['other_runnable_median']}, "
                   f"other 1-minute load {load['other_load_1m']})")
    return "; ".join(why) or None


def probe_canary(results_by_part):
    """The median canary reading (``harness.canary``) over every window of every part: the machine's speed while
    the probe (or a whole model) was measured; None unless every window has a positive, finite reading.

    A probe's windows are not levelled one by one: within a probe, which mostly runs in one speed state, a single
    0.25 ms reading varies more than the window it sits beside (profile 66, 1,042 probes on this project's 2-core
    VM: each part's canary readings 7.4% robust CV, median; its window times 2.2%; levelled window by window, 8.1%),
    while the median over a run's readings places it: profile 66's 17 reference re-measurements read an ln-spread of
    0.122 as measured and 0.031 put at the campaign's median reading, its 224 calibration runs (14 nets and batch
    sizes) 0.077 and 0.039 around their own nets' means."""
    cs = [c for r in results_by_part.values() for c in r.canary_s]
    if not cs or any(len(r.canary_s) != len(r.time_s) for r in results_by_part.values()) or \
            not all(isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c) and c > 0 for c in cs):
        return None
    return statistics.median(cs)


def canary_version(meta):
    """The canary version a campaign's readings are of (``harness.canary``; 1 for campaigns from before it was
    recorded in their meta)."""
    v = meta.get("canary_version", 1)
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def canary_detail(result, metric="time"):
    """``{"canary_s"}`` of one measured part (a whole model, the reference probe) for a model run's detail: its
    ``probe_canary``; ``{}`` without readings or for energy (the canary reads speed, not power)."""
    c = probe_canary({result.part: result})
    return {"canary_s": c} if c is not None and metric == "time" else {}


def at_canary_level(result, canary, metric="time"):
    """A measured part's (a whole model's) median put at an estimator's canary level (``canary``: its
    ``whole_model.canary``, ``{"canary_s", "version"}``): times ``canary_s`` over the part's own median reading (the
    machine's speed during it relative to the profile's); None without readings, without that level, for energy, or
    where the estimator's canary is another version's."""
    from thor_sdk.harness.protocol import CANARY_VERSION

    if not canary or canary.get("version") != CANARY_VERSION:
        return None
    own = canary_detail(result, metric)
    return statistics.median(result.values(metric)) * canary["canary_s"] / own["canary_s"] if own else None


def derive_samples(probe, results_by_part, metric="time", cv_target=None, load=None):
    """Per-layer cost samples from one probe's measured parts: THOR's subtraction.

    Returns a list of sample dicts (``metric, value, std, n, flagged, flag_reason, noisy,
    noise_reason, parts``) for ``Campaign.complete``: one for time, plus one for energy when energy
    was measured. ``value`` is the median over rounds of the per-round difference (part - head);
    ``std`` its standard error. ``cv_target`` and ``load`` (``devices.state.load_summary``) decide
    whether the sample is *noisy*. Where every window has a canary reading, the time sample also carries
    ``canary_s`` (``probe_canary``): ``fit`` puts it at the campaign's speed.
    """
    canary_s = probe_canary(results_by_part)
    metrics = ["time"]
    source = {"time": "time", "energy": "energy"}
    if all(r.energy_j for r in results_by_part.values()):
        metrics.append("energy")
    elif all(r.net_energy_j for r in results_by_part.values()):  # a meter log already net of idle (energy_basis net)
        metrics.append("energy")
        source["energy"] = "net_energy"
    samples = []
    for m in metrics:
        if probe.role == "output":
            s = robust_summary(results_by_part["head"].values(source[m]))
        else:
            s = paired_difference(results_by_part, probe.parts()[-1], "head", source[m])
        n = max(s["n"], 1)
        stderr = s["std"] / math.sqrt(n)
        flagged, why = False, None
        if not math.isfinite(s["median"]):
            flagged, why = True, "no finite measurement"
        elif s["median"] < -FLAG_SIGMAS * max(stderr, 1e-12):
            flagged = True
            why = f"negative difference {s['median']:.3g} beyond noise (stderr {stderr:.3g})"
        noisy = noise_reason(results_by_part, source[m], cv_target, load)
        samples.append({"metric": m, "value": s["median"], "std": stderr, "n": s["n"], "flagged": flagged,
                        "flag_reason": why, "noisy": noisy is not None, "noise_reason": noisy,
                        "parts": _part_summaries(results_by_part, source[m]),
                        "canary_s": canary_s if m == "time" else None})
    return samples


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
                if m.canary_s or r.canary_s:  # both attempts read it, or the windows keep none (never half)
                    m.canary_s = m.canary_s + list(r.canary_s) if len(m.canary_s) == n_before and \
                        len(r.canary_s) == len(r.time_s) else []
                if r.window_idle_power_w:  # (a time campaign has none: nothing to pad)
                    pad = [None] * (n_before - len(m.window_idle_power_w))
                    m.window_idle_power_w += pad + list(r.window_idle_power_w)
        offset += max(len(r.time_s) for r in res.values())
        samples = derive_samples(probe, merged, metric, cv_target=s.cv_target,
                                 load=load_summary([st for r in merged.values() for st in r.states],
                                                   own_threads=device.own_threads() or 1,
                                                   use_load_average=device.load_average_means_busy()))
        if not any(x["flagged"] for x in samples):
            break
    campaign.complete(probe.id, samples, window_detail=window_detail(merged))
    return samples


def is_probe_failure(e):
    """Whether ``e`` is this probe's own failure (it cannot be built, exported or run: store it ``failed``
    and go on) rather than the device's or the store's (unreachable device, no meter, a locked or broken
    campaign, a usage error: stop, so ``--resume`` continues once that is fixed)."""

    if isinstance(e, (DeviceError, NoMeterError, StoreError, UsageError)):
        return False
    return isinstance(e, (ThorError, RuntimeError, ValueError))


def window_detail(results_by_part):
    """Per-window rows for ``Campaign.complete``: net energy, the idle power it was computed with,
    wall-clock start/end, device state and canary reading, where the device recorded them (window ``i`` of a part
    is round ``i``)."""
    out = []
    for part, r in results_by_part.items():
        nets = r.net_energy_j if len(r.net_energy_j) == len(r.time_s) else []
        idle = r.window_idle_power_w if len(r.window_idle_power_w) == len(r.time_s) else []
        canary = r.canary_s if len(r.canary_s) == len(r.time_s) else []
        for i in range(len(r.time_s)):
            w = r.window_times_s[i] if i < len(r.window_times_s) else None
            d = {"part": part, "round": i, "net_energy_j": nets[i] if nets else None,
                 "start_s": w[0] if w else None, "end_s": w[1] if w else None,
                 "state": r.states[i] if i < len(r.states) else None, "idle_power_w": idle[i] if idle else None,
                 "canary_s": canary[i] if canary else None}
            if any(d[k] is not None for k in ("net_energy_j", "start_s", "state", "idle_power_w", "canary_s")):
                out.append(d)
    return out


def budget_reached(n_done, max_probes, elapsed_s, limit_s, max_seconds):
    """Why a campaign stops on its budget (probes done, or ``elapsed_s`` past ``limit_s``, the part of
    ``max_seconds`` given to probing), or None to go on."""
    if max_probes is not None and n_done >= max_probes:
        return f"probe budget of {max_probes} reached"
    if limit_s is not None and elapsed_s >= limit_s:
        return f"time budget of {max_seconds:g} s reached"
    return None



def sample_summary(campaign, samples=None):
    """``{"flagged", "noisy", "busy"}``: samples of the campaign flagged (left out of fits), stored noisy,
    and measured on a busy machine (``samples``: the campaign's, where the caller read them already)."""
    samples = campaign.samples() if samples is None else samples
    noisy = [s for s in samples if s.get("noisy")]
    return {"flagged": sum(1 for s in samples if s["flagged"]), "noisy": len(noisy),
            "busy": sum(1 for s in noisy if "machine busy" in (s.get("noise_reason") or ""))}
