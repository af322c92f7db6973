"""KindGP: fitting, the back-transform, export to the estimator format, and the estimator file itself."""

import json
import math
import warnings

import numpy as np
import pytest

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.fit.estimator import build_estimator, dumps_estimator, write_estimator
from thor_sdk.fit.gp import KindGP
from thor_sdk.layers.kinds import KINDS, feature_vector, get_kind, gp_features
from thor_sdk.runtime import load_estimator

RELU = gp_features("relu")  # numel, batch_size, role


def relu_data(n, seed=0, offset=0.0, noise=0.05):
    """SYNTHETIC relu costs: proportional to numel * batch_size, lognormal noise (+ offset)."""
    rng = np.random.default_rng(seed)
    numel = rng.choice([84, 120, 400, 1600, 4704, 16384], n)
    bs = rng.choice([1, 8, 32, 64], n)
    role = rng.integers(0, 2, n)
    X = np.column_stack([numel, bs, role]).astype(float)
    y = 1e-9 * numel * bs * (1.5 - 0.5 * role) * np.exp(rng.normal(0, noise, n)) + 1e-5 + offset
    return X, y


@pytest.fixture(scope="module")
def log_gp():
    X, y = relu_data(16)
    return KindGP(features=RELU, random_state=0).fit(X, y), X, y


def test_fit_returns_self_with_fitted_attributes(log_gp):
    gp, X, _ = log_gp
    assert gp.target_transform_ == "log"
    assert gp.n_samples_ == len(X)
    assert gp.x_mean_.shape == (3,) and np.all(gp.x_scale_ > 0)
    for attr in ("gpr_", "x_mean_", "x_scale_", "warnings_", "log_marginal_likelihood_"):
        assert hasattr(gp, attr)


def test_fit_interpolates_training_costs(log_gp):
    gp, X, y = log_gp
    mean, std = gp.predict(X, return_std=True)
    assert np.all(std > 0)
    # 5 % lognormal noise: the fit stays within a few noise widths of the data
    assert np.max(np.abs(np.log(mean / y))) < 0.25


def test_log_back_transform_is_lognormal(log_gp):
    gp, X, _ = log_gp
    Z = (np.log1p(X) - gp.x_mean_) / gp.x_scale_
    mu, s = gp.gpr_.predict(Z, return_std=True)
    mean, std = gp.predict(X, return_std=True)
    np.testing.assert_allclose(mean, np.exp(mu + s**2 / 2), rtol=1e-12)
    np.testing.assert_allclose(std, mean * np.sqrt(np.exp(s**2) - 1), rtol=1e-9)
    np.testing.assert_allclose(gp.predict(X), mean, rtol=1e-12)


def test_return_cov_diagonal_matches_return_std(log_gp):
    gp, X, _ = log_gp
    mean, std = gp.predict(X[:5], return_std=True)
    mc, cov = gp.predict(X[:5], return_cov=True)
    np.testing.assert_allclose(mc, mean, rtol=1e-9)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), std, rtol=1e-7)
    assert np.allclose(cov, cov.T)
    with pytest.raises(UsageError):
        gp.predict(X, return_std=True, return_cov=True)


def test_linear_target_when_costs_not_all_positive():
    X, y = relu_data(10, seed=1, offset=-3e-5)
    assert np.any(y <= 0)
    gp = KindGP(features=RELU).fit(X, y)
    assert gp.target_transform_ == "linear"
    Z = (np.log1p(X) - gp.x_mean_) / gp.x_scale_
    mu, s = gp.gpr_.predict(Z, return_std=True)
    mean, std = gp.predict(X, return_std=True)
    np.testing.assert_allclose(mean, mu, rtol=1e-12)
    np.testing.assert_allclose(std, s, rtol=1e-12)
    assert gp.to_dict()["target_transform"] == "linear"


def test_single_sample_fits_and_predicts():
    gp = KindGP(features=RELU).fit([[400, 32, 0]], [2e-4])
    assert gp.n_samples_ == 1
    assert any("one sample" in w for w in gp.warnings_)
    mean, std = gp.predict([[400, 32, 0], [16384, 64, 1]], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert mean[0] == pytest.approx(2e-4, rel=0.2)  # the one observation, up to the lognormal shift
    assert std[1] > std[0]  # far from the only sample -> less certain


def test_duplicated_rows_fit():
    X, y = relu_data(6, seed=2)
    X2 = np.vstack([X, X, X])
    y2 = np.concatenate([y, y * 1.02, y * 0.98])
    gp = KindGP(features=RELU).fit(X2, y2)
    mean, std = gp.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    np.testing.assert_allclose(mean, y, rtol=0.1)


def test_convergence_warnings_recorded_not_emitted():
    rng = np.random.default_rng(3)
    # batch_size and role carry no signal -> their length scales run to the upper bound
    X = np.column_stack([rng.choice([100, 1000, 10000, 100000], 12), np.full(12, 32), np.zeros(12)]).astype(float)
    y = 1e-9 * X[:, 0] * 32
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gp = KindGP(features=RELU).fit(X, y)
    from sklearn.exceptions import ConvergenceWarning

    assert not [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert gp.warnings_ and all(isinstance(w, str) for w in gp.warnings_)


@pytest.mark.parametrize("X, y", [
    ([[1, 2]], [1.0]),                      # wrong number of features
    ([[1, 2, 0]], [1.0, 2.0]),              # rows != costs
    ([[1, 2, 0]], [float("nan")]),          # NaN cost
    ([[-2, 2, 0]], [1.0]),                  # log1p undefined
    ([], []),                               # nothing to fit
])
def test_fit_rejects_bad_input(X, y):
    with pytest.raises(UsageError):
        KindGP(features=RELU).fit(X, y)


def test_predict_before_fit_is_usage_error():
    with pytest.raises(UsageError, match="not fitted"):
        KindGP(features=RELU).predict([[1, 2, 0]])


def test_to_dict_is_plain_json_and_from_dict_matches(log_gp):
    gp, X, _ = log_gp
    d = gp.to_dict()
    text = json.dumps(d, allow_nan=False)  # plain JSON, no NaN
    d = json.loads(text)
    n = len(X)
    assert d["features"] == RELU and d["feature_transform"] == "log1p" and d["n_samples"] == n
    assert len(d["x_train"]) == n and all(len(r) == 3 for r in d["x_train"]) and len(d["alpha"]) == n
    assert len(d["kernel"]["length_scale"]) == 3 and d["kernel"]["nu"] == 2.5
    # x_train is stored transformed + standardised
    np.testing.assert_allclose(d["x_train"], (np.log1p(X) - gp.x_mean_) / gp.x_scale_, rtol=1e-9, atol=1e-12)
    # ~10 significant digits, stored as given
    assert all(len(repr(v).replace("-", "").replace(".", "").split("e")[0].lstrip("0")) <= 10 for v in d["alpha"])
    g2 = KindGP.from_dict(d)
    m1, s1 = gp.predict(X, return_std=True)
    m2, s2 = g2.predict(X, return_std=True)
    # rounding to 10 digits moves predictions by far less than their uncertainty
    np.testing.assert_allclose(m2, m1, rtol=1e-5)
    np.testing.assert_allclose(s2, s1, rtol=1e-4)


def test_from_dict_rejects_malformed(log_gp):
    d = log_gp[0].to_dict()
    del d["alpha"]
    with pytest.raises(FormatError):
        KindGP.from_dict(d)
    d = log_gp[0].to_dict()
    d["target_transform"] = "sqrt"
    with pytest.raises(FormatError):
        KindGP.from_dict(d)


def _estimator(gps, metric="time", unit="s"):
    return build_estimator(gps, device={"name": "test-host"}, metric=metric, unit=unit,
                           flops_baseline={"unit_per_flop": 1e-11}, provenance={"campaign": "test"})


def test_build_estimator_top_level(log_gp):
    doc = _estimator({"relu": log_gp[0]})
    assert doc["format"] == "thor-sdk/estimator" and doc["version"] == 1
    assert doc["producer"].startswith("thor-sdk ")
    assert doc["created_utc"].endswith("Z")
    assert doc["metric"] == "time" and doc["unit"] == "s"
    assert set(doc["kinds"]) == {"relu"}
    assert doc["flops_baseline"]["unit_per_flop"] == 1e-11


@pytest.mark.parametrize("kw", [
    {"metric": "time", "unit": "J"},
    {"metric": "power", "unit": "W"},
])
def test_build_estimator_rejects_metric_unit(log_gp, kw):
    with pytest.raises(UsageError):
        _estimator({"relu": log_gp[0]}, **kw)


def test_build_estimator_needs_flops_baseline(log_gp):
    with pytest.raises(UsageError):
        build_estimator({"relu": log_gp[0]}, device={}, metric="time", unit="s", flops_baseline={},
                        provenance={})
    with pytest.raises(UsageError):
        build_estimator({}, device={}, metric="time", unit="s", flops_baseline={"unit_per_flop": 1.0},
                        provenance={})


def test_write_estimator_round_trip(log_gp, tmp_path):
    gp, X, _ = log_gp
    doc = _estimator({"relu": gp})
    path = tmp_path / "est.json"
    write_estimator(doc, str(path))
    assert [p.name for p in tmp_path.iterdir()] == ["est.json"]  # no temporary file left
    est = load_estimator(str(path))
    mean, std = gp.predict(X[:3], return_std=True)
    for row, m, s in zip(X[:3], mean, std):
        rm, rs = est.predict_layer("relu", dict(zip(RELU, row)))
        assert rm == pytest.approx(m, rel=1e-5) and rs == pytest.approx(s, rel=1e-4)


def _synthetic_kind_data(kind, n, rng):
    """Random but valid configs of a kind with SYNTHETIC costs ~ training FLOPs."""
    k = get_kind(kind)
    X, y = [], []
    for _ in range(n):
        c = {f: int(rng.choice([1, 2, 3, 8, 16, 28, 64, 120, 400])) for f in k.features}
        if kind == "conv2d":
            c.update(groups=1, kernel=int(rng.choice([1, 3, 5])), stride=int(rng.choice([1, 2])),
                     padding=int(rng.choice([0, 1])), bias=1, height=int(rng.choice([8, 16, 28])))
            c["width"] = c["height"]
        if kind in ("maxpool2d", "avgpool2d"):
            c.update(kernel=2, stride=2, padding=0, height=int(rng.choice([8, 16, 28])))
            c["width"] = c["height"]
        if kind == "dropout":
            c["p"] = 0.5
        if "bias" in c:
            c["bias"] = 1
        bs = int(rng.choice([1, 8, 32, 64]))
        role = k.roles[int(rng.integers(len(k.roles)))]
        flops = k.train_flops(c, bs, role)
        X.append(feature_vector(kind, c, bs, role))
        y.append((1e-11 * flops + 1e-5) * math.exp(rng.normal(0, 0.05)))
    return X, y


def test_estimator_size_for_lenet5_scale_is_under_64kb():
    """Realistic worst case for a small CNN: 10 kinds, 30 samples each, 10-digit floats."""
    kinds = ["conv2d", "relu", "maxpool2d", "flatten", "linear", "output", "dropout", "batchnorm2d",
             "avgpool2d", "add"]
    assert all(k in KINDS for k in kinds)
    rng = np.random.default_rng(7)
    gps = {}
    for kind in kinds:
        X, y = _synthetic_kind_data(kind, 30, rng)
        gps[kind] = KindGP(features=gp_features(kind), n_restarts_optimizer=0).fit(X, y)
    doc = _estimator(gps)
    size = len(dumps_estimator(doc).encode())
    assert size <= 64 * 1024, f"estimator is {size} bytes"
    est = load_estimator(json.loads(dumps_estimator(doc)))
    assert set(est.kinds) == set(kinds)


def test_vector_estimators_pass_schema():
    from pathlib import Path

    from thor_sdk.fit.estimator import validate_estimator

    files = sorted((Path(__file__).resolve().parent / "vectors").glob("estimator_*.json"))
    assert files
    for p in files:
        validate_estimator(json.loads(p.read_text()), str(p))
    doc = json.loads(files[0].read_text())
    doc["kinds"][next(iter(doc["kinds"]))]["kernel"]["nu"] = 0.5
    with pytest.raises(FormatError, match="nu"):
        validate_estimator(doc)
