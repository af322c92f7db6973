"""Tests of the prior's one-channel inputs and flatten-then-dense heads: the zoo nets that bring them, and the
profile candidates whose input conv reads the other channel count."""

import json

from thor_sdk.campaign.prior import CHANNELS_NEIGHBOUR_SHARE, _channels_neighbour, _valid, candidates, load_prior

RGB = {"in_channels": 3, "out_channels": 16, "kernel": 3, "stride": 2, "padding": 1, "groups": 1, "height": 64,
       "width": 64, "bias": 0, "dilation": 1, "kernel_w": 3, "stride_w": 2, "padding_w": 1}


def test_the_neighbour_of_an_input_conv_reads_one_channel_for_any_other_count_and_three_for_one():
    assert _channels_neighbour(RGB) == dict(RGB, in_channels=1)
    assert _channels_neighbour(dict(RGB, in_channels=2)) == dict(RGB, in_channels=1)
    assert _channels_neighbour(dict(RGB, in_channels=1)) == RGB
    assert _valid("conv2d", _channels_neighbour(RGB))


def _one_channel_inputs(prior):
    # drawn from the nets' first convs alone (trained, role input; not a fine-tuned twin's frozen backbone, whose
    # convs are role input too and keep their channels): among all conv2d candidates they are a few percent
    cv = prior["kinds"]["conv2d"]
    firsts = dict(prior, kinds={"conv2d": dict(cv, configs=[c for c in cv["configs"] if c["role"] == "input"
                                                            and not c["config"].get("frozen")])})
    cands = candidates(firsts, "conv2d", 400)
    assert all(_valid("conv2d", c) for c, _, _ in cands)
    return sum(1 for c, _, role in cands if role == "input" and c["in_channels"] == 1)


def test_a_share_of_the_input_convs_reads_the_other_channels_and_an_older_prior_none_more():
    prior = load_prior()
    assert prior["input_channels_share"] == CHANNELS_NEIGHBOUR_SHARE
    old = {k: v for k, v in prior.items() if k != "input_channels_share"}
    with_share, without = _one_channel_inputs(prior), _one_channel_inputs(old)
    assert with_share >= without + 20, (with_share, without)
    # only input convs change: a hidden conv's channels are its previous layer's
    hidden = {c["in_channels"] for c, _, role in candidates(prior, "conv2d", 400) if role == "hidden"}
    hidden_old = {c["in_channels"] for c, _, role in candidates(old, "conv2d", 400) if role == "hidden"}
    assert hidden == hidden_old
    # a hidden zoo layer frozen and run forward only (role input) keeps its channels too: only the zoo's input convs
    # (1 or 3 channels, scaled to at most 6) change
    frozen = {json.dumps(c, sort_keys=True) for c, _, role in candidates(prior, "conv2d", 400)
              if role == "input" and c["in_channels"] > 8}
    frozen_old = {json.dumps(c, sort_keys=True) for c, _, role in candidates(old, "conv2d", 400)
                  if role == "input" and c["in_channels"] > 8}
    assert frozen and frozen == frozen_old


def test_the_zoo_brings_one_channel_input_convs_and_wide_flatten_then_dense_layers_into_the_prior():
    prior = load_prior()
    one = {m for c in prior["kinds"]["conv2d"]["configs"] if c["role"] == "input" and c["config"]["in_channels"] == 1
           for m in c["models"]}
    assert {"mnist_example", "simple_audio_cnn", "micro_speech_tiny_conv"} <= one
    wide = {m for kind in ("linear", "output") for c in prior["kinds"][kind]["configs"]
            if c["config"]["in_features"] >= 4000 for m in c["models"]}
    assert {"mnist_example", "simple_audio_cnn", "micro_speech_tiny_conv"} <= wide
    assert max(c["config"]["in_features"] for c in prior["kinds"]["linear"]["configs"]) >= 12544


def test_a_prior_whose_input_channels_share_is_not_a_share_is_refused(tmp_path):
    import pytest

    from thor_sdk.campaign.prior import PRIOR_FILE
    from thor_sdk.errors import FormatError

    doc = json.load(open(PRIOR_FILE, encoding="utf-8"))
    for bad in (1.5, -0.1, "0.25"):
        path = tmp_path / "prior.json"
        path.write_text(json.dumps(dict(doc, input_channels_share=bad)), encoding="utf-8")
        with pytest.raises(FormatError):
            load_prior(str(path))
