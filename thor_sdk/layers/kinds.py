"""The layer kinds THOR knows: their config features, how to build one alone, and their FLOPs.

A *layer* is ``{"kind": str, "config": {feature: number}}``; together with the batch size and its
*role* it is one point in that kind's config space, and one Gaussian Process per kind maps such
points to a cost. Roles:

- ``input``: the layer's input needs no gradient (the model's first layer, or any layer before the
  first parameter): its backward skips the input gradient, or does not run at all.
- ``hidden``: the layer's input needs a gradient.
- the model's last layer is kind ``output``: a Linear with the cross-entropy loss on top.

Everything here is plain data except ``build`` (imports torch when called).
"""

from dataclasses import dataclass

from thor_sdk.errors import NotFoundError, UsageError

ROLES = ("input", "hidden")


@dataclass(frozen=True)
class Kind:
    name: str
    features: tuple
    description: str
    has_params: bool
    input_dtype: str = "float32"
    roles: tuple = ROLES

    def in_shape(self, c):
        return _SHAPES[self.name][0](c)

    def out_shape(self, c):
        return _SHAPES[self.name][1](c)

    def forward_flops(self, c):
        """Forward FLOPs per sample (multiply-add = 2 FLOPs)."""
        return float(_FLOPS[self.name](c))

    def num_params(self, c):
        return int(_PARAMS.get(self.name, lambda c: 0)(c))

    def train_flops(self, c, batch_size, role):
        """FLOPs of one training step of this layer: forward, backward (weight and, for a hidden
        layer, input gradients) and an SGD update. The FLOPs baseline uses these."""
        fwd = self.forward_flops(c) * batch_size
        if self.has_params:
            bwd = fwd * (2.0 if role != "input" else 1.0)
            update = 2.0 * self.num_params(c)
        else:
            bwd = fwd if role != "input" else 0.0
            update = 0.0
        return fwd + bwd + update

    def check_config(self, config):
        missing = [f for f in self.features if f not in config]
        if missing:
            raise UsageError(f"layer of kind {self.name!r} lacks config features: {', '.join(missing)}")
        bad = [f for f in self.features if not _is_number(config[f]) or config[f] < 0]
        if bad:
            raise UsageError(f"layer of kind {self.name!r}: features must be non-negative numbers: {', '.join(bad)}")

    def build(self, c):
        """A ``torch.nn.Module`` computing this layer alone (imports torch)."""
        from . import build

        return build.build_layer(self.name, c)

    def to_dict(self):
        return {
            "name": self.name,
            "features": list(self.features),
            "description": self.description,
            "has_params": self.has_params,
            "input_dtype": self.input_dtype,
            "roles": list(self.roles),
        }


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _conv_out(size, k, s, p, d=1):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _numel(c):
    return (c["numel"],)


_ELEMENTWISE = ("relu", "relu6", "gelu", "tanh", "sigmoid", "dropout", "flatten", "add")

KINDS = {
    k.name: k
    for k in [
        Kind("conv2d", ("in_channels", "out_channels", "kernel", "stride", "padding", "groups", "height", "width", "bias"),
             "2-D convolution (square kernel); depthwise when groups == in_channels", True),
        Kind("linear", ("in_features", "out_features", "tokens", "bias"),
             "fully connected layer; tokens = positions it is applied to per sample (1 for a vector)", True),
        Kind("maxpool2d", ("channels", "height", "width", "kernel", "stride", "padding"), "2-D max pooling", False),
        Kind("avgpool2d", ("channels", "height", "width", "kernel", "stride", "padding"), "2-D average pooling", False),
        Kind("adaptive_avgpool2d", ("channels", "height", "width", "out_size"),
             "adaptive average pooling to out_size x out_size (global pooling when 1)", False),
        Kind("batchnorm2d", ("channels", "height", "width"), "2-D batch normalisation (training mode)", True),
        Kind("layernorm", ("normalized", "tokens"), "layer normalisation over the last dimension", True),
        Kind("relu", ("numel",), "ReLU; numel = elements per sample", False),
        Kind("relu6", ("numel",), "ReLU6; numel = elements per sample", False),
        Kind("gelu", ("numel",), "GELU; numel = elements per sample", False),
        Kind("tanh", ("numel",), "tanh; numel = elements per sample", False),
        Kind("sigmoid", ("numel",), "sigmoid; numel = elements per sample", False),
        Kind("dropout", ("numel", "p"), "dropout (training mode)", False),
        Kind("flatten", ("numel",), "flatten / reshape to a vector", False),
        Kind("add", ("numel",), "residual addition of two tensors of numel elements per sample", False),
        Kind("embedding", ("num_embeddings", "embedding_dim", "seq_len", "positional"),
             "token embedding of seq_len ids (+ learned positional embedding when positional=1)", True,
             input_dtype="int64", roles=("input",)),
        Kind("lstm", ("input_size", "hidden_size", "seq_len", "num_layers"),
             "LSTM over a sequence (batch first), returning the whole output sequence", True),
        Kind("transformer_block", ("d_model", "n_heads", "head_dim", "d_ff", "seq_len"),
             "pre-LN transformer block: causal self-attention + GELU feed-forward", True),
        Kind("output", ("in_features", "out_features", "tokens"),
             "the output head: Linear + softmax cross-entropy loss (cost includes the loss and the "
             "per-step fixed work of the optimizer)", True, roles=("output",)),
    ]
}

_SHAPES = {
    "conv2d": (lambda c: (c["in_channels"], c["height"], c["width"]),
               lambda c: (c["out_channels"], _conv_out(c["height"], c["kernel"], c["stride"], c["padding"]),
                          _conv_out(c["width"], c["kernel"], c["stride"], c["padding"]))),
    "linear": (lambda c: ((c["tokens"], c["in_features"]) if c["tokens"] > 1 else (c["in_features"],)),
               lambda c: ((c["tokens"], c["out_features"]) if c["tokens"] > 1 else (c["out_features"],))),
    "output": (lambda c: ((c["tokens"], c["in_features"]) if c["tokens"] > 1 else (c["in_features"],)),
               lambda c: ((c["tokens"], c["out_features"]) if c["tokens"] > 1 else (c["out_features"],))),
    "maxpool2d": (lambda c: (c["channels"], c["height"], c["width"]),
                  lambda c: (c["channels"], _conv_out(c["height"], c["kernel"], c["stride"], c["padding"]),
                             _conv_out(c["width"], c["kernel"], c["stride"], c["padding"]))),
    "adaptive_avgpool2d": (lambda c: (c["channels"], c["height"], c["width"]),
                           lambda c: (c["channels"], c["out_size"], c["out_size"])),
    "batchnorm2d": (lambda c: (c["channels"], c["height"], c["width"]),) * 2,
    "layernorm": (lambda c: (c["tokens"], c["normalized"]) if c["tokens"] > 1 else (c["normalized"],),) * 2,
    "embedding": (lambda c: (c["seq_len"],), lambda c: (c["seq_len"], c["embedding_dim"])),
    "lstm": (lambda c: (c["seq_len"], c["input_size"]), lambda c: (c["seq_len"], c["hidden_size"])),
    "transformer_block": (lambda c: (c["seq_len"], c["d_model"]),) * 2,
}
_SHAPES["avgpool2d"] = _SHAPES["maxpool2d"]
for _k in _ELEMENTWISE:
    _SHAPES[_k] = (_numel, _numel)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _conv_flops(c):
    oc, oh, ow = _SHAPES["conv2d"][1](c)
    return 2.0 * oc * oh * ow * (c["in_channels"] / c["groups"]) * c["kernel"] ** 2


def _tb_flops(c):
    d, t, inner, ff = c["d_model"], c["seq_len"], c["n_heads"] * c["head_dim"], c["d_ff"]
    return 2.0 * t * (d * 3 * inner + inner * d + 2 * d * ff) + 4.0 * t * t * inner


_FLOPS = {
    "conv2d": _conv_flops,
    "linear": lambda c: 2.0 * c["tokens"] * c["in_features"] * c["out_features"],
    "output": lambda c: 2.0 * c["tokens"] * c["in_features"] * c["out_features"] + 5.0 * c["tokens"] * c["out_features"],
    "maxpool2d": lambda c: _prod(_SHAPES["maxpool2d"][1](c)) * c["kernel"] ** 2,
    "avgpool2d": lambda c: _prod(_SHAPES["maxpool2d"][1](c)) * c["kernel"] ** 2,
    "adaptive_avgpool2d": lambda c: c["channels"] * c["height"] * c["width"],
    "batchnorm2d": lambda c: 8.0 * c["channels"] * c["height"] * c["width"],
    "layernorm": lambda c: 8.0 * c["tokens"] * c["normalized"],
    "embedding": lambda c: c["seq_len"] * c["embedding_dim"] * (1 + c["positional"]),
    "lstm": lambda c: 8.0 * c["seq_len"] * c["num_layers"] * c["hidden_size"] * (c["input_size"] + c["hidden_size"]),
    "transformer_block": _tb_flops,
    "gelu": lambda c: 8.0 * c["numel"],
    "tanh": lambda c: 4.0 * c["numel"],
    "sigmoid": lambda c: 4.0 * c["numel"],
    "dropout": lambda c: 2.0 * c["numel"],
    "flatten": lambda c: 0.0,
}
for _k in ("relu", "relu6", "add"):
    _FLOPS[_k] = lambda c: float(c["numel"])

_PARAMS = {
    "conv2d": lambda c: c["out_channels"] * (c["in_channels"] // c["groups"]) * c["kernel"] ** 2 + c["out_channels"] * c["bias"],
    "linear": lambda c: c["in_features"] * c["out_features"] + c["out_features"] * c["bias"],
    "output": lambda c: c["in_features"] * c["out_features"] + c["out_features"],
    "batchnorm2d": lambda c: 2 * c["channels"],
    "layernorm": lambda c: 2 * c["normalized"],
    "embedding": lambda c: (c["num_embeddings"] + c["seq_len"] * c["positional"]) * c["embedding_dim"],
    "lstm": lambda c: 4 * c["hidden_size"] * (c["input_size"] + c["hidden_size"] + 2) * c["num_layers"],
    "transformer_block": lambda c: (c["d_model"] * 3 * c["n_heads"] * c["head_dim"] + c["n_heads"] * c["head_dim"] * c["d_model"]
                                    + 2 * c["d_model"] * c["d_ff"] + 4 * c["d_model"]),
}


def get_kind(name):
    try:
        return KINDS[name]
    except KeyError:
        raise NotFoundError(f"unknown layer kind {name!r}; known: {', '.join(KINDS)}") from None


def list_kinds():
    """All kinds, as plain dicts (name, features, description, ...)."""
    return [k.to_dict() for k in KINDS.values()]


def gp_features(kind_name):
    """Feature names of a kind's GP input vector: its config features, the batch size, the role."""
    kind = get_kind(kind_name)
    extra = ("batch_size",) if kind.roles == ("output",) or len(kind.roles) == 1 else ("batch_size", "role")
    return list(kind.features) + list(extra)


def feature_vector(kind_name, config, batch_size, role):
    """The raw (untransformed) GP input vector for one layer; role encoded input=1, hidden=0."""
    names = gp_features(kind_name)
    values = dict(config, batch_size=batch_size, role=1 if role == "input" else 0)
    return [float(values[n]) for n in names]
