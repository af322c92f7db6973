"""Generate the shared estimator test vectors (committed as data; re-run only to change them).

    python tests/vectors/make_vectors.py

Writes ``estimator_<case>.json`` (fitted with ``thor_sdk.fitting.gp.KindGP`` on SYNTHETIC costs -- a
made-up cost-per-FLOP law with noise, not measurements) and ``expected_<case>.json``: per-layer and
whole-model predictions computed by scikit-learn (``KindGP.from_dict`` + ``predict(return_std=True)``
and ``predict(return_cov=True)`` on the stacked rows of each kind, with the documented back-transform).
The Python, Java and Swift runtimes must reproduce the expected numbers to 1e-9 relative.

Cases (estimator format version 2, but ``time_step_bytes``: version 3; every layer carries its ``cost`` terms,
which the Java and Swift runtimes read):
- ``time_profile``: kinds conv2d, relu, maxpool2d, output fitted on positive costs; a model with
  repeated identical layers; a whole-model ``rel_std`` of 0.08.
- ``energy_floored``: costs from a noisy subtraction, some <= 0 (floored by the fit); kind linear, a
  kind fitted on ONE sample (dropout), a kind fitted on duplicated training rows (relu), a recurrent
  kind whose layers carry ``launches`` > 1 (lstm); queries far outside the samples (the fallback).
- ``time_grouped``: a structural variant: dense conv2d and depthwise conv2d in their own entries
  (``conv2d``, ``conv2d:grouped``); each runtime must cost a depthwise layer (``groups > 1``, one input channel
  per group) by the variant entry, a grouped one of several channels per group by the dense entry, and sum each
  entry's layers as its own group.
- ``time_stand_in``: layers marked ``approx`` (stand-ins, as ``--unknown-ops approx`` writes them): each
  runtime adds half the layer's mean to its std, and over the layers of one ``op`` adds those stds up
  linearly in the total (a layer naming no op is its own); plain layers of the same kinds beside them; and a
  checkpointed block's layers carrying ``recompute`` (the share of their step recomputed in backward): each
  runtime multiplies such a layer's mean and std by ``1 + recompute`` before the added std.
- ``time_defaults``: an entry with ``defaults`` (conv1d's ``dilation``: 1): layers and queries that leave the
  feature out read it as its default; each runtime must fill it before building the input vector.
- ``time_unread``: an estimator written before conv1d's ``dilation`` was a feature (its conv1d entry lacks it): a
  layer dilated 2 or 4 reads as its undilated twin and is approximated, as a stand-in is (half its mean more std,
  added up linearly over one ``op``'s layers); one dilated 1 or leaving it out is not; a stand-in already marked
  ``approx`` counts once. ``layer_unread`` lists the indices each runtime must flag.

It also writes ``table_select.json``: power tables (format ``thor-sdk/power-table``, made-up numbers,
not measurements) with, per power cap, what ``thor_sdk.runtime.table.select`` answers -- the
selection, or the error it raises (``infeasible`` with the lowest peak power, ``usage``, ``format``)
-- and malformed tables it rejects. The Python, Java and Swift runtimes must give the same answers
(numbers to 1e-12 relative). ``tests/test_runtime_python.py`` checks the committed file is exactly
what :func:`table_select_text` makes now.

    python tests/vectors/make_vectors.py --table-only     # rewrite table_select.json only

- ``time_step_bytes`` (version 3): a linear entry whose mean function charges the bytes moved once per step at
  their own rate (``per_step_byte``), relu and output entries with one rate; layers at batch 1 and 64.
- ``time_gemm``: the second structural variant: a ``conv2d:gemm`` entry for the convs PyTorch at one thread runs
  off oneDNN (1x1 stride-1 convs below batch 16, small batch-1 convs), beside the dense ``conv2d``; queries and
  models at batch 1, 8 and 16. Its expected file also has ``model_key``: convs on both sides of each clause of the
  rule, with the entry each runtime must name, made with ATen's own choice (``torch._C._select_conv_backend`` at
  one thread), not with the rule the runtimes implement.
- ``time_per_call`` (version 4): an lstm entry whose mean function pays ``per_call`` once per layer call beside its
  per-launch overhead; relu and output entries without it; layers at 4 and 256 time steps.
- ``time_shared_launch`` (version 5) and ``time_shared_launch_v4`` (the same file marked 4): conv2d and linear entries
  whose forward-only layers (frozen, role input) count a quarter of a launch; a version-4 file counts at least one.

And ``training_runs.json`` with ``layers_<case>_<i>.json``: the models of the ``expected_<case>.json``
files as layer lists (format ``thor-sdk/layers``, every layer with its role and ``cost``, as ``thor-sdk
layers --out`` writes them) and, per (estimator, layer list, batch size, samples, epochs, confidence), what
``thor_sdk.runtime.training.training_run`` answers (step / epoch / run mean, std, upper; steps per epoch,
last batch, steps, z), the errors it raises, and a table of standard normal quantiles
(``statistics.NormalDist().inv_cdf``, Wichura's AS 241) the Java and Swift ``TrainingRun`` reproduce.
Made from the committed estimators only (no fitting); ``tests/test_runtime_training.py`` checks the
committed files are what :func:`training_files` makes now.

    python tests/vectors/make_vectors.py --training-only  # rewrite training_runs.json and layers_*.json only
    python tests/vectors/make_vectors.py --grouped-only   # rewrite the time_grouped case only
    python tests/vectors/make_vectors.py --stand-in-only  # rewrite the time_stand_in case only
    python tests/vectors/make_vectors.py --defaults-only  # rewrite the time_defaults case only
    python tests/vectors/make_vectors.py --unread-only    # rewrite the time_unread case only
    python tests/vectors/make_vectors.py --step-bytes-only  # rewrite the time_step_bytes case only
    python tests/vectors/make_vectors.py --gemm-only      # rewrite the time_gemm case only (needs torch)
    python tests/vectors/make_vectors.py --per-call-only  # rewrite the time_per_call case only
    python tests/vectors/make_vectors.py --shared-launch-only  # rewrite the two time_shared_launch cases only

And ``levels.json`` with ``estimator_level.json``: the device level (``thor_sdk.runtime.device_level``,
``Estimator.level``) from reference readings, and estimates put at a level (``estimate(..., level=)``),
with the inputs each refuses; made from the committed time case only (``tests/test_runtime_python.py``
checks the committed files are what :func:`level_files` makes now).

    python tests/vectors/make_vectors.py --levels-only    # rewrite levels.json and estimator_level.json only
"""

import json
import math
import os
import sys
from statistics import NormalDist

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from thor_sdk.fitting.estimator import build_estimator, dumps_estimator  # noqa: E402
from thor_sdk.fitting.gp import KindGP  # noqa: E402
from thor_sdk.errors import FormatError, NotFoundError, UsageError  # noqa: E402
from thor_sdk.layers.kinds import (feature_vector, get_kind, gp_features, model_key, padded_value,  # noqa: E402
                                   parse_padded)
from thor_sdk.runtime import load_estimator  # noqa: E402
from thor_sdk.runtime.table import InfeasibleCapError, select  # noqa: E402
from thor_sdk.runtime.training import MAX_EPOCHS, MAX_SAMPLES, training_run  # noqa: E402
from thor_sdk.runtime.terms import at_batch, at_least_one_launch, cost_terms  # noqa: E402

ROLE_NAME = {1.0: "input", 0.0: "hidden"}
#: the std every runtime adds to a layer marked approx, relative to its mean (written here, not imported:
#: the vectors pin the runtimes' rule)
APPROX_REL_STD = 0.5
#: features a kind gained after estimators were first written, with the value a layer leaving one out has: an
#: estimator whose entry lacks the feature reads a layer setting another value as approximated (written here, not
#: imported from thor_sdk.layers.kinds.DEFAULT_FEATURES: the vectors pin the runtimes' rule)
UNREAD_DEFAULTS = {k: ({"dilation": 1, "frozen": 0} if k in ("conv1d", "conv2d") else {"frozen": 0})
                   for k in ("conv2d", "linear", "batchnorm2d", "layernorm", "embedding", "lstm", "transformer_block",
                             "conv1d", "batchnorm1d", "prelu", "groupnorm", "gru", "lstm_cell", "gru_cell", "mha",
                             "conv_transpose2d")}
UNREAD_DEFAULTS.update({k: {"inplace": 0} for k in ("relu", "relu6", "leaky_relu", "hardswish", "hardsigmoid", "silu",
                                                     "elu")})


def unread_feature(layer, features):
    """Whether an estimator entry of ``features`` reads ``layer`` at a defaulted feature it sets otherwise."""
    config = layer["config"]
    return any(f not in features and isinstance(config.get(f), (int, float)) and config[f] != d
               for f, d in UNREAD_DEFAULTS.get(layer["kind"], {}).items())


def _random_config(kind, rng):
    if kind == "conv2d":
        c = int(rng.choice([1, 3, 8, 16, 32]))
        return {"in_channels": c, "out_channels": int(rng.choice([4, 8, 16, 32, 64])), "kernel": int(rng.choice([1, 3, 5])),
                "stride": int(rng.choice([1, 2])), "padding": int(rng.choice([0, 1, 2])), "groups": 1,
                "height": int(rng.choice([8, 14, 28, 32])), "width": 0, "bias": int(rng.choice([0, 1]))}
    if kind in ("maxpool2d",):
        return {"channels": int(rng.choice([6, 16, 32, 64])), "height": int(rng.choice([8, 10, 14, 28])), "width": 0,
                "kernel": 2, "stride": 2, "padding": 0}
    if kind in ("relu", "dropout"):
        c = {"numel": int(rng.choice([84, 120, 400, 1600, 4704, 8192, 16384]))}
        if kind == "dropout":
            c["p"] = 0.5
        return c
    if kind in ("linear", "output"):
        c = {"in_features": int(rng.choice([64, 84, 120, 256, 400, 512])),
             "out_features": int(rng.choice([10, 84, 120, 256])), "tokens": 1}
        if kind == "linear":
            c["bias"] = 1
        return c
    if kind == "lstm":
        return {"input_size": int(rng.choice([16, 32, 64])), "hidden_size": int(rng.choice([32, 64, 128])),
                "seq_len": int(rng.choice([8, 16, 40, 64])), "num_layers": int(rng.choice([1, 2]))}
    raise ValueError(kind)


def _grouped_config(rng):
    """A depthwise conv2d config (groups = in = out channels)."""
    c = int(rng.choice([8, 16, 32, 64]))
    return {"in_channels": c, "out_channels": c, "kernel": int(rng.choice([3, 5])), "stride": int(rng.choice([1, 2])),
            "padding": 1, "groups": c, "height": int(rng.choice([8, 14, 28, 32])), "width": 0, "bias": 0}


def _fix(kind, c):
    if "width" in c:
        c["width"] = c["height"]
    return c


def synthetic_cost(kind, config, batch_size, role, rng, noise=0.05):
    """SYNTHETIC per-layer cost: 2e-11 s per training FLOP + 2e-5 s, times lognormal noise."""
    flops = get_kind(kind).train_flops(config, batch_size, role)
    return (2e-11 * flops + 2e-5) * float(np.exp(rng.normal(0.0, noise)))


def features_before_frozen(kind):
    """``kind``'s GP features as estimators had them before ``frozen`` and ``inplace`` were ones (2026-11-28): the
    cases written before them keep their estimators, and pin how a runtime reads an entry that lacks them."""
    return [f for f in gp_features(kind) if f not in ("frozen", "inplace")]


def sample(kind, n, rng, linear=False, config=None, slowdown=1.0, features=None, batches=(1, 8, 16, 32, 64)):
    """``n`` SYNTHETIC samples of ``kind``; ``config(rng)`` draws their configs (default: ``_random_config``),
    ``slowdown`` multiplies the synthetic law (a slow structural variant); ``features`` the GP's inputs (default:
    ``features_before_frozen``); batch sizes drawn from ``batches``."""
    feats = features or features_before_frozen(kind)
    X, y, T = [], [], []
    for _ in range(n):
        c = _fix(kind, config(rng) if config else _random_config(kind, rng))
        bs = int(rng.choice(batches))
        role = "output" if kind == "output" else str(rng.choice(get_kind(kind).roles))
        cost = slowdown * synthetic_cost(kind, c, bs, role, rng)
        if linear:  # a noisy difference of two measurements: can be <= 0 for cheap layers
            cost = cost + float(rng.normal(0.0, 4e-5))
        X.append(feature_vector(kind, c, bs, role, feats))
        y.append(cost)
        T.append(at_batch(cost_terms(kind, c, role), bs))
    return feats, X, y, T


def fit_kinds(spec, rng, linear=False):
    gps = {}
    for kind, n, dup in spec:
        feats, X, y, T = sample(kind, n, rng, linear=linear)
        if dup:  # repeat every training row with a fresh noisy cost
            X, T = X + X, T + T
            y = y + [v + float(rng.normal(0.0, 4e-5 if linear else 1e-6)) for v in y]
        noise = [max(abs(v) * 0.05, 4e-5 if linear else 0.0) for v in y]
        gps[kind] = KindGP(features=feats, random_state=0).fit(X, y, noise_std=noise, terms=T)
    return gps


def synthetic_estimator(gps, whole_rel_std=None, runtime="torch", metric="time", unit="s", unit_per_flop=2e-11):
    """The estimator document of fitted ``gps`` on a SYNTHETIC device, with a fixed creation time (the
    vectors stay byte-identical when regenerated) and, where given, a whole-model relative std."""
    prov = {"note": "SYNTHETIC test vector, not a measurement", "generator": "tests/vectors/make_vectors.py"}
    whole = {} if whole_rel_std is None else {"whole_model": {"rel_std": whole_rel_std, "source": "synthetic"}}
    doc = build_estimator(gps, device={"name": "synthetic"}, runtime=runtime, metric=metric, unit=unit,
                          flops_baseline={"unit_per_flop": unit_per_flop}, provenance=prov, **whole)
    doc["created_utc"] = "2025-01-01T00:00:00Z"
    return doc


def with_cost(layer):
    return dict(layer, cost=cost_terms(layer["kind"], layer["config"], layer["role"]))


def model_layers(kinds, rng, n_layers, n_distinct, batch_size):
    """A layer list drawing ``n_layers`` layers from ``n_distinct`` distinct configs (so repeats)."""
    pool = []
    for i in range(n_distinct):
        kind = kinds[i % len(kinds)]
        c = _fix(kind, _random_config(kind, rng))
        role = "output" if kind == "output" else ("input" if i == 0 else "hidden")
        if kind == "output":
            continue
        pool.append({"kind": kind, "role": role, "config": c})
    layers = []
    for i in range(n_layers):
        layer = dict(pool[int(rng.integers(len(pool)))])
        layers.append(with_cost(dict(layer, name=f"l{i}", config=dict(layer["config"]))))
    if "output" in kinds:
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output",
                                 "config": _fix("output", _random_config("output", rng))}))
    return layers


def expected_for(doc, layer_queries, models):
    """Per-layer and whole-model predictions by numpy (``KindGP.from_dict`` + ``predict``)."""
    gps = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    rel = doc.get("whole_model", {}).get("rel_std", 0.0)
    out = {"predict_layer": [], "estimate": []}
    def entry(kind, config, batch_size):
        key = model_key(kind, config, batch_size)
        return key if key in gps else kind

    for kind, feats in layer_queries:
        name = entry(kind, feats, feats["batch_size"])
        gp = gps[name]
        written = feats
        feats = {**doc["kinds"][name].get("defaults", {}), **feats}  # a feature left out: its default
        row = [padded_value(feats[parse_padded(f)[0]], parse_padded(f)[1]) if parse_padded(f) else
               float(feats[f] if f != "role" else {"input": 1, "hidden": 0}.get(feats[f], feats[f]))
               for f in gp.features]
        role = "output" if kind == "output" else {1: "input", 0: "hidden"}.get(feats.get("role"), feats.get("role"))
        config = {f: v for f, v in feats.items() if f not in ("batch_size", "role")}
        cost = cost_terms(kind, config, role)
        m, s = gp.predict([row], terms=[at_batch(at_least_one_launch(cost, doc["version"]), feats["batch_size"])],
                          return_std=True)
        out["predict_layer"].append({"kind": kind, "features": written, "cost": cost, "mean": float(m[0]),
                                     "std": float(s[0])})
    for layers, bs in models:
        means, stds, total_mean, total_var = [None] * len(layers), [None] * len(layers), 0.0, 0.0
        for name, gp in gps.items():
            idx = [i for i, layer in enumerate(layers) if entry(layer["kind"], layer["config"], bs) == name]
            if not idx:
                continue
            rows = [feature_vector(layers[i]["kind"], layers[i]["config"], bs, layers[i]["role"], gp.features)
                    for i in idx]
            T = [at_batch(at_least_one_launch(layers[i]["cost"], doc["version"]), bs) for i in idx]
            m, s = gp.predict(rows, terms=T, return_std=True)
            mc, cov = gp.predict(rows, terms=T, return_cov=True)
            scale = np.array([1.0 + layers[i].get("recompute", 0.0) for i in idx])  # a recomputed forward's share more
            for j, i in enumerate(idx):
                means[i], stds[i] = float(m[j] * scale[j]), float(s[j] * scale[j])
            total_mean += float(np.sum(mc * scale))
            total_var += float(scale @ cov @ scale)
        # a layer marked approx gets APPROX_REL_STD of its mean more std; over the layers of one op the
        # added stds add up linearly in the total (a layer naming no op is its own)
        # (and so does a layer setting a feature its entry predates, UNREAD_DEFAULTS)
        by_op, unread = {}, []
        for i, layer in enumerate(layers):
            if "approx" not in layer and unread_feature(layer, gps[entry(layer["kind"], layer["config"], bs)].features):
                unread.append(i)
            if "approx" in layer or unread and unread[-1] == i:
                extra = APPROX_REL_STD * means[i]
                stds[i] = float(np.sqrt(stds[i] ** 2 + extra ** 2))
                by_op.setdefault(layer.get("op", i), []).append(extra)
        total_var += sum(sum(e) ** 2 for e in by_op.values())
        layers_std = float(np.sqrt(max(total_var, 0.0)))
        out["estimate"].append({"batch_size": bs, "layers": layers, "layer_means": means, "layer_stds": stds,
                                "layers_total": {"mean": total_mean, "std": layers_std},
                                "total": {"mean": total_mean,
                                          "std": float(np.sqrt(max(total_var, 0.0) + (rel * total_mean) ** 2))},
                                **({"layer_unread": unread} if unread else {})})
    return out


def write(case, doc, expected):
    with open(os.path.join(HERE, f"estimator_{case}.json"), "w", encoding="utf-8") as f:
        f.write(dumps_estimator(doc))
    expected = dict(expected, estimator=f"estimator_{case}.json", generated_by="tests/vectors/make_vectors.py",
                    note="synthetic costs; expected values computed with numpy (KindGP.from_dict + predict)")
    with open(os.path.join(HERE, f"expected_{case}.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


# ----------------------------------------------------------------------------- power-table selection
TABLE_VECTORS = "table_select.json"
MHZ = 1_000_000


def _table(rows, ratios, **top):
    doc = {"format": "thor-sdk/power-table", "version": 1}
    doc.update(top)
    doc["rows"] = [{"batch_size": b, "freq_hz": f, "time_per_sample_s": t, "peak_power_w": p} for b, f, t, p in rows]
    doc["ratios"] = [{"batch_size": b, "ratio": r} for b, r in ratios]
    return doc


def _grid(batches, freqs, power, time):
    return [(b, f, time(b, f), power(b, f)) for b in batches for f in freqs]


def _caps(doc, extra=()):
    """Caps probing every boundary: each distinct peak power exactly, midpoints, below all, above all."""
    powers = sorted({r["peak_power_w"] for r in doc["rows"]})
    caps = [powers[0] - 0.25, powers[-1] + 1.0]
    caps += powers[::2] + [(a + b) / 2 for a, b in zip(powers[1::3], powers[2::3])]
    return sorted(set(caps) | set(extra))


def _answer(doc, cap):
    """What the Python runtime answers: the selection, or the error it raises."""
    try:
        return {"result": select(doc, cap)}
    except InfeasibleCapError as e:
        return {"error": "infeasible", "lowest_feasible_power_w": e.lowest_feasible_power_w, "message": str(e)}
    except FormatError as e:
        return {"error": "format", "message": str(e)}
    except UsageError as e:
        return {"error": "usage", "message": str(e)}


def table_tables():
    """``[(name, what, table, caps)]``: the well-formed tables the vectors query (made-up numbers)."""
    out = []
    # monotone: power rises with frequency and batch; time per sample falls with both
    t = _table(_grid([16, 32, 64, 128], [306 * MHZ, 510 * MHZ, 714 * MHZ, 918 * MHZ],
                     lambda b, f: round(1.0 + f / MHZ / 200 * (0.5 + b / 128), 6),
                     lambda b, f: round(1e-3 * (600 / (f / MHZ)) * (1 + 16 / b), 9)),
               [(16, 0.55), (32, 0.6), (64, 0.75), (128, 1.0)], reference_batch_size=128,
               reference_samples_to_target=None)
    out.append(("monotone", "power monotone in frequency for every batch: binary search everywhere", t,
                _caps(t, extra=(0, -1, 5))))
    # non-monotone: batch 8 dips (1, 3, 2, 4 W); batch 16 has a duplicated frequency listed out of order
    rows = [(8, 400 * MHZ, 0.0010, 4.0), (8, 100 * MHZ, 0.0040, 1.0), (8, 300 * MHZ, 0.0014, 2.0),
            (8, 200 * MHZ, 0.0020, 3.0),
            (16, 300 * MHZ, 0.0011, 2.6), (16, 100 * MHZ, 0.0031, 1.5), (16, 300 * MHZ, 0.0012, 2.4),
            (16, 200 * MHZ, 0.0016, 2.2),
            (32, 100 * MHZ, 0.0025, 2.0), (32, 200 * MHZ, 0.0013, 2.5), (32, 300 * MHZ, 0.0009, 3.5),
            (32, 400 * MHZ, 0.0007, 5.0)]
    t = _table(rows, [(8, 0.4), (16, 0.7), (32, 1.0)], reference_batch_size=32)
    out.append(("non_monotone", "batch 8 power dips with frequency, batch 16 has a duplicated frequency "
                "(rows out of order): linear scan there, listed in non_monotone_batch_sizes", t,
                _caps(t, extra=(2.3, 2.45, 2.5, 3.0))))
    # reference_samples_to_target known: est_time_to_accuracy_s is a number; replayed-trace knob; simulated
    t = _table(_grid([32, 64, 128, 256], [100, 150, 200, 250],
                     lambda b, f: round(0.92 * f * (0.8 + b / 1280), 3),
                     lambda b, f: round(2e-4 * (250 / f) ** 0.7 * (1 + 64 / b), 9)),
               [(32, 0.45), (64, 0.55), (128, 0.8), (256, 1.0)], reference_batch_size=256,
               reference_samples_to_target=60000.0, knob="power_limit_w", simulated=True)
    out.append(("reference_samples", "reference_samples_to_target known, knob power_limit_w, simulated", t,
                _caps(t)))
    # a batch without a ratio (8: lowest power of all, never selected) and a ratio without rows (128)
    t = _table(_grid([8, 16, 32, 64], [200 * MHZ, 400 * MHZ, 600 * MHZ],
                     lambda b, f: round(0.5 + f / MHZ / 250 * (0.4 + b / 64), 4),
                     lambda b, f: round(1e-3 * (400 / (f / MHZ)) * (1 + 8 / b), 9)),
               [(16, 0.6), (64, 1.0), (128, 1.2)], reference_batch_size=64, reference_samples_to_target=None)
    low8 = min(r["peak_power_w"] for r in t["rows"] if r["batch_size"] == 8)
    out.append(("missing_ratio", "batch 8 has rows but no ratio (ignored, also for the lowest peak power), "
                "batch 128 a ratio but no rows", t, _caps(t, extra=(low8,))))
    # equal scores (0.5 s x 2 = 1 s x 1): the larger batch wins; a batch size written as 8.0
    t = _table([(4, 100 * MHZ, 0.5, 1.0), (8.0, 100 * MHZ, 1.0, 1.5), (8, 200 * MHZ, 0.25, 3.0),
                (4, 200 * MHZ, 0.125, 2.0)], [(4, 2.0), (8, 1.0)], reference_batch_size=8,
               reference_samples_to_target=1000)
    out.append(("tie", "equal scores: the larger batch first; batch_size 8.0 groups with 8", t,
                _caps(t, extra=(1.75, 2.5))))
    return out


def table_malformed():
    """``[(name, table)]``: documents ``select`` must reject (each is the monotone table, broken once)."""
    def good():
        return _table([(16, 100 * MHZ, 0.002, 1.0), (16, 200 * MHZ, 0.001, 2.0), (32, 100 * MHZ, 0.0015, 1.5)],
                      [(16, 0.5), (32, 1.0)], reference_batch_size=32)

    def broken(how):
        d = good()
        r0 = d["rows"][0]
        if how == "not_object":
            return [d]
        if how == "format":
            d["format"] = "thor-sdk/estimator"
        elif how == "no_format":
            del d["format"]
        elif how == "version":
            d["version"] = 2
        elif how == "no_rows":
            d["rows"] = []
        elif how == "rows_not_list":
            d["rows"] = {"0": r0}
        elif how == "row_not_object":
            d["rows"][1] = [16, 200 * MHZ, 0.001, 2.0]
        elif how == "missing_time":
            del r0["time_per_sample_s"]
        elif how == "negative_power":
            r0["peak_power_w"] = -0.5
        elif how == "string_power":
            r0["peak_power_w"] = "1.0"
        elif how == "bool_batch":
            r0["batch_size"] = True
        elif how == "null_freq":
            r0["freq_hz"] = None
        elif how == "zero_batch":
            r0["batch_size"] = 0
        elif how == "zero_time":
            r0["time_per_sample_s"] = 0.0
        elif how == "no_ratios":
            del d["ratios"]
        elif how == "empty_ratios":
            d["ratios"] = []
        elif how == "ratio_not_object":
            d["ratios"][0] = 0.5
        elif how == "ratio_zero":
            d["ratios"][0]["ratio"] = 0
        elif how == "ratio_negative":
            d["ratios"][1]["ratio"] = -1.0
        elif how == "ratio_no_batch":
            del d["ratios"][0]["batch_size"]
        elif how == "no_common_batch":
            d["ratios"] = [{"batch_size": 64, "ratio": 1.0}]
        else:
            raise ValueError(how)
        return d

    names = ["not_object", "format", "no_format", "version", "no_rows", "rows_not_list", "row_not_object",
             "missing_time", "negative_power", "string_power", "bool_batch", "null_freq", "zero_batch",
             "zero_time", "no_ratios", "empty_ratios", "ratio_not_object", "ratio_zero", "ratio_negative",
             "ratio_no_batch", "no_common_batch"]
    return [(n, broken(n)) for n in names]


def table_select_vectors():
    """The ``table_select.json`` document: every answer computed by ``thor_sdk.runtime.table.select``."""
    cases = []
    for name, what, doc, caps in table_tables():
        cases.append({"name": name, "what": what, "table": doc,
                      "queries": [dict({"power_cap_w": cap}, **_answer(doc, cap)) for cap in caps]})
    malformed = []
    for name, doc in table_malformed():
        for cap in (5.0, 0):  # a broken table is reported before a bad cap
            malformed.append(dict({"name": name, "table": doc, "power_cap_w": cap}, **_answer(doc, cap)))
    return {"format": "thor-sdk/table-select-vectors", "version": 1,
            "generated_by": "tests/vectors/make_vectors.py",
            "note": "SYNTHETIC tables (made-up numbers, not measurements); every expected answer is what "
                    "thor_sdk.runtime.table.select returns or raises. 'why' and 'message' are English text "
                    "the Java and Swift runtimes need not reproduce.",
            "cases": cases, "malformed": malformed}


def table_select_text():
    """``table_select.json`` exactly as written (UTF-8 text)."""
    return json.dumps(table_select_vectors(), indent=1, allow_nan=False) + "\n"


def write_table_vectors():
    with open(os.path.join(HERE, TABLE_VECTORS), "w", encoding="utf-8") as f:
        f.write(table_select_text())


# ----------------------------------------------------------------------------- training runs
TRAINING_VECTORS = "training_runs.json"
TRAINING_CASES = ("time_profile", "energy_floored", "time_stand_in")
TRAINING_BATCHES = (1, 7, 32, 256)
TRAINING_EPOCHS = (1, 3, MAX_EPOCHS)
TRAINING_CONFIDENCES = (0.5, 0.9, 0.95, 0.9999)
#: inputs ``training_run`` refuses (with the error it raises), each on the first layer list of the time case
TRAINING_ERRORS = (
    ("batch size 0", {"batch_size": 0}),
    ("batch size above 1e9", {"batch_size": 10 ** 9 + 1}),
    ("samples 0", {"samples": 0}),
    ("negative samples", {"samples": -5}),
    ("samples above 1e12", {"samples": MAX_SAMPLES + 1}),
    ("epochs 0", {"epochs": 0}),
    ("epochs above 1e6", {"epochs": MAX_EPOCHS + 1}),
    ("confidence 0.3", {"confidence": 0.3}),
    ("confidence 1.0", {"confidence": 1.0}),
    ("confidence 0", {"confidence": 0.0}),
    ("confidence just below 0.5", {"confidence": 0.49999}),
    ("confidence just above 0.9999", {"confidence": 0.99995}),
)


def layer_list_files():
    """``[(file name, layer-list document)]``: each model of the ``expected_<case>.json`` files as a layer
    list (format ``thor-sdk/layers``; every layer with its role and cost terms, as ``--out`` writes them)."""
    out = []
    for case in TRAINING_CASES:
        with open(os.path.join(HERE, f"expected_{case}.json"), encoding="utf-8") as f:
            exp = json.load(f)
        for i, e in enumerate(exp["estimate"]):
            out.append((f"layers_{case}_{i}.json", {"format": "thor-sdk/layers", "version": 1,
                                                    "name": f"synthetic_{case}_{i}", "layers": e["layers"]}))
    return out


def quantile_confidences():
    """200 confidences in [0.5, 0.9999]: the ends, both sides of AS 241's split at 0.925, a linear grid
    and a grid that approaches 1 geometrically (the tail probability from 1e-2 to 1e-4)."""
    fixed = {0.5, math.nextafter(0.5, 1.0), 0.5 + 1e-9, 0.925, math.nextafter(0.925, 0.0),
             math.nextafter(0.925, 1.0), 0.9, 0.95, 0.975, 0.99, 0.999, 0.9999, math.nextafter(0.9999, 0.0)}
    linear = {round(0.5 + 0.005 * k, 6) for k in range(1, 99)}
    tail = {round(1.0 - 10.0 ** (-2.0 - 2.0 * k / 95), 12) for k in range(1, 95)}
    out = sorted(fixed | linear | tail)
    assert len(out) == 200 and out[0] == 0.5 and out[-1] == 0.9999, len(out)
    return out


#: probabilities over (0, 1) for the full AS 241 algorithm (its three regions, both signs)
PPND16_PROBABILITIES = (1e-300, 1e-100, 1e-20, 1e-12, 1.5e-11, 1e-9, 1e-6, 1e-3, 0.025, 0.074, 0.075, 0.0751, 0.2,
                        0.4999, 0.5, 0.5001, 0.8, 0.925, 0.9251, 0.975, 0.999, 1.0 - 1e-9, 1.0 - 1e-12,
                        1.0 - 2.0 ** -53)


def _error_class(e):
    if isinstance(e, NotFoundError):
        return "not_found"
    if isinstance(e, FormatError):
        return "format"
    if isinstance(e, UsageError):
        return "usage"
    raise e


def _run(est, layers, q):
    """What ``training_run`` answers for query ``q`` (samples None: the defaults for samples, epochs and
    confidence), or the error it raises."""
    try:
        if q["samples"] is None:
            out = training_run(est, layers, q["batch_size"])
        else:
            out = training_run(est, layers, q["batch_size"], samples=q["samples"], epochs=q["epochs"],
                               confidence=q["confidence"])
    except (UsageError, NotFoundError, FormatError) as e:
        return {"error": _error_class(e), "message": str(e)}
    out = dict(out)
    del out["approximated"]  # the Java and Swift runtimes have no approximated kinds
    return {"expected": out}


def training_run_vectors():
    """The ``training_runs.json`` document: every answer computed by ``thor_sdk.runtime.training``."""
    lists = layer_list_files()
    cases, k = [], 0
    for case in TRAINING_CASES:
        est = load_estimator(os.path.join(HERE, f"estimator_{case}.json"))
        for name, doc in lists:
            if not name.startswith(f"layers_{case}_"):
                continue
            for b in TRAINING_BATCHES:
                samples = [("one batch, the defaults (epochs 1, confidence 0.95)", None),
                           ("divisible", 10 * b), ("typical", 60000), ("the most", MAX_SAMPLES)]
                if b > 1:
                    samples += [("a last partial batch", 10 * b + b // 3 + 1), ("fewer than a batch", b // 2 + 1)]
                for what, n in samples:
                    q = {"what": what, "estimator": f"estimator_{case}.json", "layers": name, "batch_size": b,
                         "samples": n, "epochs": None, "confidence": None}
                    if n is not None:
                        q["epochs"] = TRAINING_EPOCHS[k % len(TRAINING_EPOCHS)]
                        q["confidence"] = TRAINING_CONFIDENCES[k % len(TRAINING_CONFIDENCES)]
                        k += 1
                    q.update(_run(est, doc["layers"], q))
                    assert "expected" in q, q
                    cases.append(q)
    errors = []
    est = load_estimator(os.path.join(HERE, "estimator_time_profile.json"))
    layers = dict(lists)["layers_time_profile_0.json"]["layers"]
    for what, bad in TRAINING_ERRORS:
        q = dict({"what": what, "estimator": "estimator_time_profile.json", "layers": "layers_time_profile_0.json",
                  "batch_size": 32, "samples": 1000, "epochs": 3, "confidence": 0.95}, **bad)
        q.update(_run(est, layers, q))
        errors.append(q)
    q = {"what": "a kind the estimator lacks (linear, dropout, lstm)", "estimator": "estimator_time_profile.json",
         "layers": "layers_energy_floored_0.json", "batch_size": 32, "samples": 1000, "epochs": 3, "confidence": 0.95}
    q.update(_run(est, dict(lists)[q["layers"]]["layers"], q))
    errors.append(q)
    assert all("error" in q for q in errors), errors
    nd = NormalDist()
    return {"format": "thor-sdk/training-run-vectors", "version": 1,
            "generated_by": "tests/vectors/make_vectors.py",
            "note": "SYNTHETIC estimators and layer lists (not measurements); every expected answer is what "
                    "thor_sdk.runtime.training.training_run returns or raises ('approximated' left out), every "
                    "z what statistics.NormalDist().inv_cdf returns. samples null: training_run(estimator, "
                    "layers, batch_size) with the defaults. 'message' is English text the Java and Swift "
                    "runtimes need not reproduce.",
            "cases": cases, "errors": errors,
            "quantiles": [{"confidence": c, "z": nd.inv_cdf(c)} for c in quantile_confidences()],
            "ppnd16": [{"p": p, "z": nd.inv_cdf(p)} for p in PPND16_PROBABILITIES]}


def _text(doc):
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def training_files():
    """``{file name: exact UTF-8 text}`` of ``training_runs.json`` and the ``layers_*.json`` it uses."""
    out = {name: _text(doc) for name, doc in layer_list_files()}
    out[TRAINING_VECTORS] = _text(training_run_vectors())
    return out


def write_training_vectors():
    for name, text in training_files().items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)


# ----------------------------------------------------------------------------- device levels
LEVEL_VECTORS = "levels.json"
LEVEL_ESTIMATOR = "estimator_level.json"
#: (what, readings, reference value, drift_log_std): device_level's inputs and, below, those it refuses
LEVEL_CASES = (
    ("one reading, the drift as its spread", [0.0011], 0.001, 0.02),
    ("one reading, no drift recorded", [0.0011], 0.001, 0.0),
    ("five readings, their own spread above the drift", [0.00121, 0.00118, 0.00125, 0.00131, 0.00119], 0.001, 0.01),
    ("five readings, spread below the drift", [0.00100, 0.00101, 0.00099, 0.00100, 0.00102], 0.001, 0.05),
    ("an even count: the median is the mean of the middle two", [0.9, 1.4, 1.1, 1.0], 1.2, 0.03),
    ("a slower device", [3.1, 2.9, 3.0], 1.5, 0.02),
    ("identical readings", [0.002, 0.002, 0.002], 0.002, 0.0),
    ("a spread capped at 5", [1e-3, 1e3], 500.0, 0.0),
)
LEVEL_ERRORS = (
    ("no readings", [], 0.001, 0.02),
    ("a zero reading", [0.001, 0.0], 0.001, 0.02),
    ("a negative reading", [-0.001], 0.001, 0.02),
    ("a zero reference", [0.001], 0.0, 0.02),
    ("a negative drift", [0.001], 0.001, -0.1),
    ("a level below 0.02", [0.001], 1.0, 0.02),
    ("a level above 50", [100.0], 1.0, 0.02),
)
#: (what, level, log_std) put on the first layer list of the time case at batch sizes 4 and 32
AT_LEVEL_CASES = (("no change", 1.0, 0.0), ("faster, a level with its own std", 0.87, 0.021),
                  ("slower", 1.49, 0.05), ("the lowest level", 0.02, 0.0), ("the highest level and std", 50.0, 5.0))
AT_LEVEL_ERRORS = (("level 0", 0.0, 0.0), ("level below 0.02", 0.019, 0.0), ("level above 50", 50.5, 0.0),
                   ("negative log_std", 1.0, -0.01), ("log_std above 5", 1.0, 5.01))


def _level_answer(fn):
    try:
        return {"expected": fn()}
    except (UsageError, NotFoundError, FormatError) as e:
        return {"error": _error_class(e), "message": str(e)}


def level_files():
    """``{file name: exact UTF-8 text}`` of ``levels.json`` and ``estimator_level.json`` (the time case's
    estimator with a reference probe and a drift): every answer what ``thor_sdk.runtime`` gives or raises."""
    from thor_sdk.runtime import device_level

    with open(os.path.join(HERE, "estimator_time_profile.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["whole_model"] = dict(doc["whole_model"], drift_log_std=0.017, reference={
        "probe": {"id": "conv2d-hidden-b16-synthetic", "kind": "conv2d", "role": "hidden", "batch_size": 16,
                  "config": {"bias": 1, "groups": 1, "height": 16, "in_channels": 16, "kernel": 3,
                             "out_channels": 16, "padding": 1, "stride": 1, "width": 16}},
        "part": "hidden", "median_value": 0.00118, "n": 17})
    est_ref = load_estimator(doc)
    est = load_estimator(os.path.join(HERE, "estimator_time_profile.json"))
    with open(os.path.join(HERE, "layers_time_profile_0.json"), encoding="utf-8") as f:
        layers = json.load(f)["layers"]
    vec = {"format": "thor-sdk/level-vectors", "version": 1, "generated_by": "tests/vectors/make_vectors.py",
           "note": "SYNTHETIC readings (not measurements). device_level: thor_sdk.runtime.device_level(readings, "
                   "reference_value, drift_log_std); estimator_level: Estimator.level(readings) of "
                   f"{LEVEL_ESTIMATOR} (the time case's estimator with whole_model.reference and drift_log_std); "
                   "at_level: Estimator.estimate(layers, batch_size, level={level, log_std}) of the time case, "
                   "layers as [mean, std]. 'message' is English text the Java and Swift runtimes need not "
                   "reproduce.",
           "device_level": [], "estimator_level": [], "at_level": []}
    for what, readings, ref, drift in LEVEL_CASES + LEVEL_ERRORS:
        q = {"what": what, "readings": readings, "reference_value": ref, "drift_log_std": drift}
        q.update(_level_answer(lambda: device_level(readings, ref, drift)))
        vec["device_level"].append(q)
    for what, readings in (("three readings", [0.00125, 0.00121, 0.00130]), ("one reading", [0.00100])):
        q = {"what": what, "estimator": LEVEL_ESTIMATOR, "readings": readings}
        q.update(_level_answer(lambda: est_ref.level(readings)))
        vec["estimator_level"].append(q)
    q = {"what": "an estimator without a reference probe", "estimator": "estimator_time_profile.json",
         "readings": [0.001]}
    q.update(_level_answer(lambda: est.level([0.001])))
    vec["estimator_level"].append(q)

    def at(b, level, log_std):
        r = est.estimate(layers, b, level={"level": level, "log_std": log_std})
        return {"total": r["total"], "layers_total": r["layers_total"], "level": r["level"],
                "layers": [[x["mean"], x["std"]] for x in r["layers"]]}

    for what, level, log_std in AT_LEVEL_CASES + AT_LEVEL_ERRORS:
        for b in (4, 32):
            q = {"what": what, "estimator": "estimator_time_profile.json", "layers": "layers_time_profile_0.json",
                 "batch_size": b, "level": level, "log_std": log_std}
            q.update(_level_answer(lambda: at(b, level, log_std)))
            vec["at_level"].append(q)
    n_err = sum("error" in q for k in ("device_level", "estimator_level", "at_level") for q in vec[k])
    assert n_err == len(LEVEL_ERRORS) + 1 + 2 * len(AT_LEVEL_ERRORS), n_err
    return {LEVEL_ESTIMATOR: _text(doc), LEVEL_VECTORS: _text(vec)}


def write_level_vectors():
    for name, text in level_files().items():
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)


def write_grouped_case():
    """``time_grouped``: dense and depthwise conv2d with their own entries (``conv2d`` and ``conv2d:grouped``,
    the depthwise law SYNTHETIC: 8x the dense one), relu and output; queries and models mix both, so a
    runtime that costs a depthwise layer with the dense entry, or sums both entries' layers as one group,
    fails. Its own random stream: the other cases are not rewritten."""
    rng = np.random.default_rng(20261123)
    gps = fit_kinds([("conv2d", 14, False), ("relu", 6, False), ("output", 5, False)], rng)
    feats, X, y, T = sample("conv2d", 12, rng, config=_grouped_config, slowdown=8.0)
    gps["conv2d:grouped"] = KindGP(features=feats, random_state=0).fit(
        X, y, noise_std=[0.05 * v for v in y], terms=T)
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    dw = _fix("conv2d", _grouped_config(rng))
    queries = [("conv2d", {**dw, "batch_size": 16, "role": "hidden"}),
               ("conv2d", {**dw, "groups": 1, "batch_size": 16, "role": "hidden"}),  # same sizes, dense
               ("conv2d", {**_fix("conv2d", _random_config("conv2d", rng)), "batch_size": 8, "role": "input"}),
               ("relu", {"numel": 4704, "batch_size": 16, "role": "hidden"}),
               # grouped, 4 channels per group: the dense entry (last: the other queries keep their order)
               ("conv2d", {**dw, "groups": dw["in_channels"] // 4, "batch_size": 16, "role": "hidden"})]
    models = []
    for n_layers, bs in ((12, 16), (5, 4)):
        layers = [with_cost({"name": "stem", "kind": "conv2d", "role": "input",
                             "config": _fix("conv2d", _random_config("conv2d", rng))})]
        for i in range(n_layers):
            kind = ("conv2d", "conv2d", "relu")[i % 3]
            c = _fix("conv2d", _grouped_config(rng) if i % 3 == 0 else _random_config("conv2d", rng)) \
                if kind == "conv2d" else {"numel": int(rng.choice([400, 1600, 8192]))}
            layers.append(with_cost({"name": f"l{i}", "kind": kind, "role": "hidden", "config": c}))
        layers.append(dict(layers[1], name="twin"))  # a repeated depthwise layer
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output",
                                 "config": {"in_features": 64, "out_features": 10, "tokens": 1}}))
        models.append((layers, bs))
    write("time_grouped", doc, expected_for(doc, queries, models))


def _aten_gemm(kind, config, batch_size):
    """Whether PyTorch's CPU backend at one intra-op thread runs this conv off oneDNN (ATen's own choice,
    ``torch._C._select_conv_backend``): the truth the vectors pin every runtime's ``conv2d:gemm`` rule to."""
    import torch

    c = dict(config)
    if kind == "conv2d":
        kh, kw = c["kernel"], c.get("kernel_w", c["kernel"])
        sh, sw = c["stride"], c.get("stride_w", c["stride"])
        x = torch.empty(batch_size, c["in_channels"], c["height"], c["width"])
        w = torch.empty(c["out_channels"], c["in_channels"] // c["groups"], kh, kw)
        stride, pad, dil = [sh, sw], [0, 0], [c.get("dilation", 1)] * 2
    else:
        x = torch.empty(batch_size, c["in_channels"], c["length"])
        w = torch.empty(c["out_channels"], c["in_channels"] // c["groups"], c["kernel"])
        stride, pad, dil = [c["stride"]], [0], [c.get("dilation", 1)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backend = torch._C._select_conv_backend(x, w, None, stride, pad, dil, False, [0] * len(pad), c["groups"], None)
    finally:
        torch.set_num_threads(threads)
    return backend != torch._C._ConvBackend.Mkldnn


def _gemm_key_queries():
    """(kind, config, batch size) of dense convs on both sides of every clause of ATen's rule, and the entry each
    is costed by: ``<kind>:gemm`` exactly where ``_aten_gemm`` says so (checked here), ``<kind>:grouped`` for a
    depthwise one, the kind for a config the rule cannot read."""
    def c2(cin, k, b, hw=8, **over):
        return ("conv2d", {"in_channels": cin, "out_channels": 16, "kernel": k, "stride": 1, "padding": 0,
                           "groups": 1, "height": hw, "width": hw, "bias": 0, **over}, b)

    def c1(cin, k, b, length=64, **over):
        return ("conv1d", {"in_channels": cin, "out_channels": 16, "kernel": k, "stride": 1, "padding": 0,
                           "groups": 1, "length": length, "bias": 0, **over}, b)

    dense = [c2(32, 1, 1), c2(32, 1, 8), c2(32, 1, 15), c2(32, 1, 16), c2(32, 1, 64), c2(32, 1, 8, stride=2),
             c2(32, 1, 8, stride_w=2), c2(32, 1, 8, dilation=2), c2(32, 1, 8, kernel_w=3), c2(32, 3, 8),
             c2(20, 3, 1, hw=32), c2(21, 3, 1, hw=32), c2(32, 3, 2), c2(32, 5, 1), c2(32, 5, 1, kernel_w=3),
             c2(32, 7, 1, kernel_w=1), c2(16, 1, 8, groups=2), c2(16, 3, 1, groups=2), c2(16, 1, 8, frozen=1),
             c1(32, 1, 8), c1(32, 1, 16), c1(32, 3, 1), c1(32, 9, 1), c1(32, 3, 1, length=1024), c1(32, 1, 8, stride=2),
             c1(32, 1, 4, dilation=3), c1(32, 3, 4)]
    out = []
    for kind, config, b in dense:
        key = kind + ":gemm" if _aten_gemm(kind, config, b) else kind
        out.append({"kind": kind, "config": config, "batch_size": b, "key": key})
    assert {q["key"] for q in out} == {"conv2d", "conv2d:gemm", "conv1d", "conv1d:gemm"}
    out.append({"kind": "conv2d", "config": dict(dense[1][1], groups=32), "batch_size": 8, "key": "conv2d:grouped"})
    out.append({"kind": "conv2d", "config": dict(dense[1][1], kernel=True), "batch_size": 8, "key": "conv2d"})
    out.append({"kind": "conv2d", "config": {"in_channels": 8, "kernel": 1, "stride": 1}, "batch_size": 8,
                "key": "conv2d"})  # no height: the rule cannot read it
    out.append({"kind": "linear", "config": {"in_features": 8, "out_features": 8}, "batch_size": 1, "key": "linear"})
    return out


def write_gemm_case():
    """``time_gemm``: a dense conv2d entry and a ``conv2d:gemm`` entry (the convs PyTorch at one thread runs by
    im2col and a matrix product: 1x1 stride-1 convs below batch 16, small batch-1 convs), the variant's law
    SYNTHETIC: 0.3x the dense one; a relu and an output entry. Queries and models at batch 1, 8 and 16 mix 1x1 and
    3x3 convs, so a runtime that ignores the batch, or the variant, fails; ``model_key`` lists convs on both sides
    of each clause of ATen's rule with the entry each runtime must name (``_gemm_key_queries``). Its own random
    stream."""
    rng = np.random.default_rng(20261130)

    def pointwise(r):
        return {"in_channels": int(r.choice([8, 16, 32, 64])), "out_channels": int(r.choice([8, 16, 32, 64])),
                "kernel": 1, "stride": 1, "padding": 0, "groups": 1, "height": int(r.choice([4, 8, 14, 28])),
                "width": 0, "bias": 0}

    feats, X, y, T = sample("conv2d", 16, rng, batches=(16, 32, 64))
    gps = {"conv2d": KindGP(features=feats, random_state=0).fit(X, y, noise_std=[0.05 * v for v in y], terms=T)}
    feats, X, y, T = sample("conv2d", 12, rng, config=pointwise, slowdown=0.3, batches=(1, 2, 4, 8, 12))
    gps["conv2d:gemm"] = KindGP(features=feats, random_state=0).fit(X, y, noise_std=[0.05 * v for v in y], terms=T)
    gps.update(fit_kinds([("relu", 6, False), ("output", 5, False)], rng))
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    pw = _fix("conv2d", pointwise(rng))
    small = {**pw, "kernel": 3, "padding": 1, "height": 8, "width": 8}
    queries = [("conv2d", {**pw, "batch_size": 8, "role": "hidden"}),
               ("conv2d", {**pw, "batch_size": 16, "role": "hidden"}),  # the same layer at batch 16: dense
               ("conv2d", {**pw, "stride": 2, "batch_size": 8, "role": "hidden"}),
               ("conv2d", {**small, "batch_size": 1, "role": "input"}),
               ("conv2d", {**small, "batch_size": 2, "role": "input"})]
    models = []
    for bs in (1, 8, 16):
        layers = [with_cost({"name": "stem", "kind": "conv2d", "role": "input", "config": dict(small)})]
        for i in range(6):
            kind = ("conv2d", "conv2d", "relu")[i % 3]
            c = (_fix("conv2d", pointwise(rng)) if i % 3 == 0 else _fix("conv2d", _random_config("conv2d", rng))) \
                if kind == "conv2d" else {"numel": int(rng.choice([400, 1600, 8192]))}
            layers.append(with_cost({"name": f"l{i}", "kind": kind, "role": "hidden", "config": c}))
        layers.append(dict(layers[1], name="twin"))  # a repeated 1x1 layer
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output",
                                 "config": {"in_features": 64, "out_features": 10, "tokens": 1}}))
        models.append((layers, bs))
    expected = expected_for(doc, queries, models)
    expected["model_key"] = _gemm_key_queries()
    write("time_gemm", doc, expected)


def write_stand_in_case():
    """``time_stand_in``: layers marked ``approx`` (stand-ins for operators without a kind, as
    ``--unknown-ops approx`` writes them), two operators of one ``op`` type (MultiheadAttention, four linear
    layers with a repeated twin), two of another (ConvTranspose2d as conv2d), one approx layer naming no op,
    and plain layers of the same kinds: a runtime that ignores ``approx``, or adds the added stds of one op
    as independent, fails. Its own random stream: the other cases are not rewritten."""
    rng = np.random.default_rng(20261127)
    gps = fit_kinds([("conv2d", 14, False), ("linear", 10, False), ("relu", 6, False), ("output", 5, False)], rng)
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    queries = [("linear", {"in_features": 64, "out_features": 256, "tokens": 1, "bias": 1, "batch_size": 16,
                           "role": "hidden"})]
    mha = "MultiheadAttention has no kind: SYNTHETIC stand-in"
    models = []
    for bs in (16, 3):
        layers = [with_cost({"name": "stem", "kind": "conv2d", "role": "input", "op": "Conv2d",
                             "config": _fix("conv2d", _random_config("conv2d", rng))}),
                  with_cost({"name": "act", "kind": "relu", "role": "hidden", "op": "ReLU", "config": {"numel": 4704}})]
        for a in ("att0", "att1"):
            for part in ("in_proj", "scores", "out_proj"):
                c = _random_config("linear", rng)
                layers.append(with_cost({"name": f"{a}.{part}", "kind": "linear", "role": "hidden",
                                         "op": "MultiheadAttention", "approx": mha, "config": c}))
        layers.append(dict(layers[-1], name="att1.out_proj_twin"))  # identical: shares its latent cost
        for t in ("up0", "up1"):
            layers.append(with_cost({"name": t, "kind": "conv2d", "role": "hidden", "op": "ConvTranspose2d",
                                     "approx": "ConvTranspose2d has no kind: SYNTHETIC stand-in",
                                     "config": _fix("conv2d", _random_config("conv2d", rng))}))
        layers.append(with_cost({"name": "odd", "kind": "relu", "role": "hidden",
                                 "approx": "no op named: SYNTHETIC", "config": {"numel": 1600}}))
        layers.append(with_cost({"name": "fc", "kind": "linear", "role": "hidden", "op": "Linear",
                                 "config": _random_config("linear", rng)}))
        # a checkpointed block (thor-sdk layers --unknown-ops approx): its forward's share of each step more, one
        # layer also a stand-in, and a twin of a recomputed layer that is not recomputed (a key of its own)
        ck = "its forward runs again in backward (torch.utils.checkpoint): SYNTHETIC"
        block = _fix("conv2d", _random_config("conv2d", rng))
        layers.append(with_cost({"name": "ck.conv", "kind": "conv2d", "role": "hidden", "op": "Conv2d",
                                 "approx": ck, "recompute": 1 / 3, "config": block}))
        layers.append(with_cost({"name": "ck.act", "kind": "relu", "role": "hidden", "op": "ReLU", "approx": ck,
                                 "recompute": 0.5, "config": {"numel": 4704}}))
        layers.append(with_cost({"name": "ck.up", "kind": "conv2d", "role": "hidden", "op": "ConvTranspose2d",
                                 "approx": "ConvTranspose2d has no kind: SYNTHETIC stand-in; " + ck,
                                 "recompute": 1 / 3, "config": _fix("conv2d", _random_config("conv2d", rng))}))
        layers.append(with_cost({"name": "plain.conv", "kind": "conv2d", "role": "hidden", "op": "Conv2d",
                                 "config": block}))
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output", "op": "Linear",
                                 "config": {"in_features": 84, "out_features": 10, "tokens": 1}}))
        models.append((layers, bs))
    write("time_stand_in", doc, expected_for(doc, queries, models))


def _each_with_a_relu(n, layer, rng, numels):
    """``n`` layers made by ``layer(i)``, each followed by a relu of a size drawn from ``numels`` (drawn in that
    order: a case's random stream is as it was), then a 10-way output head; with their cost terms."""
    out = []
    for i in range(n):
        out.append(with_cost(layer(i)))
        out.append(with_cost({"name": f"r{i}", "kind": "relu", "role": "hidden",
                              "config": {"numel": int(rng.choice(numels))}}))
    out.append(with_cost({"name": "head", "kind": "output", "role": "output",
                          "config": {"in_features": 64, "out_features": 10, "tokens": 1}}))
    return out


def _conv1d_config(rng, dilation=True):
    """A conv1d config, dilated 1, 2 or 4 (``dilation``), else with no ``dilation`` key (a layer list written
    before dilation was a feature)."""
    c = {"in_channels": int(rng.choice([3, 8, 16, 32])), "out_channels": int(rng.choice([8, 16, 32, 64])),
         "kernel": int(rng.choice([2, 3, 5])), "stride": 1, "padding": int(rng.choice([0, 1, 2])), "groups": 1,
         "length": int(rng.choice([64, 96, 128])), "bias": int(rng.choice([0, 1]))}
    if dilation:
        c["dilation"] = int(rng.choice([1, 2, 4]))
    return c


def _fit_conv1d(rng, features, dilated):
    """A conv1d ``KindGP`` over ``features`` fitted on 16 SYNTHETIC samples (5% noise), dilated 1, 2 or 4 where
    ``dilated`` (1 + 0.25 log2(dilation) times the undilated cost), else with no ``dilation`` key."""
    X, y, T = [], [], []
    for _ in range(16):
        c = _conv1d_config(rng, dilation=dilated)
        bs, role = int(rng.choice([1, 8, 16, 32, 64])), str(rng.choice(["input", "hidden"]))
        y.append(synthetic_cost("conv1d", c, bs, role, rng) * (1.0 + 0.25 * math.log2(c.get("dilation", 1))))
        X.append(feature_vector("conv1d", c, bs, role, features))
        T.append(at_batch(cost_terms("conv1d", c, role), bs))
    return KindGP(features=features, random_state=0).fit(X, y, noise_std=[0.05 * v for v in y], terms=T)


def write_defaults_case():
    """``time_defaults``: a conv1d entry whose features include ``dilation`` and whose ``defaults`` read a missing
    one as 1 (SYNTHETIC law: 1 + 0.25 log2(dilation) times the undilated one), with relu and output; queries and
    layers leave ``dilation`` out, give it as 1 (the same answer) or as 4. A runtime that ignores ``defaults``
    refuses the layers without it; one that reads a missing feature as 0 gets other numbers. Its own random
    stream: the other cases are not rewritten."""
    rng = np.random.default_rng(20261128)
    gps = fit_kinds([("relu", 6, False), ("output", 5, False)], rng)
    gps["conv1d"] = _fit_conv1d(rng, features_before_frozen("conv1d"), dilated=True)
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    assert doc["kinds"]["conv1d"]["defaults"] == {"dilation": 1}
    base = _conv1d_config(rng, dilation=False)
    queries = [("conv1d", {**base, "batch_size": 16, "role": "hidden"}),
               ("conv1d", {**base, "dilation": 1, "batch_size": 16, "role": "hidden"}),
               ("conv1d", {**base, "dilation": 4, "batch_size": 16, "role": "input"})]
    models = []
    for n_layers, bs in ((6, 16), (3, 4)):
        layers = [with_cost({"name": "stem", "kind": "conv1d", "role": "input",
                             "config": _conv1d_config(rng, dilation=False)})]
        layers += _each_with_a_relu(n_layers, lambda i: {"name": f"c{i}", "kind": "conv1d", "role": "hidden",
                                                         "config": _conv1d_config(rng, dilation=i % 2 == 1)},
                                    rng, [1024, 4096])
        models.append((layers, bs))
    write("time_defaults", doc, expected_for(doc, queries, models))


def write_unread_case():
    """``time_unread``: conv1d fitted on its features but ``dilation`` (SYNTHETIC costs of undilated convs), as an
    estimator written before dilation was a feature, with relu and output; layers dilated 2 and 4 (some of one
    ``op``), dilated 1, leaving it out, and a stand-in already marked ``approx`` that is dilated too. A runtime that
    does not mark the dilated ones gets smaller stds; one that marks the stand-in twice, larger. Its own random
    stream: the other cases are not rewritten."""
    rng = np.random.default_rng(20261129)
    gps = fit_kinds([("relu", 6, False), ("output", 5, False)], rng)
    gps["conv1d"] = _fit_conv1d(rng, [f for f in features_before_frozen("conv1d") if f != "dilation"], dilated=False)
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    assert "defaults" not in doc["kinds"]["conv1d"] and "dilation" not in doc["kinds"]["conv1d"]["features"]
    base = _conv1d_config(rng, dilation=False)
    queries = [("conv1d", {**base, "batch_size": 16, "role": "hidden"})]
    models = []
    for bs, dilations in ((16, (None, 1, 2, 4, 2, 8)), (4, (4, None, 1))):
        layers = [with_cost({"name": "stem", "kind": "conv1d", "role": "input", "op": "Conv1d",
                             "config": _conv1d_config(rng, dilation=False)})]
        for i, d in enumerate(dilations):
            c = _conv1d_config(rng, dilation=False)
            if d is not None:
                c["dilation"] = d
            layers.append(with_cost({"name": f"c{i}", "kind": "conv1d", "role": "hidden",
                                     **({"op": "Conv1d"} if i % 2 else {}), "config": c}))
            layers.append(with_cost({"name": f"r{i}", "kind": "relu", "role": "hidden",
                                     "config": {"numel": int(rng.choice([1024, 4096]))}}))
        c = dict(_conv1d_config(rng, dilation=False), dilation=2)
        layers.append(with_cost({"name": "standin", "kind": "conv1d", "role": "hidden", "op": "ConvTranspose1d",
                                 "approx": "ConvTranspose1d has no kind: SYNTHETIC stand-in", "config": c}))
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output",
                                 "config": {"in_features": 64, "out_features": 10, "tokens": 1}}))
        models.append((layers, bs))
    expected = expected_for(doc, queries, models)
    assert all(e.get("layer_unread") for e in expected["estimate"])
    write("time_unread", doc, expected)


def write_frozen_case():
    """``time_frozen``: a linear entry fitted on trained and frozen layers (``frozen`` a GP input, read as 0 where
    left out: its ``defaults``; SYNTHETIC costs of the frozen layers' FLOPs, which lack the weight gradient and
    update), a conv1d entry written before ``frozen`` was a feature, relu and output. Layers and queries leave
    ``frozen`` out or give it as 0 or 1; a frozen conv1d reads as its trained twin and is approximated, as in
    ``time_unread``; a conv1d at frozen 0 or without it is not. Its own random stream: the other cases are not
    rewritten."""
    rng = np.random.default_rng(20261130)
    gps = fit_kinds([("relu", 6, False), ("output", 5, False)], rng)
    feats, X, y, T = sample("linear", 20, rng, features=gp_features("linear"),
                            config=lambda r: dict(_random_config("linear", r), frozen=int(r.integers(0, 2))))
    gps["linear"] = KindGP(features=feats, random_state=0).fit(X, y, noise_std=[0.05 * v for v in y], terms=T)
    gps["conv1d"] = _fit_conv1d(rng, features_before_frozen("conv1d"), dilated=True)
    doc = synthetic_estimator(gps, whole_rel_std=0.05)
    assert doc["kinds"]["linear"]["defaults"] == {"frozen": 0} and "frozen" not in doc["kinds"]["conv1d"]["features"]
    base = _fix("linear", _random_config("linear", rng))
    queries = [("linear", {**base, "batch_size": 16, "role": "hidden"}),
               ("linear", {**base, "frozen": 0, "batch_size": 16, "role": "hidden"}),
               ("linear", {**base, "frozen": 1, "batch_size": 16, "role": "hidden"}),
               ("linear", {**base, "frozen": 1, "batch_size": 16, "role": "input"})]
    models = []
    for bs, frozen in ((16, (1, 1, None, 0, 1)), (4, (0, 1, None))):
        layers = []
        for i, f in enumerate(frozen):
            c = _fix("linear", _random_config("linear", rng))
            if f is not None:
                c["frozen"] = f
            layers.append(with_cost({"name": f"fc{i}", "kind": "linear", "role": "input" if i == 0 else "hidden",
                                     "config": c}))
            layers.append(with_cost({"name": f"r{i}", "kind": "relu", "role": "input" if f == 1 and i == 0
                                     else "hidden", "config": {"numel": int(rng.choice([256, 1024]))}}))
        for i, f in enumerate((1, 0, None, 1)):
            c = dict(_conv1d_config(rng, dilation=False), dilation=1)
            if f is not None:
                c["frozen"] = f
            layers.append(with_cost({"name": f"c{i}", "kind": "conv1d", "role": "hidden", "op": "Conv1d",
                                     "config": c}))
        layers.append(with_cost({"name": "head", "kind": "output", "role": "output",
                                 "config": {"in_features": 64, "out_features": 10, "tokens": 1}}))
        models.append((layers, bs))
    expected = expected_for(doc, queries, models)
    assert all(e.get("layer_unread") for e in expected["estimate"])
    write("time_frozen", doc, expected)


def _one_kind_case(kind, n, config_fn, batches, law, rng):
    """A synthetic estimator: ``kind`` fitted on ``n`` costs ``law(config, batch, role)`` of configs ``config_fn(rng)``
    at ``batches`` and either role (3% noise), beside relu and output entries fitted as ``fit_kinds`` fits them."""
    feats, X, y, T = gp_features(kind), [], [], []
    for _ in range(n):
        c = config_fn(rng)
        bs = int(rng.choice(batches))
        role = str(rng.choice(["input", "hidden"]))
        X.append(feature_vector(kind, c, bs, role, feats))
        y.append(law(c, bs, role))
        T.append(at_batch(cost_terms(kind, c, role), bs))
    gps = fit_kinds([("relu", 6, False), ("output", 5, False)], rng)
    gps[kind] = KindGP(features=feats, random_state=0).fit(X, y, noise_std=[0.03 * v for v in y], terms=T)
    return synthetic_estimator(gps, whole_rel_std=0.05)


def write_step_bytes_case():
    """``time_step_bytes`` (version 3): a linear entry whose mean function charges the bytes moved once per step
    (its cost term ``bytes_fixed``: weights read, gradients written, the update) at a rate of their own
    (``per_step_byte``), fitted on SYNTHETIC costs that charge them a tenth of the per-sample bytes' rate; a relu
    entry (no parameters: one rate) and an output entry beside it. Layers at batch 1 (weight traffic dominates)
    and 64. Each runtime must cost ``per_byte * (B - S) + per_step_byte * S`` where an entry has
    ``per_step_byte`` and ``per_byte * B`` where it has none. Its own random stream."""
    rng = np.random.default_rng(20261201)

    def law(c, bs, role):
        t = cost_terms("linear", c, role)
        flops, nbytes, _, step = at_batch(t, bs)
        return (2e-5 + 2e-11 * flops + 1e-9 * (nbytes - step) + 1e-10 * step) * float(np.exp(rng.normal(0, 0.03)))

    doc = _one_kind_case("linear", 24, lambda r: dict(_random_config("linear", r), frozen=0), [1, 2, 8, 32, 128], law,
                         rng)
    assert doc["version"] == 3 and "per_step_byte" in doc["kinds"]["linear"]["mean_function"]
    assert all("per_step_byte" not in doc["kinds"][k]["mean_function"] for k in ("relu", "output"))
    base = dict(_random_config("linear", rng), frozen=0)
    queries = [("linear", {**base, "batch_size": 1, "role": "hidden"}),
               ("linear", {**base, "batch_size": 64, "role": "input"}),
               ("relu", {"numel": 512, "batch_size": 4, "role": "hidden"})]
    models = []
    for bs in (1, 64):
        models.append((_each_with_a_relu(4, lambda i: {"name": f"fc{i}", "kind": "linear",
                                                       "role": "input" if i == 0 else "hidden",
                                                       "config": dict(_random_config("linear", rng), frozen=0)},
                                         rng, [256, 1024]), bs))
    write("time_step_bytes", doc, expected_for(doc, queries, models))


def write_per_call_case():
    """``time_per_call`` (version 4): an lstm entry whose mean function pays a cost once per layer call
    (``per_call``) beside its per-launch overhead (launches = time steps x layers), fitted on SYNTHETIC costs with a
    1 ms fixed cost and 5 us per step; a relu and an output entry without one. Queries and models at 4 and 256
    time steps. Each runtime must add ``per_call`` where an entry has it and nothing where it has none. Its own
    random stream."""
    rng = np.random.default_rng(20261202)

    def law(c, bs, role):
        flops, nbytes, launches, _ = at_batch(cost_terms("lstm", c, role), bs)
        return (1e-3 + 5e-6 * launches + 1e-11 * flops + 2e-10 * nbytes) * float(np.exp(rng.normal(0, 0.03)))

    def config(r):
        return {"input_size": int(r.integers(4, 64)), "hidden_size": int(r.integers(16, 160)),
                "seq_len": int(r.choice([2, 4, 8, 32, 64, 128, 256])), "num_layers": int(r.choice([1, 2])), "frozen": 0}

    doc = _one_kind_case("lstm", 30, config, [1, 4, 16, 64], law, rng)
    assert doc["version"] == 4 and doc["kinds"]["lstm"]["mean_function"]["per_call"] > 0
    assert all("per_call" not in doc["kinds"][k]["mean_function"] for k in ("relu", "output"))
    base = {"input_size": 12, "hidden_size": 48, "num_layers": 1, "frozen": 0}
    queries = [("lstm", {**base, "seq_len": 4, "batch_size": 8, "role": "input"}),
               ("lstm", {**base, "seq_len": 256, "batch_size": 8, "role": "hidden"}),
               ("relu", {"numel": 512, "batch_size": 4, "role": "hidden"})]
    models = []
    for seq, bs in ((4, 8), (256, 1)):
        layers = [{"name": "rnn", "kind": "lstm", "role": "input", "config": dict(base, seq_len=seq)},
                  {"name": "act", "kind": "relu", "role": "hidden", "config": {"numel": 48 * seq}},
                  {"name": "head", "kind": "output", "role": "output",
                   "config": {"in_features": 48, "out_features": 6, "tokens": 1}}]
        models.append(([with_cost(layer) for layer in layers], bs))
    write("time_per_call", doc, expected_for(doc, queries, models))


def write_shared_launch_cases():
    """``time_shared_launch`` (version 5) and ``time_shared_launch_v4`` (the same file marked version 4): a conv2d and
    a linear entry fitted on SYNTHETIC costs whose fixed cost a layer that runs no backward (frozen, role input) pays
    a quarter of (its ``launches`` 0.25: ``runtime.terms.FORWARD_ONLY_SHARED``), beside relu and output. Queries and
    models hold frozen input convs and linears (launches 0.25) and trained ones (1). A runtime must cost
    ``overhead * 0.25`` for them from a version-5 file and ``overhead * max(1, L)`` from a version-4 one. Their own
    random stream."""
    rng = np.random.default_rng(20261203)

    def law(kind):
        def cost(c, bs, role):
            flops, nbytes, launches, _ = at_batch(cost_terms(kind, c, role), bs)
            return (4e-4 * launches + 1e-11 * flops + 2e-10 * nbytes) * float(np.exp(rng.normal(0, 0.03)))
        return cost

    def conv(r):
        return dict(_fix("conv2d", _random_config("conv2d", r)), frozen=int(r.integers(0, 2)))

    def dense(r):
        return dict(_fix("linear", _random_config("linear", r)), frozen=int(r.integers(0, 2)))

    doc = _one_kind_case("conv2d", 30, conv, [16, 32, 64], law("conv2d"), rng)
    other = _one_kind_case("linear", 24, dense, [16, 32, 64], law("linear"), rng)
    doc["kinds"]["linear"] = other["kinds"]["linear"]
    assert doc["version"] == 5
    c0, d0 = conv(rng), dense(rng)
    queries = [("conv2d", {**c0, "frozen": 1, "batch_size": 16, "role": "input"}),
               ("conv2d", {**c0, "frozen": 0, "batch_size": 16, "role": "input"}),
               ("conv2d", {**c0, "frozen": 1, "batch_size": 32, "role": "hidden"}),
               ("linear", {**d0, "frozen": 1, "batch_size": 16, "role": "input"}),
               ("relu", {"numel": 512, "batch_size": 16, "role": "input"})]
    models = []
    for bs in (16, 64):
        layers = [with_cost({"name": "stem", "kind": "conv2d", "role": "input", "config": dict(conv(rng), frozen=1)}),
                  with_cost({"name": "act", "kind": "relu", "role": "input", "config": {"numel": 2048}}),
                  with_cost({"name": "block", "kind": "conv2d", "role": "input", "config": dict(conv(rng), frozen=1)}),
                  with_cost({"name": "fc", "kind": "linear", "role": "hidden", "config": dict(dense(rng), frozen=0)}),
                  with_cost({"name": "head", "kind": "output", "role": "output",
                             "config": {"in_features": 32, "out_features": 10, "tokens": 1}})]
        assert layers[0]["cost"]["launches"] == 0.25 and layers[3]["cost"]["launches"] == 1.0
        models.append((layers, bs))
    write("time_shared_launch", doc, expected_for(doc, queries, models))
    old = dict(doc, version=4)
    write("time_shared_launch_v4", old, expected_for(old, queries, models))


def main():
    only = {"--gemm-only": write_gemm_case, "--per-call-only": write_per_call_case,
            "--shared-launch-only": write_shared_launch_cases,
            "--step-bytes-only": write_step_bytes_case, "--frozen-only": write_frozen_case,
            "--unread-only": write_unread_case,
            "--defaults-only": write_defaults_case,
            "--levels-only": write_level_vectors, "--training-only": write_training_vectors,
            "--grouped-only": write_grouped_case, "--stand-in-only": write_stand_in_case,
            "--table-only": write_table_vectors}
    unknown = [a for a in sys.argv[1:] if a not in only]
    if unknown:  # an unknown flag (--help among them) rewrites nothing
        sys.exit(f"unknown option(s) {' '.join(unknown)}; with none, every vector file is rewritten; one of "
                 f"{', '.join(sorted(only))} rewrites only its files")
    for flag, write_case in only.items():  # one case's files rewritten, the others left as they are
        if flag in sys.argv[1:]:
            write_case()
            return
    write_table_vectors()  # needs no random numbers: written first, as before the other files' generator starts
    rng = np.random.default_rng(20250101)

    # --- time: positive costs, repeated layers, a whole-model term
    gps = fit_kinds([("conv2d", 14, False), ("relu", 8, False), ("maxpool2d", 6, False), ("output", 5, False)], rng)
    doc = synthetic_estimator(gps, whole_rel_std=0.08)
    queries = [("conv2d", {**_fix("conv2d", _random_config("conv2d", rng)), "batch_size": 32, "role": "input"}),
               ("conv2d", {**_fix("conv2d", _random_config("conv2d", rng)), "batch_size": 8, "role": 0}),
               ("relu", {"numel": 4704, "batch_size": 16, "role": "hidden"}),
               ("maxpool2d", {**_fix("maxpool2d", _random_config("maxpool2d", rng)), "batch_size": 64, "role": 1}),
               ("output", {"in_features": 84, "out_features": 10, "tokens": 1, "batch_size": 32})]
    kinds = ["conv2d", "relu", "maxpool2d", "output"]
    models = [(model_layers(kinds, rng, 20, 9, 32), 32), (model_layers(kinds, rng, 7, 7, 4), 4)]
    write("time_profile", doc, expected_for(doc, queries, models))

    # --- energy: noisy subtraction (some costs <= 0, floored), n=1 kind, duplicated rows, far queries
    gps = fit_kinds([("linear", 10, False), ("dropout", 1, False), ("relu", 6, True), ("lstm", 6, False)], rng,
                    linear=True)
    assert sum(g.n_floored_ for g in gps.values()) > 0, "regenerate with more noise: no sample was floored"
    doc = synthetic_estimator(gps, runtime="onnxruntime", metric="energy", unit="J", unit_per_flop=5e-11)
    queries = [("linear", {"in_features": 400, "out_features": 120, "tokens": 1, "bias": 1, "batch_size": 32,
                           "role": "hidden"}),
               ("linear", {"in_features": 8192, "out_features": 4096, "tokens": 1, "bias": 0, "batch_size": 1024,
                           "role": "input"}),
               ("dropout", {"numel": 120, "p": 0.5, "batch_size": 32, "role": "hidden"}),
               ("relu", {"numel": 84, "batch_size": 1, "role": "input"})]
    kinds = ["linear", "relu", "dropout", "lstm"]
    models = [(model_layers(kinds, rng, 15, 5, 16), 16), (model_layers(kinds, rng, 3, 3, 1), 1)]
    write("energy_floored", doc, expected_for(doc, queries, models))
    write_training_vectors()  # from the estimators and models just written
    write_level_vectors()
    write_grouped_case()
    write_stand_in_case()
    write_defaults_case()
    write_unread_case()
    write_frozen_case()
    write_step_bytes_case()
    write_gemm_case()
    write_per_call_case()


if __name__ == "__main__":
    main()
