"""From samples (campaigns, CSVs) to an estimator document: per-kind fits, drift, whole-model calibration.

- **drift**: a campaign that re-measured a fixed reference probe through its run (``thor-sdk profile``
  stores those as model runs named ``reference:<probe id>``) gives the machine's run-to-run variance
  in ln units; it is added to every sample's noise, so the GPs do not mistake drift for structure;
  and every sample is first put at the campaign's level (``at_campaign_level``: divided by the device's
  speed when it was measured, from the smoothed reference series);
- **whole-model calibration**: whole models measured in the campaign (model runs that carry their
  layer list, ``calibration:<name>``; zoo models, never the held-out ones) are estimated with the
  freshly fitted layer models, each put at the campaign's level first (the reference probe measured
  around it, over its median through the campaign: on a shared machine the whole models of one profile
  ran 30% faster than the hour before, and read as a -0.30 ln bias). A (model, batch size) measured in
  several passes counts once, with the median of its runs (its passes share one composition error, so
  they are not independent evidence). With at least 4 such of 2 models, their median ``ln(measured /
  estimated)`` is a bias common to whole models (composition effects, extrapolation of the layer models),
  shrunk toward 0 by its standard error (``bias_shrinkage``: continuous, never a yes/no test) and folded
  into every kind's residual offset; the spread around it, the part left uncorrected, the uncertainty of
  the part corrected and the drift make the whole-model relative std. With fewer runs, their RMS (at least the drift) is
  the std and nothing is corrected; without any, the drift alone, and the estimator says so.
"""

import collections
import json
import math
import statistics

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.fitting.estimator import METRIC_UNITS as UNITS
from thor_sdk.harness.protocol import CANARY_VERSION

REFERENCE_PREFIX = "reference:"
#: standard error of a median of n normal values is about sqrt(pi/2) = 1.2533 times that of their mean
ROBUST_SE = math.sqrt(math.pi / 2.0)
MIN_BIAS_RUNS = 4  # calibration (model, batch size) pairs (of at least 2 models) before a common bias is corrected
MIN_LEVEL_REFERENCES = 3  # reference re-measurements before calibration runs are put at the campaign's level
LEVEL_MARGIN_S = 300.0  # least time beyond the first and last reference over which levels still apply
SAMPLE_LEVEL_SMOOTHING = 3  # re-measurements of the reference in the running median a sample's level is read from
#: samples with a canary reading before samples are put at the campaign's canary level (each reading is already a
#: probe's median over 10-30; at 10, the target-driven campaigns of lstm (3 probes) and transformer (4) had none,
#: ``bench/results/accuracy-host-20261130-0853-canary.md``)
MIN_CANARY_SAMPLES = 3
CALIBRATION_PREFIX = "calibration:"
#: an estimator file at most this large (a whole device profile; ``fit`` lowers the inducing points of its
#: largest kinds until it fits) ...
MAX_ESTIMATOR_BYTES = 256_000
#: ... but never below this many inducing points for a kind that has them
MIN_BUDGET_INDUCING = 32
#: inducing points of the output kind where the layer probes' heads are among its samples (head_part_samples)
HEAD_PART_INDUCING = 64
#: kind families whose share of a calibration net's estimate is a regressor of its whole-model bias
#: (``family_biases``; base kinds; every other kind, ``transformer_block`` too, in none: a whole encoder layer, probed
#: as one, whose nets did not read like attention_har's ``mha``: with it in ``attention``, profile 62's transformers
#: read 0.77-0.85x the pooled truth, held out 13.4% against 12.4% without it). LSTMs and GRUs apart: on this host
#: torch runs an LSTM as one fused kernel per layer and a GRU step by step, op by op, and with one recurrent family
#: read from deepconvlstm alone (profiles 71-73: -0.08 to -0.23) the held-out GRU nets read 0.74-0.82x their truth
KIND_FAMILIES = {"conv": ("conv1d", "conv2d", "conv_transpose2d"), "dense": ("linear", "output"),
                 "lstm": ("lstm", "lstm_cell"), "gru": ("gru", "gru_cell"), "attention": ("mha", "sdpa")}
#: a family is read from the calibration where at least this many (model, batch size) pairs ...
MIN_FAMILY_PAIRS = 2
#: ... hold at least this share of their estimate in it
FAMILY_MIN_SHARE = 0.25
#: ridge penalty (in squared-share units) on each family's departure from the common median: a family that makes up
#: whole nets in 2 pairs keeps 2/3 of what they read, one at a quarter of 2 pairs' estimates 1/9
FAMILY_RIDGE = 1.0


def sample_terms(samples):
    """(training FLOPs, bytes moved, launches, bytes moved once per step) of each sample at its batch size and role."""
    from thor_sdk.runtime.terms import at_batch, cost_terms

    return [at_batch(cost_terms(s["kind"], s["config"], s["role"]), s["batch_size"]) for s in samples]


def drift_log_var(model_runs, metric, canary_c=None):
    """Variance in ln units of the reference probe's repeated measurements (0.0 without two of them),
    and how many there were. ``canary_c`` (``campaign_canary``): each re-measurement that read the canary is
    taken at the campaign's canary level (``canary_run``), so the variance is the drift the canary does not
    explain."""
    by_ref = {}
    for r in model_runs:
        if r["model"].startswith(REFERENCE_PREFIX) and r["metric"] == metric and r["mean"] > 0:
            at = canary_run(r, canary_c)
            by_ref.setdefault(r["model"], []).append(math.log(at[0] if at else r["mean"]))
    vals = [v for logs in by_ref.values() if len(logs) >= 2 for v in _centred(logs)]
    if len(vals) < 2:
        return 0.0, sum(len(v) for v in by_ref.values())
    return sum(v * v for v in vals) / (len(vals) - len(by_ref)), len(vals)


def campaign_canary(samples):
    """The machine's speed the layer models describe: the median canary reading (``harness.canary``) of the samples
    that carry one (``campaign.measure.probe_canary``), or None where fewer than MIN_CANARY_SAMPLES do."""
    cs = _canary_readings(samples)
    return statistics.median(cs) if len(cs) >= MIN_CANARY_SAMPLES else None


def _canary_readings(samples):
    return [s["canary_s"] for s in samples if _number(s.get("canary_s")) and s["canary_s"] > 0]


def canary_log_var(samples):
    """The variance in ln units of the samples' canary readings (``campaign_canary``'s), or 0.0 where fewer than
    MIN_CANARY_SAMPLES read it: how far the machine's speed moved through the campaign, read beside every probe (a
    profile reads it about 1,000 times, the reference 15-20). Not robust on purpose: a machine with two speed
    states is as wide as both. The whole-model std takes the larger of this and the reference's drift
    (``build``): profile 68's reference read 0.105 in a calm quarter-hour, its canary 0.160, and 9 of 52 user nets
    measured that afternoon fell outside intervals made from the reference's
    (``bench/results/user-nets-host-20261130-1201-canary-p68.md``)."""
    logs = [math.log(c) for c in _canary_readings(samples)]
    return statistics.pvariance(logs) if len(logs) >= MIN_CANARY_SAMPLES else 0.0


def canary_run(run, canary_c):
    """``(value, level)`` of a whole-model or reference ``run`` at the campaign's canary level: its median over its
    level ``detail.canary_s / canary_c`` (its median canary reading, ``campaign.measure.canary_detail``); None where
    the campaign or the run has no canary reading."""
    c = (run.get("detail") or {}).get("canary_s")
    if not (canary_c and _number(c) and c > 0 and _number(run.get("mean")) and run["mean"] > 0):
        return None
    level = c / canary_c
    return run["mean"] / level, level


def main_reference_runs(model_runs, metric):
    """The re-measurements of the campaign's reference probe: of the most re-measured one where merged
    campaigns used several (two probes' values are not one series)."""
    refs = [r for r in model_runs if r["model"].startswith(REFERENCE_PREFIX) and r["metric"] == metric
            and r["mean"] > 0]
    counts = collections.Counter(r["model"] for r in refs)
    main = max(sorted(counts), key=counts.get) if counts else None
    return [r for r in refs if r["model"] == main]


def reference_level(model_runs, metric):
    """The reference probe and the median of its re-measurements through the campaign (None without any):
    re-measuring it later tells how much faster or slower the device is than when it was profiled."""
    runs = [r for r in main_reference_runs(model_runs, metric) if (r.get("detail") or {}).get("probe")]
    if not runs:
        return None
    vals = sorted(r["mean"] for r in runs)
    return {"probe": runs[0]["detail"]["probe"], "part": runs[0]["detail"].get("part"),
            "median_value": vals[len(vals) // 2], "n": len(vals)}


def _centred(logs):
    mu = sum(logs) / len(logs)
    return [x - mu for x in logs]


def fit_kind(kind, rows, random_state=0, extra_log_var=0.0, n_restarts_optimizer=1, max_inducing=None,
             features=None):
    """A fitted ``KindGP`` from the samples of one kind (the campaign's working models and ``fit`` alike);
    ``max_inducing``: a lower cap on its inducing points than the GP's own (``fit``'s size budget);
    ``features``: GP inputs other than the kind's (``gp_features``), as a benchmark compares them."""
    from thor_sdk.fitting.gp import MAX_INDUCING, KindGP
    from thor_sdk.layers.kinds import feature_vector, gp_features

    features = gp_features(kind) if features is None else features
    X = [feature_vector(kind, r["config"], r["batch_size"], r["role"], features) for r in rows]
    return KindGP(features, random_state=random_state, n_restarts_optimizer=n_restarts_optimizer,
                  max_inducing=MAX_INDUCING if max_inducing is None else max_inducing).fit(
        X, [r["value"] for r in rows], noise_std=[r["std"] for r in rows], terms=sample_terms(rows),
        extra_log_var=extra_log_var)


def fit_kinds(samples, random_state=0, extra_log_var=0.0, progress=None, n_restarts_optimizer=1, unchanged=None,
              max_inducing=None):
    """``{key: fitted KindGP}`` from non-flagged samples of one metric, one GP per kind and structural
    variant (``thor_sdk.layers.kinds.model_key``: ``conv2d``, ``conv2d:grouped``, ``conv2d:gemm``; ``fit`` and the
    campaign's working models alike). ``unchanged(kind, rows)`` true leaves that kind out (a cache keeps
    its model); ``progress(kind, n_samples)`` is called after each fit; ``max_inducing``: ``{key: cap}``
    for the keys whose inducing points a size budget lowers."""
    from thor_sdk.layers.kinds import base_kind, model_key

    by_key = {}
    for s in samples:
        by_key.setdefault(model_key(s["kind"], s["config"], s["batch_size"]), []).append(s)
    gps = {}
    for key in sorted(by_key):
        if unchanged is not None and unchanged(key, by_key[key]):
            continue
        gps[key] = fit_kind(base_kind(key), by_key[key], random_state, extra_log_var, n_restarts_optimizer,
                            (max_inducing or {}).get(key))
        if progress:
            progress(key, len(by_key[key]))
    return gps


def epoch_s(stamp):
    """Seconds since the epoch of a stored ``created_utc`` stamp, or None."""
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(str(stamp))
    except (TypeError, ValueError):
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.timestamp()


class DeviceLevels:
    """The device's speed over a campaign, from its reference probe's re-measurements ``[(epoch s, value)]``:
    called with a ``created_utc`` stamp, the reference interpolated at that moment (the nearest one before
    and after, in time) over the median of all of them. A moment without a readable stamp, or farther from
    the series than ``margin_s`` (twice the references' median spacing, at least LEVEL_MARGIN_S: another
    campaign's runs, measured hours apart), reads 1.0: taken as measured. ``smooth`` > 1: each re-measurement
    first replaced by the median of it and its neighbours (``smooth`` of them, centred), so that one burst of
    the machine does not move every moment near it."""

    def __init__(self, series, smooth=1):
        series = sorted(series)
        half = max(int(smooth), 1) // 2
        if half:
            series = [(t, statistics.median(v for _, v in series[max(0, i - half):i + half + 1]))
                      for i, (t, _) in enumerate(series)]
        self.series = series
        self.median = statistics.median(v for _, v in self.series)
        times = [t for t, _ in self.series]
        gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
        self.margin_s = max(LEVEL_MARGIN_S, 2.0 * statistics.median(gaps)) if gaps else LEVEL_MARGIN_S

    def covers(self, stamp):
        t = epoch_s(stamp)
        return t is not None and self.series[0][0] - self.margin_s <= t <= self.series[-1][0] + self.margin_s

    def __call__(self, stamp):
        if not self.covers(stamp):
            return 1.0
        t = epoch_s(stamp)
        before = [p for p in self.series if p[0] <= t]
        after = [p for p in self.series if p[0] >= t]
        if not before or not after:
            return (before or after)[-1 if before else 0][1] / self.median
        (t0, v0), (t1, v1) = before[-1], after[0]
        v = v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
        return v / self.median


def device_levels(model_runs, metric, smooth=1):
    """``DeviceLevels`` (``f(created_utc) -> level``): the device's speed when a run was measured, relative to
    the profile as a whole. None with fewer than MIN_LEVEL_REFERENCES reference re-measurements. Runs of
    several campaigns with different reference probes: the most re-measured one alone (two probes' values
    are not one series). ``smooth``: see ``DeviceLevels``."""
    series = [(t, r["mean"]) for r in main_reference_runs(model_runs, metric)
              for t in [epoch_s(r.get("created_utc"))] if t is not None]
    if len(series) < MIN_LEVEL_REFERENCES:
        return None
    return DeviceLevels(series, smooth)


def at_campaign_level(samples, model_runs, metric, canary_c=None, canary_version=CANARY_VERSION):
    """``(samples, summary)``: each sample divided (value and std) by the device's level when it was measured
    (``device_levels`` of the campaign's reference probe, smoothed over SAMPLE_LEVEL_SMOOTHING re-measurements;
    1 where no reference is near its ``measured_utc``), so that the layer models describe the device at its
    median speed through the campaign rather than each sample's moment; ``summary`` (None without references)
    says how far the levels went. Profiles 4-12 of this project's 2-core host refitted with and without it and
    rescored on their 18 evaluations (``bench/results/sample-levels-rescore-host-20261127-0413.md``): held-out MAPE
    better in 12, -5.5 to +2.9 points, -0.65 on average; unsmoothed, one noisy reference moved every sample near
    it (profiles 9-12: better in 4 of 8). Also where the reference flips between readings minutes apart (this
    project's VM on 2026-11-29, an AMD EPYC): leaving such samples as measured was tried and not taken (held out
    6.2 -> 5.0% at the level on profile 49, but 10.7 -> 16.8% as estimated and 9.7 -> 12.2% at the best scale on
    profile 50; ``bench/results/sample-levels-host-20261129-*.md``).

    ``canary_c`` (``campaign_canary``): a sample that read the canary (``canary_s``) is put at that level instead,
    ``canary_s / canary_c``: its own probe's speed, read beside its windows, where the reference re-measured every
    two minutes cannot place the machine's speed states that switch every few seconds."""
    levels = device_levels(model_runs, metric, SAMPLE_LEVEL_SMOOTHING)
    if levels is None and not canary_c:
        return samples, None
    out, used, by_canary = [], [], 0
    for s in samples:
        c = s.get("canary_s")
        if canary_c and _number(c) and c > 0:
            lvl = c / canary_c
            by_canary += 1
        else:
            lvl = levels(s.get("measured_utc")) if levels is not None else 1.0
        if not (math.isfinite(lvl) and lvl > 0):  # a reference series is positive: never, but never divide by it
            lvl = 1.0
        used.append(lvl)
        out.append(dict(s, value=s["value"] / lvl, std=s["std"] / lvl) if lvl != 1.0 else s)
    summary = {"references": len(levels.series) if levels is not None else 0, "smoothing": SAMPLE_LEVEL_SMOOTHING,
               "min": round(min(used), 4), "max": round(max(used), 4),
               "samples_scaled": sum(1 for v in used if v != 1.0)}
    if canary_c:
        from thor_sdk.fitting.gp import round_sig

        summary.update(canary_s=round_sig(canary_c, 6), canary_version=canary_version, samples_by_canary=by_canary)
    return out, summary


def calibrate(est, model_runs, metric, drift_var, family=True, canary_c=None):
    """Whole-model relative std and common bias from calibration runs, with its evidence, and the bias per kind
    family where the runs tell families apart (``family``: ``family_biases``'s, or None; ``family=False``
    skips it).

    Each run gives ``ln(measured / (estimated x level))`` (the run's median step; ``level``: the device's
    speed at that moment relative to the whole campaign, from the reference probe re-measured around it,
    ``device_levels``; 1 without references); the bias is their median, corrected where at least
    MIN_BIAS_RUNS (model, batch size) pairs of two models give one, shrunk toward 0 by its standard error
    (``bias_shrinkage``); the std is their robust spread (1.4826 x MAD) plus what is left of the median, the
    error of what is corrected, and the drift. Runs of one
    (model, batch size), a profile's calibration passes, count once with the median of their ratios. ``canary_c``
    (``campaign_canary``): a run that read the canary is taken at that level instead (``canary_run``)."""
    levels = device_levels(model_runs, metric)
    runs = []
    estimated = {}  # (layer list, batch size) -> estimate or error: a profile's passes share one
    for r in model_runs:
        if not (r["model"].startswith(CALIBRATION_PREFIX) and r["metric"] == metric and r["mean"] > 0):
            continue
        layers = (r.get("detail") or {}).get("layers")
        if not layers:
            continue
        key = (json.dumps(layers, sort_keys=True), r["batch_size"])
        if key not in estimated:
            try:
                e = est.estimate(layers, r["batch_size"])
                total = e["layers_total"]["mean"]
                estimated[key] = (total, family_shares(e.get("layers") or (), total))
            except Exception as e:  # a kind the estimator lacks: that model cannot calibrate it
                estimated[key] = f"{type(e).__name__}: {e}"
        got = estimated[key]
        if isinstance(got, str):
            runs.append({"model": r["model"][len(CALIBRATION_PREFIX):], "batch_size": r["batch_size"],
                         "skipped": got})
            continue
        at = canary_run(r, canary_c)
        level = at[1] if at else (levels(r.get("created_utc")) if levels else 1.0)
        runs.append({"model": r["model"][len(CALIBRATION_PREFIX):], "batch_size": r["batch_size"],
                     "measured": r["mean"], "estimated": got[0], "family_shares": got[1], "device_level": level,
                     "log_ratio": math.log(r["mean"] / (got[0] * level))})
    by_key, shares = {}, {}
    for r in runs:
        if "log_ratio" in r:
            by_key.setdefault((r["model"], r["batch_size"]), []).append(r["log_ratio"])
            shares[(r["model"], r["batch_size"])] = r["family_shares"]
    used = [statistics.median(v) for v in by_key.values()]  # one per (model, batch size): passes are not independent
    n_runs = sum(len(v) for v in by_key.values())
    models = {m for m, _ in by_key}
    bias, by_family = 0.0, None
    # robust: one whole-model run caught by a burst of load must not hide a bias every other run shows
    center = statistics.median(used) if used else 0.0
    mad = statistics.median(abs(x - center) for x in used) if used else 0.0
    sd = 1.4826 * mad if mad > 0 else (statistics.stdev(used) if len(used) > 1 else 0.0)
    se = ROBUST_SE * sd / math.sqrt(len(used)) if used else 0.0  # standard error of a median
    # a net measured once, at one moment, departs from its own median over passes by this much more
    pass_var, n_pass = pass_log_var(by_key.values())
    parts = {"between_nets_log_std": sd, "n_models": len(models), "n_pairs": len(used),
             "pass_log_std": math.sqrt(pass_var), "n_pass_runs": n_pass}
    if len(used) >= MIN_BIAS_RUNS and len(models) >= 2:
        # a shift common to whole models (e.g. what the layer sum misses) is corrected, shrunk toward 0 by
        # its own noise (bias_shrinkage): continuous, so a fit that moves the median by a hair moves every
        # estimate by a hair, not by the whole bias; what varies between models, the part of the median
        # left uncorrected and the uncertainty of the part corrected stay in the std
        w = bias_shrinkage(center, se)
        bias = w * center
        # the spread of a few nets, stretched to a new net's 95% prediction interval (predictive_factor)
        factor = predictive_factor(len(models))
        parts["predictive_factor"] = factor
        spread = factor * sd
        rel = math.sqrt(spread * spread + ((1.0 - w) * center) ** 2 + (w * se) ** 2 + drift_var + pass_var)
        source = (f"{len(used)} calibration (model, batch size) pair(s) of {len(models)} model(s), {n_runs} run(s): "
                  f"median ln bias {center:+.3f} (standard error {se:.3f}), {bias:+.3f} corrected "
                  f"(shrunk by {w:.2f}), robust spread around it ({sd:.3f}, x {factor:.2f} for a new net's 95% "
                  f"interval from {len(models)} nets), one pass's departure from its pair's median "
                  f"({math.sqrt(pass_var):.3f} over {n_pass} runs) plus drift")
        if family:
            by_family = family_biases([(statistics.median(v), shares[k], k[0]) for k, v in by_key.items()],
                                      center, bias)
        if by_family:
            source += ("; by kind family: " + ", ".join(f"{f} {b:+.3f}" for f, b in by_family["biases"].items())
                       + f", the rest {bias:+.3f} (each family's departure from the median regressed on the nets' "
                         f"shares of it, ridge {FAMILY_RIDGE:g})")
    elif used:
        rel = math.sqrt(max(center * center + sd * sd, drift_var) + pass_var)
        source = (f"robust RMS of ln(measured / estimated) over {len(used)} calibration (model, batch size) "
                  f"pair(s), {n_runs} run(s), at least the drift")
    else:
        rel = math.sqrt(drift_var)
        source = ("no calibration runs: reference-probe drift only" if drift_var > 0 else
                  "no calibration runs and no drift measurements: layer uncertainty only")
    return {"rel_std": rel, "log_bias": bias, "family": by_family, "source": source,
            "drift_log_std": math.sqrt(drift_var), "parts": parts if used else None, "runs": runs}


def pass_log_var(groups):
    """``(variance, runs)``: how far one run of a calibration (model, batch size) lies from the mean of its passes,
    in ln units, pooled over the pairs measured at least twice (robust: 1.4826 x the median absolute departure,
    each scaled by sqrt(k / (k - 1)) for a pair of k passes, so that every one reads the std of a single run);
    (0.0, runs) where fewer than 2 such runs. ``calibrate`` takes a pair's median over its passes, which hides this;
    an unseen net is measured once, at one moment, and carries it. Its runs are at the campaign's level already
    (canary or reference), so this is the whole net's own run-to-run scatter beyond what the level explains."""
    dev = []
    for logs in groups:
        k = len(logs)
        if k >= 2:
            mu = sum(logs) / k
            dev += [abs(x - mu) * math.sqrt(k / (k - 1)) for x in logs]
    if len(dev) < 2:
        return 0.0, len(dev)
    return (1.4826 * statistics.median(dev)) ** 2, len(dev)


def predictive_factor(n_models, z=1.959964):
    """How much wider a new net's 95% interval is than ``z`` times the spread of ``n_models`` calibration nets:
    ``t(0.975, n - 1) x sqrt(1 + 1 / n) / z``, the textbook prediction interval of one more draw from a normal
    population whose spread is estimated from ``n`` draws (1.28 for 8 nets, 1.14 for 16, 2.0 for 3). The nets,
    not their (model, batch size) pairs, are the draws: one net's two batch sizes err alike."""
    from scipy.stats import t

    n = int(n_models)
    if n < 2:
        raise UsageError(f"a spread needs at least 2 calibration nets, got {n}")
    return float(t.ppf(0.975, n - 1)) * math.sqrt(1.0 + 1.0 / n) / z


def calibration_record(runs):
    """``provenance.calibration``: ``calibrate``'s runs, one entry per (model, batch size) in their order: its
    estimate and family shares (the same for every run of it), ``log_ratio`` the median that ``calibrate`` used, and
    per run ``measured`` and ``device_level`` (lists); a pair the estimator could not estimate, ``skipped``. A
    profile's spread passes measure each pair 10-16 times: one entry per run was 55 KB of profile 62's 242 KB
    estimator, which the size budget would take from the GPs' inducing points."""
    from thor_sdk.fitting.gp import round_sig

    def num(v):
        return round_sig(v, 6) if isinstance(v, float) else v

    out, at = [], {}
    for r in runs:
        key = (r["model"], r["batch_size"])
        if key not in at:
            at[key] = len(out)
            out.append({"model": r["model"], "batch_size": r["batch_size"]})
            if "skipped" in r:
                out[-1]["skipped"] = r["skipped"]
            else:
                out[-1].update(estimated=num(r["estimated"]), family_shares=r["family_shares"], log_ratios=[],
                               measured=[], device_level=[])
        e = out[at[key]]
        if "skipped" not in e and "log_ratio" in r:
            e["log_ratios"].append(r["log_ratio"])  # rounded after the median, as calibrate took it
            e["measured"].append(num(r["measured"]))
            e["device_level"].append(num(r["device_level"]))
    for e in out:
        if e.get("log_ratios"):
            e["log_ratio"] = num(statistics.median(e.pop("log_ratios")))
        else:
            e.pop("log_ratios", None)
    return out


def family_of(kind):
    """The KIND_FAMILIES family of a kind or estimator entry (``conv2d:grouped``: by its base kind); None for
    the kinds of no family."""
    from thor_sdk.layers.kinds import base_kind

    b = base_kind(str(kind))
    return next((f for f, kinds in KIND_FAMILIES.items() if b in kinds), None)


def family_shares(rows, total):
    """``{family: share}`` of an estimate's per-layer ``rows`` (``{"kind", "mean"}``) in each of KIND_FAMILIES
    (rounded; families without layers left out)."""
    out = {}
    for row in rows:
        f = family_of(row.get("kind"))
        if f is not None and total > 0:
            out[f] = out.get(f, 0.0) + row["mean"] / total
    return {f: round(v, 6) for f, v in sorted(out.items())}


def family_biases(points, center, common):
    """``{"biases": {family: ln bias}, "pairs", "read": {family: pairs}}`` or None: the whole-model bias of each kind
    family (KIND_FAMILIES) read from ``points`` ``[(ln(measured / estimated), {family: share of the estimate},
    model)]`` (one per calibration (model, batch size)), around their median ``center`` of which ``common`` is
    corrected: each family's departure ``d`` from the median is the ridge regression (FAMILY_RIDGE) of ``ln ratio -
    center`` on the nets' shares of the families, and its bias ``common + d``. A family is read where at least
    MIN_FAMILY_PAIRS pairs hold FAMILY_MIN_SHARE of their estimate in it (the others, and the layers of no family,
    stay at ``common``); None unless two families are read (else they are not told apart).

    One common bias moved every layer by the median of nets whose layers the GP over- and under-estimates alike; a
    line over the nets' conv share (convolutions against the rest, profiles 41-61) read the MLPs' departure as the
    rest's: profile 61's rest +0.306 lifted transformers and conv nets' dense heads by 1.36x with har and
    mlp_tabular (its dense nets) reading 1.32-1.38x. On one pooled truth (each net's median over 12 evaluations),
    profiles 51-63 refitted by ``bench/bench_family_bias.py --pool``: held out 12.0% against one common bias's 14.8%
    (lower in 12 of 13; worst 17.3% against 21.1%). The stored estimators of profiles 51-61 with their conv line
    against these biases on the same GPs: held out 11.9% and 11.8% (profile 61: 16.4% and 11.9%), all 16 nets 13.6%
    and 12.7%; a prototype with ridge 0.5 or 2 read within 0.4% of ridge 1 held out."""
    import numpy as np

    read = {f: sum(1 for _, sh, _ in points if sh.get(f, 0.0) >= FAMILY_MIN_SHARE) for f in KIND_FAMILIES}
    read = {f: n for f, n in read.items() if n >= MIN_FAMILY_PAIRS}
    if len(read) < 2:
        return None
    fams = sorted(read)
    A = np.array([[sh.get(f, 0.0) for f in fams] for _, sh, _ in points])
    y = np.array([p[0] - center for p in points])
    d = np.linalg.solve(A.T @ A + FAMILY_RIDGE * np.eye(len(fams)), A.T @ y)
    return {"biases": {f: common + float(v) for f, v in zip(fams, d)}, "pairs": len(points), "read": read}


def bias_shrinkage(center, se):
    """The share of a median whole-model bias ``center`` (standard error ``se``) that is corrected:
    ``center^2 / (center^2 + se^2)``, the share that would minimise the squared error were the bias as
    large as measured; 1 when the median has no error, 0 when it is 0. Half a bias one standard error
    from 0 is corrected, 0.8 of one at two (where a yes/no test at two standard errors switched the whole
    bias on: profile 41 refitted with a larger size budget moved its median -0.093 to -0.075, under that
    test, and every estimate by 10%)."""
    c2, s2 = center * center, se * se
    return 1.0 if s2 == 0.0 else c2 / (c2 + s2)


def noisy_by_kind(samples):
    """``{kind: {"noisy": n, "samples": total, "reasons": [first 3]}}`` for kinds with noisy samples (CV
    above the protocol's target, or measured on a busy machine): what ``fit`` and ``estimate`` warn about."""
    out = {}
    for s in samples:
        d = out.setdefault(s["kind"], {"noisy": 0, "samples": 0, "reasons": []})
        d["samples"] += 1
        if s.get("noisy"):
            d["noisy"] += 1
            if len(d["reasons"]) < 3 and s.get("noise_reason"):
                d["reasons"].append(s["noise_reason"])
    return {k: d for k, d in sorted(out.items()) if d["noisy"]}


def head_part_samples(samples):
    """Samples of the ``output`` kind read off the other probes' 1-layer parts: every layer probe measures its
    head alone (``Probe.head_probe``: the same model an output probe of that head measures), so a profile of
    1,000 probes holds about as many head measurements, where its own output probes were 3 (the output kind's
    share of the zoo's cost is 0.5%). Fitted on those 3, profile 46's output kind read another campaign's 1,096
    heads at 0.88x (median; 0.80x at 4,096-32,768 inputs), 17.3% MAPE; with its own 1,027 heads, 1.00x and 8.2%,
    95% of them in its 95% intervals (``bench/bench_head_parts.py``, ``bench/results/head-parts-host-20261129-0250-*``).
    Each derived sample is the part's median over its rounds with its standard error, ``noisy`` where the head's
    own CV is above the protocol's default target or its probe's machine was busy, ``source`` ``head_part``. None
    from an output probe, a swept one, one whose head needs no input gradient, or a part without a finite positive
    median (a CSV's samples have no parts: none)."""
    from thor_sdk.errors import ThorError
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers.kinds import with_added_features
    from thor_sdk.probes.build import Probe

    cv_target = ProtocolSettings().cv_target
    out = []
    for s in samples:
        parts = s.get("parts")
        head = parts.get("head") if isinstance(parts, dict) and s.get("kind") != "output" else None
        if not isinstance(head, dict):
            continue
        med, sd, n = head.get("median"), head.get("std"), head.get("n")
        if not (_number(med) and med > 0):
            continue
        try:
            hp = Probe(s["kind"], s["config"], int(s["batch_size"]), s["role"], s.get("cache") or "warm").head_probe()
        except (ThorError, KeyError, TypeError, ValueError):
            continue
        if hp is None:
            continue
        n = int(n) if _number(n) and n >= 1 else 1
        std = float(sd) / math.sqrt(n) if _number(sd) and sd >= 0 else 0.0
        why = [w for w in (s.get("noise_reason") or "").split("; ") if w.startswith("machine busy")]
        cv = float(sd) / float(med) if _number(sd) else float("inf")
        if not cv <= cv_target:
            why.insert(0, f"CV head {cv:.1%} above the {cv_target:.1%} target")
        out.append({"probe_id": f"{s.get('probe_id')}:head", "kind": "output", "role": "output",
                    "batch_size": hp.batch_size, "config": with_added_features("output", hp.config),
                    "metric": s["metric"], "value": float(med), "std": std, "n": n, "flagged": False,
                    "flag_reason": None, "parts": {"head": head}, "noisy": bool(why),
                    "noise_reason": "; ".join(why) or None, "measured_utc": s.get("measured_utc"), "cache": "warm",
                    "source": "head_part", "canary_s": s.get("canary_s")})
    return out


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def warm_forward_only(samples):
    """How many forward-only samples (role input, no weights that train) a campaign measured warm, before swept
    probes existed (``thor_sdk.probes.build``): their probes charged the layer the head's warm-to-cold step, so
    fine-tunes estimated from them read high. 0 where every one was swept or the samples do not say (a CSV)."""
    from thor_sdk.probes.build import forward_only

    return sum(1 for s in samples if s.get("cache") == "warm" and forward_only(s["kind"], s["config"], s["role"]))


def inducing_caps(doc, over_bytes, caps=None):
    """``{key: cap}`` (``caps`` updated): the inducing points of the kinds that have the most lowered to one
    common level, the highest that takes ``over_bytes`` out of ``doc`` (each kind's bytes per inducing point
    read off its own JSON), MIN_BUDGET_INDUCING where none does; None when no kind has more than that."""
    caps = dict(caps or {})
    sizes = {}
    for key, d in doc["kinds"].items():
        m = len(d["inducing"])
        if m > MIN_BUDGET_INDUCING:
            # inducing rows, alpha and var_factor columns grow with m; the rest of the kind does not
            per_point = sum(len(json.dumps(d[f], separators=(",", ":")))
                            for f in ("inducing", "alpha", "var_factor")) / m
            sizes[key] = (m, per_point)
    if not sizes:
        return None
    level = MIN_BUDGET_INDUCING  # the lowest, when no level takes enough out: as small as the budget allows
    for top in range(max(m for m, _ in sizes.values()) - 1, MIN_BUDGET_INDUCING - 1, -1):
        if sum((m - top) * b for m, b in sizes.values() if m > top) >= over_bytes:
            level = top
            break
    caps.update({k: level for k, (m, _) in sizes.items() if m > level})
    return caps


def fit_samples(samples, model_runs, metric, sources=(), canary_version=CANARY_VERSION):
    """What ``build`` fits the kinds on, from a campaign's ``samples`` and ``model_runs`` of one ``metric``:
    ``{"samples", "heads", "canary_s", "drift_var", "references", "levels"}``: the non-flagged samples and the
    heads read off the probes (``head_part_samples``) put at the campaign's level (``at_campaign_level``, at
    ``campaign_canary``'s reading where the samples read the canary; ``levels`` its summary), those heads as read,
    that reading, the drift each sample carries (``drift_log_var``, the GPs' ``extra_log_var``) and how many
    reference runs it rests on. Benchmarks that fit kinds apart (``bench/bench_kind_cv.py``) start here too."""
    good = [s for s in samples if s["metric"] == metric and not s["flagged"]]
    if not good:
        raise FormatError(f"no usable {metric} samples in {', '.join(sources) or 'the input'}")
    heads = head_part_samples([s for s in samples if s["metric"] == metric])  # a flagged difference's head is sound
    good = good + heads
    canary_c = campaign_canary(good)
    # what every sample carries: the drift its level (the canary's, else the reference series') leaves
    drift_var, n_ref = drift_log_var(model_runs, metric, canary_c)
    good, levels = at_campaign_level(good, model_runs, metric, canary_c, canary_version)
    return {"samples": good, "heads": heads, "canary_s": canary_c, "drift_var": drift_var, "references": n_ref,
            "levels": levels}


def build(samples, *, device, runtime, metric, model_runs=(), sources=(), random_state=0, progress=None,
          max_bytes=MAX_ESTIMATOR_BYTES, family=True, cv_folds=None, canary_version=CANARY_VERSION):
    """The estimator document from samples of one device, runtime and metric, at most ``max_bytes`` long as
    ``write_estimator`` writes it where that can be met: the inducing points of the kinds that have the most
    are lowered to a common level (``inducing_caps``; those kinds refitted) until it fits; the caps, or how
    far over the file stayed, are in ``provenance.size_budget``. ``family``: False calibrates one common bias
    only, not one per kind family (``family_biases``; ``bench/bench_family_bias.py`` compares the two).
    ``cv_folds``: also cross-validate each kind on those folds (``fitting.crossval``), into
    ``provenance.cross_validation``, outside the size budget (the fit is the same with or without it).
    ``canary_version``: the version of the samples' canary readings (``api.fit`` reads it off the campaigns), which
    the estimator's ``whole_model.canary`` names."""
    from thor_sdk import __version__
    from thor_sdk.baselines.flops import fit_unit_per_flop
    from thor_sdk.fitting.estimator import dumps_estimator

    if metric not in UNITS:
        raise UsageError(f"unknown metric {metric!r} (time or energy)")
    flagged = [{"kind": s["kind"], "role": s["role"], "config": s["config"], "reason": s["flag_reason"]}
               for s in samples if s["metric"] == metric and s["flagged"]]
    prep = fit_samples(samples, model_runs, metric, sources, canary_version)
    good, heads, canary_c, drift_var = prep["samples"], prep["heads"], prep["canary_s"], prep["drift_var"]
    n_ref, levels = prep["references"], prep["levels"]
    # what a whole model measured later carries: the device's drift as measured (its speed states are the user's too),
    # the reference's or, where wider, the spread of the canary read beside every probe
    probes = [s for s in good if s.get("source") != "head_part"]  # a head shares its probe's reading
    device_var = max(drift_log_var(model_runs, metric)[0], canary_log_var(probes)) if canary_c else drift_var
    # a thousand heads vary in two features (inputs, batch size): 64 inducing points read them at 7.0% MAPE where
    # 194 read 6.5% (profile 46, in sample), and leave the file's budget to the kinds that need it
    caps = {"output": HEAD_PART_INDUCING} if heads else {}
    gps = fit_kinds(good, random_state=random_state, extra_log_var=drift_var, progress=progress, max_inducing=caps)
    base = dict(sources=list(sources), flagged_excluded=flagged, noisy_samples=noisy_by_kind(good),
                reference_runs=n_ref, producer=f"thor-sdk {__version__}")
    if heads:
        base["head_part_samples"] = len(heads)
    warm = warm_forward_only(good)
    if warm:
        base["warm_forward_only_samples"] = warm
    if levels:
        base["sample_levels"] = levels
    if canary_c:  # the drift the samples carry (what the canary leaves), beside the device's in whole_model
        base["sample_drift_log_std"] = round(math.sqrt(drift_var), 6)
    kw = dict(device=device, runtime=runtime, metric=metric, unit=UNITS[metric],
              flops_baseline=fit_unit_per_flop(good))
    while True:
        budget = {"max_bytes": int(max_bytes), "inducing_caps": dict(caps)}
        doc = _assemble(gps, model_runs, metric, device_var, dict(base, size_budget=budget), kw, family, canary_c,
                        canary_version)
        size = len(dumps_estimator(doc).encode("utf-8"))
        if size <= max_bytes:
            break
        new = inducing_caps(doc, size - max_bytes, caps)
        if new is None or new == caps:  # said in the file, not failed: the estimator still works, only larger
            doc["provenance"]["size_budget"] = dict(budget, over_by_bytes=size - max_bytes)
            break
        changed = {k for k in new if new[k] != caps.get(k)}
        caps = new
        gps.update(fit_kinds(good, random_state=random_state, extra_log_var=drift_var, max_inducing=caps,
                             unchanged=lambda key, rows: key not in changed))
    if cv_folds:  # after the size budget: a record of about 100 bytes a kind that never takes inducing points
        from thor_sdk.fitting.crossval import cross_validate, rounded

        doc["provenance"]["cross_validation"] = rounded(cross_validate(good, drift_var, cv_folds))
    return doc


def _assemble(gps, model_runs, metric, drift_var, provenance, kw, family=True, canary_c=None,
              canary_version=CANARY_VERSION):
    """The estimator document of fitted ``gps``: calibrated on the whole-model runs, the bias (per kind family
    where ``calibrate`` reads one, else the common one) folded into each kind's offset for the document only (the
    GPs are left as they were). ``drift_var``: the device's drift as measured (in the whole-model std and
    ``drift_log_std``); ``canary_c``: the campaign's canary level the calibration runs are put at."""
    from thor_sdk.fitting.estimator import build_estimator
    from thor_sdk.fitting.gp import round_sig
    from thor_sdk.runtime import load_estimator

    # (each kind's fit warnings are in its own entry, ``kinds.<key>.fit.warnings``: not copied here, 5% of a profile's
    # estimator that its size budget would take from the GPs' inducing points)
    provenance = dict(provenance, n_samples={k: g.n_samples_ for k, g in gps.items()})
    doc = build_estimator(gps, whole_model={"rel_std": 0.0}, provenance=provenance, **kw)
    cal = calibrate(load_estimator(doc), model_runs, metric, drift_var, family, canary_c)
    biases = (cal["family"] or {}).get("biases", {})
    bias_of = {k: biases.get(family_of(k), cal["log_bias"]) for k in gps}
    wm = {"rel_std": cal["rel_std"], "log_bias": cal["log_bias"], "source": cal["source"],
          "drift_log_std": cal["drift_log_std"]}
    if cal["parts"]:
        wm["parts"] = {k: (round_sig(v, 6) if isinstance(v, float) else v) for k, v in cal["parts"].items()}
    own = sorted(k for k in gps if bias_of[k] != cal["log_bias"])
    if own:
        wm["kind_log_bias"] = {k: round_sig(bias_of[k], 6) for k in own}
    ref = reference_level(model_runs, metric)
    if ref:
        wm["reference"] = ref
    if canary_c:  # the machine speed the estimates describe, as the canary reads it (evaluate levels truth to it)
        wm["canary"] = {"canary_s": round_sig(canary_c, 6), "version": canary_version}
    runs = calibration_record(cal["runs"])
    offsets = {k: g.residual_offset_ for k, g in gps.items()}
    for k, g in gps.items():  # folded into every kind's residual offset: the file format is unchanged
        g.residual_offset_ += bias_of[k]
    try:
        return build_estimator(gps, whole_model=wm, provenance=dict(provenance, calibration=runs), **kw)
    finally:  # exactly as they were (not "- bias": a size-budget pass assembles the same GPs again)
        for k, g in gps.items():
            g.residual_offset_ = offsets[k]
