"""Device profiles (``thor-sdk profile``): a campaign over the zoo's prior, not over target models.

1. **Space-filling start**: every kind of the prior gets its first ``start_per_kind`` probes from the
   cheaper half of its scrambled Sobol candidates (``prior.candidates``), spread over batch sizes and
   sizes (farthest-first in ln batch size and ln(1 + size feature)), costliest kinds first.
2. **Active selection**: then the next probe is the candidate that most lowers the *integrated*
   variance of estimates over the prior: for kind ``k``, integration points ``j`` (its zoo configs at
   batch sizes 4, 16 and 64, weighted by their count in the zoo) and a candidate ``x``,
   ``gain(x) = sum_j w_j mean_j^2 Cov(j, x)^2 / (Var(x) + noise)`` (in the metric's unit squared, so
   kinds weigh by their share of the zoo's cost), divided by the probe's expected measuring time.
   Every ``coverage_every``-th of these probes is a **coverage** probe instead: the zoo config (any of
   the kind's, at those batch sizes) whose estimate has the largest latent ln-variance per probing second,
   whatever its cost (``coverage_score``), so rare and cheap layers get samples too. Every other coverage
   probe is a **range** probe where a zoo config lies outside what its kind's samples span (``range_gap``):
   the one furthest outside per probing second, so no zoo layer stays an extrapolation. A kind below
   ``FLOOR_SHARE`` of its relative share of the probes so far takes the pick instead (its best-gain
   candidate; the kind furthest below its floor first), so no kind the zoo relies on stays at a handful;
   after those, an entry below ``MIN_ENTRY_PROBES`` (so that no mean law rests on as many samples as it has
   coefficients), then a kind below the samples its GP needs to fit its length scales (``fit_need``), once its
   share cap allows that many.
3. **Drift**: a fixed reference probe is re-measured every ``reference_every_s`` seconds and stored as a
   model run ``reference:<probe id>``; ``fit`` turns its spread into noise every sample carries.
4. **Calibration**: at the end (the last ``calibration_share`` of the time budget), whole zoo models
   are measured and stored as ``calibration:<name>`` with their layer lists, in passes over every
   (model, batch size) while the budget lasts (at most ``CALIBRATION_PASSES``; one without a time
   budget), the reference probe measured before each pass and after the last; ``fit`` puts each run at
   the campaign's level, takes each (model, batch size)'s median over its passes and turns their errors
   into the estimator's whole-model std. One window of a small net's step read up to 1.5x another taken
   minutes later on this host; passes spread each net's measurements over the reserved time instead of
   one window (a 20-minute profile's single pass took 5 of its 96 reserved seconds). One more pass follows
   each re-measurement of the reference during the probes (``calibration_pass``, ``calibration_spread``), so
   the calibration also samples the machine's states the probes were measured in. The calibration nets' own
   configs (those no other zoo net has) are never integration points or coverage probes (``ProfilePlan``'s
   ``held_out``), so the calibration reads the error of a net the profile did not aim at, as a user's is.

It stops on ``max_seconds``, ``max_probes`` or when the integrated relative std over the prior is
below ``target_rel_std``. The store is the same SQLite campaign as ``probe`` (planned probes are
measured first after a crash; each probe is measured exactly once).
"""

import itertools
import math
import time
from collections import Counter

from thor_sdk.layers.kinds import feature_vector, model_key
from thor_sdk.probes import Probe

from .gpcache import GPCache
from .measure import budget_reached, canary_detail, is_probe_failure, measure_and_store, sample_summary

INTEGRATION_BATCHES = (4, 16, 64)
MAX_INTEGRATION_CONFIGS = 40
CANDIDATES_PER_KIND = 160
#: the first start probes of a kind are picked farthest-first in ln(batch size) among its cheap candidates
SPREAD_FIRST = 8
#: the start's distance between a grouped conv (``groups > 1``) and an ungrouped one (``_spread_start``): above any
#: L1 distance in ln batch size and ln sizes, so each of an entry's cheap candidates' patterns is among its first two
PATTERN_GAP = 100.0
#: an entry gets CANDIDATES_PER_KIND candidates per this much of the zoo's share (at least that many)
CANDIDATE_SHARE_UNIT = 0.1
#: no kind takes more than this many times its relative share of the probes (at least MIN_CAP): a kind
#: whose cost the mean function cannot explain (depthwise conv1d with 33-tap kernels: 0.3-118 ms, 45%
#: mean-function error) keeps a wide prior everywhere and would otherwise absorb the whole budget
SHARE_CAP = 4.0
#: weight of a recurrent kind's zoo configs in the role its zoo layers never have (prior.py's
#: ROLE_NEIGHBOUR_KINDS) among its integration points, relative to the zoo's own role; and of an attention
#: layer's zoo configs with their other dropout (DROPOUT_NEIGHBOUR_KINDS)
OTHER_ROLE_WEIGHT = 0.5
MIN_CAP = 6
#: every entry takes at least this many probes (its cap allows MIN_CAP), after the share floors and before what its
#: GP needs: an entry of a small share kept only its 3 start probes, and a mean law of three coefficients fitted on
#: three samples can fit them exactly with no overhead. Profile 71's conv_transpose2d (3 probes, 2 of them frozen)
#: had an overhead of 3e-10 s, and a user's 8->4 2x2 stride-2 transposed conv at batch 8 read 0.13 ms against the
#: 1.08 ms its own probes measured (Deconv 0.59x, ConvAE 0.71x its step); 30 of profile 71's 56 entries had 3-5
#: probes
MIN_ENTRY_PROBES = MIN_CAP
#: ln-spread of the reference probe's re-measurements above which a profile says the device's speed moved
DRIFT_WARN_LOG_STD = 0.10
#: every kind takes at least this fraction of its relative share of the probes: a kind whose mean function
#: fits its few samples looks sure of itself to the gain, though its samples miss where unseen nets put it.
#: In every profile 2-13 ``linear`` (10% of the zoo's relative cost) got 6-13 of 800-1,300 probes, nearly all
#: 1-token dense layers, and the attention and MLP projections of unseen nets (16-24 tokens) read 0.2-0.5x
#: their cost measured alone
FLOOR_SHARE = 0.5
#: after the start, every COVERAGE_EVERY-th probe is a coverage probe: the zoo config (any of a kind's, at
#: the integration batch sizes) whose estimate is least sure in *relative* terms (latent ln-variance) per
#: probing second. The integrated-variance gain weighs a layer by its cost in the nets, so a layer the model
#: underestimates also looks unimportant to it: se_cnn's squeeze-excite convs (1x1 on a 1x1 map) read 0.28x
#: their probes, 6 of 6 outside their intervals, in a profile whose tiny conv samples all ran below batch 16
#: (PyTorch's cheaper path for 1x1 convs), and no active probe went near them.
COVERAGE_EVERY = 4
#: a zoo config whose size features lie at least this far (ln(1 + x)) outside what its kind's samples span is a
#: candidate of the range probes (every other coverage probe): a kind's GP with few samples along a feature puts
#: its length scale at the bound and reads an extrapolation as sure as an interpolation. Profile 59 sampled the
#: ``output`` kind at 1-12 tokens (3 output probes; every layer probe's head has 1), and the language models' heads
#: at 32-64 tokens read 2x their own probe (lstm's: 6.9 ms estimated, 3.35 ms probed); 75 of the zoo's 1,359
#: configs lay 2x or more outside their kind's sampled sizes (187 outside at all), 12 of its 37 output heads
RANGE_GAP = math.log(2.0)
REFERENCE = ("conv2d", {"in_channels": 16, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                        "height": 16, "width": 16, "bias": 1}, 16, "hidden")
#: cheap zoo nets (never held-out ones) covering conv, depthwise, 1-D, recurrent (an LSTM's and a GRU's family) and
#: dense layers
DEFAULT_CALIBRATION = ("lenet5", "har", "cnn5", "dscnn_kws", "cnn1d_har", "deepconvlstm", "mlp_tabular", "gru_har")
#: passes over the calibration models at most, while the calibration's share of the time budget lasts
CALIBRATION_PASSES = 6


def reference_probe():
    kind, config, batch, role = REFERENCE
    return Probe(kind, config, batch, role)


def _probe(kind, config, batch, role):
    return Probe(kind, config, int(batch), role)


def _valid_probes(kind, rows):
    """Probes of ``kind`` from ``(config, batch, role)`` rows; a prior row that is not a valid probe is
    skipped, never stored."""
    out = []
    for config, batch, role in rows:
        try:
            out.append(_probe(kind, config, batch, role))
        except Exception:
            continue
    return out


class ProfilePlan:
    """The candidates and integration points of every kind of a prior (deterministic for a seed)."""

    def __init__(self, prior, kinds=None, seed=0, per_kind=CANDIDATES_PER_KIND, held_out=()):
        """``held_out``: zoo nets (the calibration's, ``calibration_held_out``) whose own configs are no integration
        point and no coverage probe: a config only they have is never aimed at, so their whole-model error
        measures an unseen net's. An entry all of whose configs are theirs keeps them (it would have none)."""
        from .prior import DROPOUT_NEIGHBOUR_KINDS, _other_dropout, _other_role, candidates, kind_share

        self.prior = prior
        names = [k for k in prior["kinds"] if kinds is None or k in kinds]
        # one entry per cost model: a kind, or a structural variant of it (conv2d:grouped) with the
        # share of the kind's zoo configs that are of that variant
        self.share = {}
        self.candidates = {}
        self.start = {}
        self.integration = {}
        self.coverage = {}
        for k in names:
            entry = prior["kinds"][k]
            by_key = {}
            for e in entry["configs"]:
                by_key.setdefault(model_key(k, e["config"]), []).append(e)
            total = sum(e.get("rel_share", e["share"]) for e in entry["configs"])
            for key, configs in by_key.items():
                w = sum(e.get("rel_share", e["share"]) for e in configs)
                share = kind_share(entry) * (w / total if total > 0 else 1.0 / len(by_key))
                # candidates and integration points per entry, from its own zoo configs: a variant with a
                # few zoo layers (depthwise conv2d) would otherwise get a handful of candidates, and a
                # big entry (dense conv2d, 42% of the zoo) ran out of them in a 20-minute profile
                sub = dict(prior, kinds={k: dict(entry, configs=configs)})
                n = max(per_kind, int(round(per_kind * share / CANDIDATE_SHARE_UNIT)))
                cands = [p for p in _valid_probes(k, candidates(sub, k, n, seed=seed))
                         if model_key(p.kind, p.config) == key]
                pts = []
                aimed = [e for e in configs if not calibration_only(e, held_out)] or configs
                by_share = sorted(aimed, key=lambda e: -e.get("rel_share", e["share"]))
                other = _other_role(k, configs) if prior.get("neighbour_share", 0) > 0 else None
                roles = [(None, 1.0)] + ([(other, OTHER_ROLE_WEIGHT)] if other else [])
                flip = k in DROPOUT_NEIGHBOUR_KINDS and prior.get("neighbour_share", 0) > 0
                for e in by_share[:MAX_INTEGRATION_CONFIGS]:
                    # the zoo config and, for an attention layer, the same with its other dropout (half weight)
                    variants = [(e["config"], 1.0)] + ([(_other_dropout(e["config"]), OTHER_ROLE_WEIGHT)] if flip
                                                       else [])
                    for (config, weight), (role, role_weight) in itertools.product(variants, roles):
                        scale = weight * role_weight
                        for b in INTEGRATION_BATCHES:
                            try:  # (probe, count weight, relative-variance weight) per batch size
                                pts.append((_probe(k, config, b, role or e["role"]),
                                            scale * e["count"] / len(INTEGRATION_BATCHES),
                                            scale * e.get("rel_weight", e["count"]) / len(INTEGRATION_BATCHES)))
                            except Exception:
                                continue
                # every zoo config of the entry, however cheap
                cover = _valid_probes(k, ((e["config"], b, e["role"]) for e in aimed for b in INTEGRATION_BATCHES))
                self._add_entries(k, key, configs, share, cands, pts, cover)
        self.kinds = sorted(self.candidates, key=lambda k: -self.share[k])

    def _add_entries(self, kind, key, configs, share, cands, pts, cover):
        """The zoo entry ``key``'s candidates, integration points and coverage probes, split by the estimator
        entry that costs each at its batch size (``Probe.model_key``: a 1x1 conv's probes below batch 16 are
        ``conv2d:gemm``'s), and its ``share`` as its zoo ``configs``' relative shares at each integration batch size,
        every batch alike (a layer's share of its net's cost hardly moves with the batch); each part's start is its
        cheap half's candidates, spread (``_spread_start``). Split by proxy cost instead (batch 4 against 16 and 64),
        conv2d:gemm had 0.1% of the zoo and profile 70 gave it 5 of 937 probes: mobilenetv2 at batch 8, 34 of whose
        convs are that entry's, then read 1.31x its measured step (1.04x at batch 16)."""
        parts = {}
        for i, rows in enumerate((cands, pts, cover)):
            for row in rows:
                parts.setdefault((row[0] if i == 1 else row).model_key, ([], [], []))[i].append(row)
        parts = parts or {key: ([], [], [])}
        weight = Counter()
        for e in configs:
            for b in INTEGRATION_BATCHES:
                weight[model_key(kind, e["config"], b)] += e.get("rel_share", e["share"])
        total = sum(weight.values())
        for entry, (c, ip, cv) in parts.items():
            self.share[entry] = share * (weight[entry] / total if total > 0 else 1.0 / len(parts))
            costs = sorted(_proxy(p) for p in c)
            cheap = costs[len(costs) // 2] if costs else 0.0
            self.candidates[entry] = c
            self.start[entry] = _spread_start([p for p in c if _proxy(p) <= cheap])
            self.integration[entry] = ip
            self.coverage[entry] = cv


def calibration_only(entry, held_out):
    """Whether a prior config ``entry`` belongs to the ``held_out`` nets alone (its ``models``, a fine-tune's
    ``name:finetune`` read as ``name``); an entry that names no models is nobody's alone."""
    from .prior import FINETUNE_SUFFIX

    models = entry.get("models") or ()
    held = set(held_out)
    return bool(models and held) and all(m.removesuffix(FINETUNE_SUFFIX) in held for m in models)


def _spread_start(probes, first=SPREAD_FIRST):
    """``probes`` with their first ``first`` reordered farthest-first (ties: Sobol order), the rest as they
    were: a kind's first probes span the batch sizes *and* the sizes (``prior.SIZE_FEATURES``, in
    ln(1 + x)) of its cheap candidates, at L1 distance.

    In Sobol order the cheap half's first three were mostly at batch 2-4, and the 14 kinds that get no
    probe beyond the start had every estimate at batch 16-128 extrapolated in batch size. Spread over
    batch size alone, all 5 batchnorm1d probes of a profile lay at length 1 (an MLP's feature norm),
    while the zoo's 1-D CNNs norm sequences of 32-256 steps: held-out 1-D CNNs read their batch norms
    at 0.28x of their own probes, 7-15 standard deviations off.

    Grouping is one more coordinate of a conv, PATTERN_GAP apart (farther than any spread of sizes): the dense
    entry also costs grouped convs of several channels per group (RegNet, ResNeXt, ShuffleNetV1;
    ``thor_sdk.layers.kinds.model_key``), 7 of its 631 candidates, and no size feature tells them apart, so its
    start takes one among its first two probes (the depthwise variant's are all grouped: no change there). Profile
    55 took 7 grouped-conv probes, 6 of them depthwise; profile 54's estimator, whose zoo had only depthwise ones,
    read a user's ``groups=2`` conv at their cost per FLOP, 10x a dense conv's."""
    from .prior import SIZE_FEATURES

    def point(p):
        out = [math.log(p.batch_size)] + [math.log1p(float(v)) for f, v in sorted(p.config.items())
                                          if f in SIZE_FEATURES]
        if "groups" in p.config:
            out.append(PATTERN_GAP if p.config["groups"] > 1 else 0.0)
        return out

    rest = list(probes)
    pts = [point(p) for p in rest]
    out, placed = rest[:1], pts[:1]
    del rest[:1], pts[:1]
    while rest and len(out) < first:
        def gap(j):
            return min(sum(abs(a - b) for a, b in zip(pts[j], q)) for q in placed)
        i = max(range(len(rest)), key=lambda j: (gap(j), -j))
        out.append(rest.pop(i))
        placed.append(pts.pop(i))
    return out + rest


def coverage_score(gp, probes):
    """Per probe: the latent ln-variance of its estimate (the residual's posterior variance without the
    kind's fitted noise level, which no probe lowers) per expected probing second: how unsure the model
    is of that layer, relatively, whatever it costs. With the noise level in, a profile spent 42 of its 59
    conv2d coverage probes on squeeze-excite convs and 38 on relu (28% mean-function error)."""
    import numpy as np

    var, secs = _latent_and_seconds(gp, probes)
    return np.maximum(var - gp.noise_level_, 0.0) / secs


def _latent_and_seconds(gp, probes):
    """Per probe: the GP's ln-variance of its layer's cost and the expected seconds to probe it."""
    import numpy as np

    logm, mu, var, _ = gp.predict_log(_rows(probes), terms=_terms(probes))
    return var, np.array([_expected_probe_s(m) for m in np.exp(logm + mu)])


def fit_need(plan):
    """``{entry: samples}``: how many samples each entry's GP needs before it fits its length scales
    (``fitting.gp.MIN_SAMPLES_PER_DIM`` per input: the layer's features and its derived FLOPs and bytes).

    Profiles 55-60 left conv1d, lstm, transformer_block, batchnorm2d, relu and mha at their share floors, each
    below that, so each was fitted with its length scales fixed at 1 (a layer far from the samples read as sure as
    one near them): lstm had 21-25 samples for 9 inputs, and the reference net ``lstm`` read 1.2-1.9x its
    measurement in all six, its own layer 79 ms against its probe's 47 (profile 60). Profile 61, with this floor,
    fitted all six (``bench/results/evaluate-host-20261130-0044-fit-floor/NOTES.md``)."""
    from thor_sdk.fitting.gp import DERIVED, MIN_SAMPLES_PER_DIM

    return {k: MIN_SAMPLES_PER_DIM * (len(feature_vector(p.kind, p.config, p.batch_size, p.role)) + len(DERIVED))
            for k, cands in plan.candidates.items() for p in cands[:1]}


def sampled_ranges(samples):
    """``{entry: {size feature: (low, high)}}`` over ``samples`` (unflagged), the ``output`` kind's including the
    layer probes' heads (``head_part_samples``: the fit's samples of that kind)."""
    from thor_sdk.fitting.pipeline import head_part_samples

    from .prior import SIZE_FEATURES

    rows = [s for s in samples if not s.get("flagged")]
    out = {}
    for s in rows + head_part_samples(rows):
        r = out.setdefault(model_key(s["kind"], s["config"], s["batch_size"]), {})
        for f, x in s["config"].items():
            if f in SIZE_FEATURES and isinstance(x, (int, float)):
                lo, hi = r.get(f, (x, x))
                r[f] = (min(lo, x), max(hi, x))
    return out


def range_gap(ranges, probe):
    """How far (in ln(1 + x)) ``probe``'s size features lie outside what its entry's samples span
    (``sampled_ranges``); 0 within, or for an entry without samples (its start covers it first)."""
    r = ranges.get(probe.model_key)
    if not r:
        return 0.0
    gap = 0.0
    for f, x in probe.config.items():
        if f in r and isinstance(x, (int, float)):
            lo, hi = r[f]
            gap = max(gap, math.log1p(x) - math.log1p(hi) if x > hi else math.log1p(lo) - math.log1p(x) if x < lo
                      else 0.0)
    return gap


def range_score(gp, probes, ranges):
    """Per probe: its ``range_gap`` per expected probing second where at least RANGE_GAP, else 0."""
    import numpy as np

    gaps = np.array([range_gap(ranges, p) for p in probes])
    if not (gaps >= RANGE_GAP).any():
        return np.zeros(len(probes))
    _, secs = _latent_and_seconds(gp, probes)
    return np.where(gaps >= RANGE_GAP, gaps / secs, 0.0)


def _median_sd(sorted_vals):
    """Median and the spread around it (sample std) of sorted window values."""
    med = sorted_vals[len(sorted_vals) // 2]
    return med, (sum((v - med) ** 2 for v in sorted_vals) / max(len(sorted_vals) - 1, 1)) ** 0.5


def _proxy(p):
    from .prior import proxy_cost_s

    return proxy_cost_s(p.kind, p.config, p.role, p.batch_size)


def _expected_probe_s(cost_s):
    """Rough seconds to measure one probe whose layer costs ``cost_s`` per step (two parts, ~10 rounds)."""
    return 1.0 + 20.0 * max(0.05, 3.0 * cost_s)


def _terms(probes):
    from thor_sdk.fitting.pipeline import sample_terms

    return sample_terms([{"kind": p.kind, "config": p.config, "batch_size": p.batch_size, "role": p.role}
                         for p in probes])


def _rows(probes):
    return [feature_vector(p.kind, p.config, p.batch_size, p.role) for p in probes]


def kind_gain(gp, integ, cands):
    """Per candidate: the reduction of the zoo nets' summed relative variance over ``integ`` (each
    point weighed by its ``rel_weight``) per expected probing second; and the kind's integrated
    variance (metric unit squared) and mean, weighed by count."""
    import numpy as np

    Xi, Wi = _rows([p for p, *_ in integ]), np.array([w for _, w, *_ in integ])
    Ri = np.array([r[-1] for r in integ])
    Ti = _terms([p for p, *_ in integ])
    Xc, Tc = _rows(cands), _terms(cands)
    mi, si = gp.predict(Xi, terms=Ti, return_std=True)
    mc = gp.predict(Xc, terms=Tc)
    logm_c, _, var_c, _ = gp.predict_log(Xc, terms=Tc)
    cov = gp.latent_cov(Xi, Xc, Ti, Tc)                           # ln units
    noise = gp.noise_level_ + 1e-3
    red = (Ri[:, None] * (mi[:, None] ** 2) * cov ** 2).sum(0) / (var_c + noise)
    secs = np.array([_expected_probe_s(m) for m in mc])
    return red / secs, float((Wi * si ** 2).sum()), float((Wi * mi).sum())


def run_profile(campaign, device, plan, metric="time", settings=None, runtime="torch", max_probes=None,
                max_seconds=None, target_rel_std=None, start_per_kind=3, reference_every_s=120.0,
                calibration_models=DEFAULT_CALIBRATION, calibration_batches=(8, 32), calibration_share=0.08,
                progress=None, clock=time.monotonic, coverage_every=COVERAGE_EVERY, floor_share=FLOOR_SHARE,
                range_probes=True, fit_floor=True, calibration_spread=True):
    """Profile ``device`` over ``plan`` until a stop condition holds; returns a summary dict.
    ``range_probes``: False makes every coverage probe a variance one (no ``range_gap`` picks). ``fit_floor``:
    False keeps a kind's floor at its share of the probes (``floor_share``), not at MIN_ENTRY_PROBES and what its GP
    needs (``fit_need``).
    ``calibration_spread``: False measures the calibration nets only at the end, not also after each reference
    re-measurement during the probes.

    ``progress(event, info)``: ("start", {...}), ("probe", {"probe", "done", "worst", "seconds_left"}),
    ("reference", {...}), ("calibration", {...}), ("stop", {"reason"}).
    """
    from thor_sdk.harness.protocol import ProtocolSettings

    settings = settings or ProtocolSettings()
    t0 = clock()
    budget_probe_s = None if max_seconds is None else max_seconds * (1.0 - calibration_share)
    done = {p.id for p in campaign.probes("done")} | {p.id for p in campaign.probes("failed")}
    counts = {}
    for p in campaign.probes("done"):
        counts[p.model_key] = counts.get(p.model_key, 0) + 1
    if progress:
        progress("start", {"done": len(done), "max_probes": max_probes, "max_seconds": max_seconds})
    measured_now, last_ref = 0, None
    worst = {"kind": None, "rel_std": None}

    def seconds_left():
        return None if max_seconds is None else max(0.0, max_seconds - (clock() - t0))

    def measure(p):
        nonlocal measured_now
        try:
            samples = measure_and_store(campaign, device, p, metric, settings, runtime)
        except Exception as e:  # a probe that cannot be built or run is failed, not retried forever
            if not is_probe_failure(e):
                raise
            campaign.fail(p.id, f"{type(e).__name__}: {e}")
            samples = []
        done.add(p.id)
        counts[p.model_key] = counts.get(p.model_key, 0) + 1
        measured_now += 1
        if progress:
            progress("probe", {"probe": p.to_dict(), "samples": samples, "done": len(done),
                               "worst": dict(worst), "seconds_left": seconds_left()})

    def reference():
        nonlocal last_ref
        last_ref = clock()
        p = reference_probe()
        res = device.measure_probe(p, metric=metric, settings=settings, runtime=runtime)
        vals = sorted(res[p.role].values(metric))
        med, sd = _median_sd(vals)
        campaign.add_model_run(f"reference:{p.id}", p.batch_size, metric, med, sd, len(vals), runtime,
                               {"probe": p.to_dict(), "part": p.role, "values": vals, "t_s": clock() - t0,
                                **canary_detail(res[p.role], metric)})
        if progress:
            progress("reference", {"value": med})

    for p in campaign.probes("planned"):  # planned before a crash: exactly those first
        measure(p)

    cache = GPCache(metric)
    reason = None
    n_picked = 0  # probes chosen after the start (active and coverage)
    n_cover = n_range = 0  # coverage picks so far, and those that were range picks
    n_spread = _spread_passes(campaign.model_runs())  # spread passes stored before a resume
    cal_layers = {}  # calibration net -> its layer list, read once
    need = fit_need(plan) if fit_floor else {}
    while True:
        reason = budget_reached(len(done), max_probes, clock() - t0, budget_probe_s, max_seconds)
        if reason:
            break
        if reference_every_s and (last_ref is None or clock() - last_ref >= reference_every_s):
            reference()
            if calibration_spread and calibration_models:
                calibration_pass(campaign, device, metric, settings, runtime, calibration_models,
                                 calibration_batches, {"pass": "spread", "spread": n_spread}, progress, cal_layers)
                n_spread += 1
        # 1. space-filling start: the next Sobol candidate of the costliest kind still short of it
        #    (among the kind's cheaper half by proxy cost: the start buys coverage, not big batches)
        nxt = None
        for k in plan.kinds:
            if counts.get(k, 0) < start_per_kind:
                nxt = next((p for p in plan.start[k] if p.id not in done), None)
                if nxt is not None:
                    break
        # 2. active: the largest integrated-variance reduction per probing second over all kinds (or, every
        #    coverage_every-th pick, the zoo config least sure in ln units per probing second)
        if nxt is None:
            stored = campaign.samples(metric)  # read once: the GPs and the range picks both need them
            cache.update(stored)
            best, cover_best, tot_var, tot_mean, worst_k = None, None, 0.0, 0.0, (None, -1.0)
            starved = None  # ((tier, count over floor), best candidate) of the kind furthest below its floor
            n_done = sum(counts.values())
            cover = bool(coverage_every) and n_picked % coverage_every == coverage_every - 1
            n_picked += 1
            ranged = cover and range_probes and n_cover % 2 == 0  # every other coverage pick, from the first
            if cover:
                n_cover += 1
            ranges = sampled_ranges(stored) if ranged else None
            range_best = None
            for k in plan.kinds:
                gp = cache.gps.get(k)
                cands = [p for p in plan.candidates[k] if p.id not in done]
                if gp is None or not cands or not plan.integration[k]:
                    continue
                if counts.get(k, 0) >= max(MIN_CAP, SHARE_CAP * plan.share[k] * n_done):
                    continue  # saturated: more than its share allows, until the others catch up
                zoo = [p for p in plan.coverage.get(k, ()) if p.id not in done] if cover else []
                if zoo:
                    scores = coverage_score(gp, zoo)
                    j = int(scores.argmax())
                    if cover_best is None or scores[j] > cover_best[0]:
                        cover_best = (float(scores[j]), zoo[j])
                    if ranged:
                        scores = range_score(gp, zoo, ranges)
                        j = int(scores.argmax())
                        if scores[j] > 0 and (range_best is None or scores[j] > range_best[0]):
                            range_best = (float(scores[j]), zoo[j])
                gains, iv, im = kind_gain(gp, plan.integration[k], cands)
                tot_var, tot_mean = tot_var + iv, tot_mean + im
                rel = math.sqrt(iv) / im if im > 0 else 0.0
                if rel > worst_k[1]:
                    worst_k = (k, rel)
                j = int(gains.argmax())
                if best is None or gains[j] > best[0]:
                    best = (float(gains[j]), cands[j])
                # below its share floor first; then below MIN_ENTRY_PROBES; then below what its GP needs to fit
                # its length scales, where its cap allows that many; within each, the kind furthest below
                c = counts.get(k, 0)
                floor = floor_share * plan.share[k] * n_done
                if floor > 0 and c < floor:
                    key = (0, c / floor)
                elif fit_floor and c < MIN_ENTRY_PROBES:
                    key = (1, c / MIN_ENTRY_PROBES)
                elif c < need.get(k, 0) <= SHARE_CAP * plan.share[k] * n_done:
                    key = (2, c / need[k])
                else:
                    key = None
                if key is not None and (starved is None or key < starved[0]):
                    starved = (key, cands[j])
            worst.update(kind=worst_k[0], rel_std=worst_k[1])
            if target_rel_std is not None and tot_mean > 0 and math.sqrt(tot_var) / tot_mean <= target_rel_std:
                reason = f"target relative uncertainty {target_rel_std:g} reached ({math.sqrt(tot_var) / tot_mean:.3g})"
                break
            if best is None:
                reason = "every candidate of the prior is measured"
                break
            if range_best is not None:
                cover_best = range_best
                n_range += 1
            nxt = cover_best[1] if cover_best is not None else starved[1] if starved is not None else best[1]
        campaign.plan(nxt)
        measure(nxt)

    cal = calibrate(campaign, device, metric, settings, runtime, calibration_models, calibration_batches,
                    progress, deadline=None if max_seconds is None else t0 + max_seconds, clock=clock,
                    before_pass=reference if reference_every_s else None,
                    layers=cal_layers) if calibration_models else 0
    if reference_every_s:
        reference()
    if progress:
        progress("stop", {"reason": reason})
    out = {"stop_reason": reason, **stored_summary(campaign, metric)}
    out.update(probes_measured_now=measured_now, calibration_runs=cal, seconds=clock() - t0, range_probes=n_range,
               kinds=dict(sorted(counts.items())))
    return out


def stored_summary(campaign, metric="time"):
    """What a profile campaign's store says of it, with no measuring (``run_profile``'s summary is this, plus what
    only the run knows: its stop reason, seconds and range probes): ``probes_done``, ``probes_failed``,
    ``calibration_runs`` (end-pass runs stored), ``calibration_spread_passes``, ``flagged``/``noisy``/``busy``
    samples, ``kinds`` (done probes per model key), ``measured_span_s`` (wall seconds from the first stored
    measurement to the last, None without two stamps), and ``reference``/``warnings`` (``reference_drift``)."""
    from thor_sdk.fitting.pipeline import epoch_s

    st = campaign.status_counts()
    runs = campaign.model_runs()
    samples = campaign.samples()
    when = [epoch_s(r.get("created_utc")) for r in runs] + [epoch_s(s.get("measured_utc")) for s in samples]
    stamps = sorted(t for t in when if t is not None)
    out = {"probes_done": st.get("done", 0), "probes_failed": st.get("failed", 0),
           "calibration_runs": sum(1 for r in runs if _is_end_pass(r)),
           "calibration_spread_passes": _spread_passes(runs), **sample_summary(campaign, samples),
           "kinds": dict(sorted(Counter(p.model_key for p in campaign.probes("done")).items())),
           "measured_span_s": round(stamps[-1] - stamps[0], 1) if len(stamps) > 1 else None}
    drift = reference_drift(runs, metric)
    if drift:
        out["reference"] = drift
        if drift.get("warning"):
            out["warnings"] = [drift.pop("warning")]
    return out


def reference_drift(model_runs, metric):
    """How the reference probe's re-measurements moved through a campaign: ``{"n", "min", "max", "log_std"}`` (the
    range of the main reference's series, ``fitting.pipeline.main_reference_runs``, and ``drift_log_var``'s
    ln-spread, the drift ``fit`` adds to every sample), with a ``warning`` where that spread is above
    DRIFT_WARN_LOG_STD; None with fewer than two re-measurements."""
    from thor_sdk.fitting.estimator import METRIC_UNITS
    from thor_sdk.fitting.gp import round_sig
    from thor_sdk.fitting.pipeline import drift_log_var, main_reference_runs

    vals = [r["mean"] for r in main_reference_runs(model_runs, metric)]
    if len(vals) < 2:
        return None
    var, _ = drift_log_var(model_runs, metric)
    out = {"n": len(vals), "min": round_sig(min(vals), 6), "max": round_sig(max(vals), 6),
           "log_std": round(math.sqrt(var), 4)}
    if out["log_std"] > DRIFT_WARN_LOG_STD:
        unit = METRIC_UNITS.get(metric, "")
        out["warning"] = (f"the reference probe read {out['min']:.4g}-{out['max']:.4g} {unit} per step through the "
                          f"profile (ln-spread {out['log_std']:.2f}): the device's speed moved while it was profiled; "
                          "`fit` puts each sample at the level of its moment and the estimator describes the device at "
                          "its median speed, its std includes the spread; profile on a quieter machine for tighter "
                          "estimates")
    return out


def calibrate(campaign, device, metric, settings, runtime, models, batches, progress=None, deadline=None,
              clock=time.monotonic, max_passes=CALIBRATION_PASSES, before_pass=None, layers=None):
    """Measure whole calibration models and store them with their layer lists; returns how many ran.

    Pass ``k`` measures every (model, batch size) with at most ``k`` stored runs of the end passes (so ``--resume``
    goes on where it stopped, each run once; the spread passes, ``calibration_pass`` during the probes, are not
    counted); passes after the first run only while one more fits before ``deadline`` (``clock()`` seconds; None:
    one pass), judged by the last pass's duration.
    ``before_pass()`` runs before each pass that measures (the reference probe: the device's level). ``layers``:
    the nets' layer lists kept between passes (``calibration_pass``; a profile's spread passes read them already)."""
    # (stored label, batch size) -> end-pass runs already stored
    have = Counter((r["model"], r["batch_size"]) for r in campaign.model_runs() if _is_end_pass(r))
    layers = {} if layers is None else layers
    n, pass_s = 0, 0.0
    for k in range(max(1, int(max_passes))):
        todo = [(name, b) for name in models for b in batches if have[(f"calibration:{name}", b)] <= k]
        if not todo:
            continue
        if k > 0 and (deadline is None or clock() + pass_s > deadline):
            break
        if before_pass:
            before_pass()
        t = clock()
        n += calibration_pass(campaign, device, metric, settings, runtime, todo, None, {"pass": k}, progress, layers)
        for name, b in todo:
            have[(f"calibration:{name}", b)] += 1
        pass_s = clock() - t
    return n


def calibration_pass(campaign, device, metric, settings, runtime, models, batches, tag, progress=None, layers=None):
    """Measure each calibration model at each batch size once (``batches`` None: ``models`` is a list of (model,
    batch size)) and store it as ``calibration:<name>`` with its layer list and ``tag`` in its detail; returns how
    many ran. ``layers``: a dict the nets' layer lists are kept in between passes. During a profile one such pass
    follows each re-measurement of the reference probe (tag ``{"pass": "spread", "spread": i}``): the end passes are
    measured in one stretch of about a minute, inside one of the speed states that last minutes on this project's
    2-core VM; the spread ones sample the states the probes were measured in, each beside a reference reading."""
    from thor_sdk.layers import layers_of

    todo = list(models) if batches is None else [(name, b) for name in models for b in batches]
    layers = {} if layers is None else layers
    for name, b in todo:
        if name not in layers:
            layers[name] = layers_of(name).layers
        r = device.measure_model(name, b, metric=metric, settings=settings, runtime=runtime)
        vals = sorted(r.values(metric))
        med, sd = _median_sd(vals)
        campaign.add_model_run(f"calibration:{name}", b, metric, med, sd, len(vals), runtime,
                               {"layers": layers[name], "values": vals, **tag, **canary_detail(r, metric)})
        if progress:
            progress("calibration", {"model": name, "batch_size": b, "value": med, "pass": tag.get("pass")})
    return len(todo)


def _is_spread(run):
    """Whether a stored model run is of a spread calibration pass (``calibration_pass`` during the probes)."""
    return (run.get("detail") or {}).get("pass") == "spread"


def _is_end_pass(run):
    """Whether a stored model run is a calibration net's run of an end pass (``calibrate``), not of a spread one."""
    return run["model"].startswith("calibration:") and not _is_spread(run)


def _spread_passes(runs):
    """How many spread calibration passes a campaign's model ``runs`` hold (``calibration_pass``'s ``spread``
    index + 1)."""
    got = [r["detail"].get("spread") for r in runs if r["model"].startswith("calibration:")
           and _is_spread(r)]
    return 1 + max(g for g in got if isinstance(g, int)) if any(isinstance(g, int) for g in got) else 0
