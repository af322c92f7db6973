"""Build one layer of a given kind and config as a ``torch.nn.Module`` (used by probes)."""

import torch
from torch import nn

from thor_sdk.models.blocks import LSTMSequence, TokenPositionalEmbedding, TransformerBlock


class Add(nn.Module):
    """A residual add as a module: ``x + x`` (two gradient paths into the same tensor, as a
    residual connection has at its fork)."""

    def forward(self, x):
        return x + x


class Flatten(nn.Module):
    def forward(self, x):
        return x.reshape(x.shape[0], -1)


def _i(v):
    return int(round(v))


def build_layer(kind, c):
    if kind == "conv2d":
        return nn.Conv2d(_i(c["in_channels"]), _i(c["out_channels"]), _i(c["kernel"]), _i(c["stride"]),
                         _i(c["padding"]), groups=_i(c["groups"]), bias=bool(c["bias"]))
    if kind == "linear":
        return nn.Linear(_i(c["in_features"]), _i(c["out_features"]), bias=bool(c["bias"]))
    if kind == "output":
        return nn.Linear(_i(c["in_features"]), _i(c["out_features"]))
    if kind == "maxpool2d":
        return nn.MaxPool2d(_i(c["kernel"]), _i(c["stride"]), _i(c["padding"]))
    if kind == "avgpool2d":
        return nn.AvgPool2d(_i(c["kernel"]), _i(c["stride"]), _i(c["padding"]))
    if kind == "adaptive_avgpool2d":
        return nn.AdaptiveAvgPool2d(_i(c["out_size"]))
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(_i(c["channels"]))
    if kind == "layernorm":
        return nn.LayerNorm(_i(c["normalized"]))
    if kind == "dropout":
        return nn.Dropout(float(c["p"]))
    if kind == "flatten":
        return Flatten()
    if kind == "add":
        return Add()
    if kind == "embedding":
        if c["positional"]:
            return TokenPositionalEmbedding(_i(c["num_embeddings"]), _i(c["embedding_dim"]), _i(c["seq_len"]))
        return nn.Embedding(_i(c["num_embeddings"]), _i(c["embedding_dim"]))
    if kind == "lstm":
        return LSTMSequence(_i(c["input_size"]), _i(c["hidden_size"]), _i(c["num_layers"]))
    if kind == "transformer_block":
        return TransformerBlock(_i(c["d_model"]), _i(c["n_heads"]), _i(c["head_dim"]), _i(c["d_ff"]))
    simple = {"relu": nn.ReLU, "relu6": nn.ReLU6, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    return simple[kind]()


def example_input(kind_obj, config, batch_size, generator=None):
    """A random input batch for a layer of this kind (float, or token ids for embeddings)."""
    shape = (batch_size, *[_i(s) for s in kind_obj.in_shape(config)])
    if kind_obj.input_dtype == "int64":
        return torch.randint(0, _i(config["num_embeddings"]), shape, generator=generator)
    return torch.randn(shape, generator=generator)
