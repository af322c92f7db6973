"""Structural variants: grouped and depthwise convolutions get their own cost model (``conv1d:grouped``),
fitted apart from the dense ones, chosen by every runtime per layer, and planned apart by a profile."""

import math

import numpy as np
import pytest

from thor_sdk.campaign.prior import load_prior
from thor_sdk.campaign.profile import ProfilePlan
from thor_sdk.fitting.estimator import build_estimator
from thor_sdk.fitting.pipeline import fit_kinds
from thor_sdk.layers.kinds import base_kind, model_key
from thor_sdk.runtime import load_estimator
from thor_sdk.runtime.terms import at_batch, cost_terms

DEPTHWISE_SLOWDOWN = 10.0  # planted: a grouped conv costs 10x the dense law of its FLOPs and bytes


def _conv1d(ic, oc, k, groups, length):
    return {"in_channels": ic, "out_channels": oc, "kernel": k, "stride": 1, "padding": k // 2, "groups": groups,
            "length": length, "bias": 0}


def _law(config, batch, role):
    flops, nbytes = at_batch(cost_terms("conv1d", config, role), batch)[:2]
    cost = 2e-5 + flops / 2e10 + nbytes / 5e9
    return cost * (DEPTHWISE_SLOWDOWN if config["groups"] > 1 else 1.0)


def _samples(n_dense, n_grouped, seed=0, noise=0.03):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_dense + n_grouped):
        batch = int(rng.choice([2, 4, 16, 64]))  # none a 1x1 conv below batch 16 or a batch-1 one: no :gemm
        length = int(rng.integers(16, 300))
        if i < n_dense:
            cfg = _conv1d(int(rng.integers(4, 200)), int(rng.integers(4, 200)), int(rng.choice([3, 5, 7])), 1, length)
        else:
            c = int(rng.integers(8, 64))
            cfg = _conv1d(c, c, int(rng.choice([15, 33])), c, length)
        role = str(rng.choice(["input", "hidden"]))
        out.append(_row("conv1d", cfg, batch, role, _law(cfg, batch, role) * math.exp(rng.normal(0, noise))))
    return out


def _row(kind, config, batch, role, value):
    """One time sample as a campaign stores it (unflagged, no spread)."""
    return {"kind": kind, "config": config, "batch_size": batch, "role": role, "metric": "time", "value": value,
            "std": 0.0, "flagged": False}


def _estimator(gps):
    return load_estimator(build_estimator(gps, device={"name": "test"}, metric="time", unit="s",
                                          flops_baseline={"unit_per_flop": 1e-10}, provenance={}))


def test_model_key_names_the_grouped_variant_of_depthwise_convolutions_only():
    assert model_key("conv1d", _conv1d(8, 8, 3, 8, 32)) == "conv1d:grouped"
    assert model_key("conv1d", _conv1d(8, 32, 3, 8, 32)) == "conv1d:grouped"  # a channel multiplier: depthwise
    assert model_key("conv2d", {"groups": 2}) == "conv2d:grouped"  # no channel count: the variant, as before
    # several input channels per group (ResNeXt, RegNetX, ShuffleNetV1): the dense entry
    assert model_key("conv1d", _conv1d(16, 32, 3, 2, 32)) == "conv1d"
    assert model_key("conv2d", {"groups": 8, "in_channels": 64}) == "conv2d"
    assert model_key("conv2d", {"groups": 2, "in_channels": True}) == "conv2d:grouped"  # a bool is no count
    assert model_key("conv1d", _conv1d(8, 8, 3, 1, 32)) == "conv1d"
    assert model_key("linear", {"groups": 4}) == "linear"  # not a convolution: no variant
    assert model_key("conv2d", {"groups": True}) == "conv2d"  # a bool is not a group count
    assert model_key("conv2d", {}) == "conv2d" and model_key("conv2d", None) == "conv2d"
    assert base_kind("conv2d:grouped") == "conv2d" and base_kind("relu") == "relu"


def test_fit_gives_dense_and_grouped_layers_their_own_model():
    gps = fit_kinds(_samples(40, 20))
    assert set(gps) == {"conv1d", "conv1d:grouped"}
    assert gps["conv1d"].n_samples_ == 40 and gps["conv1d:grouped"].n_samples_ == 20
    assert gps["conv1d:grouped"].input_features == gps["conv1d"].input_features


def test_an_unseen_dense_layer_is_not_lifted_by_the_depthwise_samples():
    gps = fit_kinds(_samples(40, 20))
    est = _estimator(gps)
    one = _estimator({"conv1d": gps["conv1d"]})
    dense = [_conv1d(6, 32, 7, 1, 100), _conv1d(32, 64, 5, 1, 50), _conv1d(64, 64, 3, 1, 25)]
    depthwise = _conv1d(24, 24, 33, 24, 200)
    for cfg in dense:
        truth = _law(cfg, 16, "hidden")
        m, s = est.predict_layer("conv1d", dict(cfg, batch_size=16, role="hidden"))
        assert abs(m / truth - 1) < 0.15 and abs(m - truth) <= 2 * s, (cfg, m, truth)
    truth = _law(depthwise, 16, "hidden")
    m, _ = est.predict_layer("conv1d", dict(depthwise, batch_size=16, role="hidden"))
    assert abs(m / truth - 1) < 0.25, (m, truth)
    # without the variant entry (a file written before variants) a grouped layer falls back to the kind's
    m_old, _ = one.predict_layer("conv1d", dict(depthwise, batch_size=16, role="hidden"))
    assert m_old > 0


def test_a_grouped_conv_of_several_channels_per_group_is_a_dense_layer_to_fit_and_estimator():
    samples = _samples(40, 20)
    several = dict(samples[0], config=_conv1d(32, 64, 3, 4, 100), value=1e-3)
    with_several = fit_kinds(samples + [several])
    # its sample joins the dense entry's, not the depthwise variant's
    assert with_several["conv1d"].n_samples_ == 41 and with_several["conv1d:grouped"].n_samples_ == 20
    gps = fit_kinds(samples)
    est = _estimator(gps)
    dense_only = _estimator({"conv1d": gps["conv1d"]})
    q = dict(_conv1d(32, 64, 3, 4, 100), batch_size=16, role="hidden")
    assert est.predict_layer("conv1d", q) == dense_only.predict_layer("conv1d", q)
    layer = {"name": "g", "kind": "conv1d", "role": "hidden", "config": _conv1d(32, 64, 3, 4, 100)}
    assert est.estimate([layer], 16)["layers_total"] == dense_only.estimate([layer], 16)["layers_total"]
    # a depthwise one of the same sizes is the variant's: far from the dense entry's reading
    dw = dict(_conv1d(32, 32, 3, 32, 100), batch_size=16, role="hidden")
    assert est.predict_layer("conv1d", dw)[0] > 3 * dense_only.predict_layer("conv1d", dw)[0]


def test_the_whole_model_sums_each_entry_as_its_own_group():
    est = _estimator(fit_kinds(_samples(40, 20)))
    dense, dw = _conv1d(32, 64, 5, 1, 50), _conv1d(32, 32, 15, 32, 50)
    layers = [{"name": "a", "kind": "conv1d", "role": "input", "config": dense},
              {"name": "b", "kind": "conv1d", "role": "hidden", "config": dw}]
    both = est.estimate(layers, 16)
    alone = [est.estimate([l], 16)["layers_total"] for l in layers]
    assert both["layers_total"]["mean"] == pytest.approx(sum(a["mean"] for a in alone), rel=1e-12)
    # different entries are independent: variances add, no covariance between dense and depthwise
    assert both["layers_total"]["std"] ** 2 == pytest.approx(sum(a["std"] ** 2 for a in alone), rel=1e-9)
    assert both["layers"][1]["mean"] == pytest.approx(
        est.predict_layer("conv1d", dict(dw, batch_size=16, role="hidden"))[0], rel=1e-12)


def test_a_profile_plans_the_grouped_variant_as_its_own_entry():
    prior = load_prior()
    plan = ProfilePlan(prior, kinds=["conv1d"])
    assert set(plan.kinds) == {"conv1d", "conv1d:grouped", "conv1d:gemm"}  # the last: test_gemm_variant.py
    total = prior["kinds"]["conv1d"].get("rel_share", prior["kinds"]["conv1d"]["share"])
    assert sum(plan.share.values()) == pytest.approx(total)
    assert plan.share["conv1d"] > 0 and plan.share["conv1d:grouped"] > 0
    from thor_sdk.campaign.profile import CANDIDATES_PER_KIND

    grouped_configs = [e for e in prior["kinds"]["conv1d"]["configs"] if model_key("conv1d", e["config"]) != "conv1d"]
    # each entry draws its own candidates and integration points: a variant with few zoo layers is not starved
    assert len(plan.candidates["conv1d:grouped"]) >= 0.8 * CANDIDATES_PER_KIND
    assert len(plan.integration["conv1d:grouped"]) == 3 * min(len(grouped_configs), 40)
    for key in plan.kinds:
        assert plan.candidates[key] and plan.start[key] and plan.integration[key]
        assert all(p.model_key == key for p in plan.candidates[key])
        assert all(p.model_key == key for p, *_ in plan.integration[key])
