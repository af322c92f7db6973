"""Operators without a kind and kinds an estimator lacks: a clear error by default, `--unknown-ops approx` on request."""

import json

import pytest
import torch
from torch import nn

from thor_sdk.errors import NotFoundError, UnsupportedOperatorError
from thor_sdk.layers import layers_of
from thor_sdk.runtime import load_estimator

VECTORS = "tests/vectors/estimator_time_profile.json"  # kinds: conv2d, maxpool2d, output, relu


class Swishy(nn.Module):
    """SiLU written by hand, a torch.cat, a LeakyReLU, and two ops with no kind at all (exp, Mish)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.LeakyReLU()
        self.mish = nn.Mish()
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        y = self.conv(x)
        y = y * torch.sigmoid(y)
        y = torch.cat([self.act(y), torch.exp(-y)], dim=1)
        y = self.mish(y)
        return self.fc(y.flatten(1))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 4)

    def forward(self, x):
        return self.fc(torch.matmul(x, x.transpose(1, 2)).sum(-1))


def test_ops_with_kinds_are_named_by_their_module_and_ops_without_one_are_a_clear_error():
    with pytest.raises(UnsupportedOperatorError) as e:
        layers_of(Swishy(), input_shape=[3, 8, 8])
    msg = str(e.value)
    assert e.value.ops == ["-x", "Mish", "torch.exp"]
    assert "--unknown-ops approx" in msg and "_operator" not in msg


def test_approx_turns_elementwise_ops_without_a_kind_into_the_generic_kind_and_says_so():
    ml = layers_of(Swishy(), input_shape=[3, 8, 8], unknown_ops="approx")
    ops = {l["op"]: l for l in ml.layers}
    assert ops["x * y"]["kind"] == "mul" and ops["torch.sigmoid"]["kind"] == "sigmoid"
    assert ops["torch.cat"]["kind"] == "cat" and ops["LeakyReLU"]["kind"] == "leaky_relu"
    for op in ("torch.exp", "Mish"):
        assert ops[op]["kind"] == "elementwise" and op in ops[op]["approx"]
        assert ops[op]["config"]["numel"] == (16 if op == "Mish" else 8) * 8 * 8
    assert not any("approx" in l for l in ml.layers if l["kind"] != "elementwise")
    assert ml.layers[-1]["kind"] == "output"


def test_dense_linear_algebra_is_never_approximated():
    with pytest.raises(UnsupportedOperatorError) as e:
        layers_of(Attention(), input_shape=[5, 8], unknown_ops="approx")
    assert "torch.matmul" in e.value.ops


def test_an_estimator_lacking_kinds_names_the_layers_and_approx_estimates_them_wider():
    est = load_estimator(VECTORS)
    ml = layers_of(Swishy(), input_shape=[3, 8, 8], unknown_ops="approx")
    with pytest.raises(NotFoundError) as e:
        est.estimate(ml.layers, 16)
    msg = str(e.value)
    for kind, op in (("leaky_relu", "LeakyReLU"), ("mul", "x * y"), ("cat", "torch.cat"), ("elementwise", "Mish")):
        assert kind in msg and op in msg
    assert "--unknown-ops approx" in msg
    r = est.estimate(ml.layers, 16, unknown="approx")
    known = [l for l in r["layers"] if l["kind"] in est.kinds]
    missing = [l for l in r["layers"] if l["kind"] not in est.kinds]
    assert missing and all("approx" in l and l["mean"] > 0 and l["std"] == pytest.approx(l["mean"]) for l in missing)
    assert all("approx" not in l for l in known)
    assert {a["index"] for a in r["approximated"]} == {i for i, l in enumerate(r["layers"]) if "approx" in l}
    assert r["total"]["mean"] == pytest.approx(sum(l["mean"] for l in r["layers"]))
    # the total's std includes the approximated layers' (independent) uncertainty
    sub = est.estimate([l for l in ml.layers if l["kind"] in est.kinds], 16)
    assert r["layers_total"]["std"] ** 2 >= sub["layers_total"]["std"] ** 2 + sum(l["std"] ** 2 for l in missing) * 0.999


def test_an_approx_marked_layer_of_a_known_kind_gets_a_wider_std():
    est = load_estimator(VECTORS)
    layer = {"name": "r", "kind": "relu", "role": "hidden", "config": {"numel": 4096}}
    plain = est.estimate([layer], 8)["layers"][0]
    marked = est.estimate([dict(layer, approx="Softplus has no kind")], 8)["layers"][0]
    assert marked["mean"] == plain["mean"] and marked["std"] > plain["std"] and marked["approx"]


def test_one_layer_lists_and_lists_not_ending_in_a_linear_estimate(tmp_path):
    est = load_estimator(VECTORS)
    one = tmp_path / "conv.json"
    one.write_text(json.dumps({"format": "thor-sdk/layers", "version": 1, "name": "conv", "layers": [
        {"kind": "conv2d", "config": {"in_channels": 3, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1,
                                      "groups": 1, "height": 32, "width": 32, "bias": 1}}]}))
    ml = layers_of(str(one))
    assert [l["kind"] for l in ml.layers] == ["conv2d"] and ml.layers[0]["role"] == "input"
    r = est.estimate(ml.layers, 4)
    assert r["total"]["mean"] > 0 and r["layers"][0]["role"] == "input"
    net = nn.Sequential(nn.Linear(6, 5), nn.Softmax(dim=-1))  # a final softmax: no longer refused
    assert [l["kind"] for l in layers_of(net, input_shape=[6]).layers] == ["linear", "softmax"]


NET = '''
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.LeakyReLU()
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        y = self.conv(x)
        y = y * torch.sigmoid(y)  # SiLU written by hand
        y = torch.cat([self.act(y), y], dim=1)
        return self.fc(y.flatten(1))
'''


def test_cli_estimate_names_missing_kinds_by_module_and_approx_estimates_them(tmp_path):
    from click.testing import CliRunner

    from thor_sdk.cli.main import cli

    (tmp_path / "net.py").write_text(NET)
    args = ["estimate", "--estimator", VECTORS, "--model", f"{tmp_path}/net.py:Net", "--input-shape", "3,8,8",
            "--batch-size", "4", "--json"]
    bad = CliRunner().invoke(cli, args)
    assert bad.exit_code != 0
    msg = str(bad.exception)
    for op in ("LeakyReLU", "x * y", "torch.cat", "torch.sigmoid"):
        assert op in msg
    ok = CliRunner().invoke(cli, args + ["--unknown-ops", "approx"])
    assert ok.exit_code == 0, ok.output
    r = json.loads(ok.stdout)
    assert {a["op"] for a in r["approximated"]} >= {"LeakyReLU", "x * y", "torch.cat", "torch.sigmoid"}
    assert r["total"]["mean"] > 0 and all(l["mean"] > 0 and l["std"] >= 0 for l in r["layers"])
    assert any("approximated" in w for w in r["warnings"]) and "approximated" in ok.stderr


class _Encoder(nn.Module):
    def __init__(self, batch_first=True):
        super().__init__()
        self.proj = nn.Linear(16, 64)
        self.enc = nn.TransformerEncoderLayer(64, 4, 128, batch_first=batch_first)
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        return self.fc(self.enc(self.proj(x)).mean(dim=1))


def test_a_standard_transformer_encoder_layer_stands_in_as_a_transformer_block_under_approx():
    """nn.TransformerEncoderLayer has no kind: refused by default, costed as the transformer_block of the same
    sizes under approx (marked, so the runtime widens its std); a sequence-first one stays refused."""
    with pytest.raises(UnsupportedOperatorError, match="TransformerEncoderLayer"):
        layers_of(_Encoder(), input_shape=[24, 16])
    ml = layers_of(_Encoder(), input_shape=[24, 16], unknown_ops="approx")
    enc = next(l for l in ml.layers if l["name"] == "enc")
    assert enc["kind"] == "transformer_block" and enc["role"] == "hidden"
    assert enc["config"] == {"d_model": 64, "n_heads": 4, "head_dim": 16, "d_ff": 128, "seq_len": 24}
    assert "TransformerEncoderLayer" in enc["approx"] and "transformer_block" in enc["approx"]
    with pytest.raises(UnsupportedOperatorError, match="TransformerEncoderLayer"):
        layers_of(_Encoder(batch_first=False), input_shape=[24, 16], unknown_ops="approx")
