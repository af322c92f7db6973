"""A conv's dilation as a feature of kinds conv1d and conv2d: its default, probe ids, old campaigns, the prior's
dilated neighbours, the estimator's defaults and the zoo's dilated nets."""

import pytest

from thor_sdk.errors import UsageError
from thor_sdk.layers.kinds import complete_config, get_kind, gp_features, minimal_config, with_added_features

CONV1D = dict(in_channels=16, out_channels=32, kernel=3, stride=1, padding=1, groups=1, length=64, bias=1)
CONV2D = dict(in_channels=8, out_channels=16, kernel=3, stride=1, padding=1, groups=1, height=12, width=12, bias=0)


@pytest.mark.parametrize("kind,config", [("conv1d", CONV1D), ("conv2d", CONV2D)])
def test_dilation_left_out_reads_as_1_and_a_probe_keeps_the_id_it_had(kind, config):
    from thor_sdk.probes import Probe

    assert "dilation" in gp_features(kind)
    assert complete_config(kind, config)["dilation"] == 1
    assert with_added_features(kind, config)["dilation"] == 1  # a sample of an older campaign: undilated
    assert "dilation" not in minimal_config(kind, dict(config, dilation=1))
    assert minimal_config(kind, dict(config, dilation=2))["dilation"] == 2
    assert Probe(kind, dict(config, dilation=1), 16, "hidden").id == Probe(kind, config, 16, "hidden").id
    assert Probe(kind, dict(config, dilation=2, padding=2), 16, "hidden").id != Probe(kind, config, 16, "hidden").id
    k = get_kind(kind)
    assert k.out_shape(config) == k.out_shape(dict(config, dilation=1))
    assert k.forward_flops(dict(config, dilation=2, padding=2)) == k.forward_flops(config)  # same output, same taps


@pytest.mark.parametrize("bad,match", [(0, "at least 1"), (1.5, "integer"), (-2, "non-negative"),
                                       (40, "empty")])
def test_a_bad_dilation_is_refused_before_any_work(bad, match):
    with pytest.raises(UsageError, match=match):
        get_kind("conv1d").check_config(dict(CONV1D, dilation=bad))


def test_the_dilation_neighbour_doubles_or_undoes_it_and_keeps_same_padding():
    from thor_sdk.campaign.prior import _dilation_neighbour

    same = dict(CONV2D, kernel_w=3, stride_w=1, padding_w=1)
    assert _dilation_neighbour(same, 0.2) == dict(same, dilation=2, padding=2, padding_w=2)
    assert _dilation_neighbour(same, 0.7) == dict(same, dilation=4, padding=4, padding_w=4)
    dilated = dict(CONV1D, dilation=4, padding=4)
    assert _dilation_neighbour(dilated, 0.2) == dict(dilated, dilation=1, padding=1)
    assert _dilation_neighbour(dilated, 0.7) == dict(dilated, dilation=8, padding=8)
    valid = dict(CONV1D, padding=0)  # a "valid" conv stays unpadded
    assert _dilation_neighbour(valid, 0.2) == dict(valid, dilation=2)
    assert _dilation_neighbour(dict(CONV1D, kernel=1, padding=0), 0.2) is None  # one tap: nothing to space
    assert _dilation_neighbour(dict(CONV2D, kernel=4, stride=4, padding=0), 0.2) is None  # patchify


def test_profile_candidates_dilate_a_share_of_the_convs_and_every_one_is_valid():
    from thor_sdk.campaign.prior import DILATION_NEIGHBOUR_SHARE, _valid, candidates, load_prior

    prior = load_prior()
    assert prior["dilation_share"] == DILATION_NEIGHBOUR_SHARE
    for kind in ("conv1d", "conv2d"):
        cands = candidates(prior, kind, 400)
        dilated = [c for c, _, _ in cands if c.get("dilation", 1) > 1]
        assert 0.03 * len(cands) < len(dilated) < 0.4 * len(cands), kind
        assert all(_valid(kind, c) for c, _, _ in cands)
    old = {k: v for k, v in prior.items() if k != "dilation_share"}  # an older prior file: none added
    zoo = {c["config"].get("dilation", 1) for c in prior["kinds"]["conv2d"]["configs"]}
    assert {c.get("dilation", 1) for c, _, _ in candidates(old, "conv2d", 400)} <= zoo | {1}


def test_the_zoo_has_dilated_convs_of_both_kinds():
    from thor_sdk.campaign.prior import load_prior

    prior = load_prior()
    for kind, model in (("conv1d", "tcn_har"), ("conv2d", "erfnet_small")):
        dilated = [c for c in prior["kinds"][kind]["configs"] if c["config"].get("dilation", 1) > 1]
        # each from the net, whole or fine-tuned (its twin: "erfnet_small:finetune")
        assert dilated and all(model in {m.split(":")[0] for m in c["models"]} for c in dilated), kind


def test_an_estimator_tells_its_runtimes_the_default():
    """The fit writes ``defaults`` for the conv entries (the dense and the grouped one), so a layer list without
    dilation (written before it was a feature) reads as undilated in every runtime."""
    import numpy as np

    from thor_sdk.fitting.estimator import build_estimator
    from thor_sdk.fitting.gp import KindGP
    from thor_sdk.layers.kinds import feature_vector
    from thor_sdk.runtime import Estimator
    from thor_sdk.runtime.terms import at_batch, cost_terms

    rng = np.random.default_rng(0)
    gps = {}
    for key, groups in (("conv1d", 1), ("conv1d:grouped", 16), ("tanh", None)):
        kind = key.split(":")[0]
        X, y, T = [], [], []
        for i in range(6):
            c = dict(CONV1D, groups=groups, length=int(rng.choice([32, 64])), dilation=1 + i % 2) if groups \
                else {"numel": 100 * (i + 1)}
            X.append(feature_vector(kind, c, 8, "hidden"))
            T.append(at_batch(cost_terms(kind, c, "hidden"), 8))
            y.append(1e-4 * (1 + i))
        gps[key] = KindGP(features=gp_features(kind), random_state=0).fit(X, y, terms=T)
    doc = build_estimator(gps, device={"name": "t"}, runtime="torch", metric="time", unit="s",
                          flops_baseline={"unit_per_flop": 1e-11}, provenance={"note": "test"})
    assert doc["kinds"]["conv1d"]["defaults"] == doc["kinds"]["conv1d:grouped"]["defaults"] \
        == {"dilation": 1, "frozen": 0}
    assert "defaults" not in doc["kinds"]["tanh"]  # a kind without a defaulted feature has none
    est = Estimator(doc)
    layer = {"name": "c", "kind": "conv1d", "role": "hidden", "config": CONV1D}
    assert est.estimate([layer], 8)["total"] == est.estimate([dict(layer, config=dict(CONV1D, dilation=1))], 8)["total"]


def test_an_estimator_fitted_before_dilation_marks_a_dilated_layer_approx():
    """An estimator whose conv2d model has no dilation input (the shared time vector predates it) reads a dilated conv
    as its undilated twin of the same FLOPs and bytes: the same mean, marked approx with the reason and its std
    widened as a stand-in's; an undilated one (dilation 1, or left out) is estimated as before, unmarked."""
    from pathlib import Path

    from thor_sdk.layers import approximation_warnings
    from thor_sdk.runtime import load_estimator

    est = load_estimator(Path(__file__).parent / "vectors" / "estimator_time_profile.json")
    assert "dilation" not in est._models["conv2d"].index
    conv = dict(CONV2D, height=16, width=16)
    plain = est.estimate([{"name": "c", "kind": "conv2d", "role": "hidden", "config": conv}], 8)
    one = est.estimate([{"name": "c", "kind": "conv2d", "role": "hidden", "config": dict(conv, dilation=1)}], 8)
    dilated = est.estimate([{"name": "c", "kind": "conv2d", "role": "hidden",
                             "config": dict(conv, dilation=2, padding=2)}], 8)
    assert [(r["mean"], r["std"]) for r in plain["layers"]] == [(r["mean"], r["std"]) for r in one["layers"]]
    assert not plain["approximated"] and not one["approximated"]
    (row,) = dilated["layers"]
    # (its padding, 2 for the same output, is a GP input too: the mean moves by that alone)
    before = plain["layers"][0]
    assert row["mean"] == pytest.approx(before["mean"], rel=0.01) and row["std"] > 1.5 * before["std"]
    assert "predates" in row["approx"] and "dilation 2" in row["approx"]
    (a,) = dilated["approximated"]
    assert a["unread_feature"] and not a["missing_kind"]
    (w,) = approximation_warnings(dilated["approximated"])
    assert "fitted without (conv2d" in w
