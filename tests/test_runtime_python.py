"""The stdlib estimator runtime: golden values vs scikit-learn, shared vectors, validation, no-deps import."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from thor_sdk.errors import FormatError, NotFoundError, ThorError, UsageError
from thor_sdk.fit.estimator import build_estimator
from thor_sdk.fit.gp import KindGP
from thor_sdk.layers.kinds import feature_vector, gp_features
from thor_sdk.runtime import Estimator, load_estimator

VECTORS = Path(__file__).resolve().parent / "vectors"
CASES = sorted(p.name[len("expected_"):-len(".json")] for p in VECTORS.glob("expected_*.json"))
RTOL = 1e-9


def close(a, b, rtol=RTOL):
    return abs(a - b) <= rtol * abs(b) + 1e-300


# ----------------------------------------------------------------------------- scikit-learn reference
def sk_layers(gp, rows):
    """Per-row mean/std straight from the fitted sklearn regressor + the documented back-transform."""
    Z = (np.log1p(np.asarray(rows, dtype=float)) - gp.x_mean_) / gp.x_scale_
    mu, s = gp.gpr_.predict(Z, return_std=True)
    if gp.target_transform_ == "log":
        m = np.exp(mu + s**2 / 2)
        return m, m * np.sqrt(np.expm1(s**2))
    return mu, s


def sk_total(gps, layers, batch_size):
    """Whole-model mean/std: per kind, sklearn return_cov on the stacked rows (duplicates included)."""
    mean, var = 0.0, 0.0
    for kind, gp in gps.items():
        rows = [feature_vector(kind, l["config"], batch_size, l["role"]) for l in layers if l["kind"] == kind]
        if not rows:
            continue
        Z = (np.log1p(np.asarray(rows, dtype=float)) - gp.x_mean_) / gp.x_scale_
        mu, cov = gp.gpr_.predict(Z, return_cov=True)
        d = np.maximum(np.diag(cov), 0.0)
        np.fill_diagonal(cov, d)
        if gp.target_transform_ == "log":
            m = np.exp(mu + d / 2)
            cov = np.outer(m, m) * np.expm1(cov)
            mu = m
        mean += float(np.sum(mu))
        var += float(np.sum(cov))
    return mean, math.sqrt(max(var, 0.0))


def _data(kind, n, rng, linear=False):
    feats = gp_features(kind)
    X, y = [], []
    for _ in range(n):
        if kind == "relu":
            c = {"numel": int(rng.choice([84, 120, 400, 1600, 4704]))}
        else:  # linear
            c = {"in_features": int(rng.choice([84, 120, 400])), "out_features": int(rng.choice([10, 84, 120])),
                 "tokens": 1, "bias": 1}
        bs = int(rng.choice([1, 8, 32]))
        role = str(rng.choice(["input", "hidden"]))
        X.append(feature_vector(kind, c, bs, role))
        size = float(np.prod([v for v in c.values()])) * bs
        y.append(1e-9 * size * math.exp(rng.normal(0, 0.05)) + (rng.normal(0, 3e-4) if linear else 1e-5))
    return feats, X, y


@pytest.fixture(scope="module")
def fitted():
    """Freshly fitted GPs (via the exported dict, so sklearn and the runtime see the same numbers):
    log targets, linear targets, a one-sample kind, a kind trained on duplicated rows."""
    rng = np.random.default_rng(11)
    gps = {}
    f, X, y = _data("relu", 9, rng)
    gps["relu"] = KindGP(f).fit(X, y)
    f, X, y = _data("linear", 10, rng, linear=True)
    gps["linear"] = KindGP(f).fit(X, y)
    gps["flatten"] = KindGP(gp_features("flatten")).fit([[400, 32, 0]], [3e-6])
    f, X, y = _data("relu", 4, rng)
    gps["relu6"] = KindGP(gp_features("relu6")).fit(X + X, y + [v * 1.03 for v in y])
    assert gps["linear"].target_transform_ == "linear" and gps["relu"].target_transform_ == "log"
    doc = build_estimator(gps, device={"name": "t"}, metric="time", unit="s", flops_baseline={"unit_per_flop": 1e-11},
                          provenance={})
    # sklearn side rebuilt from the exported (rounded) numbers: the reference the runtime must match
    ref = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    return doc, ref, load_estimator(doc)


LAYERS = [
    {"name": "a", "kind": "linear", "role": "input", "config": {"in_features": 400, "out_features": 120, "tokens": 1, "bias": 1}},
    {"name": "b", "kind": "relu", "role": "hidden", "config": {"numel": 120}},
    {"name": "c", "kind": "flatten", "role": "hidden", "config": {"numel": 120}},
    {"name": "d", "kind": "linear", "role": "hidden", "config": {"in_features": 120, "out_features": 84, "tokens": 1, "bias": 1}},
    {"name": "e", "kind": "relu", "role": "hidden", "config": {"numel": 84}},
    {"name": "f", "kind": "relu6", "role": "hidden", "config": {"numel": 84}},
    {"name": "g", "kind": "relu", "role": "hidden", "config": {"numel": 120}},   # same as b
    {"name": "h", "kind": "relu6", "role": "hidden", "config": {"numel": 84}},   # same as f
    {"name": "i", "kind": "relu6", "role": "hidden", "config": {"numel": 84}},   # same as f
    {"name": "j", "kind": "flatten", "role": "hidden", "config": {"numel": 120}},  # same as c
]


@pytest.mark.parametrize("kind", ["relu", "linear", "flatten", "relu6"])
def test_predict_layer_matches_sklearn(fitted, kind):
    _, ref, est = fitted
    gp = ref[kind]
    rows = [feature_vector(kind, l["config"], bs, l["role"]) for l in LAYERS if l["kind"] == kind for bs in (1, 32, 7)]
    m, s = sk_layers(gp, rows)
    for row, em, es in zip(rows, m, s):
        rm, rs = est.predict_layer(kind, dict(zip(gp.features, row)))
        assert close(rm, em) and close(rs, es), (kind, row, rm, em, rs, es)


@pytest.mark.parametrize("batch_size", [1, 32])
def test_estimate_matches_sklearn_return_cov(fitted, batch_size):
    _, ref, est = fitted
    out = est.estimate(LAYERS, batch_size)
    mean, std = sk_total(ref, LAYERS, batch_size)
    assert close(out["total"]["mean"], mean) and close(out["total"]["std"], std), (out["total"], mean, std)
    for layer, got in zip(LAYERS, out["layers"]):
        m, s = sk_layers(ref[layer["kind"]], [feature_vector(layer["kind"], layer["config"], batch_size, layer["role"])])
        assert close(got["mean"], m[0]) and close(got["std"], s[0])
        assert {k: got[k] for k in ("name", "kind", "role", "config")} == layer
    assert out["metric"] == "time" and out["unit"] == "s" and out["batch_size"] == batch_size
    assert math.isclose(out["total"]["mean"], sum(l["mean"] for l in out["layers"]), rel_tol=1e-12)


def test_identical_layers_are_correlated(fitted):
    """Three identical layers: the std of their sum lies between sqrt(3) and 3 single stds."""
    _, _, est = fitted
    layer = LAYERS[5]
    one = est.estimate([layer], 32)["total"]
    three = est.estimate([layer] * 3, 32)["total"]
    assert close(three["mean"], 3 * one["mean"])
    assert math.sqrt(3) * one["std"] < three["std"] <= 3 * one["std"] * (1 + 1e-12)


def test_role_as_string_or_number(fitted):
    _, _, est = fitted
    f = {"numel": 400, "batch_size": 8}
    assert est.predict_layer("relu", dict(f, role="input")) == est.predict_layer("relu", dict(f, role=1))
    assert est.predict_layer("relu", dict(f, role="hidden")) == est.predict_layer("relu", dict(f, role=0))


def test_fitted_vs_runtime_close(fitted):
    """The exported (rounded) GP predicts what the fitted one does, to rounding."""
    doc, _, est = fitted
    rng = np.random.default_rng(11)
    feats, X, y = _data("relu", 9, rng)
    gp = KindGP(feats).fit(X, y)
    m, s = gp.predict(X, return_std=True)
    for row, em, es in zip(X, m, s):
        rm, rs = est.predict_layer("relu", dict(zip(feats, row)))
        assert rm == pytest.approx(em, rel=1e-5) and rs == pytest.approx(es, rel=1e-4)


# ----------------------------------------------------------------------------- shared vectors
@pytest.mark.parametrize("case", CASES)
def test_vectors_reproduced(case):
    exp = json.loads((VECTORS / f"expected_{case}.json").read_text())
    est = load_estimator(VECTORS / exp["estimator"])
    for q in exp["predict_layer"]:
        m, s = est.predict_layer(q["kind"], q["features"])
        assert close(m, q["mean"]) and close(s, q["std"]), q
    for e in exp["estimate"]:
        out = est.estimate(e["layers"], e["batch_size"])
        assert close(out["total"]["mean"], e["total"]["mean"]) and close(out["total"]["std"], e["total"]["std"])
        for got, m, s in zip(out["layers"], e["layer_means"], e["layer_stds"]):
            assert close(got["mean"], m) and close(got["std"], s)


@pytest.mark.parametrize("case", CASES)
def test_vectors_still_match_sklearn(case):
    """The committed expected values are what scikit-learn computes from the committed estimator."""
    exp = json.loads((VECTORS / f"expected_{case}.json").read_text())
    doc = json.loads((VECTORS / exp["estimator"]).read_text())
    ref = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    for e in exp["estimate"]:
        mean, std = sk_total(ref, e["layers"], e["batch_size"])
        assert close(mean, e["total"]["mean"], 1e-9) and close(std, e["total"]["std"], 1e-9)


def test_vectors_cover_the_promised_cases():
    docs = [json.loads(p.read_text()) for p in VECTORS.glob("estimator_*.json")]
    gps = [g for d in docs for g in d["kinds"].values()]
    assert {g["target_transform"] for g in gps} == {"log", "linear"}
    assert any(g["n_samples"] == 1 for g in gps)
    assert any(len({tuple(r) for r in g["x_train"]}) < g["n_samples"] for g in gps)  # duplicated rows
    exps = [json.loads(p.read_text()) for p in VECTORS.glob("expected_*.json")]
    layer_lists = [e["layers"] for x in exps for e in x["estimate"]]
    assert any(len({json.dumps([l["kind"], l["config"]], sort_keys=True) for l in ls}) < len(ls) for ls in layer_lists)


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
out = est.estimate(e["layers"], e["batch_size"])
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
    return json.loads((VECTORS / "estimator_time_log.json").read_text())


def _broken(doc, how):
    k = doc["kinds"]["relu"]
    if how == "version":
        doc["version"] = 2
    elif how == "format":
        doc["format"] = "something-else"
    elif how == "missing_kinds":
        del doc["kinds"]
    elif how == "missing_alpha":
        del k["alpha"]
    elif how == "nan_in_dict":
        k["alpha"][0] = float("nan")
    elif how == "x_mean_length":
        k["x_mean"].append(0.0)
    elif how == "x_train_row_length":
        k["x_train"][1] = k["x_train"][1][:-1]
    elif how == "alpha_length":
        k["alpha"].pop()
    elif how == "n_samples":
        k["n_samples"] += 1
    elif how == "unit":
        doc["unit"] = "J"
    elif how == "string_number":
        k["y_mean"] = "1.0"
    elif how == "bool_number":
        k["kernel"]["constant"] = True
    elif how == "negative_scale":
        k["x_scale"][0] = -1.0
    elif how == "nu":
        k["kernel"]["nu"] = 1.5
    elif how == "not_pd":  # duplicated training rows, no noise, no jitter -> singular kernel matrix
        k["x_train"][1] = list(k["x_train"][0])
        k["kernel"]["noise_level"] = 0.0
        k["jitter"] = 0.0
    elif how == "kind_not_object":
        doc["kinds"]["relu"] = [1, 2]
    return doc


@pytest.mark.parametrize("how", ["version", "format", "missing_kinds", "missing_alpha", "nan_in_dict", "x_mean_length",
                                 "x_train_row_length", "alpha_length", "n_samples", "unit", "string_number",
                                 "bool_number", "negative_scale", "nu", "not_pd", "kind_not_object"])
def test_invalid_estimator_is_format_error(good_doc, how):
    with pytest.raises(FormatError) as ei:
        load_estimator(_broken(good_doc, how))
    assert "\n" not in str(ei.value) and str(ei.value)


def test_corrupt_files_are_format_errors(tmp_path, good_doc):
    p = tmp_path / "e.json"
    p.write_text('{"format": "thor-sdk/estimator", "version": 1, "kinds": {')
    with pytest.raises(FormatError, match="not valid JSON"):
        load_estimator(p)
    text = json.dumps(good_doc).replace('"y_mean":', '"y_mean": NaN, "was":', 1)
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


def test_unknown_kind_names_it(good_doc):
    est = Estimator(good_doc)
    layers = [{"name": "x", "kind": "lstm", "role": "hidden",
               "config": {"input_size": 8, "hidden_size": 8, "seq_len": 4, "num_layers": 1}}]
    with pytest.raises(ThorError, match="no GP for kind 'lstm'; probe it on this device"):
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
    with pytest.raises(UsageError, match="batch size"):
        est.estimate([{"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 8}}], 0)
    with pytest.raises(UsageError):
        est.predict_layer("relu", {"numel": float("inf"), "batch_size": 8, "role": 0})


def test_attributes(good_doc):
    est = load_estimator(good_doc)
    assert est.metric == "time" and est.unit == "s"
    assert est.device == good_doc["device"]
    assert set(est.kinds) == set(good_doc["kinds"])
    assert est.kinds["output"] == good_doc["kinds"]["output"]["features"]
    assert "role" not in est.kinds["output"]


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
