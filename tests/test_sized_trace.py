"""Models fx cannot trace symbolically (a size used as a Python number) traced with their input's sizes; a forward's
optional arguments traced at their defaults."""

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from thor_sdk.errors import ModelError
from thor_sdk.layers import layers_of


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention without flash: its causal mask a buffer sliced by the sequence length ``T`` (fx's
    symbolic trace: "slice indices must be integers"), its scale ``1 / math.sqrt(k.size(-1))``."""

    def __init__(self, d=32, heads=4, block=16, sliced=True, fused=False):
        super().__init__()
        self.heads, self.sliced, self.fused = heads, sliced, fused
        self.qkv, self.proj, self.drop = nn.Linear(d, 3 * d), nn.Linear(d, d), nn.Dropout(0.1)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = self.bias[:, :, :T, :T] if self.sliced else self.bias
            att = self.drop(F.softmax(att.masked_fill(mask == 0, float("-inf")), dim=-1))
            y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TinyGPT(nn.Module):
    def __init__(self, sliced=True, fused=False, vocab=100, block=16, d=32, bn=True):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.ln, self.attn = nn.LayerNorm(d), CausalSelfAttention(d, 4, block, sliced, fused)
        self.bn = nn.BatchNorm1d(block) if bn else nn.Identity()  # over the positions: a running statistic
        self.head = nn.Linear(d, vocab)

    def forward(self, idx):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        x = x + self.attn(self.ln(x))
        return self.head(self.bn(x))[:, -1, :]


def _kinds(ml):
    return [(l["kind"], l["config"], l.get("approx") is not None) for l in ml.layers]


def test_a_buffer_sliced_by_a_size_traces_with_the_inputs_sizes_and_reads_as_its_traceable_twin():
    """The sliced model failed with fx's TypeError before; traced with its sizes it gives the very layer list of
    the same model that uses the whole buffer (traceable symbolically), token ids found without being told
    (``idx.size()`` and ``idx.device`` only read what the input is)."""
    from torch import fx

    with pytest.raises(TypeError):
        fx.symbolic_trace(TinyGPT(sliced=True))
    fx.symbolic_trace(TinyGPT(sliced=False))
    sliced = layers_of(TinyGPT(sliced=True), input_shape=[16], unknown_ops="approx")
    whole = layers_of(TinyGPT(sliced=False), input_shape=[16], unknown_ops="approx")
    assert sliced.input_dtype == whole.input_dtype == "int64"
    assert _kinds(sliced) == _kinds(whole)
    kinds = [k for k, _, _ in _kinds(sliced)]
    assert kinds[:2] == ["embedding", "layernorm"] and kinds[-1] == "output" and "softmax" in kinds
    # tok(idx) + pos(torch.arange(T)): one embedding with its positions, as the zoo's TokenPositionalEmbedding reads
    assert _kinds(sliced)[0][1] == {"num_embeddings": 100, "embedding_dim": 32, "seq_len": 16, "positional": 1}
    # the batch axis is found as for a symbolic trace: per-sample sizes, nothing of the batch in a config
    assert next(c for k, c, _ in _kinds(sliced) if k == "softmax") == {"numel": 4 * 16 * 16, "last_dim": 16}
    # the sizes read as numbers are the input's: a shorter sequence gives smaller layers, the buffer still sliced
    short = layers_of(TinyGPT(sliced=True, bn=False), input_shape=[8], unknown_ops="approx")
    assert next(c for k, c, _ in _kinds(short) if k == "softmax") == {"numel": 4 * 8 * 8, "last_dim": 8}


def test_the_fused_attention_of_a_sliced_model_is_the_sdpa_kind_as_from_a_symbolic_trace():
    ml = layers_of(TinyGPT(sliced=True, fused=True), input_shape=[16])
    sdpa = [c for k, c, _ in _kinds(ml) if k == "sdpa"]
    assert sdpa == [{"num_heads": 4, "seq_len": 16, "kv_len": 16, "head_dim": 8, "causal": 1, "p": 0.0}]


def test_tracing_with_sizes_leaves_the_users_module_as_it_was():
    """The module runs while it is traced (on a copy): a batch norm's running statistics and the training flag
    stay the caller's."""
    model = TinyGPT(sliced=True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    layers_of(model, input_shape=[16], unknown_ops="approx")
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert int(model.bn.num_batches_tracked) == 0


class PerSample(nn.Module):
    """Loops over the batch: its operators change with the batch size."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.stack([self.fc(x[i]) for i in range(x.size(0))])


class TimeLoop(nn.Module):
    """A recurrence written as a Python loop over time (``range(x.size(1))``: fx's symbolic trace refuses it)."""

    def __init__(self):
        super().__init__()
        self.cell, self.head = nn.Linear(8, 8), nn.Linear(8, 3)

    def forward(self, x):
        h = torch.zeros(x.size(0), 8)
        for t in range(x.size(1)):
            h = torch.tanh(self.cell(x[:, t] + h))
        return self.head(h)


class ValueBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        n = x.size(-1)
        return self.fc(x[..., :n] * 2 if x.sum() > 0 else x)


def test_a_loop_over_time_unrolls_and_one_over_the_batch_or_over_values_is_refused():
    steps = layers_of(TimeLoop(), input_shape=[5, 8])
    assert [l["kind"] for l in steps.layers].count("tanh") == 5
    assert [l["config"]["tokens"] for l in steps.layers if l["kind"] == "linear"] == [1] * 5
    with pytest.raises(ModelError, match="operators change with the batch size"):
        layers_of(PerSample(), input_shape=[4])
    with pytest.raises(ModelError, match="could not trace"):
        layers_of(ValueBranch(), input_shape=[4])


def test_a_sized_trace_of_a_model_that_does_not_run_on_the_shape_says_so():
    with pytest.raises(ModelError, match=r"does not run on inputs of shape \[5, 9\]"):
        layers_of(TimeLoop(), input_shape=[5, 9])


class _Once(nn.Module):
    """Runs ``inner`` once inside ``range()`` of a size, which fx's symbolic trace refuses: the whole net then goes
    through the trace with its input's sizes."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        for _ in range(x.dim() - x.dim() + 1):
            x = self.inner(x)
        return x


def _same(ml):
    return [(l["kind"], l["role"], l["config"], l.get("approx")) for l in ml.layers], ml.input_dtype


def test_every_zoo_and_user_net_reads_the_same_traced_with_its_sizes():
    """The trace with sizes against fx's symbolic one on every net that has both: the prior's zoo (reference nets
    included) and the held-out user nets (under approx: their stand-ins too) give the same layers, roles, configs
    and input dtype, so a net that needs the sized trace is read as a traceable one is."""
    from bench_module import load_bench

    from thor_sdk import models

    for name in models.SPECS:
        spec = models.model_spec(name)
        mode = spec.unknown_ops if spec.unknown_ops != "error" else None
        kwargs = {"input_shape": list(spec.input_shape), "input_dtype": spec.input_dtype, "vocab": spec.vocab}
        if mode:
            kwargs["unknown_ops"] = mode
        assert _same(layers_of(_Once(models.build_model(name)), **kwargs)) == _same(layers_of(name)), name
    nets = load_bench("user_nets")
    for name, shape in nets.NETS:
        if name == "MiniGPT":  # needs the sized trace itself
            continue
        cls = getattr(nets, name)
        symbolic = layers_of(cls(), input_shape=list(shape), unknown_ops="approx")
        assert _same(layers_of(_Once(cls()), input_shape=list(shape), unknown_ops="approx")) == _same(symbolic), name


class OptionalArgs(nn.Module):
    """``forward(x, mask=None, scale=2.0, return_feats=False, *, temp=1.0)``: traced symbolically before, ``mask``
    was a proxy, ``if mask is not None`` took the masked branch and running it failed ("unsupported operand
    type(s) for *: 'Tensor' and 'NoneType')."""

    def __init__(self, sized=False):
        super().__init__()
        self.sized = sized  # read a size as a number: only the sized trace follows
        self.conv, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8, 10)

    def forward(self, x, mask=None, scale=2.0, return_feats=False, *, temp=1.0):
        for _ in range(x.dim() - 3 if self.sized else 1):
            f = self.conv(x)
        if mask is not None:
            f = f * mask
        f = f.mean((2, 3)) * scale / temp
        return (self.fc(f), f) if return_feats else self.fc(f)


class LMWithTargets(nn.Module):
    """nanoGPT's ``forward(self, idx, targets=None)``: the loss only where targets are given."""

    def __init__(self, sized=False):
        super().__init__()
        self.sized = sized
        self.emb, self.head = nn.Embedding(50, 16), nn.Linear(16, 50)

    def forward(self, idx, targets=None):
        for _ in range(idx.size(0) - idx.size(0) + 1 if self.sized else 1):
            logits = self.head(self.emb(idx))
        if targets is not None:
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits[:, [-1], :], None


@pytest.mark.parametrize("sized", [False, True])
def test_a_forwards_optional_arguments_are_traced_at_their_defaults(sized):
    """The branch a call with one input takes, fx's checks of the defaults costing nothing, symbolically and with
    sizes alike; a language model's token ids are still found beside its optional targets."""
    ml = layers_of(OptionalArgs(sized), input_shape=[3, 16, 16])
    assert [(l["kind"], l["op"]) for l in ml.layers] == [
        ("conv2d", "Conv2d"), ("adaptive_avgpool2d", "Tensor.mean"), ("scale", "x * y"), ("scale", "x / y"),
        ("output", "Linear")]
    lm = layers_of(LMWithTargets(sized), input_shape=[12])
    assert lm.input_dtype == "int64"
    assert [(l["kind"], l["config"].get("tokens")) for l in lm.layers] == [("embedding", None), ("output", 12)]
