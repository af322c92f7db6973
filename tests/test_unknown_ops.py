"""Operators without a kind and kinds an estimator lacks: a clear error by default, `--unknown-ops approx` on request."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch
from torch import nn

from thor_sdk.errors import ModelError, NotFoundError, UnsupportedOperatorError
from thor_sdk.layers import layers_of
from thor_sdk.layers.kinds import get_kind
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
    assert e.value.ops == ["Mish", "torch.exp"]  # -y is kind scale
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


class Einsum(nn.Module):
    def __init__(self, equation="bij,bkj->bik"):
        super().__init__()
        self.equation = equation
        self.fc = nn.Linear(5, 4)

    def forward(self, x):
        return self.fc(torch.einsum(self.equation, x, x).sum(-1))


def test_dense_linear_algebra_is_never_approximated_as_an_elementwise_op():
    """A matmul has no kind: refused by default; under approx it stands in as a linear layer of its FLOPs (never
    the memory-bound generic kind); so does a two-operand einsum, and an einsum it cannot read stays refused."""
    with pytest.raises(UnsupportedOperatorError) as e:
        layers_of(Attention(), input_shape=[5, 8])
    assert "torch.matmul" in e.value.ops
    ml = layers_of(Attention(), input_shape=[5, 8], unknown_ops="approx")
    mm = next(l for l in ml.layers if l["op"] == "torch.matmul")
    assert mm["kind"] == "linear" and mm["role"] == "input" and "torch.matmul" in mm["approx"]
    assert mm["config"] == {"in_features": 8, "out_features": 5, "tokens": 5, "bias": 0}
    assert get_kind("linear").forward_flops(mm["config"]) == 2 * 5 * 5 * 8  # (5 x 8) @ (8 x 5)
    assert [l["kind"] for l in ml.layers if l["op"] == "Tensor.sum"] == ["reduce_sum"]  # the reduction after it
    ein = next(l for l in layers_of(Einsum(), input_shape=[5, 8], unknown_ops="approx").layers
               if l["op"] == "torch.einsum")
    assert ein["kind"] == "linear" and ein["config"] == mm["config"]  # (5 x 8) @ (8 x 5), as the matmul
    summed = next(l for l in layers_of(Einsum("bi...,bk...->bik"), input_shape=[5, 8], unknown_ops="approx").layers
                  if l["op"] == "torch.einsum")  # the ellipsis summed over, as j above
    assert summed["config"] == mm["config"]
    with pytest.raises(UnsupportedOperatorError) as e:
        layers_of(Einsum("bij,bkj"), input_shape=[5, 8], unknown_ops="approx")  # an implicit output
    assert e.value.ops == ["torch.einsum"]


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
    # the total's std includes the approximated layers' uncertainty, one error per missing kind (stds added up
    # linearly over its layers), the kinds apart
    sub = est.estimate([l for l in ml.layers if l["kind"] in est.kinds], 16)
    by_kind = {}
    for l in missing:
        by_kind[l["kind"]] = by_kind.get(l["kind"], 0.0) + l["std"]
    assert any(sum(l["kind"] == k for l in missing) > 1 for k in by_kind)  # a kind with several layers
    assert r["layers_total"]["std"] ** 2 == pytest.approx(sub["layers_total"]["std"] ** 2
                                                          + sum(v * v for v in by_kind.values()), rel=1e-9)


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


class _MaskedEncoder(_Encoder):
    """An encoder layer under a causal mask buffer, with PyTorch's ``is_causal`` hint or without; ``padding``: with
    a key padding mask (one row of flags per sample) instead."""

    def __init__(self, is_causal=False, padding=False):
        super().__init__()
        self.is_causal, self.padding = is_causal, padding
        self.register_buffer("mask", torch.triu(torch.full((24, 24), float("-inf")), diagonal=1))

    def forward(self, x):
        h = self.proj(x)
        if self.padding:
            return self.fc(self.enc(h, src_key_padding_mask=torch.zeros_like(x[..., 0]).bool()).mean(dim=1))
        return self.fc(self.enc(h, src_mask=self.mask, is_causal=self.is_causal).mean(dim=1))


class _CausalStack(nn.Module):
    """``nn.TransformerEncoder`` as PyTorch's language-model example calls it: the mask made in forward by
    ``nn.Transformer.generate_square_subsequent_mask`` (``kind="float"``), its bool form, or a fixed mask that is
    not causal (``kind="band"``)."""

    def __init__(self, kind="float"):
        super().__init__()
        self.kind = kind
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 2, 64, batch_first=True), 2,
                                         enable_nested_tensor=False)
        self.fc = nn.Linear(32, 3)
        band = torch.ones(12, 12, dtype=torch.bool).triu(3) | torch.ones(12, 12, dtype=torch.bool).tril(-3)
        self.register_buffer("band", band)

    def forward(self, x):
        if self.kind == "band":
            mask = self.band
        else:
            mask = nn.Transformer.generate_square_subsequent_mask(x.size(1))
            mask = mask.bool() if self.kind == "bool" else mask
        return self.fc(self.enc(x, mask=mask).mean(dim=1))


def test_a_standard_transformer_encoder_layer_is_its_attention_norms_and_feed_forward():
    """nn.TransformerEncoderLayer called without a mask is the layers it runs (post-norm): its self-attention
    (kind mha, weights not returned, as the layer calls it), dropouts, residual adds, layer norms and the ReLU
    feed-forward; exact, so nothing is marked approx."""
    layers = layers_of(_Encoder(), input_shape=[24, 16]).layers
    enc = [l for l in layers if l["name"].startswith("enc.")]
    assert [l["kind"] for l in enc] == ["mha", "dropout", "add", "layernorm", "linear", "relu", "dropout", "linear",
                                        "dropout", "add", "layernorm"]
    assert enc[0]["config"] == {"embed_dim": 64, "num_heads": 4, "seq_len": 24, "kv_len": 24, "cross": 0,
                                "need_weights": 0, "p": 0.1, "mask": 0, "causal": 0}
    assert enc[4]["config"] == {"in_features": 64, "out_features": 128, "tokens": 24, "bias": 1}
    assert all(l["role"] == "hidden" and "approx" not in l for l in enc)
    # the same multiply-adds as the module's own linears and attention
    t, d, ff = 24, 64, 128
    assert _flops([l for l in enc if l["kind"] == "linear"]) == 2 * (2 * t * d * ff)


def test_a_pre_norm_encoder_stack_with_gelu_and_a_final_norm_is_each_of_its_layers():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(32), enable_nested_tensor=False)
            self.fc = nn.Linear(32, 3)

        def forward(self, x):
            return self.fc(self.enc(x).mean(dim=1))

    layers = layers_of(Stack(), input_shape=[10, 32]).layers
    enc = [l for l in layers if l["name"].startswith("enc.")]
    block = ["layernorm", "mha", "dropout", "add", "layernorm", "linear", "gelu", "dropout", "linear", "dropout", "add"]
    assert [l["kind"] for l in enc] == block + block + ["layernorm"]
    assert enc[0]["role"] == "input" and all(l["role"] == "hidden" for l in enc[1:])  # the stack reads the data
    assert [l["name"] for l in enc if l["kind"] == "mha"] == ["enc.layers.0.self_attn", "enc.layers.1.self_attn"]


@pytest.mark.parametrize("is_causal, mask, causal", [(False, 1, 0), (True, 0, 1)])
def test_an_encoder_layer_under_a_fixed_mask_is_masked_attention(is_causal, mask, causal):
    """A source mask of one tokens x tokens buffer is kind mha's mask (added to the scores), or, with the
    is_causal hint, its causal fused kernel (PyTorch drops the tensor then); the rest of the layer is unchanged and
    nothing is approx."""
    layers = layers_of(_MaskedEncoder(is_causal), input_shape=[24, 16]).layers
    enc = [l for l in layers if l["name"].startswith("enc.")]
    assert [l["kind"] for l in enc] == ["mha", "dropout", "add", "layernorm", "linear", "relu", "dropout", "linear",
                                        "dropout", "add", "layernorm"]
    assert (enc[0]["config"]["mask"], enc[0]["config"]["causal"]) == (mask, causal)
    assert all("approx" not in l for l in layers)


@pytest.mark.parametrize("kind, mask, causal", [("float", 0, 1), ("bool", 0, 1), ("band", 1, 0)])
def test_an_encoder_stack_reads_its_mask_to_tell_causal_attention(kind, mask, causal):
    """nn.TransformerEncoder compares its mask with the causal one and then runs its layers causally: the mask
    generate_square_subsequent_mask makes in forward (float or bool) is causal, a band mask is added; the ops that
    build the mask (torch.full, triu) cost nothing of the batch and are no layers."""
    layers = layers_of(_CausalStack(kind), input_shape=[12, 32]).layers
    att = [l for l in layers if l["kind"] == "mha"]
    assert [l["name"] for l in att] == ["enc.layers.0.self_attn", "enc.layers.1.self_attn"]
    assert all((l["config"]["mask"], l["config"]["causal"]) == (mask, causal) for l in att)
    assert [l["name"] for l in layers][-1] == "fc" and not any("triu" in l["op"] or "full" in l["op"] for l in layers)


class _Decoder(nn.Module):
    """A decoder reading a memory of 8 tokens made from the first frames, its 12 targets from the rest, under the
    causal target mask made in forward: one nn.TransformerDecoderLayer with the is_causal hint, or an
    nn.TransformerDecoder stack (pre-norm, a final norm) that reads the mask's value; ``memory_mask``: a fixed
    mask over the memory too; ``padding``: a key padding mask over it instead."""

    def __init__(self, stack=False, memory_mask=False, padding=False):
        super().__init__()
        self.stack, self.memory_mask, self.padding = stack, memory_mask, padding
        self.src, self.tgt = nn.Linear(16, 32), nn.Linear(16, 32)
        layer = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True, norm_first=stack)
        self.dec = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(32)) if stack else layer
        self.fc = nn.Linear(32, 5)
        self.register_buffer("band", torch.zeros(12, 8))

    def forward(self, x):
        mem, t = self.src(x[:, :8]), self.tgt(x[:, 8:])
        kw = {"tgt_mask": nn.Transformer.generate_square_subsequent_mask(t.size(1))}
        if self.memory_mask:
            kw["memory_mask"] = self.band
        if self.padding:
            kw["memory_key_padding_mask"] = torch.zeros_like(x[:, :8, 0]).bool()
        if not self.stack:
            kw["tgt_is_causal"] = True
        return self.fc(self.dec(t, mem, **kw).mean(dim=1))


@pytest.mark.parametrize("stack, memory_mask", [(False, False), (True, True)])
def test_a_transformer_decoder_is_its_self_attention_cross_attention_norms_and_feed_forward(stack, memory_mask):
    """nn.TransformerDecoderLayer (and a stack of them) is the layers it runs: the causal self-attention over its
    targets, the cross-attention of the targets over the memory (kind mha with cross: the memory's tokens are the
    keys and values; a fixed memory mask is its mask), each with its dropout, residual add and norm, then the
    feed-forward; norms before or after each block as norm_first says; a stack's final norm. Nothing approx."""
    layers = layers_of(_Decoder(stack, memory_mask), input_shape=[20, 16]).layers
    dec = [l for l in layers if l["name"].startswith("dec")]
    block = ["mha", "dropout", "add", "layernorm", "mha", "dropout", "add", "layernorm", "linear", "relu", "dropout",
             "linear", "dropout", "add", "layernorm"]
    pre_norm = ["layernorm", "mha", "dropout", "add", "layernorm", "mha", "dropout", "add", "layernorm", "linear",
                "relu", "dropout", "linear", "dropout", "add"]
    assert [l["kind"] for l in dec] == (pre_norm * 2 + ["layernorm"] if stack else block)
    self_att, cross_att = [l for l in dec if l["kind"] == "mha"][:2]
    assert self_att["config"] == {"embed_dim": 32, "num_heads": 4, "seq_len": 12, "kv_len": 12, "cross": 0,
                                  "need_weights": 0, "p": 0.1, "mask": 0, "causal": 1}
    assert cross_att["config"] == {"embed_dim": 32, "num_heads": 4, "seq_len": 12, "kv_len": 8, "cross": 1,
                                   "need_weights": 0, "p": 0.1, "mask": int(memory_mask), "causal": 0}
    assert cross_att["name"].endswith("multihead_attn") and dec[-1]["name"] == ("dec.norm" if stack else "dec.norm3")
    assert all("approx" not in l and l["role"] == "hidden" for l in dec)
    with pytest.raises(UnsupportedOperatorError, match=r"TransformerDecoder\w*\(a key padding mask\)"):
        layers_of(_Decoder(stack, padding=True), input_shape=[20, 16])


def test_a_full_transformer_is_its_encoder_then_its_decoder_over_the_encoders_output():
    """nn.Transformer (a seq2seq model: 8 source tokens, 12 targets under the causal mask) is its encoder stack's
    layers, the encoder's final norm, then its decoder stack's, whose cross-attention reads the encoder's output
    (8 keys); the source stack has no mask, the target stack is causal (read from the mask's value)."""

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src, self.tgt = nn.Linear(16, 32), nn.Linear(16, 32)
            self.tr = nn.Transformer(32, 4, 2, 1, 64, batch_first=True)
            self.fc = nn.Linear(32, 5)

        def forward(self, x):
            mask = nn.Transformer.generate_square_subsequent_mask(12)
            return self.fc(self.tr(self.src(x[:, :8]), self.tgt(x[:, 8:]), tgt_mask=mask).mean(dim=1))

    layers = layers_of(Seq2Seq(), input_shape=[20, 16]).layers
    att = [(l["name"], l["config"]["seq_len"], l["config"]["kv_len"], l["config"]["cross"], l["config"]["causal"])
           for l in layers if l["kind"] == "mha"]
    assert att == [("tr.encoder.layers.0.self_attn", 8, 8, 0, 0), ("tr.encoder.layers.1.self_attn", 8, 8, 0, 0),
                   ("tr.decoder.layers.0.self_attn", 12, 12, 0, 1), ("tr.decoder.layers.0.multihead_attn", 12, 8, 1, 0)]
    names = [l["name"] for l in layers]
    assert names.index("tr.encoder.norm") < names.index("tr.decoder.layers.0.self_attn")
    assert names[-3:] == ["tr.decoder.norm", "mean", "fc"] and all("approx" not in l for l in layers)


def test_an_encoder_layer_with_a_key_padding_mask_stands_in_as_a_transformer_block_under_approx():
    """A key padding mask (per sample) is not what kind mha measures: refused by default, the transformer_block of
    the same sizes under approx (marked, so the runtime widens its std); a sequence-first one fed batch first stays
    refused."""
    with pytest.raises(UnsupportedOperatorError, match=r"TransformerEncoderLayer\(a key padding mask\)"):
        layers_of(_MaskedEncoder(padding=True), input_shape=[24, 16])
    ml = layers_of(_MaskedEncoder(padding=True), input_shape=[24, 16], unknown_ops="approx")
    enc = next(l for l in ml.layers if l["name"] == "enc")
    assert enc["kind"] == "transformer_block" and enc["role"] == "hidden"
    assert enc["config"] == {"d_model": 64, "n_heads": 4, "head_dim": 16, "d_ff": 128, "seq_len": 24}
    assert "TransformerEncoderLayer" in enc["approx"] and "transformer_block" in enc["approx"]
    with pytest.raises(UnsupportedOperatorError, match="TransformerEncoderLayer"):
        layers_of(_Encoder(batch_first=False), input_shape=[24, 16], unknown_ops="approx")


def _flops(layers):
    return sum(get_kind(l["kind"]).forward_flops(l["config"]) for l in layers)


class _Rnn(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn
        self.fc = nn.Linear(2 * rnn.hidden_size, 3)

    def forward(self, x):
        h, _ = self.rnn(x)
        return self.fc(h[:, -1])


@pytest.mark.parametrize("cls, kind", [(nn.LSTM, "lstm"), (nn.GRU, "gru")])
def test_a_bidirectional_rnn_is_one_layer_per_direction_and_a_cat(cls, kind):
    """A bidirectional LSTM stands in so (refused by default: it took up to 1.5x its directions' probes); a
    bidirectional GRU is read so by default, not approximated (0.93-1.10x, bench_stand_ins)."""
    rnn = cls(12, 20, num_layers=2, batch_first=True, bidirectional=True)
    if cls is nn.LSTM:
        with pytest.raises(UnsupportedOperatorError):
            layers_of(_Rnn(rnn), input_shape=[30, 12])
    else:
        assert layers_of(_Rnn(rnn), input_shape=[30, 12]).layers == \
            layers_of(_Rnn(rnn), input_shape=[30, 12], unknown_ops="approx").layers
    ml = layers_of(_Rnn(rnn), input_shape=[30, 12], unknown_ops="approx")
    got = [(l["name"], l["kind"], l["role"], l["config"].get("input_size")) for l in ml.layers[:-1]]
    assert got == [("rnn.fwd0", kind, "input", 12), ("rnn.rev0", kind, "input", 12), ("rnn.cat0", "cat", "hidden", None),
                   ("rnn.fwd1", kind, "hidden", 40), ("rnn.rev1", kind, "hidden", 40), ("rnn.cat1", "cat", "hidden", None)]
    for l in ml.layers[:-1]:
        assert l["op"] == cls.__name__
        assert ("bidirectional" in l["approx"]) if cls is nn.LSTM else "approx" not in l
        if l["kind"] == kind:
            assert l["config"] == dict(l["config"], hidden_size=20, seq_len=30, num_layers=1)
        else:
            assert l["config"] == {"numel": 30 * 40, "parts": 2}
    seq_first = cls(12, 20, batch_first=False, bidirectional=True)
    with pytest.raises(UnsupportedOperatorError):
        layers_of(_Rnn(seq_first), input_shape=[30, 12], unknown_ops="approx")


def test_a_projected_lstm_stands_in_as_full_size_lstms_and_their_projections():
    """nn.LSTM(proj_size=P): per layer, the lstm of the full hidden size H (PyTorch runs a projected LSTM unfused,
    at about that cost: bench_stand_ins) and the projection, a bias-free linear H -> P over the time steps; later
    layers read P."""
    class Net(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn, self.fc = rnn, nn.Linear(rnn.proj_size * (1 + rnn.bidirectional), 3)

        def forward(self, x):
            return self.fc(self.rnn(x)[0][:, -1])

    net = Net(nn.LSTM(40, 256, num_layers=2, proj_size=64, batch_first=True))
    with pytest.raises(UnsupportedOperatorError, match="projected"):
        layers_of(net, input_shape=[50, 40])
    layers = layers_of(net, input_shape=[50, 40], unknown_ops="approx").layers[:-1]
    assert [(l["name"], l["kind"], l["role"]) for l in layers] == [
        ("rnn.lstm0", "lstm", "input"), ("rnn.proj0", "linear", "hidden"),
        ("rnn.lstm1", "lstm", "hidden"), ("rnn.proj1", "linear", "hidden")]
    assert all("LSTM(projected)" in l["approx"] and l["op"] == "LSTM" for l in layers)
    assert [(l["config"]["input_size"], l["config"]["hidden_size"]) for l in layers if l["kind"] == "lstm"] == \
        [(40, 256), (64, 256)]
    assert all(l["config"] == {"in_features": 256, "out_features": 64, "tokens": 50, "bias": 0}
               for l in layers if l["kind"] == "linear")
    exact = sum(50 * (8 * 256 * (i + 64) + 2 * 256 * 64) for i in (40, 64))  # gates and projection, per sample
    assert 1.5 * exact < _flops(layers) < 2.5 * exact  # the recurrence read at H, not P


def test_a_projected_bidirectional_lstm_stands_in_per_direction_with_the_cat_of_the_projections():
    """Bidirectional and projected: per layer and direction, the full-size lstm and its projection H -> P, then the
    cat of the two projections; the second layer reads 2P."""
    class Net(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn, self.fc = rnn, nn.Linear(2 * rnn.proj_size, 3)

        def forward(self, x):
            return self.fc(self.rnn(x)[0][:, -1])

    net = Net(nn.LSTM(40, 32, num_layers=2, proj_size=8, batch_first=True, bidirectional=True))
    with pytest.raises(UnsupportedOperatorError, match="projected"):
        layers_of(net, input_shape=[50, 40])
    layers = layers_of(net, input_shape=[50, 40], unknown_ops="approx").layers[:-1]
    assert [(l["name"], l["kind"], l["role"]) for l in layers] == [
        ("rnn.fwd0", "lstm", "input"), ("rnn.proj_fwd0", "linear", "hidden"),
        ("rnn.rev0", "lstm", "input"), ("rnn.proj_rev0", "linear", "hidden"), ("rnn.cat0", "cat", "hidden"),
        ("rnn.fwd1", "lstm", "hidden"), ("rnn.proj_fwd1", "linear", "hidden"),
        ("rnn.rev1", "lstm", "hidden"), ("rnn.proj_rev1", "linear", "hidden"), ("rnn.cat1", "cat", "hidden")]
    assert all("LSTM(projected, bidirectional)" in l["approx"] for l in layers)
    assert [(l["config"]["input_size"], l["config"]["hidden_size"]) for l in layers if l["kind"] == "lstm"] == \
        [(40, 32), (40, 32), (16, 32), (16, 32)]
    assert all(l["config"] == {"in_features": 32, "out_features": 8, "tokens": 50, "bias": 0}
               for l in layers if l["kind"] == "linear")
    assert all(l["config"] == {"numel": 50 * 16, "parts": 2} for l in layers if l["kind"] == "cat")
    seq_first = nn.LSTM(40, 32, proj_size=8, bidirectional=True)  # batch at axis 1, fed batch first: refused
    with pytest.raises(UnsupportedOperatorError):
        layers_of(Net(seq_first), input_shape=[50, 40], unknown_ops="approx")


class _SeqFirst(nn.Module):
    """A sequence-first model as users write it: nn.LSTM/GRU/MultiheadAttention with batch_first=False, fed its
    batch-first input transposed, the last time step (or the mean over time) to the classifier."""

    def __init__(self, inner, pool="last"):
        super().__init__()
        self.inner, self.pool = inner, pool
        self.fc = nn.Linear(20, 3)

    def forward(self, x):
        t = x.transpose(0, 1)  # (T, B, F)
        h = self.inner(t, t, t)[0] if isinstance(self.inner, nn.MultiheadAttention) else self.inner(t)[0]
        return self.fc(h[-1] if self.pool == "last" else h.mean(dim=0))


class _BatchFirst(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner, self.fc = inner, nn.Linear(20, 3)

    def forward(self, x):
        return self.fc(self.inner(x)[0][:, -1])


@pytest.mark.parametrize("cls, kind", [(nn.LSTM, "lstm"), (nn.GRU, "gru")])
def test_a_sequence_first_rnn_fed_its_input_transposed_is_its_kind(cls, kind):
    """The batch axis of every value is found by tracing at two batch sizes: a seq-first RNN reads its batch at
    axis 1, so it is the same layer as the batch-first one (plus the transpose); fed a batch-first tensor it
    would treat the batch as time, and stays refused."""
    torch.manual_seed(0)
    seq = layers_of(_SeqFirst(cls(12, 20, num_layers=2)), input_shape=[30, 12]).layers
    ref = layers_of(_BatchFirst(cls(12, 20, num_layers=2, batch_first=True)), input_shape=[30, 12]).layers
    assert [(l["kind"], l["config"]) for l in seq] == [("permute", {"numel": 30 * 12})] + \
        [(l["kind"], l["config"]) for l in ref]
    assert seq[1]["config"] == {"input_size": 12, "hidden_size": 20, "seq_len": 30, "num_layers": 2}
    assert not any("approx" in l for l in seq)
    with pytest.raises(UnsupportedOperatorError, match="batch_first=False"):
        layers_of(_BatchFirst(cls(12, 20)), input_shape=[30, 12])  # fed (B, T, F): it would read B as time
    with pytest.raises(UnsupportedOperatorError, match="batch_first=True"):  # a batch-first one fed (T, B, F)
        layers_of(_SeqFirst(cls(12, 20, batch_first=True)), input_shape=[30, 12])
    bi = layers_of(_SeqFirst(cls(12, 10, bidirectional=True)), input_shape=[30, 12], unknown_ops="approx").layers
    assert [l["name"] for l in bi if l.get("op") == cls.__name__] == ["inner.fwd0", "inner.rev0", "inner.cat0"]
    assert all(("approx" in l) == (cls is nn.LSTM) for l in bi if l.get("op") == cls.__name__)


def test_sequence_first_attention_and_dims_counted_around_the_batch_axis():
    """MultiheadAttention(batch_first=False) on (T, B, E) is the batch-first one's layer; the mean over
    time (dim 0, the batch at 1) is the same pooling layer as mean(dim=1) on a batch-first tensor."""
    att = layers_of(_SeqFirst(nn.MultiheadAttention(20, 4), pool="mean"), input_shape=[10, 20],
                    unknown_ops="approx").layers
    ref = layers_of(_Mha20(), input_shape=[10, 20], unknown_ops="approx").layers
    assert [(l["kind"], l["config"]) for l in att] == [("permute", {"numel": 200})] + \
        [(l["kind"], l["config"]) for l in ref]


class _SeqMatmul(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 5))
        self.fc = nn.Linear(5, 3)

    def forward(self, x):  # (T, B, 8) @ (8, 5): the batch at axis 1 of the product
        return self.fc((x.transpose(0, 1) @ self.w).mean(dim=0))


def test_a_product_with_the_batch_at_axis_1_stands_in_per_sample():
    layers = layers_of(_SeqMatmul(), input_shape=[6, 8], unknown_ops="approx").layers
    mm = next(l for l in layers if l["op"] == "x @ y")
    assert mm["config"] == {"in_features": 8, "out_features": 5, "tokens": 6, "bias": 0}  # 6 steps, not the batch
    assert next(l for l in layers if l["kind"] == "adaptive_avgpool1d")["config"] == {"channels": 5, "length": 6,
                                                                                    "out_size": 1}


class _Mha20(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.fc = nn.MultiheadAttention(20, 4, batch_first=True), nn.Linear(20, 3)

    def forward(self, x):
        return self.fc(self.inner(x, x, x)[0].mean(dim=1))


def _conv_stand_in(conv, shape, refused):
    """The one layer a conv without a kind stands in as (refused by default, naming ``refused``), its kind and the
    conv's output on a batch of one."""
    net = nn.Sequential(conv, nn.Flatten())
    with pytest.raises(UnsupportedOperatorError, match=refused):
        layers_of(net, input_shape=shape)
    layer = layers_of(net, input_shape=shape, unknown_ops="approx").layers[0]
    return layer, get_kind(layer["kind"]), conv(torch.zeros(1, *shape))


@pytest.mark.parametrize("conv, shape", [
    (nn.Conv1d(3, 16, 3, padding=4, dilation=4), [3, 64]),
    (nn.Conv1d(8, 8, 5, stride=2, padding=3, dilation=3, groups=2), [8, 50]),
    (nn.Conv2d(4, 6, 3, padding=2, dilation=2), [4, 12, 12]),
])
def test_a_dilated_conv_is_its_kind_with_its_dilation_and_no_stand_in(conv, shape):
    """A dilated conv is conv1d/conv2d with ``dilation`` (by default, not under approx): its output and FLOPs
    those the module has, no approx mark; the layer built from the config is the module's twin."""
    from thor_sdk.layers.build import build_layer

    layer = layers_of(nn.Sequential(conv, nn.Flatten()), input_shape=shape).layers[0]
    k, out = get_kind(layer["kind"]), conv(torch.zeros(1, *shape))
    assert layer["config"]["dilation"] == conv.dilation[0] and "approx" not in layer
    assert list(k.out_shape(layer["config"])) == list(out.shape[1:])
    assert k.forward_flops(layer["config"]) == pytest.approx(2 * out.numel() * conv.weight[0].numel(), rel=1e-9)
    twin = build_layer(layer["kind"], layer["config"])
    assert (twin.dilation, twin.padding, twin.stride, twin.groups) == (conv.dilation, conv.padding, conv.stride,
                                                                       conv.groups)


@pytest.mark.parametrize("conv, shape", [  # a 2-D one without groups or dilation is kind conv_transpose2d
    (nn.ConvTranspose2d(8, 4, 2, stride=(2, 1)), [8, 10, 10]),
    (nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1, groups=2), [16, 7, 7]),
    (nn.ConvTranspose1d(6, 3, 3, stride=2, padding=1, output_padding=1), [6, 20]),
])
def test_a_transposed_conv_stands_in_as_a_stride_1_conv_of_the_same_flops(conv, shape):
    layer, k, _ = _conv_stand_in(conv, shape, "ConvTranspose")
    # every input element meets the whole kernel: in x out / groups x kernel area multiply-adds per input pixel
    pixels = 1
    for s in shape[1:]:
        pixels *= s
    want = 2 * conv.in_channels * conv.out_channels // conv.groups * conv.weight[0, 0].numel() * pixels
    assert k.forward_flops(layer["config"]) == want
    assert list(k.out_shape(layer["config"]))[1:] == shape[1:] and layer["config"]["stride"] == 1


class _Mha(nn.Module):
    def __init__(self, cross=False, masked=False, padding=False, **call):
        super().__init__()
        self.cross, self.call, self.padding = cross, call, padding
        self.att = nn.MultiheadAttention(32, 4, batch_first=True)
        self.fc = nn.Linear(32, 3)
        self.register_buffer("mask", torch.zeros(10, 4 if cross else 10) if masked else None)

    def forward(self, x):
        kv = x[:, :4] if self.cross else x
        if self.padding:  # one flag per key and sample
            a, _ = self.att(x, kv, kv, key_padding_mask=torch.zeros_like(x[..., 0]).bool())
        else:
            a, _ = self.att(x, kv, kv, attn_mask=self.mask, **self.call)
        return self.fc(a.mean(dim=1))


@pytest.mark.parametrize("cross, masked, call, need_weights, mask, causal", [
    (False, False, {}, 1, 0, 0), (False, False, {"need_weights": False}, 0, 0, 0), (True, False, {}, 1, 0, 0),
    (False, True, {}, 1, 1, 0), (True, True, {"need_weights": False}, 0, 1, 0),
    (False, True, {"need_weights": False, "is_causal": True}, 0, 0, 1),
    (False, True, {"is_causal": True}, 1, 1, 0)])  # weights returned: PyTorch adds the mask, is_causal or not
def test_multi_head_attention_is_its_own_kind(cross, masked, call, need_weights, mask, causal):
    """nn.MultiheadAttention as models call it (self-attention, or keys that are the values; a fixed attn_mask or
    none) is kind mha, its path (weights returned, PyTorch's default, or not) and masking features; its FLOPs are
    the module's multiply-adds (x 2; about half the scores under the causal kernel), the softmax, the mask added to
    each score and the head average of the weights when returned."""
    layers = layers_of(_Mha(cross, masked, **call), input_shape=[10, 32]).layers
    att = next(l for l in layers if l["name"] == "att")
    tq, tk, d, h = 10, 4 if cross else 10, 32, 4
    assert att["kind"] == "mha" and "approx" not in att and att["role"] == "input"  # its inputs need no gradient
    assert att["config"] == {"embed_dim": d, "num_heads": h, "seq_len": tq, "kv_len": tk, "cross": int(cross),
                             "need_weights": need_weights, "p": 0.0, "mask": mask, "causal": causal}
    proj, scores = tq * d * d + tk * d * 2 * d + tq * d * d, 2 * tq * tk * d
    want = 2 * proj + (2 * scores + 5 * h * tq * tk) * (0.5 if causal else 1) + (need_weights + mask) * h * tq * tk
    assert get_kind("mha").forward_flops(att["config"]) == want
    assert get_kind("mha").num_params(att["config"]) == sum(p.numel() for p in _Mha().att.parameters())


def test_multi_head_attention_with_a_key_padding_mask_stands_in_as_its_projections_scores_and_softmax():
    with pytest.raises(UnsupportedOperatorError, match=r"MultiheadAttention\(a key padding mask\)"):
        layers_of(_Mha(padding=True), input_shape=[10, 32])
    ml = layers_of(_Mha(padding=True), input_shape=[10, 32], unknown_ops="approx")
    att = [l for l in ml.layers if l["op"] == "MultiheadAttention"]
    assert [(l["name"], l["kind"], l["role"]) for l in att] == [
        ("att.in_proj", "linear", "input"), ("att.scores", "linear", "hidden"), ("att.softmax", "softmax", "hidden"),
        ("att.weighted", "linear", "hidden"), ("att.out_proj", "linear", "hidden")]
    t, d, h = 10, 32, 4
    macs = t * d * 3 * d + 2 * h * t * t * (d // h) + t * d * d  # projections in and out, scores, weighted sum
    assert _flops([l for l in att if l["kind"] == "linear"]) == 2 * macs
    assert att[2]["config"] == {"numel": h * t * t, "last_dim": t}


class _Cross(nn.Module):
    """Queries from the sequence, keys and values from a shorter memory made of it (a decoder reading an
    encoder's output); ``apart``: keys and values are two tensors."""

    def __init__(self, apart=False):
        super().__init__()
        self.apart = apart
        self.mem = nn.Linear(32, 32)
        self.att = nn.MultiheadAttention(32, 4, batch_first=True, bias=False)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        m = self.mem(x[:, :4])
        a, _ = self.att(x, m, m.flip(1) if self.apart else m)
        return self.fc(a.mean(dim=1))


@pytest.mark.parametrize("apart", [False, True])
def test_cross_attention_stands_in_with_projections_over_queries_and_keys(apart):
    """Queries (10) attend to keys (4): the query projection runs over 10 tokens, the key and value
    projections over 4, the scores are 10 x 4 per head; the same multiply-adds as the module."""
    with pytest.raises(UnsupportedOperatorError, match="MultiheadAttention"):
        layers_of(_Cross(apart), input_shape=[10, 32])
    att = [l for l in layers_of(_Cross(apart), input_shape=[10, 32], unknown_ops="approx").layers
           if l["op"] == "MultiheadAttention"]
    tq, tk, d, h = 10, 4, 32, 4
    projections = ["att.q_proj", "att.k_proj", "att.v_proj"] if apart else ["att.q_proj", "att.kv_proj"]
    assert [l["name"] for l in att] == projections + ["att.scores", "att.softmax", "att.weighted", "att.out_proj"]
    assert {l["config"]["tokens"] for l in att if l["name"] in projections[1:]} == {tk}
    assert all(l["config"]["bias"] == 0 for l in att if l["kind"] == "linear")
    assert att[len(projections) + 1]["config"] == {"numel": h * tq * tk, "last_dim": tk}
    macs = tq * d * d + tk * d * 2 * d + 2 * h * tq * tk * (d // h) + tq * d * d
    assert _flops([l for l in att if l["kind"] == "linear"]) == 2 * macs
    assert "query" in att[0]["approx"]


class _CrossWidths(nn.Module):
    """Cross-attention whose keys and values have their own widths (kdim 16, vdim 24): a decoder reading another
    encoder's features."""

    def __init__(self):
        super().__init__()
        self.k, self.v = nn.Linear(32, 16), nn.Linear(32, 24)
        self.att = nn.MultiheadAttention(32, 4, kdim=16, vdim=24, batch_first=True)
        self.fc = nn.Linear(32, 3)

    def forward(self, x):
        m = x[:, :4]
        return self.fc(self.att(x, self.k(m), self.v(m))[0].mean(dim=1))


def test_cross_attention_with_key_and_value_widths_projects_each_from_its_own():
    layers = layers_of(_CrossWidths(), input_shape=[10, 32], unknown_ops="approx").layers
    att = [l for l in layers if l["op"] == "MultiheadAttention"]
    assert [(l["name"], l["config"].get("in_features"), l["config"].get("tokens")) for l in att[:3]] == [
        ("att.q_proj", 32, 10), ("att.k_proj", 16, 4), ("att.v_proj", 24, 4)]
    tq, tk, d, h = 10, 4, 32, 4
    macs = tq * d * d + tk * 16 * d + tk * 24 * d + 2 * h * tq * tk * (d // h) + tq * d * d
    assert _flops([l for l in att if l["kind"] == "linear"]) == 2 * macs


class _Einsum(nn.Module):
    def __init__(self, equation="bhqd,bhkd->bhqk"):
        super().__init__()
        self.equation = equation
        self.fc = nn.Linear(8, 3)

    def forward(self, x):  # (heads 2, tokens 6, head dim 8) per sample
        a = torch.softmax(torch.einsum(self.equation, x, x), dim=-1)
        return self.fc(torch.einsum("bhqk,bhkd->bhqd", a, x).mean(dim=(1, 2)))


def test_a_two_operand_einsum_stands_in_as_a_linear_of_its_multiply_adds():
    from torch.utils.flop_counter import FlopCounterMode

    with pytest.raises(UnsupportedOperatorError, match="einsum"):
        layers_of(_Einsum(), input_shape=[2, 6, 8])
    layers = layers_of(_Einsum(), input_shape=[2, 6, 8], unknown_ops="approx").layers
    ein = [l for l in layers if l["op"] == "torch.einsum"]
    assert [l["kind"] for l in ein] == ["linear", "linear"] and all("approx" in l for l in ein)
    assert ein[0]["config"] == {"in_features": 8, "out_features": 6, "tokens": 12, "bias": 0}
    x = torch.randn(1, 2, 6, 8)
    with FlopCounterMode(display=False) as fc:
        torch.einsum("bhqd,bhkd->bhqk", x, x)
    assert _flops(ein[:1]) == fc.get_total_flops()  # per sample (batch 1): the einsum's own FLOPs
    assert _flops(ein) == 2 * 2 * (2 * 6 * 6 * 8)
    # an ellipsis is read as the letters it stands for: the same layers as spelled out
    for eq in ("b...qd,b...kd->b...qk", "...qd,...kd->...qk"):
        got = layers_of(_Einsum(eq), input_shape=[2, 6, 8], unknown_ops="approx").layers
        assert [(l["kind"], l["config"]) for l in got] == [(l["kind"], l["config"]) for l in layers]
    # what it cannot say stays refused: a batch axis that is not every subscript's first letter, no output
    # subscripts
    for eq in ("bhqd,bhkd->hbqk", "...qd,...kd"):
        with pytest.raises(UnsupportedOperatorError, match="einsum"):
            layers_of(_Einsum(eq), input_shape=[2, 6, 8], unknown_ops="approx")


class _Sdpa(nn.Module):
    def __init__(self, masked=False, **call):
        super().__init__()
        self.fc, self.call = nn.Linear(8, 3), call
        self.register_buffer("mask", torch.ones(6, 6, dtype=torch.bool).tril() if masked else None)

    def forward(self, x):  # (heads 2, tokens 6, head dim 8) per sample
        from torch.nn import functional as F

        return self.fc(F.scaled_dot_product_attention(x, x, x, attn_mask=self.mask, **self.call).mean(dim=(1, 2)))


@pytest.mark.parametrize("call, causal, p", [({}, 0, 0.0), ({"is_causal": True, "dropout_p": 0.1}, 1, 0.1)])
def test_scaled_dot_product_attention_is_its_own_kind(call, causal, p):
    """F.scaled_dot_product_attention without a mask tensor is kind sdpa (heads, query and key lengths, head width,
    is_causal and dropout_p as features); its FLOPs are the scores and weighted sum (x 2) and the softmax, half of
    them under a causal mask."""
    sd = [l for l in layers_of(_Sdpa(**call), input_shape=[2, 6, 8], unknown_ops="approx").layers  # (the mean)
          if l["op"] == "F.scaled_dot_product_attention"]
    assert len(sd) == 1 and sd[0]["kind"] == "sdpa" and "approx" not in sd[0] and sd[0]["role"] == "input"
    assert sd[0]["config"] == {"num_heads": 2, "seq_len": 6, "kv_len": 6, "head_dim": 8, "causal": causal, "p": p}
    full = 2 * 2 * (2 * 6 * 6 * 8) + 5 * 2 * 6 * 6
    assert get_kind("sdpa").forward_flops(sd[0]["config"]) == full / (2 if causal else 1)


class _SplitQkv(nn.Module):
    """timm's attention: q, k, v split out of one projection by reshape and permute; ``also``: the permuted
    tensor also feeds something that is not attention."""

    def __init__(self, also=False):
        super().__init__()
        self.qkv, self.fc, self.also = nn.Linear(16, 48), nn.Linear(16, 3), also

    def forward(self, x):  # (tokens 6, 16)
        from torch.nn import functional as F

        b, t, _ = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k, v = qkv
        y = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, 16)
        if self.also:
            y = y + qkv.sum(dim=0).transpose(1, 2).reshape(b, t, 16)
        return self.fc(y.mean(dim=1))


def test_a_permute_that_only_feeds_attention_is_a_view_and_costs_nothing():
    """The permute that splits q, k and v out of a projection is a strided view the attention kernel reads as it is
    (kind sdpa's probe reads such views too): no layer. The transpose of the heads' output back, copied by the
    reshape after it, stays a permute; so does a permute whose value also feeds another op."""
    kinds = [l["kind"] for l in layers_of(_SplitQkv(), input_shape=[6, 16]).layers]
    assert kinds == ["linear", "flatten", "sdpa", "permute", "flatten", "adaptive_avgpool1d", "output"]
    kinds = [l["kind"] for l in layers_of(_SplitQkv(also=True), input_shape=[6, 16], unknown_ops="approx").layers]
    assert kinds[:3] == ["linear", "flatten", "permute"] and "sdpa" in kinds


def test_scaled_dot_product_attention_with_a_mask_stands_in_as_scores_softmax_and_weighted_sum():
    with pytest.raises(UnsupportedOperatorError, match=r"scaled_dot_product_attention\(a mask\)"):
        layers_of(_Sdpa(masked=True), input_shape=[2, 6, 8])
    ml = layers_of(_Sdpa(masked=True), input_shape=[2, 6, 8], unknown_ops="approx")
    sd = [l for l in ml.layers if l["op"] == "F.scaled_dot_product_attention"]
    assert [l["kind"] for l in sd] == ["linear", "softmax", "linear"]
    assert _flops([sd[0], sd[2]]) == 2 * 2 * (2 * 6 * 6 * 8)


def test_stand_in_layers_are_estimated_with_the_wider_std_of_approximated_layers():
    from thor_sdk.runtime.estimator import APPROX_OP_REL_STD

    est = load_estimator(VECTORS)  # conv2d, maxpool2d, output, relu
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose2d(4, 4, 2, stride=2, groups=2),
                        nn.ReLU())
    ml = layers_of(net, input_shape=[3, 8, 8], unknown_ops="approx")
    r = est.estimate(ml.layers, 8)
    stand_in = r["layers"][2]
    assert stand_in["kind"] == "conv2d" and "ConvTranspose2d" in stand_in["approx"]
    assert stand_in["std"] >= APPROX_OP_REL_STD * stand_in["mean"] > 0
    assert [a["index"] for a in r["approximated"]] == [2]


def test_the_added_std_of_one_operator_type_adds_up_linearly():
    """Two ConvTranspose2d stand-ins share one error (the operator against its stand-in, on this device):
    the total's variance gains (0.5 (m1 + m2))^2, not 0.25 (m1^2 + m2^2). Layers of another op, or that
    name none, stay independent; each layer's own std is the same either way."""
    from math import fsum

    from thor_sdk.runtime.estimator import APPROX_OP_REL_STD

    est = load_estimator(VECTORS)  # conv2d, maxpool2d, output, relu
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose2d(4, 4, 2, stride=2, groups=2),
                        nn.ReLU(), nn.ConvTranspose2d(4, 4, 2, stride=2, groups=2), nn.ReLU())
    layers = layers_of(net, input_shape=[3, 8, 8], unknown_ops="approx").layers
    idx = [i for i, l in enumerate(layers) if "approx" in l]
    assert len(idx) == 2 and len({layers[i]["op"] for i in idx}) == 1
    apart = [dict(l, op=f"op{i}") if i in idx else l for i, l in enumerate(layers)]
    no_op = [{k: v for k, v in l.items() if k != "op"} if i in idx else l for i, l in enumerate(layers)]
    shared, indep, unnamed = (est.estimate(x, 8) for x in (layers, apart, no_op))
    m1, m2 = (shared["layers"][i]["mean"] for i in idx)
    e1, e2 = APPROX_OP_REL_STD * m1, APPROX_OP_REL_STD * m2
    assert [r["std"] for r in shared["layers"]] == [r["std"] for r in indep["layers"]]
    var = shared["layers_total"]["std"] ** 2
    assert var - indep["layers_total"]["std"] ** 2 == pytest.approx(2 * e1 * e2, rel=1e-9)
    assert unnamed["layers_total"]["std"] == pytest.approx(indep["layers_total"]["std"], rel=1e-12)
    assert var == pytest.approx(fsum([indep["layers_total"]["std"] ** 2, 2 * e1 * e2]), rel=1e-9)


def test_stand_ins_and_generic_approximations_are_warned_apart(tmp_path):
    """A stand-in's kind is one the estimator has (nothing to probe); a generic elementwise op or a kind the
    estimator lacks is worth probing: `estimate` says which is which."""
    from thor_sdk.api import estimate_layers

    est = load_estimator(VECTORS)  # conv2d, maxpool2d, output, relu
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.Mish(), nn.ConvTranspose2d(4, 4, 2, stride=2, groups=2),
                        nn.ReLU())
    ml = layers_of(net, input_shape=[3, 8, 8], unknown_ops="approx")
    warnings = estimate_layers(est, ml, 8, unknown_ops="approx")["warnings"]
    stand_in = [w for w in warnings if "stand in" in w]
    generic = [w for w in warnings if "probe their kinds" in w]
    assert len(stand_in) == 1 and "1 layer(s)" in stand_in[0] and "ConvTranspose2d" in stand_in[0]
    assert len(generic) == 1 and "Mish" in generic[0] and "ConvTranspose2d" not in generic[0]


def test_a_bidirectional_stand_in_follows_a_subclass_of_the_torch_rnn():
    class MyLSTM(nn.LSTM):  # kept whole by the tracer, as nn.LSTM is
        pass

    rnn = layers_of(_Rnn(MyLSTM(6, 8, batch_first=True, bidirectional=True)), input_shape=[5, 6],
                    unknown_ops="approx").layers
    assert [l["kind"] for l in rnn] == ["lstm", "lstm", "cat", "output"]
    assert "LSTM(bidirectional)" in rnn[0]["approx"]


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.sampled_from(["dilated1d", "dilated2d"]), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4),
       st.integers(2, 4), st.integers(1, 3), st.integers(0, 2), st.integers(4, 12), st.sampled_from([1, 2]))
def test_any_dilated_conv_is_read_with_its_output_and_flops(what, cin, cout, kernel, dilation, stride, padding, side,
                                                            groups):
    """Any dilated conv that runs: its kind, with exactly the module's output shape and multiply-adds (counted from
    its weight and the sizes it really produces), and the layer its config builds gives that output."""
    from thor_sdk.layers.build import build_layer

    cin, cout = cin * groups, cout * groups
    cls = nn.Conv1d if what.endswith("1d") else nn.Conv2d
    conv = cls(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups)
    shape = [cin] + [side] * (1 if what.endswith("1d") else 2)
    try:
        out = conv(torch.zeros(1, *shape))
    except RuntimeError:  # a dilated kernel larger than its padded input: not a module that runs, said so
        with pytest.raises(ModelError, match="does not run on inputs"):
            layers_of(nn.Sequential(conv, nn.Flatten()), input_shape=shape)
        return
    layer = layers_of(nn.Sequential(conv, nn.Flatten()), input_shape=shape).layers[0]
    k = get_kind(layer["kind"])
    assert layer["kind"] == cls.__name__.lower() and "approx" not in layer
    assert list(k.out_shape(layer["config"])) == list(out.shape[1:])
    assert k.forward_flops(layer["config"]) == 2 * out.numel() * conv.weight[0].numel()
    assert build_layer(layer["kind"], layer["config"])(torch.zeros(1, *shape)).shape == out.shape


@settings(derandomize=True, max_examples=40, deadline=None)
@given(st.sampled_from(["transposed1d", "transposed2d"]), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 4), st.integers(2, 4), st.integers(1, 3), st.integers(0, 2),
       st.integers(4, 12), st.sampled_from([1, 2]))
def test_transposed_conv_stand_ins_keep_the_flops_of_any_conv_they_accept(what, cin, cout, kernel, dilation, stride,
                                                                         padding, side, groups):
    """Any transposed conv: refused, or a conv stand-in of exactly the module's multiply-adds (counted from its
    weight and the sizes it really produces) and of an output no larger than the module's."""
    cin, cout = cin * groups, cout * groups
    try:
        cls = nn.ConvTranspose1d if what.endswith("1d") else nn.ConvTranspose2d
        conv = cls(cin, cout, kernel, stride=stride, padding=min(padding, kernel - 1), groups=groups)
        shape = [cin] + [side] * (1 if what.endswith("1d") else 2)
        out = conv(torch.zeros(1, *shape))
    except RuntimeError:  # a kernel larger than its padded input: not a module that runs
        return
    try:
        layers = layers_of(nn.Sequential(conv, nn.Flatten()), input_shape=shape, unknown_ops="approx").layers
    except UnsupportedOperatorError:
        return
    layer = layers[0]
    k = get_kind(layer["kind"])
    want = 2 * torch.zeros(shape).numel() * conv.weight[0].numel()  # every input element meets its group's kernel
    if what == "transposed2d" and groups == 1:  # kind conv_transpose2d itself: its own output, parameters, FLOPs
        assert layer["kind"] == "conv_transpose2d" and "approx" not in layer
        assert list(k.out_shape(layer["config"])) == list(out.shape[1:])
        assert k.num_params(layer["config"]) == sum(p.numel() for p in conv.parameters())
        assert k.forward_flops(layer["config"]) == want
        return
    assert k.forward_flops(layer["config"]) == want and "approx" in layer


def test_an_instance_norm_stands_in_as_the_batch_norm_of_the_same_sizes():
    """torch computes nn.InstanceNorm1d/2d as a batch norm over the (1, B x C, ...) view: under approx it is the
    batchnorm1d/2d of the same sizes, marked approx; without approx it stays refused by name. GroupNorm without its
    affine is the layernorm of the same statistics, one row per group; with it, kind groupnorm."""
    class Net(nn.Module):
        def __init__(self, norm, out):
            super().__init__()
            self.norm, self.fc = norm, nn.Linear(out, 3)

        def forward(self, x):
            return self.fc(torch.flatten(torch.relu(self.norm(x)), 1))

    for norm, shape, kind, config in (
            (nn.InstanceNorm2d(8, affine=True), [8, 6, 6], "batchnorm2d", {"channels": 8, "height": 6, "width": 6}),
            (nn.InstanceNorm2d(8), [8, 6, 6], "batchnorm2d", {"channels": 8, "height": 6, "width": 6}),
            (nn.InstanceNorm1d(8), [8, 20], "batchnorm1d", {"channels": 8, "length": 20})):
        net = Net(norm, _prod_of(shape))
        with pytest.raises(UnsupportedOperatorError, match="InstanceNorm"):
            layers_of(net, input_shape=shape)
        first = layers_of(net, input_shape=shape, unknown_ops="approx").layers[0]
        assert (first["kind"], first["config"], first["op"]) == (kind, config, type(norm).__name__)
        assert first["approx"].startswith(f"{type(norm).__name__} has no kind")
    gn = layers_of(Net(nn.GroupNorm(2, 8, affine=False), 288), input_shape=[8, 6, 6],
                   unknown_ops="approx").layers[0]
    assert (gn["kind"], gn["config"]) == ("layernorm", {"normalized": 4 * 36, "tokens": 2})  # a row per group
    assert gn["approx"].startswith("GroupNorm without its affine has no kind")
    gn = layers_of(Net(nn.GroupNorm(2, 8), 288), input_shape=[8, 6, 6]).layers[0]  # with it: its own kind
    assert (gn["kind"], gn["config"]) == ("groupnorm", {"channels": 8, "num_groups": 2, "spatial": 36})
    assert "approx" not in gn


def _prod_of(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_a_three_operand_einsum_stands_in_as_its_two_pairwise_contractions():
    """torch contracts three operands pairwise: left to right, or (with opt_einsum) the pairing of fewest
    multiply-adds. Each contraction is a linear layer of its own multiply-adds; a contraction summing over nothing
    (a broadcast product) is refused, even under approx."""
    from thor_sdk.layers.extract import einsum_chain_stand_in

    shapes, out = [[1, 4, 8], [1, 8, 16], [1, 16, 2]], [1, 4, 2]
    layers, why = einsum_chain_stand_in("bij,bjk,bkl->bil", shapes, out)
    assert [(s, k, c) for s, (k, c), _ in layers] == [
        (".contract0", "linear", {"in_features": 8, "out_features": 16, "tokens": 4, "bias": 0}),  # (4x8)(8x16)
        (".contract1", "linear", {"in_features": 16, "out_features": 2, "tokens": 4, "bias": 0})]  # (4x16)(16x2)
    assert [r for *_, r in layers] == [True, False] and "left to right" in why
    layers, why = einsum_chain_stand_in("bij,bjk,bkl->bil", shapes, out, cheapest=True)
    assert [c for _, (k, c), _ in layers] == [  # (8x16)(16x2) first: 256 + 64 multiply-adds, not 512 + 128
        {"in_features": 16, "out_features": 2, "tokens": 8, "bias": 0},
        {"in_features": 8, "out_features": 2, "tokens": 4, "bias": 0}]
    assert "operands 2 and 3 first" in why
    assert einsum_chain_stand_in("bi,bi,bi->bi", [[1, 8]] * 3, [1, 8]) is None  # sums over nothing
    assert einsum_chain_stand_in("bij,bjk,bkl", shapes, out) is None  # an implicit output
    assert einsum_chain_stand_in("bij,jk,bkl->bil", [[1, 4, 8], [8, 16], [1, 16, 2]], out) is None  # no batch

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.fc = nn.Linear(8, 8), nn.Linear(8, 16), nn.Linear(8, 3)

        def forward(self, x):  # x: [B, 4, 8]
            h = self.b(x).view(-1, 8, 8)  # [B, 8, 8]
            y = torch.einsum("bij,bjk,bkl->bil", self.a(x), h, h)
            return self.fc(y.mean(dim=1))

    with pytest.raises(UnsupportedOperatorError, match="einsum"):
        layers_of(Chain(), input_shape=[4, 8])
    ein = [l for l in layers_of(Chain(), input_shape=[4, 8], unknown_ops="approx").layers if l["op"] == "torch.einsum"]
    assert [l["kind"] for l in ein] == ["linear", "linear"] and all("pairwise" in l["approx"] for l in ein)
    assert _flops(ein) == 2 * (4 * 8 * 8 + 4 * 8 * 8)  # (4x8)(8x8), then (4x8)(8x8): the cheapest order too
    with pytest.raises(UnsupportedOperatorError, match="einsum"):
        class Broadcast(Chain):
            def forward(self, x):
                return self.fc(torch.einsum("bij,bij,bij->bij", x, x, x).mean(dim=1))
        layers_of(Broadcast(), input_shape=[4, 8], unknown_ops="approx")
