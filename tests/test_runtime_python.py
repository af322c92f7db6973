"""The stdlib estimator runtime (format version 3, and 2): agreement with the numpy model, shared vectors,
validation, bounds that keep every number finite, and no heavy imports."""

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from thor_sdk.errors import FormatError, NotFoundError, ThorError, UsageError
from thor_sdk.fitting.estimator import build_estimator
from thor_sdk.fitting.pipeline import sample_terms
from thor_sdk.fitting.gp import KindGP
from thor_sdk.layers.kinds import DEFAULT_FEATURES, feature_vector, gp_features, model_key
from thor_sdk.runtime import Estimator, load_estimator
from thor_sdk.runtime.terms import at_batch, at_least_one_launch, cost_terms

VECTORS = Path(__file__).resolve().parent / "vectors"
CASES = sorted(p.name[len("expected_"):-len(".json")] for p in VECTORS.glob("expected_*.json"))
RTOL = 1e-9


def close(a, b, rtol=RTOL):
    return abs(a - b) <= rtol * abs(b) + 1e-300


def _samples(kind, configs, rng, roles=("input", "hidden")):
    out = []
    for c in configs:
        b = int(rng.choice([1, 4, 16, 64]))
        role = "output" if kind == "output" else str(rng.choice(roles))
        flops, nbytes = at_batch(cost_terms(kind, c, role), b)[:2]
        out.append({"kind": kind, "config": c, "batch_size": b, "role": role,
                    "value": (3e-5 + flops / 4e9 + nbytes / 8e9) * float(np.exp(rng.normal(0, 0.05)))})
    return out


def _fit(samples, **kw):
    kind = samples[0]["kind"]
    X = [feature_vector(kind, s["config"], s["batch_size"], s["role"]) for s in samples]
    y = [s["value"] for s in samples]
    return KindGP(gp_features(kind), **kw).fit(X, y, noise_std=[0.05 * v for v in y], terms=sample_terms(samples))


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(7)
    relu = _samples("relu", [{"numel": int(n)} for n in rng.integers(64, 200000, 40)], rng)
    lin = _samples("linear", [{"in_features": int(a), "out_features": int(b), "tokens": 1, "bias": 1}
                              for a, b in rng.integers(8, 1024, (30, 2))], rng)
    out = _samples("output", [{"in_features": int(a), "out_features": 10, "tokens": 1}
                              for a in rng.integers(8, 2048, 12)], rng)
    gps = {"relu": _fit(relu, max_inducing=16), "linear": _fit(lin), "output": _fit(out)}
    doc = build_estimator(gps, device={"name": "test"}, runtime="torch", metric="time", unit="s",
                          flops_baseline={"unit_per_flop": 1e-10}, provenance={}, whole_model={"rel_std": 0.05})
    doc = json.loads(json.dumps(doc))
    ref = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    return doc, ref, load_estimator(doc)


def _layers(rng, n):
    layers = [{"name": "in", "kind": "linear", "role": "input",
               "config": {"in_features": 300, "out_features": 128, "tokens": 1, "bias": 1}}]
    for i in range(n):
        if i % 2:
            layers.append({"name": f"r{i}", "kind": "relu", "role": "hidden",
                           "config": {"numel": int(rng.choice([128, 5000, 128]))}})
        else:
            layers.append({"name": f"l{i}", "kind": "linear", "role": "hidden",
                           "config": {"in_features": 128, "out_features": 128, "tokens": 1, "bias": 1}})
    layers.append({"name": "head", "kind": "output", "role": "output",
                   "config": {"in_features": 128, "out_features": 10, "tokens": 1}})
    return layers


def unread_feature(layer, features):
    """A layer setting a defaulted feature (a conv's dilation) that its kind's entry predates: approximated."""
    return any(f not in features and layer["config"].get(f, d) != d
               for f, d in DEFAULT_FEATURES.get(layer["kind"], {}).items())


def _numpy_total(ref, doc, layers, b):
    mean, var = 0.0, 0.0
    def entry(l):  # a structural variant's entry (at batch b) where the estimator has one, else the kind's
        key = model_key(l["kind"], l["config"], b)
        return key if key in ref else l["kind"]

    for name, gp in ref.items():
        ls = [l for l in layers if entry(l) == name]
        if not ls:
            continue
        X = [feature_vector(l["kind"], l["config"], b, l["role"], gp.features) for l in ls]
        # as the file's version reads them: before 5, every layer at least one launch
        T = [at_batch(at_least_one_launch(cost_terms(l["kind"], l["config"], l["role"]), doc["version"]), b)
             for l in ls]
        m, cov = gp.predict(X, terms=T, return_cov=True)
        scale = np.array([1.0 + l.get("recompute", 0.0) for l in ls])  # a recomputed forward's share more
        mean += float(m @ scale)
        var += float(scale @ cov @ scale)
    by_op = {}  # a layer marked approx: half its mean more std, added up linearly over one op's layers
    for i, l in enumerate(layers):
        if "approx" in l or unread_feature(l, ref[entry(l)].features):
            gp = ref[entry(l)]
            m = gp.predict([feature_vector(l["kind"], l["config"], b, l["role"], gp.features)],
                           terms=[at_batch(at_least_one_launch(cost_terms(l["kind"], l["config"], l["role"]),
                                                               doc["version"]), b)])
            by_op.setdefault(l.get("op", i), []).append(0.5 * float(m[0]) * (1.0 + l.get("recompute", 0.0)))
    var += sum(sum(e) ** 2 for e in by_op.values())
    rel = doc["whole_model"]["rel_std"]
    return mean, math.sqrt(var + (rel * mean) ** 2)


@pytest.mark.parametrize("kind", ["relu", "linear", "output"])
def test_predict_layer_matches_the_numpy_model(fitted, kind):
    doc, ref, est = fitted
    rng = np.random.default_rng(1)
    for s in _samples(kind, [{"numel": 777}] if kind == "relu" else
                      [{"in_features": 100, "out_features": 50, "tokens": 1, "bias": 0}] if kind == "linear" else
                      [{"in_features": 64, "out_features": 10, "tokens": 1}], rng):
        feats = dict(s["config"], batch_size=s["batch_size"], role=s["role"])
        m, sd = est.predict_layer(kind, feats)
        X = [feature_vector(kind, s["config"], s["batch_size"], s["role"])]
        mr, sr = ref[kind].predict(X, terms=sample_terms([s]), return_std=True)
        assert close(m, mr[0]) and close(sd, sr[0])


@pytest.mark.parametrize("batch_size", [1, 16, 1000])
def test_estimate_matches_numpy_joint_covariance(fitted, batch_size):
    doc, ref, est = fitted
    layers = _layers(np.random.default_rng(3), 9)
    out = est.estimate(layers, batch_size)
    mean, std = _numpy_total(ref, doc, layers, batch_size)
    assert close(out["total"]["mean"], mean) and close(out["total"]["std"], std)
    assert out["layers_total"]["std"] < out["total"]["std"]
    assert out["runtime"] == "torch" and out["device"] == "test"


def test_identical_layers_share_their_cost(fitted):
    _, _, est = fitted
    one = [{"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 5000}}]
    a, b = est.estimate(one, 8)["layers_total"], est.estimate(one * 4, 8)["layers_total"]
    assert close(b["mean"], 4 * a["mean"])
    # strongly correlated (shared latent cost), not independent: std grows about 4x, not 2x
    assert 3.0 * a["std"] < b["std"] <= 4.0 * a["std"] * (1 + 1e-9)


def test_a_repeated_layer_is_read_once_and_counted_each_time(fitted):
    """Repeated layers (dicts equal in kind, role, config and cost) are read once per estimate: the result is the
    one each copy read alone gives, copies whose config cannot be hashed (a list) or whose order differs too."""
    _, _, est = fitted
    lin = {"name": "l", "kind": "linear", "role": "hidden",
           "config": {"in_features": 128, "out_features": 64, "tokens": 1, "bias": 1}}
    reordered = dict(lin, name="l2", config=dict(reversed(list(lin["config"].items()))))
    listy = dict(lin, name="l3", config=dict(lin["config"], note=[1, 2]))  # an extra entry no kind reads
    with_cost = dict(lin, name="l4", cost=cost_terms("linear", lin["config"], "hidden"))
    layers = [lin, dict(lin, name="copy"), reordered, listy, with_cost, dict(lin, role="input")]
    out = est.estimate(layers, 8)
    hidden = est.predict_layer("linear", dict(lin["config"], batch_size=8, role="hidden"))
    assert all(close(r["mean"], hidden[0]) and close(r["std"], hidden[1]) for r in out["layers"][:5])
    assert out["layers"][5]["mean"] != out["layers"][0]["mean"]  # another role is another layer
    assert [r["name"] for r in out["layers"]] == ["l", "copy", "l2", "l3", "l4", "l"]
    # an error in the first copy is raised for it, with its index
    bad = dict(lin, config=dict(lin["config"], in_features=float("nan")))
    with pytest.raises(UsageError, match="layer 1"):
        est.estimate([lin, bad, bad], 8)
    # equal but not alike: True == 1 (refused as a feature) is not a copy of 1, in a config or in a cost
    with pytest.raises(UsageError, match="layer 1"):
        est.estimate([lin, dict(lin, config=dict(lin["config"], bias=True))], 8)
    flag = dict(with_cost, cost=dict(with_cost["cost"], launches=True))
    with pytest.raises(UsageError, match="layer 1"):
        est.estimate([dict(with_cost, cost=dict(with_cost["cost"], launches=1)), flag], 8)


@pytest.mark.parametrize("value", [0, 1, 7, 2 ** 53, 2 ** 53 + 1, 10 ** 400, -1, -2, -0.5, -1.0, -1.5, 0.0, -0.0,
                                   1e300, 1e308 * 10, float("nan"), -float("inf"), True, False, "3", None, 3.5,
                                   -1.0 + 1e-12])
def test_the_fast_reading_of_a_feature_agrees_with_every_check(fitted, value):
    """``KindModel.vector`` reads plain ints and floats the short way; whatever it reads, it reads as the full
    checks do, and whatever those refuse it refuses with their message."""
    _, _, est = fitted
    model = est._model("linear")
    values = {"in_features": value, "out_features": 64, "tokens": 1, "bias": 1, "frozen": 0, "batch_size": 8,
              "role": 0, "train_flops": 1e6, "train_bytes": 1e5}
    _agree(model, values)
    # a padded input (conv2d's in_channels_pad8 ...) read from its base count
    conv = load_estimator(str(VECTORS / "estimator_time_profile.json"))._model("conv2d")
    assert any(conv.padded)
    _agree(conv, {"in_channels": value, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
                  "height": 8, "width": 8, "bias": 0, "batch_size": 8, "role": 1, "train_flops": 1e6,
                  "train_bytes": 1e5})


def _agree(model, values):

    def slow():
        return [model._value(f, p, values, "here") for f, p in zip(model.features, model.padded)]

    try:
        expected = slow()
    except UsageError as e:
        with pytest.raises(UsageError) as got:
            model.vector(values, "here")
        assert str(got.value) == str(e)
    else:
        got = model.vector(values, "here")
        assert got == expected and all(type(x) is float for x in got)


def test_batch_size_moves_the_estimate_and_far_batches_are_less_sure(fitted):
    _, _, est = fitted
    layer = [{"name": "l", "kind": "linear", "role": "hidden",
              "config": {"in_features": 256, "out_features": 256, "tokens": 1, "bias": 1}}]
    got = {b: est.estimate(layer, b)["layers_total"] for b in (8, 32, 1024, 100000)}
    assert got[8]["mean"] < got[32]["mean"] < got[1024]["mean"] < got[100000]["mean"]
    rel = {b: g["std"] / g["mean"] for b, g in got.items()}
    assert rel[100000] > rel[32]


def test_far_from_every_sample_falls_back_to_the_mean_function_with_the_prior_width(fitted):
    doc, _, est = fitted
    k = doc["kinds"]["linear"]
    cfg = {"in_features": 10 ** 6, "out_features": 10 ** 5, "tokens": 4096, "bias": 1}
    m, sd = est.predict_layer("linear", dict(cfg, batch_size=4096, role="input"))
    flops, nbytes = at_batch(cost_terms("linear", cfg, "input"), 4096)[:2]
    mf = k["mean_function"]
    base = mf["overhead"] + mf["per_flop"] * flops + mf["per_byte"] * nbytes
    var = k["kernel"]["constant"] + k["kernel"]["noise_level"]
    assert close(m, base * math.exp(k["residual_offset"] + var / 2), 1e-6)
    assert close(sd / m, math.sqrt(math.expm1(var)), 1e-6)
    assert math.isfinite(m) and m > 0


def test_layers_outside_the_samples_say_so(fitted):
    """The fit stores each input's range over its samples; a layer outside it is marked, one inside is not, and
    ``thor_sdk.estimate`` warns, naming the feature and the range."""
    from thor_sdk.api import estimate_layers
    from thor_sdk.layers import ModelLayers

    doc, _, est = fitted
    k = doc["kinds"]["linear"]
    assert len(k["feature_range"]) == len(k["features"]) and all(lo <= hi for lo, hi in k["feature_range"])
    lo, hi = k["feature_range"][k["features"].index("in_features")]
    inside = {"name": "a", "kind": "linear", "role": "hidden",
              "config": {"in_features": int(lo + hi) // 2, "out_features": 64, "tokens": 1, "bias": 1}}
    far = dict(inside, name="b", config=dict(inside["config"], in_features=int(hi) * 4))
    r = est.estimate([inside, far], 16)
    assert "outside" not in r["layers"][0]
    got = r["layers"][1]["outside"]
    assert got[0]["feature"] == "in_features" and got[0]["value"] == int(hi) * 4 and got[0]["probed"] == [lo, hi]
    ml = ModelLayers(name="m", input_shape=[int(lo + hi) // 2], input_dtype="float32", layers=[inside, far])
    w = [x for x in estimate_layers(est, ml, 16)["warnings"] if "outside" in x]
    assert len(w) == 1 and f"layer 1 (b): in_features {int(hi) * 4}" in w[0] and f"samples {lo:g} to {hi:g}" in w[0]
    # without the optional field (an older file) nothing is marked
    old = json.loads(json.dumps(doc))
    for e in old["kinds"].values():
        del e["feature_range"]
    assert "outside" not in Estimator(old).estimate([far], 16)["layers"][0]
    bad = json.loads(json.dumps(doc))
    bad["kinds"]["linear"]["feature_range"][0] = [2.0, 1.0]
    with pytest.raises(FormatError, match="feature_range"):
        Estimator(bad)


def test_fitted_vs_runtime_close_on_the_training_samples(fitted):
    doc, ref, est = fitted
    rng = np.random.default_rng(7)
    relu = _samples("relu", [{"numel": int(n)} for n in rng.integers(64, 200000, 40)], rng)
    for s in relu[:10]:
        m, _ = est.predict_layer("relu", dict(s["config"], batch_size=s["batch_size"], role=s["role"]))
        assert abs(m - s["value"]) / s["value"] < 0.25


def _rows_both_ways(doc, layers, batch_size):
    """Each distinct layer's KindModel.row read twice: with the dot products as loaded, and with the direct sums."""
    est = load_estimator(doc)
    out = []
    for layer in layers:
        model = est._model(layer["kind"], layer["config"])
        flops, nbytes, launches, step = at_batch(cost_terms(layer["kind"], layer["config"], layer["role"]), batch_size)
        raw = model.vector(dict(layer["config"], batch_size=batch_size, role=1 if layer["role"] == "input" else 0,
                                train_flops=flops, train_bytes=nbytes), "here")
        fast = model.row(raw, flops, nbytes, launches, step)
        taken = (model.alpha_by_dist, model.W_by_dist)
        model.alpha_by_dist = model.W_by_dist = False  # this instance only: the direct sums
        out.append((taken, fast, model.row(raw, flops, nbytes, launches, step)))
        model.alpha_by_dist, model.W_by_dist = taken
    return out


@pytest.mark.parametrize("source", ["fitted", "estimator_time_profile.json", "estimator_energy_floored.json"])
def test_dot_products_through_dist_agree_with_the_direct_sums(fitted, source):
    """alpha . k and W k are read as (|a|^2 + |k|^2 - dist(a, k)^2) / 2 where the rows are small (every fitted
    file here): to 1e-12 of the direct sums, in the ln mean, the ln variance and v."""
    doc = fitted[0] if source == "fitted" else json.loads((VECTORS / source).read_text())
    exp = None if source == "fitted" else json.loads(
        (VECTORS / f"expected_{source[len('estimator_'):]}").read_text())
    layers = _layers(np.random.default_rng(3), 9) if exp is None else [l for e in exp["estimate"] for l in e["layers"]]
    rows = _rows_both_ways(doc, layers, 16)
    assert rows and all(taken == (True, True) for taken, _, _ in rows)
    for _, (lmu, var, v, _), (lmu_d, var_d, v_d, _) in rows:
        assert abs(lmu - lmu_d) < 1e-12 and abs(var - var_d) < 1e-12
        assert max(abs(a - b) for a, b in zip(v, v_d)) < 1e-12


def test_rows_too_large_for_dist_take_the_direct_sums(fitted):
    """An alpha or a variance-factor row beyond what dist's rounding allows is read by the direct sums, and the
    estimate still matches the numpy model."""
    from thor_sdk.runtime.estimator import DIST_DOT_MAX_NORM2_MEAN, DIST_DOT_MAX_NORM2_VAR

    doc = json.loads(json.dumps(fitted[0]))
    lin = doc["kinds"]["linear"]
    c = lin["kernel"]["constant"]
    # one more inducing point, far from every layer (its k is ~0): a large alpha and W column there
    far = [50.0] * len(lin["inducing"][0])
    lin["inducing"].append(far)
    lin["alpha"].append(2.0 * math.sqrt(DIST_DOT_MAX_NORM2_MEAN) / c)
    lin["var_factor"] = [row + [0.0] for row in lin["var_factor"]]
    lin["var_factor"][0][-1] = 2.0 * math.sqrt(DIST_DOT_MAX_NORM2_VAR) / c
    est = load_estimator(doc)
    model = est._model("linear")
    assert not model.alpha_by_dist and not model.W_by_dist
    assert est._model("relu").alpha_by_dist  # the other kinds keep the fast reading
    ref = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    layers = _layers(np.random.default_rng(3), 9)
    out = est.estimate(layers, 16)
    mean, std = _numpy_total(ref, doc, layers, 16)
    assert close(out["total"]["mean"], mean) and close(out["total"]["std"], std)


# ----------------------------------------------------------------------------- shared vectors
@pytest.mark.parametrize("case", CASES)
def test_vectors_reproduced(case):
    exp = json.loads((VECTORS / f"expected_{case}.json").read_text())
    est = load_estimator(VECTORS / exp["estimator"])
    for q in exp["predict_layer"]:
        m, s = est.predict_layer(q["kind"], q["features"], cost=q["cost"])
        assert close(m, q["mean"]) and close(s, q["std"]), q
    for e in exp["estimate"]:
        out = est.estimate(e["layers"], e["batch_size"])
        for got, m, s in zip(out["layers"], e["layer_means"], e["layer_stds"]):
            assert close(got["mean"], m) and close(got["std"], s)
        # layers read at a feature their kind's entry predates are flagged, and only those
        assert [a["index"] for a in out["approximated"] if a.get("unread_feature")] == e.get("layer_unread", [])
        for key in ("total", "layers_total"):
            assert close(out[key]["mean"], e[key]["mean"]) and close(out[key]["std"], e[key]["std"])


@pytest.mark.parametrize("case", CASES)
def test_vectors_still_match_the_numpy_model(case):
    exp = json.loads((VECTORS / f"expected_{case}.json").read_text())
    doc = json.loads((VECTORS / exp["estimator"]).read_text())
    ref = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    for e in exp["estimate"]:
        mean, std = _numpy_total(ref, dict(doc, whole_model=doc.get("whole_model", {"rel_std": 0.0})),
                                 e["layers"], e["batch_size"])
        assert close(mean, e["total"]["mean"], 1e-9) and close(std, e["total"]["std"], 1e-9)


def test_vectors_cover_the_promised_cases():
    assert set(CASES) == {"time_profile", "energy_floored", "time_grouped", "time_stand_in", "time_defaults",
                          "time_unread", "time_frozen", "time_step_bytes", "time_gemm", "time_per_call",
                          "time_shared_launch", "time_shared_launch_v4"}
    docs = [json.loads(p.read_text()) for p in VECTORS.glob("estimator_*.json")]
    # every runtime reads all four: 2 is 3 without per_step_byte, 3 is 4 without per_call, 4 is 5 counting every
    # layer at least one launch
    assert {d["version"] for d in docs} == {2, 3, 4, 5}
    # a forward-only conv's share of a launch, read from a version-5 file and (at least one) from a version-4 one
    shared = [l for p in ("time_shared_launch", "time_shared_launch_v4")
              for e in json.loads((VECTORS / f"expected_{p}.json").read_text())["estimate"] for l in e["layers"]]
    assert any(l["cost"]["launches"] < 1 for l in shared)
    assert any("per_step_byte" in g["mean_function"] for d in docs for g in d["kinds"].values())
    assert all(("per_call" in g["mean_function"]) <= (d["version"] == 4) for d in docs for g in d["kinds"].values())
    assert any("per_call" in g["mean_function"] for d in docs for g in d["kinds"].values())
    gps = [g for d in docs for g in d["kinds"].values()]
    assert any(g["n_samples"] == 1 for g in gps)
    assert any(g["fit"]["floored_samples"] > 0 for g in gps)
    assert any(len(g["inducing"]) < g["n_samples"] for g in gps)  # duplicated rows: fewer inducing points
    assert any(d.get("whole_model", {}).get("rel_std", 0) > 0 for d in docs)
    assert any("conv2d:grouped" in d["kinds"] and "conv2d" in d["kinds"] for d in docs)  # a structural variant
    assert any("conv2d:gemm" in d["kinds"] and "conv2d" in d["kinds"] for d in docs)  # and the other
    exps = [json.loads(p.read_text()) for p in VECTORS.glob("expected_*.json")]
    layer_lists = [e["layers"] for x in exps for e in x["estimate"]]
    assert all("cost" in l for ls in layer_lists for l in ls)
    assert any(len({json.dumps([l["kind"], l["config"]], sort_keys=True) for l in ls}) < len(ls) for ls in layer_lists)
    # padded features with channel counts that are not multiples of their block, in layers every runtime costs
    padded = [(l["config"]["in_channels"], l["config"]["out_channels"]) for ls in layer_lists for l in ls
              if l["kind"] == "conv2d"]
    assert any(g["features"][9:13] == ["in_channels_pad8", "out_channels_pad8", "in_channels_pad16",
                                       "out_channels_pad16"] for d in docs
               for k, g in d["kinds"].items() if k.startswith("conv2d"))
    assert any(i % 8 for i, _ in padded) and any(o % 8 for _, o in padded)
    assert any(i % 16 == 8 for i, _ in padded)  # padded by 16 but not by 8


def _conv_layer(**over):
    c = {"in_channels": 3, "out_channels": 64, "kernel": 3, "stride": 1, "padding": 1, "groups": 1, "height": 28,
         "width": 28, "bias": 1}
    c.update(over)
    return {"name": "c", "kind": "conv2d", "role": "input", "config": c}


def test_padded_features_are_derived_from_their_base_never_read():
    est = load_estimator(VECTORS / "estimator_time_profile.json")
    assert "in_channels_pad8" in est.kinds["conv2d"]
    base = est.estimate([_conv_layer()], 16)["total"]["mean"]
    # a config that carries the padded feature itself changes nothing: the reader derives it
    assert est.estimate([_conv_layer(in_channels_pad8=1.0, out_channels_pad8=5.0)], 16)["total"]["mean"] == base
    # and it is what the fit's feature_vector computes: 3 channels padded to 8 is 8/3, to 16 is 16/3
    gp = KindGP.from_dict(json.loads((VECTORS / "estimator_time_profile.json").read_text())["kinds"]["conv2d"])
    x = feature_vector("conv2d", _conv_layer()["config"], 16, "input", gp.features)  # the GP's own inputs
    assert x[9:13] == [8 / 3, 1.0, 16 / 3, 1.0]
    # today's conv2d inputs hold dilation and frozen after bias (1 and 0 where the config leaves them out); this
    # file predates both
    assert feature_vector("conv2d", _conv_layer()["config"], 16, "input") == x[:9] + [1.0, 0.0] + x[9:]
    m = gp.predict([x], terms=[at_batch(cost_terms("conv2d", _conv_layer()["config"], "input"), 16)])
    assert close(base, float(m[0]), 1e-9)
    feats = dict(_conv_layer()["config"], batch_size=16, role="input")
    assert close(est.predict_layer("conv2d", feats)[0], base, 1e-12)
    with pytest.raises(UsageError, match="'in_channels' must be a finite number >= 1"):
        est.predict_layer("conv2d", dict(feats, in_channels=0.5))
    with pytest.raises(UsageError, match="needs feature 'in_channels'") as e:
        est.predict_layer("conv2d", {k: v for k, v in feats.items() if k != "in_channels"})
    assert "_pad8" not in str(e.value)  # callers give the base features only


@pytest.mark.parametrize("name,parsed", [("in_channels_pad8", ("in_channels", 8)), ("a_pad1024", ("a", 1024)),
                                         ("padding", None), ("x_pad", None), ("_pad8", None), ("x_pad08", None),
                                         ("x_pad1025", None), ("x_pad8a", None), ("x_pad-8", None),
                                         ("x_pad\u0663", None)])
def test_padded_names(name, parsed):
    from thor_sdk.layers.kinds import parse_padded

    assert parse_padded(name) == parsed


# ----------------------------------------------------------------------------- no numpy / sklearn / torch
BLOCKER = r"""
import json, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numpy", "scipy", "sklearn", "torch", "jsonschema"):
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
for name in ("numpy", "scipy", "sklearn", "torch"):
    sys.modules[name] = None
from thor_sdk.runtime import load_estimator
est = load_estimator(sys.argv[1])
exp = json.load(open(sys.argv[2]))
e = exp["estimate"][0]
layers = [{k: v for k, v in l.items() if k != "cost"} for l in e["layers"]]   # terms computed from kinds.py
out = est.estimate(layers, e["batch_size"])
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "scipy", "sklearn", "torch") and sys.modules[m] is not None)
print(json.dumps({"total": out["total"], "heavy": heavy}))
"""


def test_runtime_runs_without_numpy_sklearn_torch():
    case = CASES[0]
    exp = json.loads((VECTORS / f"expected_{case}.json").read_text())
    proc = subprocess.run([sys.executable, "-c", BLOCKER, str(VECTORS / exp["estimator"]),
                           str(VECTORS / f"expected_{case}.json")], capture_output=True, text=True, timeout=60,
                          cwd=str(Path(__file__).resolve().parents[1]))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["heavy"] == []
    assert close(got["total"]["mean"], exp["estimate"][0]["total"]["mean"])
    assert close(got["total"]["std"], exp["estimate"][0]["total"]["std"])


# ----------------------------------------------------------------------------- errors
@pytest.fixture
def good_doc():
    return json.loads((VECTORS / "estimator_time_profile.json").read_text())


def _broken(doc, how):
    k = doc["kinds"]["relu"]
    if how == "version":
        doc["version"] = 6
    elif how == "version1":
        doc["version"] = 1
    elif how == "format":
        doc["format"] = "something-else"
    elif how == "missing_kinds":
        del doc["kinds"]
    elif how == "missing_runtime":
        del doc["runtime"]
    elif how == "missing_alpha":
        del k["alpha"]
    elif how == "nan_in_dict":
        k["alpha"][0] = float("nan")
    elif how == "x_mean_length":
        k["x_mean"].append(0.0)
    elif how == "inducing_row_length":
        k["inducing"][0] = k["inducing"][0][:-1]
    elif how == "alpha_length":
        k["alpha"].pop()
    elif how == "var_factor_row_length":
        k["var_factor"][0] = k["var_factor"][0] + [0.0]
    elif how == "n_samples":
        k["n_samples"] = 0
    elif how == "unit":
        doc["unit"] = "J"
    elif how == "string_number":
        k["residual_offset"] = "1.0"
    elif how == "bool_number":
        k["kernel"]["constant"] = True
    elif how == "negative_scale":
        k["x_scale"][0] = -1.0
    elif how == "nu":
        k["kernel"]["nu"] = 1.5
    elif how == "negative_per_flop":
        k["mean_function"]["per_flop"] = -1e-9
    elif how == "negative_per_step_byte":
        k["mean_function"]["per_step_byte"] = -1e-12
    elif how == "negative_per_call":
        k["mean_function"]["per_call"] = -1e-12
    elif how == "version_half":
        doc["version"] = 2.5
    elif how == "zero_overhead":
        k["mean_function"]["overhead"] = 0.0
    elif how == "residual_bound":  # y_mean-like blow-up: exp(1000) would overflow
        k["residual_offset"] = 1000.0
    elif how == "variance_bound":
        k["kernel"]["constant"] = 1e6
    elif how == "tiny_length_scale":  # 1e-300: every distance infinite
        k["kernel"]["length_scale"][0] = 1e-300
    elif how == "huge_integer":
        k["residual_offset"] = 10 ** 400
    elif how == "whole_model":
        doc["whole_model"] = {"rel_std": -0.1}
    elif how == "kind_not_object":
        doc["kinds"]["relu"] = [1, 2]
    return doc


HOW = ["version", "version1", "format", "missing_kinds", "missing_runtime", "missing_alpha", "nan_in_dict",
       "x_mean_length", "inducing_row_length", "alpha_length", "var_factor_row_length", "n_samples", "unit",
       "string_number", "bool_number", "negative_scale", "nu", "negative_per_flop", "zero_overhead", "residual_bound",
       "variance_bound", "tiny_length_scale", "huge_integer", "whole_model", "kind_not_object", "negative_per_step_byte", "negative_per_call",
       "version_half"]


@pytest.mark.parametrize("how", HOW)
def test_invalid_estimator_is_format_error(good_doc, how):
    with pytest.raises(FormatError) as ei:
        load_estimator(_broken(good_doc, how))
    assert "\n" not in str(ei.value) and str(ei.value)


def test_version_1_says_to_refit(good_doc):
    with pytest.raises(FormatError, match="refit"):
        load_estimator(_broken(good_doc, "version1"))


def test_corrupt_files_are_format_errors(tmp_path, good_doc):
    p = tmp_path / "e.json"
    p.write_text('{"format": "thor-sdk/estimator", "version": 2, "kinds": {')
    with pytest.raises(FormatError, match="not valid JSON"):
        load_estimator(p)
    text = json.dumps(good_doc).replace('"residual_offset":', '"residual_offset": NaN, "was":', 1)
    p.write_text(text)
    with pytest.raises(FormatError, match="NaN"):
        load_estimator(str(p))
    p.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(FormatError):
        load_estimator(p)
    with pytest.raises(NotFoundError):
        load_estimator(tmp_path / "absent.json")
    p.write_text("[1, 2]")
    with pytest.raises(FormatError, match="object"):
        load_estimator(p)
    p.write_text(json.dumps(good_doc).replace('"residual_offset":', '"residual_offset": ' + "9" * 5000 + ', "was":', 1))
    with pytest.raises(FormatError):
        load_estimator(p)


@pytest.mark.parametrize("defaults,fragment", [
    ([1], "must be an object"), ({"nope": 1}, "names 'nope'"), ({"batch_size": 16}, "names 'batch_size'"),
    ({"role": 0}, "names 'role'"), ({"in_channels_pad8": 1}, "names 'in_channels_pad8'"),
    ({"dilation": -1}, "finite number >= 0"), ({"dilation": "1"}, "finite number >= 0"),
    ({"dilation": True}, "finite number >= 0")])
def test_malformed_defaults_are_format_errors(defaults, fragment):
    doc = json.loads((VECTORS / "estimator_time_defaults.json").read_text())
    doc["kinds"]["conv1d"]["defaults"] = defaults
    with pytest.raises(FormatError, match=re.escape(fragment)):
        Estimator(doc)


def test_a_feature_left_out_reads_as_its_default_and_only_where_the_entry_has_one():
    """conv1d's ``dilation`` left out reads as 1 (the entry's ``defaults``): the same estimate as given 1, another
    at 4; without ``defaults`` (a file written before) the missing feature is named, as before."""
    doc = json.loads((VECTORS / "estimator_time_defaults.json").read_text())
    est = Estimator(doc)
    c = {"in_channels": 16, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1, "groups": 1, "length": 96,
         "bias": 1}
    left_out = est.predict_layer("conv1d", dict(c, batch_size=16, role="hidden"))
    assert left_out == est.predict_layer("conv1d", dict(c, dilation=1, batch_size=16, role="hidden"))
    assert left_out != est.predict_layer("conv1d", dict(c, dilation=4, batch_size=16, role="hidden"))
    layers = [{"name": "c", "kind": "conv1d", "role": "hidden", "config": c}]
    assert est.estimate(layers, 16)["total"] == est.estimate([dict(layers[0], config=dict(c, dilation=1))], 16)["total"]
    del doc["kinds"]["conv1d"]["defaults"]
    with pytest.raises(UsageError, match="needs feature 'dilation'"):
        Estimator(doc).predict_layer("conv1d", dict(c, batch_size=16, role="hidden"))


def test_unknown_kind_names_it(good_doc):
    est = Estimator(good_doc)
    layers = [{"name": "x", "kind": "lstm", "role": "hidden",
               "config": {"input_size": 8, "hidden_size": 8, "seq_len": 4, "num_layers": 1}}]
    with pytest.raises(ThorError, match="no model for these layers' kinds: lstm"):
        est.estimate(layers, 8)
    with pytest.raises(NotFoundError, match="'lstm'"):
        est.predict_layer("lstm", {})


def test_bad_layer_inputs_are_usage_errors(good_doc):
    est = Estimator(good_doc)
    with pytest.raises(UsageError, match="'numel'"):
        est.predict_layer("relu", {"batch_size": 8, "role": 0})
    with pytest.raises(UsageError, match="role"):
        est.predict_layer("relu", {"numel": 8, "batch_size": 8, "role": "sideways"})
    with pytest.raises(UsageError, match="role"):
        est.estimate([{"name": "r", "kind": "relu", "role": "output", "config": {"numel": 8}}], 8)
    for b in (0, 16.7, 10 ** 12, True, float("nan")):
        with pytest.raises(UsageError, match="batch size"):
            est.estimate([{"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 8}}], b)
    with pytest.raises(UsageError):
        est.predict_layer("relu", {"numel": float("inf"), "batch_size": 8, "role": 0})
    with pytest.raises(UsageError, match="cost"):
        est.estimate([{"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 8},
                       "cost": {"flops_per_sample": -1}}], 8)
    with pytest.raises(UsageError):
        est.estimate([{"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 10 ** 400}}], 8)


def test_attributes(good_doc):
    est = load_estimator(good_doc)
    assert est.metric == "time" and est.unit == "s" and est.runtime == "torch"
    assert est.device == good_doc["device"]
    assert set(est.kinds) == set(good_doc["kinds"])
    assert est.kinds["output"] == good_doc["kinds"]["output"]["features"]
    assert "role" not in est.kinds["output"]
    assert est.whole_model_rel_std == good_doc["whole_model"]["rel_std"]


# ----------------------------------------------------------------------------- power-table select vectors
TABLE_VECTORS = VECTORS / "table_select.json"


def _make_vectors_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("thor_make_vectors", VECTORS / "make_vectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_vectors_are_what_make_vectors_makes_now():
    """The committed table_select.json is byte for byte what make_vectors.py writes today (regenerate
    with ``python tests/vectors/make_vectors.py --table-only`` after changing the runtime or the cases)."""
    assert TABLE_VECTORS.read_text(encoding="utf-8") == _make_vectors_module().table_select_text()


def _select_answer(doc, cap):
    from thor_sdk.runtime.table import InfeasibleCapError, select

    try:
        return {"result": select(doc, cap)}
    except InfeasibleCapError as e:
        return {"error": "infeasible", "lowest": e.lowest_feasible_power_w}
    except FormatError:
        return {"error": "format"}
    except UsageError:
        return {"error": "usage"}


def test_table_vectors_reproduced_by_the_python_runtime():
    vec = json.loads(TABLE_VECTORS.read_text())
    queries = [(c["table"], q) for c in vec["cases"] for q in c["queries"]]
    queries += [(m["table"], m) for m in vec["malformed"]]
    for table, q in queries:
        got = _select_answer(table, q["power_cap_w"])
        assert got.get("error") == q.get("error"), (q, got)
        if "result" in q:
            assert got["result"] == q["result"]
        elif q["error"] == "infeasible":
            assert got["lowest"] == q["lowest_feasible_power_w"]


def test_table_vectors_cover_the_promised_cases():
    vec = json.loads(TABLE_VECTORS.read_text())
    results = [q["result"] for c in vec["cases"] for q in c["queries"] if "result" in q]
    errors = [q["error"] for c in vec["cases"] for q in c["queries"] if "error" in q]
    assert len(results) >= 20 and {"infeasible", "usage"} <= set(errors)
    assert any(r["non_monotone_batch_sizes"] for r in results)
    assert any(not c["monotone"] for r in results for c in r["candidates"])
    assert any(r["est_time_to_accuracy_s"] is not None for r in results)
    assert any(r["est_time_to_accuracy_s"] is None for r in results)
    # equal scores: the larger batch listed first
    assert any(a["score_s"] == b["score_s"] and a["batch_size"] > b["batch_size"]
               for r in results for a, b in zip(r["candidates"], r["candidates"][1:]))
    # a batch with rows but no ratio, and a ratio with no rows
    for c in vec["cases"]:
        rows = {int(r["batch_size"]) for r in c["table"]["rows"]}
        ratios = {int(r["batch_size"]) for r in c["table"]["ratios"]}
        if rows - ratios and ratios - rows:
            break
    else:
        raise AssertionError("no table lacks a ratio for a batch size")
    # an infeasible cap whose lowest power is NOT the table-wide lowest (that batch has no ratio)
    assert any(q.get("error") == "infeasible" and q["lowest_feasible_power_w"] > min(r["peak_power_w"]
               for r in c["table"]["rows"]) for c in vec["cases"] for q in c["queries"])
    malformed = [m["error"] for m in vec["malformed"]]
    assert malformed.count("format") >= 20 and set(malformed) <= {"format", "usage"}


def test_table_rejects_what_json_cannot_carry_like_java_and_swift():
    # an infinite cap and "version": true pass Python's == checks but not Java's or Swift's: all
    # three runtimes refuse them
    vec = json.loads(TABLE_VECTORS.read_text())
    table = vec["cases"][0]["table"]
    assert _select_answer(table, float("inf")) == {"error": "usage"}
    assert _select_answer(dict(table, version=True), 1e3) == {"error": "format"}
    assert "result" in _select_answer(table, 1e3)
