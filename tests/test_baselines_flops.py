"""The FLOPs baseline: per-kind rate and overhead (>= 0, relative error), fallbacks, no negative estimate."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thor_sdk
from thor_sdk.baselines.flops import (baseline_cost, fit_baseline, fit_rate_overhead, fit_unit_per_flop,
                                      flops_estimate, layer_train_flops)
from thor_sdk.errors import FormatError, UsageError
from thor_sdk.layers.kinds import base_kind


def _sample(kind, config, batch_size, value, role="hidden", std=0.0):
    return {"kind": kind, "config": config, "batch_size": batch_size, "role": role, "value": value, "std": std,
            "metric": "time", "n": 5, "flagged": False, "flag_reason": None}


def _linear(i):
    return {"in_features": 16 * (i + 1), "out_features": 8 * (i + 2), "tokens": 1, "bias": 1}


def _pool(i):
    return {"channels": 4 * (i + 1), "height": 8 * (i + 1), "width": 8 * (i + 1), "kernel": 2, "stride": 2,
            "padding": 0}


def _law_samples(law):
    """Samples of linear and maxpool2d layers whose cost follows ``law(kind, flops)`` exactly."""
    out = []
    for i in range(6):
        for b in (1, 8, 32):
            for kind, cfg in (("linear", _linear(i)), ("maxpool2d", _pool(i))):
                s = _sample(kind, cfg, b, 0.0)
                s["value"] = law(kind, layer_train_flops(s, b))
                out.append(s)
    return out


def _all_numbers(x, path=""):
    if isinstance(x, bool):
        return
    if isinstance(x, (int, float)):
        yield path, x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _all_numbers(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _all_numbers(v, f"{path}[{i}]")


def _check_doc(fb):
    pairs = [("", fb)] + [(k, e) for k, e in fb["per_kind"].items()]
    for where, e in pairs:
        for key in ("unit_per_flop", "overhead", "n_samples"):
            assert math.isfinite(e[key]) and e[key] >= 0, (where, key, e[key])


# ----------------------------------------------------------------------------- fitting
RATES = {"linear": (2e-11, 3e-5), "maxpool2d": (4e-9, 1e-5)}  # (cost per FLOP, overhead): 200x apart


def test_per_kind_rate_and_overhead_recover_a_planted_law():
    fb = fit_unit_per_flop(_law_samples(lambda k, f: RATES[k][0] * f + RATES[k][1]))
    _check_doc(fb)
    for kind, (rate, overhead) in RATES.items():
        got = fb["per_kind"][kind]
        assert got["unit_per_flop"] == pytest.approx(rate, rel=1e-6)
        assert got["overhead"] == pytest.approx(overhead, rel=1e-6)
        assert got["n_samples"] == 18
    assert fb["n_samples"] == 36 and fb["n_floored"] == 0 and "relative" in fb["method"]


def test_one_rate_for_all_kinds_would_miss_pooling_but_per_kind_does_not():
    samples = _law_samples(lambda k, f: RATES[k][0] * f + RATES[k][1])
    fb = fit_unit_per_flop(samples)
    # the global pair alone (what a kind without samples gets) is far off on pooling layers
    pool = [s for s in samples if s["kind"] == "maxpool2d"]
    err = [abs(baseline_cost(fb, "unseen", layer_train_flops(s, s["batch_size"])) - s["value"]) / s["value"]
           for s in pool]
    assert max(err) > 0.3
    assert all(abs(baseline_cost(fb, "maxpool2d", layer_train_flops(s, s["batch_size"])) - s["value"])
               <= 1e-6 * s["value"] for s in pool)


def test_relative_weighting_lets_a_small_layer_count():
    # large layers with +-20% scatter around 1e-10 s/FLOP, one small layer of 50 us that a least-squares
    # fit in absolute terms would miss: the relative fit gets it within a few percent
    flops = [1e9, 2e9, 4e9, 8e9, 1.6e10, 1e5]
    costs = [0.1 * 1.2, 0.2 * 0.8, 0.4 * 1.2, 0.8 * 0.8, 1.6 * 1.2, 5e-5]
    rate, overhead, how = fit_rate_overhead(flops, costs)
    assert how == "nnls" and rate > 0 and overhead >= 0
    small = (rate * flops[-1] + overhead) / costs[-1] - 1
    assert abs(small) < 0.1
    # the same data fitted for absolute error (non-negative least squares): the small layer is off by over half
    rate_abs, over_abs, _ = fit_rate_overhead(flops, costs, scales=[1.0] * len(flops))
    assert abs((rate_abs * flops[-1] + over_abs) / costs[-1] - 1) > 0.5


def test_noisy_and_negative_samples_never_give_negative_numbers():
    samples = []
    for i in range(6):
        b = 4 * (i + 1)
        s = _sample("relu", {"numel": 1000 * (i + 1)}, b, 0.0, std=2e-6)
        # costs falling with FLOPs (pure noise) and subtractions below zero
        s["value"] = [3e-5, -4e-6, 1e-6, 0.0, -1e-3, 2e-5][i]
        samples.append(s)
    fb = fit_unit_per_flop(samples)
    _check_doc(fb)
    assert fb["n_floored"] == 4
    r = fb["per_kind"]["relu"]
    assert r["unit_per_flop"] >= 0 and r["overhead"] >= 0
    # a cost that falls as FLOPs grow is fitted as a constant, not as a negative rate
    rate, overhead, how = fit_rate_overhead([1e6, 2e6, 4e6], [4e-5, 2e-5, 1e-5])
    assert how == "nnls" and rate == 0.0 and overhead > 0
    # every sample of a kind below zero: the fit pulls towards nothing but stays >= 0
    fb = fit_unit_per_flop([_sample("relu", {"numel": 100 * (i + 1)}, 8, -1e-5 * (i + 1)) for i in range(3)]
                           + _law_samples(lambda k, f: RATES[k][0] * f + RATES[k][1]))
    _check_doc(fb)
    assert fb["per_kind"]["relu"]["unit_per_flop"] * 1e4 + fb["per_kind"]["relu"]["overhead"] < 1e-5


def test_kind_without_samples_falls_back_to_the_global_pair():
    fb = fit_unit_per_flop(_law_samples(lambda k, f: RATES[k][0] * f + RATES[k][1]))
    assert "conv2d" not in fb["per_kind"] and fb["unit_per_flop"] > 0 and fb["overhead"] >= 0
    f = 3.5e8
    assert baseline_cost(fb, "conv2d", f) == pytest.approx(fb["unit_per_flop"] * f + fb["overhead"])
    assert baseline_cost(fb, "linear", f) == pytest.approx(RATES["linear"][0] * f + RATES["linear"][1], rel=1e-6)


def test_degenerate_kinds():
    # one sample: a rate through the origin, exactly through it
    one = [_sample("linear", _linear(0), 8, 1e-4)]
    fb = fit_unit_per_flop(one)
    e = fb["per_kind"]["linear"]
    assert e["overhead"] == 0.0 and e["unit_per_flop"] * layer_train_flops(one[0], 8) == pytest.approx(1e-4)
    # identical FLOPs (repeats of one config): the rate only
    assert fit_rate_overhead([5e6] * 4, [1e-4, 2e-4, 1.5e-4, 1e-4])[1:] == (0.0, "origin")
    # no FLOPs at all (flatten): an overhead, with the global rate
    flat = [_sample("flatten", {"numel": 64 * (i + 1)}, 8, 2e-5 * (1 + 0.1 * i)) for i in range(3)]
    fb = fit_unit_per_flop(flat + _law_samples(lambda k, f: RATES[k][0] * f + RATES[k][1]))
    assert all(layer_train_flops(s, 8) == 0 for s in flat)
    assert fb["per_kind"]["flatten"]["unit_per_flop"] == fb["unit_per_flop"]
    assert 2e-5 <= fb["per_kind"]["flatten"]["overhead"] <= 2.2e-5
    assert fit_rate_overhead([0.0, 0.0], [1e-5, 3e-5])[0::2] == (None, "overhead only")
    # nothing to fit from
    empty = fit_baseline([])
    assert empty["unit_per_flop"] == 0.0 and empty["overhead"] == 0.0 and empty["per_kind"] == {}
    assert fit_rate_overhead([], []) == (None, 0.0, "none")
    assert fit_rate_overhead([1.0, float("nan")], [float("inf"), 1.0]) == (None, 0.0, "none")


_KINDS = st.sampled_from(["a", "b", "c"])
_FLOPS = st.one_of(st.just(0.0), st.floats(0.0, 1e20, allow_nan=False), st.floats(0.0, 10.0, allow_nan=False))
_VALUES = st.one_of(st.just(0.0), st.floats(-1e3, 1e3, allow_nan=False), st.floats(-1e-12, 1e-12, allow_nan=False),
                    st.floats(0.0, 1e-15, allow_nan=False))
_STDS = st.one_of(st.just(0.0), st.floats(0.0, 1e3, allow_nan=False))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_KINDS, _FLOPS, _VALUES, _STDS), max_size=12),
       st.lists(st.tuples(st.sampled_from(["a", "b", "c", "unseen"]), _FLOPS), min_size=1, max_size=5))
def test_every_fitted_number_and_estimate_is_finite_and_non_negative(rows, layers):
    fb = fit_baseline(rows)
    _check_doc(fb)
    json.dumps(fb, allow_nan=False)
    for kind, f in layers:
        c = baseline_cost(fb, kind, f)
        assert c is not None and math.isfinite(c) and c >= 0, (kind, f, c)
    r, o, _ = fit_rate_overhead([f for _, f, _, _ in rows], [abs(v) for _, _, v, _ in rows])
    assert (r is None or (math.isfinite(r) and r >= 0)) and math.isfinite(o) and o >= 0


# ----------------------------------------------------------------------------- per-layer estimates
def test_flops_estimate_accepts_old_and_new_baselines():
    layers = thor_sdk.layers_of("har").layers
    flops = [layer_train_flops(l, 8) for l in layers]
    old = flops_estimate(layers, 8, 2e-11)  # a bare cost per FLOP, as before per-kind rates
    assert old["layers"] == pytest.approx([2e-11 * f for f in flops]) and old["flops"] == sum(flops)
    assert flops_estimate(layers, 8, {"unit_per_flop": 2e-11})["layers"] == old["layers"]
    neg = flops_estimate(layers, 8, {"unit_per_flop": -1.0, "overhead": -1.0})  # a hand-edited file
    assert all(v == 0.0 for v in neg["layers"]) and neg["total"] == 0.0
    for none in (None, {}, {"unit_per_flop": None}):
        r = flops_estimate(layers, 8, none)
        assert r["total"] is None and r["layers"] == [None] * len(layers)
    fb = {"unit_per_flop": 1e-11, "overhead": 1e-6,
          "per_kind": {"relu": {"unit_per_flop": 1e-9, "overhead": 2e-5, "n_samples": 3}}}
    new = flops_estimate(layers, 8, fb)
    for l, f, v in zip(layers, flops, new["layers"]):
        want = 1e-9 * f + 2e-5 if l["kind"] == "relu" else 1e-11 * f + 1e-6
        assert v == pytest.approx(want)
    assert new["total"] == pytest.approx(sum(new["layers"]))


def test_build_estimator_checks_the_baseline(tmp_path):
    from thor_sdk.fitting.estimator import build_estimator, validate_estimator

    est = json.loads(open(_vector(), encoding="utf-8").read())
    kinds = _gps(est)
    good = {"unit_per_flop": 1e-11, "overhead": 1e-6, "n_samples": 3, "method": "test",
            "per_kind": {"relu": {"unit_per_flop": 1e-9, "overhead": 2e-5, "n_samples": 3}}}
    doc = build_estimator(kinds, device={}, metric="time", unit="s", flops_baseline=good, provenance={})
    assert doc["flops_baseline"]["per_kind"]["relu"]["overhead"] == 2e-5
    bad = [{"unit_per_flop": -1e-11}, dict(good, overhead=-1.0), dict(good, overhead=float("nan")),
           dict(good, per_kind={"relu": {"unit_per_flop": 1e-9, "overhead": -2e-5}}),
           dict(good, per_kind={"relu": {"unit_per_flop": float("inf"), "overhead": 0.0}}),
           dict(good, per_kind={"relu": {"unit_per_flop": 1e-9}}), dict(good, per_kind=[1])]
    for fb in bad:
        with pytest.raises(UsageError):
            build_estimator(kinds, device={}, metric="time", unit="s", flops_baseline=fb, provenance={})
    # the schema says so too (a file written by hand)
    doc["flops_baseline"]["per_kind"]["relu"]["overhead"] = -1.0
    with pytest.raises(FormatError):
        validate_estimator(doc)


def _vector():
    import os

    return os.path.join(os.path.dirname(__file__), "vectors", "estimator_time_profile.json")


def _gps(doc):
    from thor_sdk.fitting.gp import KindGP

    return {k: KindGP.from_dict(v) for k, v in doc["kinds"].items()}


# ----------------------------------------------------------------------------- every net
@pytest.fixture(scope="module")
def nets_and_estimator(tmp_path_factory):
    """Every reference, zoo and held-out net's layers, and an estimator fitted (through the pipeline
    ``thor-sdk fit`` runs) on synthetic samples of every kind they use: up to 3 configs per kind at 2
    batch sizes, each kind with its own rate and overhead, some samples below zero."""
    from thor_sdk.fitting.estimator import write_estimator
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.models import list_models

    names = list_models("all")
    assert set(list_models("reference")) | set(list_models("zoo")) <= set(names)
    nets = {n: thor_sdk.layers_of(n).layers for n in names}
    by_kind = {}
    for layers in nets.values():
        for l in layers:
            by_kind.setdefault(l["kind"], {}).setdefault(json.dumps([l["role"], l["config"]], sort_keys=True), l)
    samples = []
    for i, kind in enumerate(sorted(by_kind)):
        for j, l in enumerate(list(by_kind[kind].values())[:3]):
            for b in (4, 32):
                value = 1e-10 * (1 + i % 5) * layer_train_flops(l, b) + 2e-5 * (1 + i % 3)
                samples.append(_sample(kind, l["config"], b, -1e-6 if (j, b) == (2, 4) else value, role=l["role"],
                                       std=1e-6))
    doc = build(samples, device={"name": "synthetic"}, runtime="torch", metric="time")
    path = tmp_path_factory.mktemp("est") / "e.json"
    write_estimator(doc, str(path))
    return nets, doc, str(path)


def test_fit_writes_the_per_kind_baseline(nets_and_estimator):
    _, doc, _ = nets_and_estimator
    fb = doc["flops_baseline"]
    _check_doc(fb)
    # per kind, not per entry: a structural variant (a 1x1 conv1d at batch 4, conv1d:gemm) is at its kind's rate
    assert set(fb["per_kind"]) == {base_kind(k) for k in doc["kinds"]} and fb["n_floored"] > 0
    assert {"unit_per_flop", "overhead", "per_kind", "method", "n_samples"} <= set(fb)


def test_no_negative_number_in_estimate_json_of_any_net(nets_and_estimator):
    from click.testing import CliRunner

    from thor_sdk.cli.main import cli

    nets, doc, path = nets_and_estimator
    for name in nets:
        res = CliRunner().invoke(cli, ["estimate", "--estimator", path, "--model", name, "--batch-size", "8",
                                       "--json"])
        assert res.exit_code == 0, (name, res.output)
        r = json.loads(res.stdout)  # warnings (layers outside the samples, noisy kinds) go to stderr
        bad = [(p, v) for p, v in _all_numbers(r) if not (math.isfinite(v) and v >= 0)]
        assert not bad, (name, bad[:5])
        assert r["flops_baseline"]["total"] > 0 and all(l["flops_baseline"] >= 0 for l in r["layers"])
        assert r["flops_baseline"]["total"] == pytest.approx(sum(l["flops_baseline"] for l in r["layers"]))


def test_kinds_missing_from_the_baseline_use_the_global_pair_on_every_net(nets_and_estimator):
    nets, doc, _ = nets_and_estimator
    fb = dict(doc["flops_baseline"])
    fb["per_kind"] = {k: v for i, (k, v) in enumerate(sorted(fb["per_kind"].items())) if i % 2}
    for name, layers in nets.items():
        r = flops_estimate(layers, 16, fb)
        assert r["total"] >= 0 and all(v >= 0 and math.isfinite(v) for v in r["layers"]), name
