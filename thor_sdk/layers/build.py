"""Build one layer of a given kind and config as a ``torch.nn.Module`` (used by probes)."""

import torch
from torch import nn

from thor_sdk.models.blocks import (GRUCellLoop, GRUSequence, LSTMCellLoop, LSTMSequence, TokenPositionalEmbedding,
                                    TransformerBlock)
from thor_sdk.layers.kinds import complete_config


class Add(nn.Module):
    """A residual add as a module: ``x + x`` (two gradient paths into the same tensor, as a
    residual connection has at its fork)."""

    def forward(self, x):
        return x + x


class Sub(nn.Module):
    """Kind ``sub``: ``x - x`` (two gradient paths into one tensor, as ``pool(x) - x`` has at its fork; the
    backward negates one of them)."""

    def forward(self, x):
        return x - x


class Flatten(nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1)


class Reshape(nn.Module):
    """Reshape each sample to ``shape`` (between two layers of a layer list whose element counts agree)."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(int(s) for s in shape)

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)


class Mul(nn.Module):
    """An elementwise product whose two operands both carry gradients: ``x * x`` (full size), or with
    ``broadcast`` ``x * x[:, :1]``: each sample scaled by one of its own elements, standing in for a
    squeeze-and-excitation scale (x also feeds the branch that computes the scale in such a block, so
    its gradient is accumulated from two paths there too)."""

    def __init__(self, broadcast=False):
        super().__init__()
        self.broadcast = bool(broadcast)

    def forward(self, x):
        return x * x[:, :1] if self.broadcast else x * x


class Cat(nn.Module):
    """Concatenation of ``parts`` slices of the input (``split`` then ``cat`` along dim 1): the output
    has the input's numel and gradients flow back into every part."""

    def __init__(self, parts):
        super().__init__()
        self.parts = max(int(parts), 1)

    def forward(self, x):
        n = x.shape[1]
        parts = min(self.parts, n)
        sizes = [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
        return torch.cat(x.split(sizes, dim=1), dim=1)


class Permute(nn.Module):
    """A transpose copied to contiguous memory, as a channel shuffle does: ``(B, g, n/g)`` transposed to
    ``(B, n/g, g)`` with ``g`` the smallest divisor > 1 of ``n`` (a prime ``n``: reversed, also a copy)."""

    def forward(self, x):
        b, n = x.shape[0], x.shape[1]
        g = next((d for d in range(2, int(n ** 0.5) + 1) if n % d == 0), None)
        if g is None:
            return x.flip(1)
        return x.reshape(b, g, n // g).transpose(1, 2).reshape(b, n)


class Scale(nn.Module):
    """Kind ``scale``: the input times a Python number (``x * 0.5``), as ``x * math.sqrt(d)`` or ``x / t`` in a
    network."""

    def forward(self, x):
        return x * 0.5


class Clamp(nn.Module):
    """Kind ``clamp``: ``torch.clamp`` with two number bounds (its backward PyTorch's clamp_backward)."""

    def forward(self, x):
        return torch.clamp(x, -1.0, 1.0)


class Pad(nn.Module):
    """Kind ``pad``: constant (zero) padding of a (channels, height, width) input by ``pad_c``, ``pad_h`` and
    ``pad_w`` elements along each axis, half before and the rest after (``F.pad``, as ``nn.ZeroPad2d`` runs it)."""

    def __init__(self, pad_c, pad_h, pad_w):
        super().__init__()
        self.pads = tuple(p for n in (pad_w, pad_h, pad_c) for p in (n // 2, n - n // 2))

    def forward(self, x):
        return torch.nn.functional.pad(x, self.pads)


class Reduce(nn.Module):
    """Kinds ``reduce_sum``, ``reduce_mean`` and ``reduce_max``: a (rows, reduced, inner) input reduced over its
    middle axis, as ``x.sum(dim)``, ``x.mean(dim)``, ``torch.max(x, dim)[0]`` (``indices``) or ``x.amax(dim)`` run
    it."""

    def __init__(self, op, indices=False):
        super().__init__()
        self.op, self.indices = op, bool(indices)

    def forward(self, x):
        if self.op == "sum":
            return x.sum(dim=2)
        if self.op == "mean":
            return x.mean(dim=2)
        return x.max(dim=2)[0] if self.indices else x.amax(dim=2)


class Elementwise(nn.Module):
    """The generic elementwise op of kind ``elementwise``: softplus, a transcendental pointwise op
    (what an operator without a kind of its own is estimated as, with a wider uncertainty)."""

    def forward(self, x):
        return torch.nn.functional.softplus(x)


class Attention(nn.Module):
    """Kind ``mha``: an ``nn.MultiheadAttention`` (batch first) called as a model calls it: on one tensor as
    query, key and value (self-attention), or with ``cross`` on the first ``seq_len`` tokens of its input as
    queries and the rest as keys and values (the input of a cross-attention layer is both tensors, the
    gradient flowing into each). With ``mask`` or ``causal`` it passes a causal float mask of ``seq_len x
    kv_len`` (a buffer, as ``nn.Transformer.generate_square_subsequent_mask`` makes it) as ``attn_mask``, with
    ``is_causal`` for ``causal``: PyTorch then runs the fused kernel causally and drops the tensor."""

    def __init__(self, embed_dim, num_heads, seq_len, kv_len, cross, need_weights, p, mask=0, causal=0):
        super().__init__()
        self.att = nn.MultiheadAttention(embed_dim, num_heads, dropout=p, batch_first=True)
        self.seq_len, self.cross, self.need_weights = int(seq_len), bool(cross), bool(need_weights)
        self.causal = bool(causal)
        masked = bool(mask) or self.causal
        self.register_buffer("mask", torch.triu(torch.full((int(seq_len), int(kv_len)), float("-inf")), 1)
                             if masked else None)

    def forward(self, x):
        options = {"need_weights": self.need_weights, "attn_mask": self.mask, "is_causal": self.causal}
        if self.cross:
            q, kv = x[:, :self.seq_len], x[:, self.seq_len:]
            return self.att(q, kv, kv, **options)[0]
        return self.att(x, x, x, **options)[0]


class Sdpa(nn.Module):
    """Kind ``sdpa``: ``F.scaled_dot_product_attention`` called as attention code calls it, on queries, keys and
    values that are strided views of one projection's output: the input holds, per sample, ``seq_len`` query
    tokens then ``kv_len`` key and ``kv_len`` value tokens of ``num_heads x head_dim`` features; self-attention
    (equal lengths) reads it as timm and nanoGPT do, ``(tokens, 3, heads, head_dim)`` permuted to three
    ``(heads, tokens, head_dim)`` views, cross-attention as three token ranges, each viewed by heads and
    transposed. So the views' gradients flow back into one tensor as in a network."""

    def __init__(self, seq_len, kv_len, causal, p):
        super().__init__()
        self.seq_len, self.kv_len, self.causal, self.p = int(seq_len), int(kv_len), bool(causal), float(p)

    def forward(self, x):
        b, _, h, d = x.shape
        t, s = self.seq_len, self.kv_len
        if t == s:
            q, k, v = x.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        else:
            q, k, v = (part.transpose(1, 2) for part in x.split([t, s, s], dim=1))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                                                is_causal=self.causal)


def _i(v):
    return int(round(v))


def build_layer(kind, c):
    """The torch module of one layer of ``kind`` with config ``c``; its parameters frozen (``requires_grad``
    False) where the config says ``frozen`` 1."""
    layer = _build_layer(kind, c)
    if isinstance(c, dict) and c.get("frozen"):
        layer.requires_grad_(False)
    return layer


def _build_layer(kind, c):
    if kind == "conv2d":
        c = complete_config(kind, c)
        return nn.Conv2d(_i(c["in_channels"]), _i(c["out_channels"]), (_i(c["kernel"]), _i(c["kernel_w"])),
                         (_i(c["stride"]), _i(c["stride_w"])), (_i(c["padding"]), _i(c["padding_w"])),
                         dilation=_i(c["dilation"]), groups=_i(c["groups"]), bias=bool(c["bias"]))
    if kind == "linear":
        return nn.Linear(_i(c["in_features"]), _i(c["out_features"]), bias=bool(c["bias"]))
    if kind == "output":
        return nn.Linear(_i(c["in_features"]), _i(c["out_features"]))
    if kind in ("maxpool2d", "avgpool2d"):
        c = complete_config(kind, c)
        return (nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(
            (_i(c["kernel"]), _i(c["kernel_w"])), (_i(c["stride"]), _i(c["stride_w"])),
            (_i(c["padding"]), _i(c["padding_w"])))
    if kind == "adaptive_avgpool2d":
        return nn.AdaptiveAvgPool2d(_i(c["out_size"]))
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(_i(c["channels"]))
    if kind == "layernorm":
        return nn.LayerNorm(_i(c["normalized"]))
    if kind == "dropout":
        return nn.Dropout(float(c["p"]))
    if kind == "dropout2d":  # on (N, channels, spatial): the channel dropout nn.Dropout2d runs on (N, C, H, W)
        return nn.Dropout1d(float(c["p"]))
    if kind == "flatten":
        return Flatten()
    if kind == "add":
        return Add()
    if kind == "sub":
        return Sub()
    if kind == "embedding":
        if c["positional"]:
            return TokenPositionalEmbedding(_i(c["num_embeddings"]), _i(c["embedding_dim"]), _i(c["seq_len"]))
        return nn.Embedding(_i(c["num_embeddings"]), _i(c["embedding_dim"]))
    if kind == "lstm":
        return LSTMSequence(_i(c["input_size"]), _i(c["hidden_size"]), _i(c["num_layers"]))
    if kind == "transformer_block":
        return TransformerBlock(_i(c["d_model"]), _i(c["n_heads"]), _i(c["head_dim"]), _i(c["d_ff"]))
    if kind == "conv1d":
        c = complete_config(kind, c)
        return nn.Conv1d(_i(c["in_channels"]), _i(c["out_channels"]), _i(c["kernel"]), _i(c["stride"]),
                         _i(c["padding"]), dilation=_i(c["dilation"]), groups=_i(c["groups"]), bias=bool(c["bias"]))
    if kind == "batchnorm1d":
        return nn.BatchNorm1d(_i(c["channels"]))
    if kind == "prelu":
        return nn.PReLU(1 if c["shared"] else _i(c["channels"]))
    if kind == "groupnorm":
        return nn.GroupNorm(_i(c["num_groups"]), _i(c["channels"]))
    if kind == "maxpool1d":
        return nn.MaxPool1d(_i(c["kernel"]), _i(c["stride"]), _i(c["padding"]))
    if kind == "adaptive_avgpool1d":
        return nn.AdaptiveAvgPool1d(_i(c["out_size"]))
    if kind == "gru":
        return GRUSequence(_i(c["input_size"]), _i(c["hidden_size"]), _i(c["num_layers"]))
    if kind == "lstm_cell":
        return LSTMCellLoop(_i(c["input_size"]), _i(c["hidden_size"]))
    if kind == "gru_cell":
        return GRUCellLoop(_i(c["input_size"]), _i(c["hidden_size"]))
    if kind == "softmax":
        return nn.Softmax(dim=-1)
    if kind == "upsample":
        return nn.Upsample(scale_factor=_i(c["scale"]), mode="nearest")
    if kind == "upsample_bilinear":
        return nn.Upsample(scale_factor=_i(c["scale"]), mode="bilinear", align_corners=False)
    if kind == "conv_transpose2d":
        return nn.ConvTranspose2d(_i(c["in_channels"]), _i(c["out_channels"]), _i(c["kernel"]), _i(c["stride"]),
                                  _i(c["padding"]), _i(c["output_padding"]), bias=bool(c["bias"]))
    if kind == "pad":
        return Pad(_i(c["pad_c"]), _i(c["pad_h"]), _i(c["pad_w"]))
    if kind == "reduce_sum":
        return Reduce("sum")
    if kind == "reduce_max":
        return Reduce("max", c["indices"])
    if kind == "reduce_mean":
        return Reduce("mean")
    if kind == "adaptive_maxpool2d":
        return nn.AdaptiveMaxPool2d(_i(c["out_size"]))
    if kind == "mul":
        return Mul(bool(c["broadcast"]))
    if kind == "cat":
        return Cat(_i(c["parts"]))
    if kind == "permute":
        return Permute()
    if kind == "scale":
        return Scale()
    if kind == "elementwise":
        return Elementwise()
    if kind == "clamp":
        return Clamp()
    if kind == "sdpa":
        return Sdpa(_i(c["seq_len"]), _i(c["kv_len"]), c["causal"], float(c["p"]))
    if kind == "mha":
        return Attention(_i(c["embed_dim"]), _i(c["num_heads"]), _i(c["seq_len"]), _i(c["kv_len"]), c["cross"],
                         c["need_weights"], float(c["p"]), c["mask"], c["causal"])
    simple = {"relu": nn.ReLU, "relu6": nn.ReLU6, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
              "hardswish": nn.Hardswish, "hardsigmoid": nn.Hardsigmoid, "silu": nn.SiLU,
              "leaky_relu": nn.LeakyReLU, "elu": nn.ELU}
    if isinstance(c, dict) and c.get("inplace"):  # overwrites its input (a forward-only layer's, see kinds.IN_PLACE)
        return simple[kind](inplace=True)
    return simple[kind]()


def example_input(kind_obj, config, batch_size, generator=None):
    """A random input batch for a layer of this kind (float, or token ids for embeddings)."""
    shape = (batch_size, *[_i(s) for s in kind_obj.in_shape(config)])
    if kind_obj.input_dtype == "int64":
        return torch.randint(0, _i(config["num_embeddings"]), shape, generator=generator)
    return torch.randn(shape, generator=generator)
