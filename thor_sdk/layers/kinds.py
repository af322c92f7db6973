"""The layer kinds THOR knows: their config features, shapes and training FLOPs and bytes (plain data).

A *layer* is ``{"kind": str, "config": {feature: number}}``; together with the batch size and its
*role* it is one point in that kind's config space, and one Gaussian Process per kind maps such
points to a cost. Roles:

- ``input``: the layer's input needs no gradient (the model's first layer, or any layer before the
  first parameter): its backward skips the input gradient, or does not run at all.
- ``hidden``: the layer's input needs a gradient.
- the model's last layer is kind ``output``: a Linear with the cross-entropy loss on top.

Each kind also has two device-free cost terms of one training step: ``train_flops`` and
``train_bytes`` (see ``cost_terms``), the inputs of the estimator's mean function and of the FLOPs
baseline. Plain Python, no torch (building a layer alone is ``thor_sdk.layers.build.build_layer``); it
imports nothing of thor_sdk but ``errors``, so the stdlib runtime may use it.
"""

import math
from dataclasses import dataclass, replace

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
        """FLOPs of one training step of this layer: forward, backward (weight and data gradients, the
        input layer's less ``input_grad_flops``) and an SGD update. The FLOPs baseline uses these."""
        per_sample, fixed = self._flops_terms(c, role)
        return per_sample * batch_size + fixed

    def trains(self, c):
        """Whether a training step computes this layer's weight gradient and updates its weights: it has weights
        and its config does not freeze them (``frozen`` 1: a fine-tuned net's backbone, whose parameters have
        ``requires_grad`` False)."""
        return self.has_params and not (isinstance(c, dict) and c.get("frozen", 0))

    def input_grad_flops(self, c):
        """Of the backward's FLOPs per sample, those that compute the gradient of the layer's input: what the input
        role skips. The forward's FLOPs for a single operation (its data gradient costs what it does); for a layer
        that is a chain of operations only its first one's: a recurrent layer still carries its hidden state's
        gradient back through every time step (``W_hh^T`` per step, and the layers above the first one's inputs), an
        attention layer its scores' and output projection's: only the first input projection is skipped, and nothing
        by a pre-LN transformer block (``_INPUT_GRAD_FLOPS``)."""
        f = _INPUT_GRAD_FLOPS.get(self.name)
        return float(f(c)) if f is not None else self.forward_flops(c)

    def _flops_terms(self, c, role):
        """``train_flops`` as (per sample, per step): forward and backward per sample, the update per step. The
        backward computes the weight gradient (the forward's FLOPs again) and the data gradient (as many), less
        ``input_grad_flops`` as the input layer. A frozen layer's backward computes its input's gradient only (none
        as the input layer), as a layer without weights."""
        fwd = self.forward_flops(c)
        if self.trains(c):
            return fwd * 3.0 - (self.input_grad_flops(c) if role == "input" else 0.0), 2.0 * self.num_params(c)
        return fwd * (2.0 if role != "input" else 1.0), 0.0

    def forward_share(self, c, role):
        """The forward's share of a training step's FLOPs per sample (1/3 for a layer with weights behind one
        that needs a gradient, 1/2 without weights or as the input layer; 1 where the step has no FLOPs): what
        recomputing the forward in backward (``torch.utils.checkpoint``) adds, relative to the step."""
        per_sample, _ = self._flops_terms(c, role)
        fwd = self.forward_flops(c)
        return min(1.0, fwd / per_sample) if per_sample > 0 and fwd > 0 else 1.0

    def train_terms(self, c, role):
        """``(flops_per_sample, flops_fixed, bytes_per_sample, bytes_fixed)``: ``train_flops`` and
        ``train_bytes`` are affine in the batch size, and these are their slopes and intercepts (one pass)."""
        return self._flops_terms(c, role) + self._bytes_terms(c, role)

    def backward_runs(self, role, c=None):
        """Whether a training step runs this layer's backward at all (no: a parameter-free or frozen layer
        whose input needs no gradient)."""
        return (self.has_params if c is None else self.trains(c)) or role != "input"

    def train_bytes(self, c, batch_size, role):
        """Bytes moved by one training step of this layer alone (float32 = 4 bytes, int64 ids 8).

        With ``I``/``O`` the per-sample input/output elements (products of ``in_shape``/``out_shape``),
        ``P`` the parameters, ``b`` the batch size and ``s`` the input element size (8 for token ids,
        else 4)::

            forward   s*b*I  + 4*P_fwd + 4*b*O                       read input, params; write output
            backward  4*b*O  + s*b*I   + 4*P*[role != input]          read output grad, saved input, params
                      + 4*P + 4*b*I*[role != input]                   write weight grad, input grad
            update    12*P                                            SGD: read + write params, read grads
            extra     b * extra_per_sample                            kind-specific, see below

        ``P_fwd = P`` except ``embedding``, whose forward reads only the ``seq_len`` rows it looks up (``seq_len *
        embedding_dim * (1 + positional)``). The backward terms count only when the backward runs
        (``backward_runs``: parameters, or an input that needs a gradient); the ``P`` terms are zero for kinds
        without parameters. A frozen layer (``frozen`` 1) reads its parameters in the forward and, for its input's
        gradient, in the backward, but writes no weight gradient and has no update. The extra per-sample bytes, written
        in the forward and read back in the backward: ``lstm`` its gates and cell state per time step and layer
        (``2*4*seq_len*num_layers*5*hidden``), ``gru`` its gates and hidden state (``2*4*seq_len*num_layers*4*hidden``),
        ``lstm_cell`` and ``gru_cell`` those of each call (each of the four written once, ``1*4*...``, where the
        backward never runs), ``transformer_block`` its attention scores and probabilities (``2*seq_len^2*n_heads``) and
        its other saved activations (``seq_len*(4*n_heads*head_dim + 4*d_model + 2*d_ff)``), both times ``2*4``; ``mha``
        its queries, keys, values and heads' output (``2*embed_dim*(seq_len + kv_len)``) and, on the explicit path
        (need_weights) and for its dropout mask (p > 0), the attention probabilities (``num_heads*seq_len*kv_len``
        each), times ``2*4``; ``sdpa`` its softmax's row statistics (``num_heads*seq_len``) and with dropout its
        probabilities and their mask (``2*num_heads*seq_len*kv_len``), times ``2*4`` (``transformer_block`` and ``mha``
        ``1*4`` where the backward never runs: written once); max pooling its int64 argmax
        indices (``2*8*O``; ``adaptive_maxpool2d`` too, ``8*O`` without a backward), ``reduce_max`` with ``indices`` its
        int64 argmax (``2*8*rows*inner``), dropout its byte mask (``2*numel``), dropout2d its float mask of one value
        per channel (``2*4*channels``); ``add``, ``sub`` and a full-size ``mul`` read a second operand (``4*numel``;
        ``mul`` also saves it for the backward and writes its gradient, ``+8*numel``; ``sub``'s backward negates the
        gradient, ``+8*numel``). Affine in ``b`` (per-sample + per-step terms), as the runtime needs.
        """
        per_sample, fixed = self._bytes_terms(c, role)
        return per_sample * float(batch_size) + fixed

    def _bytes_terms(self, c, role):
        """``train_bytes`` as (per sample, per step)."""
        n_in, n_out = float(_prod(self.in_shape(c))), float(_prod(self.out_shape(c)))
        p = float(self.num_params(c)) if self.has_params else 0.0
        p_train = p if self.trains(c) else 0.0
        s = 8.0 if self.input_dtype == "int64" else 4.0
        grads_in = role != "input"
        p_fwd = float(_FWD_PARAM_READS[self.name](c)) if self.name in _FWD_PARAM_READS else p
        per_sample, fixed = s * n_in + 4.0 * n_out, 4.0 * p_fwd
        runs = self.backward_runs(role, c)
        if runs:
            per_sample += 4.0 * n_out + s * n_in + 4.0 * n_in * grads_in
            fixed += 4.0 * p * grads_in + 4.0 * p_train
        fixed += 12.0 * p_train
        if self.name in _EXTRA_BYTES:
            per_sample += float(_EXTRA_BYTES[self.name](c, runs))
        return per_sample, fixed

    def check_config(self, config):
        """Bounds of a config, checked before anything is built, planned or stored: every feature a finite
        number in range (integers but ``p``; flags 0 or 1; sizes >= 1 and at most MAX_FEATURE), shapes
        that exist (a kernel no larger than its padded input), groups that divide the channels, and at
        most MAX_NUMEL elements per sample in and out."""
        config = complete_config(self.name, config)
        missing = [f for f in self.features if f not in config]
        if missing:
            raise UsageError(f"layer of kind {self.name!r} lacks config features: {', '.join(missing)}")
        checked = self.features + tuple(f for f in OPTIONAL_KEYS.get(self.name, ()) if f in config)
        bad = [f for f in checked if not _is_number(config[f]) or config[f] < 0]
        if bad:
            raise UsageError(f"layer of kind {self.name!r}: features must be non-negative numbers: {', '.join(bad)}")
        for f in checked:
            v = config[f]
            if v > MAX_FEATURE:
                raise UsageError(f"layer of kind {self.name!r}: {f} = {v:g} is above {MAX_FEATURE:g}")
            if f == "p":
                if not v < 1:
                    raise UsageError(f"layer of kind {self.name!r}: p must be in [0, 1), got {v!r}")
                continue
            if v != int(v):
                raise UsageError(f"layer of kind {self.name!r}: {f} must be an integer, got {v!r}")
            if f in _FLAGS and v not in (0, 1):
                raise UsageError(f"layer of kind {self.name!r}: {f} must be 0 or 1, got {v!r}")
            if f not in _FLAGS and f not in _MAY_BE_ZERO and v < 1:
                raise UsageError(f"layer of kind {self.name!r}: {f} must be at least 1, got {v!r}")
        if self.name == "mha":
            if config["embed_dim"] % config["num_heads"]:
                raise UsageError(f"layer of kind 'mha': num_heads ({config['num_heads']:g}) must divide embed_dim "
                                 f"({config['embed_dim']:g})")
            if not config["cross"] and config["kv_len"] != config["seq_len"]:
                raise UsageError(f"layer of kind 'mha': self-attention (cross = 0) has kv_len = seq_len, got "
                                 f"{config['kv_len']:g} and {config['seq_len']:g}")
            if config["causal"] and (config["mask"] or config["need_weights"]):
                raise UsageError("layer of kind 'mha': causal = 1 is the fused kernel without a mask tensor "
                                 "(need_weights = 0, mask = 0); with the weights returned the mask is added "
                                 "(mask = 1)")
        if self.name == "conv_transpose2d" and not config["output_padding"] < config["stride"]:
            raise UsageError(f"layer of kind 'conv_transpose2d': output_padding ({config['output_padding']:g}) must be "
                             f"smaller than stride ({config['stride']:g})")
        if self.name == "groupnorm" and config["channels"] % config["num_groups"]:
            raise UsageError(f"layer of kind 'groupnorm': num_groups ({config['num_groups']:g}) must divide channels "
                             f"({config['channels']:g})")
        if "groups" in self.features:
            g = config["groups"]
            if config["in_channels"] % g or config["out_channels"] % g:
                raise UsageError(f"layer of kind {self.name!r}: groups ({g:g}) must divide in_channels and "
                                 f"out_channels ({config['in_channels']:g}, {config['out_channels']:g})")
        try:
            shapes = (tuple(self.in_shape(config)), tuple(self.out_shape(config)))
        except (ArithmeticError, KeyError, TypeError, ValueError) as e:
            raise UsageError(f"layer of kind {self.name!r}: its shapes cannot be computed ({e})") from None
        for what, shape in zip(("input", "output"), shapes):
            if any(s < 1 for s in shape):
                raise UsageError(f"layer of kind {self.name!r}: its {what} shape {list(shape)} is empty (a kernel "
                                 "larger than its padded input?)")
            if _prod(shape) > MAX_NUMEL:
                raise UsageError(f"layer of kind {self.name!r}: {_prod(shape):g} {what} elements per sample is "
                                 f"above {MAX_NUMEL:g}")

    def to_dict(self):
        return {
            "name": self.name,
            "features": list(self.features),
            "description": self.description,
            "has_params": self.has_params,
            "input_dtype": self.input_dtype,
            "roles": list(self.roles),
            "optional_keys": dict(OPTIONAL_KEYS.get(self.name, {})),  # config keys, not GP inputs: key -> read as
            "defaults": dict(DEFAULT_FEATURES.get(self.name, {})),  # features a config may leave out: -> default
        }


#: features a kind gained after campaigns had been written, with the value every older sample of it had: a stored
#: config without one reads as that value (``with_added_features``). Kind ``mha``'s masks came on 2026-11-27; its
#: samples before them were all unmasked.
ADDED_FEATURES = {"mha": {"mask": 0, "causal": 0}}
#: config keys that are not GP inputs, each optional and read as the value of a feature when left out
#: (``complete_config``): a conv2d's or 2-D pooling's kernel, stride and padding along its width are those along
#: its height unless given (a square kernel, as every one was before 2026-11-27, when rectangular kernels came: a
#: keyword spotter's 10x4 over MFCCs, Inception's 1x7, an audio net's (2, 1) pooling over time). They shape the
#: layer (its output, FLOPs and bytes, the probe built) but the GP reads the kernel's shape through those FLOPs
#: and bytes only: with a profile's few rectangular samples (5 of 161), kernel_w as a GP input read 3x1 convs at
#: 1.20-1.92x their measured cost where the kind's own inputs read them at 0.91-1.30x, and rectangular convs
#: overall at 30.5% MAPE against 25.4% (``bench/bench_rect_kernels.py``, ``rect-kernels-host-20261128-0002.md``).
OPTIONAL_KEYS = {k: {"kernel_w": "kernel", "stride_w": "stride", "padding_w": "padding"}
                 for k in ("conv2d", "maxpool2d", "avgpool2d")}


#: GP inputs that a config may leave out, each read as its default: a conv's ``dilation`` (1, an undilated conv; it
#: came on 2026-11-28, when dilated convs stopped being a stand-in: a TCN's or WaveNet's dilated causal conv1d,
#: DeepLab's atrous conv2d). Unlike OPTIONAL_KEYS they are GP inputs: a dilation changes neither FLOPs nor bytes
#: but the kernel's memory access (on this project's host a dilated conv1d took 0.56-1.13x the undilated conv of
#: the same output and FLOPs, ``bench/results/stand-ins-host-*.md``), so only the GP can learn it. A probe's config
#: leaves each out at its default (``minimal_config``): undilated probes keep the ids they had before.
#:
#: ``frozen`` (0, trained; it came on 2026-11-28) is one of every kind with weights but the output head
#: (``FREEZABLE``): 1 where none of the layer's parameters requires a gradient, as in a net fine-tuned on the device
#: with its pretrained backbone frozen (transfer learning, the commonest training on a phone). Such a layer's
#: step has no weight gradient and no update, and as the input layer no backward at all: on the host a
#: MobileNetV2 (96x96) and a ResNet-18 (64x64) trained only in their classifier took 0.37x and 0.31x their
#: fully trained steps. Its FLOPs and bytes say so (``Kind.trains``); the GP reads the rest.
FREEZABLE = ("conv2d", "linear", "batchnorm2d", "layernorm", "embedding", "lstm", "transformer_block", "conv1d",
             "batchnorm1d", "prelu", "groupnorm", "gru", "lstm_cell", "gru_cell", "mha", "conv_transpose2d")
#:
#: ``inplace`` (0; 2026-11-28) is one of the activations PyTorch can run in place (``IN_PLACE``): 1 on a layer that
#: runs forward only (role ``input``: behind a frozen backbone's layers) and overwrites its input
#: (``nn.ReLU(inplace=True)``, as torchvision's backbones build theirs, ``F.relu(x, inplace=True)``, ``x.relu_()``).
#: There it costs a fraction of the out-of-place op its probe otherwise runs: 0.053 ms against 0.162 ms for a ReLU
#: over 32x32x32 at batch 16 on the host, whose out-of-place probe read 0.204 ms (``bench/bench_forward_only.py``).
#: Behind a trained layer (role ``hidden``) no probe can run one in place (its input is the probe's leaf that needs a
#: gradient): such a layer keeps 0 and is estimated out of place.
IN_PLACE = ("relu", "relu6", "leaky_relu", "hardswish", "hardsigmoid", "silu", "elu")
DEFAULT_FEATURES = {**{k: ({"dilation": 1, "frozen": 0} if k in ("conv1d", "conv2d") else {"frozen": 0})
                       for k in FREEZABLE},
                    **{k: {"inplace": 0} for k in IN_PLACE}}
#: defaulted features a layer list carries only where they are not their default (every other one is spelled out)
SPARSE_FEATURES = ("frozen", "inplace")


def complete_config(kind, config):
    """``config`` with each optional key it leaves out (``OPTIONAL_KEYS``) at the value it reads as and each
    defaulted feature (``DEFAULT_FEATURES``) at its default; the same dict when there is none to add (or it is not
    a dict: the checks that follow say why)."""
    optional, defaults = OPTIONAL_KEYS.get(kind) or {}, DEFAULT_FEATURES.get(kind) or {}
    if not isinstance(config, dict) or all(f in config for f in (*optional, *defaults)):
        return config
    return {**{f: v for f, v in defaults.items() if f not in config}, **config,
            **{f: config[base] for f, base in optional.items() if f not in config and base in config}}


def minimal_config(kind, config):
    """``config`` without the optional keys (``OPTIONAL_KEYS``) that equal what they read as and the defaulted
    features (``DEFAULT_FEATURES``) at their default: a probe keeps its config so, and a square undilated conv2d
    probe has the id it had before kernel_w and dilation existed (old campaigns resume)."""
    optional, defaults = OPTIONAL_KEYS.get(kind) or {}, DEFAULT_FEATURES.get(kind) or {}
    if not isinstance(config, dict) or not any(f in config for f in (*optional, *defaults)):
        return config
    return {k: v for k, v in config.items()
            if not (k in optional and optional[k] in config and v == config[optional[k]])
            and not (k in defaults and v == defaults[k])}


def with_added_features(kind, config):
    """``config`` of a layer of ``kind`` as stored by an older campaign, with the features the kind gained since
    (``ADDED_FEATURES``) and its optional keys (``OPTIONAL_KEYS``) at the value its samples then had; unchanged
    otherwise."""
    added = ADDED_FEATURES.get(kind)
    return complete_config(kind, {**added, **config} if added and isinstance(config, dict) else config)


#: bounds of a layer config (see ``Kind.check_config``)
MAX_FEATURE = 1e9
MAX_NUMEL = 1e10
_FLAGS = ("bias", "positional", "broadcast", "cross", "need_weights", "causal", "mask", "shared", "indices", "frozen",
          "inplace")
_MAY_BE_ZERO = ("padding", "padding_w", "output_padding", "pad_c", "pad_h", "pad_w")


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _conv_out(size, k, s, p, d=1):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _dilation(c):
    """A conv's dilation (1 where its config leaves it out; pooling has none)."""
    return c.get("dilation", 1)


def _deconv_out(c, size):
    """A transposed conv's output side from its input ``size`` (PyTorch's formula, no dilation)."""
    return (size - 1) * c["stride"] - 2 * c["padding"] + c["kernel"] + c["output_padding"]


def _width_side(c):
    """A conv2d's or 2-D pooling's (kernel, stride, padding) along its width: ``*_w``, else those along its height
    (square)."""
    return (c.get("kernel_w", c["kernel"]), c.get("stride_w", c["stride"]), c.get("padding_w", c["padding"]))


def _numel(c):
    return (c["numel"],)


_ACTIVATIONS = ("hardswish", "hardsigmoid", "silu", "leaky_relu", "elu")
_ELEMENTWISE = ("relu", "relu6", "gelu", "tanh", "sigmoid", "dropout", "flatten", "add", "sub", "mul", "cat",
                "permute", "elementwise", "scale", "clamp") + _ACTIVATIONS

KINDS = {
    k.name: (replace(k, features=k.features + ("frozen",)) if k.name in FREEZABLE else
             replace(k, features=k.features + ("inplace",)) if k.name in IN_PLACE else k)
    for k in [
        Kind("conv2d", ("in_channels", "out_channels", "kernel", "stride", "padding", "groups", "height", "width",
                        "bias", "dilation"),
             "2-D convolution; depthwise when groups == in_channels. kernel, stride and padding are along the "
             "height; the config keys kernel_w, stride_w and padding_w along the width (left out: the same, a "
             "square kernel; not GP inputs: a kernel's shape reaches the estimate through its FLOPs and bytes); "
             "dilation the same along both sides (left out: 1)",
             True),
        Kind("linear", ("in_features", "out_features", "tokens", "bias"),
             "fully connected layer; tokens = positions it is applied to per sample (1 for a vector)", True),
        Kind("maxpool2d", ("channels", "height", "width", "kernel", "stride", "padding"),
             "2-D max pooling (kernel, stride, padding along the height; the config keys kernel_w, stride_w, "
             "padding_w along the width, as conv2d's)", False),
        Kind("avgpool2d", ("channels", "height", "width", "kernel", "stride", "padding"),
             "2-D average pooling (kernel, stride, padding along the height; the config keys kernel_w, stride_w, "
             "padding_w along the width, as conv2d's)", False),
        Kind("adaptive_avgpool2d", ("channels", "height", "width", "out_size"),
             "adaptive average pooling to out_size x out_size (global pooling when 1)", False),
        Kind("batchnorm2d", ("channels", "height", "width"), "2-D batch normalisation (training mode)", True),
        Kind("layernorm", ("normalized", "tokens"), "layer normalisation over the last dimension", True),
        Kind("relu", ("numel",), "ReLU; numel = elements per sample", False),
        Kind("relu6", ("numel",), "ReLU6, and any hardtanh (the kernel ReLU6 runs); numel = elements per sample",
             False),
        Kind("gelu", ("numel",), "GELU; numel = elements per sample", False),
        Kind("tanh", ("numel",), "tanh; numel = elements per sample", False),
        Kind("sigmoid", ("numel",), "sigmoid; numel = elements per sample", False),
        Kind("dropout", ("numel", "p"), "dropout (training mode)", False),
        Kind("dropout2d", ("channels", "spatial", "p"),
             "channel dropout (training mode: nn.Dropout1d/2d/3d, F.dropout1d/2d/3d): whole channels of channels x "
             "spatial elements per sample zeroed, one mask value per sample and channel (spatial: H x W, a length)",
             False),
        Kind("flatten", ("numel",), "flatten / reshape to a vector", False),
        Kind("add", ("numel",), "residual addition of two tensors of numel elements per sample", False),
        Kind("sub", ("numel",),
             "difference of two tensors (x - y, torch.sub), numel = output elements per sample: PoolFormer's "
             "pool(x) - x; its backward negates the gradient of y (x - c, a number subtracted, is add's kernel: "
             "kind add; c - x is scale's, as -x)", False),
        Kind("embedding", ("num_embeddings", "embedding_dim", "seq_len", "positional"),
             "token embedding of seq_len ids (+ learned positional embedding when positional=1)", True,
             input_dtype="int64", roles=("input",)),
        Kind("lstm", ("input_size", "hidden_size", "seq_len", "num_layers"),
             "LSTM over a sequence (batch first), returning the whole output sequence", True),
        Kind("transformer_block", ("d_model", "n_heads", "head_dim", "d_ff", "seq_len"),
             "pre-LN transformer block: causal self-attention + GELU feed-forward", True),
        Kind("conv1d", ("in_channels", "out_channels", "kernel", "stride", "padding", "groups", "length", "bias",
                        "dilation"),
             "1-D convolution over (channels, length); depthwise when groups == in_channels; dilation (left out: 1) "
             "the spacing of the kernel's taps (a TCN's or WaveNet's dilated causal conv)", True),
        Kind("batchnorm1d", ("channels", "length"),
             "1-D batch normalisation (training mode) of (channels, length), or of (channels,) vectors when "
             "length == 1", True),
        Kind("maxpool1d", ("channels", "length", "kernel", "stride", "padding"), "1-D max pooling", False),
        Kind("prelu", ("channels", "spatial", "shared"),
             "PReLU (nn.PReLU): a learned slope per channel (shared 0: nn.PReLU(channels)) or one for all (shared 1: "
             "nn.PReLU()), on channels x spatial elements per sample (spatial: H x W, a length, or 1)", True),
        Kind("groupnorm", ("channels", "num_groups", "spatial"),
             "group normalisation with its per-channel affine (nn.GroupNorm) of channels in num_groups groups, "
             "spatial elements per channel (H x W of an image, a length, 1)", True),
        Kind("adaptive_avgpool1d", ("channels", "length", "out_size"),
             "adaptive average pooling of (channels, length) to out_size (global pooling when 1)", False),
        Kind("gru", ("input_size", "hidden_size", "seq_len", "num_layers"),
             "GRU over a sequence (batch first), returning the whole output sequence", True),
        Kind("lstm_cell", ("input_size", "hidden_size", "steps"),
             "nn.LSTMCell (with its biases) called steps times in a training step, as a Python loop over time "
             "calls it: each call on one time step's input (batch first, input_size) and the state the call before "
             "returned, from a zero state; one weight update for all of them", True),
        Kind("gru_cell", ("input_size", "hidden_size", "steps"),
             "nn.GRUCell (with its biases) called steps times in a training step, as a Python loop over time "
             "calls it (see lstm_cell)", True),
        Kind("softmax", ("numel", "last_dim"),
             "softmax over the last dimension (last_dim elements) of numel elements per sample", False),
        Kind("hardswish", ("numel",), "hard swish; numel = elements per sample", False),
        Kind("hardsigmoid", ("numel",), "hard sigmoid; numel = elements per sample", False),
        Kind("silu", ("numel",), "SiLU (swish); numel = elements per sample", False),
        Kind("leaky_relu", ("numel",), "leaky ReLU; numel = elements per sample", False),
        Kind("elu", ("numel",),
             "ELU, and SELU and CELU (ELU's kernel with other constants: 0.96-1.07x and 0.64-1.25x, medians 1.00 and "
             "0.99, of ELU's training step on the host, bench/bench_unary_ops.py); numel = elements per sample",
             False),
        Kind("upsample", ("channels", "height", "width", "scale"),
             "nearest-neighbour upsampling of (channels, height, width) by an integer scale", False),
        Kind("mul", ("numel", "broadcast"),
             "elementwise product of two tensors, numel = output elements per sample; broadcast = 1 when the "
             "second operand is a per-channel scale (squeeze-and-excitation), 0 when both are full size", False),
        Kind("cat", ("numel", "parts"),
             "concatenation of parts tensors (along channels) into numel elements per sample", False),
        Kind("permute", ("numel",),
             "transpose/permute copied to contiguous memory (channel shuffle); numel = elements per sample",
             False),
        Kind("scale", ("numel",),
             "a tensor times a Python number (x * c, c * x, x / c, -x, and c - x, a number minus a tensor: an "
             "embedding scaled by the square root of its width, attention scores by their temperature, a gate's "
             "1 - z); numel = elements per sample; the backward scales the gradient by the same number", False),
        Kind("elementwise", ("numel",),
             "softplus (nn.Softplus, F.softplus: what it is probed as, a transcendental pointwise op) and log-sigmoid "
             "(nn.LogSigmoid: 0.71-1.29x softplus's training step on the host, median 1.01); under --unknown-ops "
             "approx also the generic elementwise op standing in for operators without a kind of their own (marked "
             "approx): one tensor of numel elements per sample in, one out", False),
        Kind("clamp", ("numel",),
             "torch.clamp / Tensor.clamp / torch.clip / clamp_min / clamp_max with number bounds (a VAE's clamped "
             "log-variance, ReLU6 written as x.clamp(0, 6)); numel = elements per sample. Its backward is PyTorch's "
             "clamp_backward (comparisons, a mask and a where), not hardtanh's fused one: 2.3-5.3x hardtanh's training "
             "step and 1.2-2.2x softplus's on the host (bench/bench_unary_ops.py)", False),
        Kind("mha", ("embed_dim", "num_heads", "seq_len", "kv_len", "cross", "need_weights", "p", "mask", "causal"),
             "nn.MultiheadAttention (batch first, biases, no key padding mask): self-attention over seq_len tokens "
             "of embed_dim (kv_len = seq_len, cross = 0), or cross-attention (cross = 1) of seq_len queries over "
             "kv_len keys that are also the values; need_weights = 1 returns the head-averaged attention weights "
             "(PyTorch's default, the explicit path), 0 runs the fused kernel; p = its attention dropout; mask = 1 "
             "adds an attn_mask of seq_len x kv_len shared by the batch (a causal or other fixed mask) to the "
             "scores; causal = 1 runs the fused kernel causally (is_causal with need_weights = 0, where PyTorch "
             "drops the mask tensor; at most one of mask and causal). The input is the queries then, for "
             "cross-attention, the keys along the tokens", True),
        Kind("sdpa", ("num_heads", "seq_len", "kv_len", "head_dim", "causal", "p"),
             "F.scaled_dot_product_attention of num_heads heads: seq_len queries over kv_len keys and values, "
             "each head_dim wide; causal = is_causal, p = dropout_p. The input is the queries, keys and values "
             "along the tokens (seq_len + 2 kv_len tokens of num_heads x head_dim)", False),
        Kind("conv_transpose2d", ("in_channels", "out_channels", "kernel", "stride", "padding", "output_padding",
                                  "height", "width", "bias"),
             "2-D transposed convolution (nn.ConvTranspose2d: a decoder's learned upsampling) of a square kernel, "
             "stride and padding, no groups or dilation; output side (side - 1) x stride - 2 x padding + kernel + "
             "output_padding", True),
        Kind("upsample_bilinear", ("channels", "height", "width", "scale"),
             "bilinear upsampling of (channels, height, width) by an integer scale (either align_corners: the same "
             "kernel, timed within 3% here)", False),
        Kind("pad", ("channels", "height", "width", "pad_c", "pad_h", "pad_w"),
             "constant padding (F.pad, nn.ZeroPad2d, nn.ConstantPad1d/2d/3d) of (channels, height, width) per sample "
             "(a 1-D input is (1, 1, length), leading axes beyond three are the channels) by pad_c, pad_h and pad_w "
             "elements along each axis, both sides together", False),
        Kind("reduce_sum", ("rows", "reduced", "inner"),
             "a sum over adjacent axes (x.sum(dim), torch.sum): per sample, an input of rows x reduced x inner "
             "elements (the axes before, the summed ones, those after) to rows x inner; attention pooling "
             "(weights x states summed over time)", False),
        Kind("reduce_max", ("rows", "reduced", "inner", "indices"),
             "a max over adjacent axes, as reduce_sum's shapes: indices = 1 for torch.max(x, dim) (the argmax kept "
             "for the backward), 0 for x.amax(dim) (the backward spreads the gradient over ties by comparing with "
             "the input)", False),
        Kind("reduce_mean", ("rows", "reduced", "inner"),
             "a mean over adjacent axes that no pooling kind runs (x.mean(dim), torch.mean over the channels of an "
             "image, as CBAM's spatial attention pools them), shaped as reduce_sum's; its backward expands the "
             "gradient divided by the reduced count", False),
        Kind("adaptive_maxpool2d", ("channels", "height", "width", "out_size"),
             "adaptive max pooling to out_size x out_size (global max pooling when 1: nn.AdaptiveMaxPool2d, "
             "F.adaptive_max_pool2d; a 1-D one to 1, nn.AdaptiveMaxPool1d(1), runs the same kernel over "
             "(channels, 1, length)); its int64 argmax kept for the backward", False),
        Kind("output", ("in_features", "out_features", "tokens"),
             "the output head: Linear + softmax cross-entropy loss (cost includes the loss and the "
             "per-step fixed work of the optimizer)", True, roles=("output",)),
    ]
}

_SHAPES = {
    "conv2d": (lambda c: (c["in_channels"], c["height"], c["width"]),
               lambda c: (c["out_channels"],
                          _conv_out(c["height"], c["kernel"], c["stride"], c["padding"], _dilation(c)),
                          _conv_out(c["width"], *_width_side(c), _dilation(c)))),
    "linear": (lambda c: ((c["tokens"], c["in_features"]) if c["tokens"] > 1 else (c["in_features"],)),
               lambda c: ((c["tokens"], c["out_features"]) if c["tokens"] > 1 else (c["out_features"],))),
    "output": (lambda c: ((c["tokens"], c["in_features"]) if c["tokens"] > 1 else (c["in_features"],)),
               lambda c: ((c["tokens"], c["out_features"]) if c["tokens"] > 1 else (c["out_features"],))),
    "maxpool2d": (lambda c: (c["channels"], c["height"], c["width"]),
                  lambda c: (c["channels"], _conv_out(c["height"], c["kernel"], c["stride"], c["padding"]),
                             _conv_out(c["width"], *_width_side(c)))),
    "adaptive_avgpool2d": (lambda c: (c["channels"], c["height"], c["width"]),
                           lambda c: (c["channels"], c["out_size"], c["out_size"])),
    "batchnorm2d": (lambda c: (c["channels"], c["height"], c["width"]),) * 2,
    "layernorm": (lambda c: (c["tokens"], c["normalized"]) if c["tokens"] > 1 else (c["normalized"],),) * 2,
    "embedding": (lambda c: (c["seq_len"],), lambda c: (c["seq_len"], c["embedding_dim"])),
    "lstm": (lambda c: (c["seq_len"], c["input_size"]), lambda c: (c["seq_len"], c["hidden_size"])),
    "transformer_block": (lambda c: (c["seq_len"], c["d_model"]),) * 2,
    "conv1d": (lambda c: (c["in_channels"], c["length"]),
               lambda c: (c["out_channels"], _conv_out(c["length"], c["kernel"], c["stride"], c["padding"],
                                                     _dilation(c)))),
    "batchnorm1d": (lambda c: (c["channels"], c["length"]) if c["length"] > 1 else (c["channels"],),) * 2,
    "groupnorm": (lambda c: (c["channels"], c["spatial"]),) * 2,
    "prelu": (lambda c: (c["channels"], c["spatial"]),) * 2,
    "dropout2d": (lambda c: (c["channels"], c["spatial"]),) * 2,
    "maxpool1d": (lambda c: (c["channels"], c["length"]),
                  lambda c: (c["channels"], _conv_out(c["length"], c["kernel"], c["stride"], c["padding"]))),
    "adaptive_avgpool1d": (lambda c: (c["channels"], c["length"]), lambda c: (c["channels"], c["out_size"])),
    "gru": (lambda c: (c["seq_len"], c["input_size"]), lambda c: (c["seq_len"], c["hidden_size"])),
    "lstm_cell": (lambda c: (c["steps"], c["input_size"]), lambda c: (c["hidden_size"],)),
    "gru_cell": (lambda c: (c["steps"], c["input_size"]), lambda c: (c["hidden_size"],)),
    "softmax": (lambda c: _softmax_shape(c),) * 2,
    "upsample": (lambda c: (c["channels"], c["height"], c["width"]),
                 lambda c: (c["channels"], c["height"] * c["scale"], c["width"] * c["scale"])),
    "conv_transpose2d": (lambda c: (c["in_channels"], c["height"], c["width"]),
                         lambda c: (c["out_channels"], _deconv_out(c, c["height"]), _deconv_out(c, c["width"]))),
    "upsample_bilinear": (lambda c: (c["channels"], c["height"], c["width"]),
                          lambda c: (c["channels"], c["height"] * c["scale"], c["width"] * c["scale"])),
    "reduce_sum": (lambda c: (c["rows"], c["reduced"], c["inner"]), lambda c: (c["rows"], c["inner"])),
    "pad": (lambda c: (c["channels"], c["height"], c["width"]),
            lambda c: (c["channels"] + c["pad_c"], c["height"] + c["pad_h"], c["width"] + c["pad_w"])),
    "sdpa": (lambda c: (c["seq_len"] + 2 * c["kv_len"], c["num_heads"], c["head_dim"]),
             lambda c: (c["num_heads"], c["seq_len"], c["head_dim"])),
    "mha": (lambda c: (c["seq_len"] + c["cross"] * c["kv_len"], c["embed_dim"]),
            lambda c: (c["seq_len"], c["embed_dim"])),
}
_SHAPES["avgpool2d"] = _SHAPES["maxpool2d"]
_SHAPES["reduce_max"] = _SHAPES["reduce_sum"]
_SHAPES["reduce_mean"] = _SHAPES["reduce_sum"]
_SHAPES["adaptive_maxpool2d"] = _SHAPES["adaptive_avgpool2d"]
for _k in _ELEMENTWISE:
    _SHAPES[_k] = (_numel, _numel)


def _softmax_shape(c):
    """(rows, last_dim) per sample; rows = numel / last_dim, rounded (at least 1)."""
    last = c["last_dim"]
    rows = max(1, int(round(c["numel"] / last))) if last > 0 else 1
    return (rows, last) if rows > 1 else (last,)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _conv_flops(c):
    oc, oh, ow = _SHAPES["conv2d"][1](c)
    return 2.0 * oc * oh * ow * (c["in_channels"] / c["groups"]) * c["kernel"] * _width_side(c)[0]


def _tb_flops(c):
    d, t, inner, ff = c["d_model"], c["seq_len"], c["n_heads"] * c["head_dim"], c["d_ff"]
    return 2.0 * t * (d * 3 * inner + inner * d + 2 * d * ff) + 4.0 * t * t * inner


def _mha_flops(c):
    """Projections (one d -> 3d over the tokens for self-attention; d -> d over the queries and d -> 2d over
    the keys for cross-attention), scores and weighted sum, their softmax (5 per score; about half of them
    under the causal kernel, as kind ``sdpa``), the mask added to each score, the head average of the weights
    when returned, and the output projection."""
    d, h, t, s = c["embed_dim"], c["num_heads"], c["seq_len"], c["kv_len"]
    proj = 2.0 * t * d * d + 2.0 * s * d * 2 * d if c["cross"] else 2.0 * t * d * 3 * d
    scores = (4.0 * t * s * d + 5.0 * h * t * s) * (0.5 if c["causal"] else 1.0) + c["mask"] * h * t * s
    return proj + scores + c["need_weights"] * h * t * s + 2.0 * t * d * d


def _conv1d_flops(c):
    oc, ol = _SHAPES["conv1d"][1](c)
    return 2.0 * oc * ol * (c["in_channels"] / c["groups"]) * c["kernel"]


def _rnn_layer_inputs(c):
    """Input size of each stacked layer: input_size, then hidden_size."""
    return [c["input_size"]] + [c["hidden_size"]] * max(int(c["num_layers"]) - 1, 0)


_FLOPS = {
    "conv2d": _conv_flops,
    "linear": lambda c: 2.0 * c["tokens"] * c["in_features"] * c["out_features"],
    "output": lambda c: 2.0 * c["tokens"] * c["in_features"] * c["out_features"] + 5.0 * c["tokens"] * c["out_features"],
    "maxpool2d": lambda c: _prod(_SHAPES["maxpool2d"][1](c)) * c["kernel"] * _width_side(c)[0],
    "avgpool2d": lambda c: _prod(_SHAPES["maxpool2d"][1](c)) * c["kernel"] * _width_side(c)[0],
    "adaptive_avgpool2d": lambda c: c["channels"] * c["height"] * c["width"],
    "batchnorm2d": lambda c: 8.0 * c["channels"] * c["height"] * c["width"],
    "layernorm": lambda c: 8.0 * c["tokens"] * c["normalized"],
    "embedding": lambda c: c["seq_len"] * c["embedding_dim"] * (1 + c["positional"]),
    "lstm": lambda c: 8.0 * c["seq_len"] * sum(c["hidden_size"] * (i + c["hidden_size"]) for i in _rnn_layer_inputs(c)),
    "transformer_block": _tb_flops,
    "mha": _mha_flops,
    # scores and weighted sum, and the softmax (5 per score); a causal mask leaves about half of them to compute
    "sdpa": lambda c: (4.0 * c["head_dim"] + 5.0) * c["num_heads"] * c["seq_len"] * c["kv_len"]
    * (0.5 if c["causal"] else 1.0),
    "gelu": lambda c: 8.0 * c["numel"],
    "tanh": lambda c: 4.0 * c["numel"],
    "sigmoid": lambda c: 4.0 * c["numel"],
    "dropout": lambda c: 2.0 * c["numel"],
    "dropout2d": lambda c: 2.0 * c["channels"] * c["spatial"],  # scale, multiply (the mask is per channel)
    "flatten": lambda c: 0.0,
    "conv1d": _conv1d_flops,
    "batchnorm1d": lambda c: 8.0 * c["channels"] * c["length"],
    "groupnorm": lambda c: 8.0 * c["channels"] * c["spatial"],
    "prelu": lambda c: 2.0 * c["channels"] * c["spatial"],  # compare, multiply
    "maxpool1d": lambda c: _prod(_SHAPES["maxpool1d"][1](c)) * c["kernel"],
    "adaptive_avgpool1d": lambda c: c["channels"] * c["length"],
    # 3 gates x 2 matmuls per time step and layer (multiply-add = 2), plus ~10 elementwise ops per unit
    "gru": lambda c: c["seq_len"] * sum(6.0 * c["hidden_size"] * (i + c["hidden_size"]) + 10.0 * c["hidden_size"]
                                        for i in _rnn_layer_inputs(c)),
    # per call, one time step of one layer of lstm and gru, as those kinds count it
    "lstm_cell": lambda c: c["steps"] * 8.0 * c["hidden_size"] * (c["input_size"] + c["hidden_size"]),
    "gru_cell": lambda c: c["steps"] * (6.0 * c["hidden_size"] * (c["input_size"] + c["hidden_size"])
                                        + 10.0 * c["hidden_size"]),
    "softmax": lambda c: 5.0 * _prod(_softmax_shape(c)),  # max, subtract, exp, sum, divide
    "hardswish": lambda c: 4.0 * c["numel"],
    "hardsigmoid": lambda c: 3.0 * c["numel"],
    "silu": lambda c: 5.0 * c["numel"],
    "leaky_relu": lambda c: 2.0 * c["numel"],
    "elu": lambda c: 4.0 * c["numel"],
    "elementwise": lambda c: 4.0 * c["numel"],
    "clamp": lambda c: 2.0 * c["numel"],  # two compares (a max, a min)
    # data movement only: one operation per element written
    "upsample": lambda c: _prod(_SHAPES["upsample"][1](c)),
    "pad": lambda c: _prod(_SHAPES["pad"][1](c)),
    # one add (or compare, reduce_max) per element read
    "reduce_sum": lambda c: c["rows"] * c["reduced"] * c["inner"],
    # four neighbours weighed and summed per output element
    "upsample_bilinear": lambda c: 8.0 * _prod(_SHAPES["upsample_bilinear"][1](c)),
    # every input element meets the whole kernel for every output channel
    "conv_transpose2d": lambda c: 2.0 * c["in_channels"] * c["height"] * c["width"] * c["out_channels"]
    * c["kernel"] * c["kernel"],
}
for _k in ("relu", "relu6", "add", "sub", "mul", "cat", "permute", "scale"):
    _FLOPS[_k] = lambda c: float(c["numel"])
_FLOPS["reduce_max"] = _FLOPS["reduce_sum"]
# the sum, and a division per output element
_FLOPS["reduce_mean"] = lambda c: c["rows"] * c["inner"] * (c["reduced"] + 1)
_FLOPS["adaptive_maxpool2d"] = _FLOPS["adaptive_avgpool2d"]

#: the input role's skipped FLOPs per sample of a layer that chains several operations (``Kind.input_grad_flops``): the
#: data gradient of its first layer's input projection (multiply-add = 2, as the forward counts them); each agrees
#: with the difference torch's own FLOP counter finds between the roles (``tests/test_kind_flops.py``)
_INPUT_GRAD_FLOPS = {
    "lstm": lambda c: 8.0 * c["seq_len"] * c["hidden_size"] * c["input_size"],
    "gru": lambda c: 6.0 * c["seq_len"] * c["hidden_size"] * c["input_size"],
    "lstm_cell": lambda c: 8.0 * c["steps"] * c["hidden_size"] * c["input_size"],
    "gru_cell": lambda c: 6.0 * c["steps"] * c["hidden_size"] * c["input_size"],
    # pre-LN: the first operation is the layer norm, whose weight gradient needs its output's gradient, so the
    # projections' data gradients run whatever the role; the norm's own input gradient is not in its FLOPs either
    "transformer_block": lambda c: 0.0,
    "mha": lambda c: (2.0 * c["seq_len"] * c["embed_dim"] * c["embed_dim"]
                      + 2.0 * c["kv_len"] * c["embed_dim"] * 2 * c["embed_dim"]) if c["cross"]
    else 2.0 * c["seq_len"] * c["embed_dim"] * 3 * c["embed_dim"],
}

_PARAMS = {
    "conv2d": lambda c: (c["out_channels"] * (c["in_channels"] // c["groups"]) * c["kernel"] * _width_side(c)[0]
                         + c["out_channels"] * c["bias"]),
    "linear": lambda c: c["in_features"] * c["out_features"] + c["out_features"] * c["bias"],
    "output": lambda c: c["in_features"] * c["out_features"] + c["out_features"],
    "batchnorm2d": lambda c: 2 * c["channels"],
    "layernorm": lambda c: 2 * c["normalized"],
    "embedding": lambda c: (c["num_embeddings"] + c["seq_len"] * c["positional"]) * c["embedding_dim"],
    # per layer: 4 gates, input and hidden weights, two bias vectors (layers above the first eat hidden_size)
    "lstm": lambda c: sum(4 * c["hidden_size"] * (i + c["hidden_size"] + 2) for i in _rnn_layer_inputs(c)),
    "transformer_block": lambda c: (c["d_model"] * 3 * c["n_heads"] * c["head_dim"] + c["n_heads"] * c["head_dim"] * c["d_model"]
                                    + 2 * c["d_model"] * c["d_ff"] + 4 * c["d_model"]
                                    # biases of qkv, proj, ff1, ff2
                                    + 3 * c["n_heads"] * c["head_dim"] + 2 * c["d_model"] + c["d_ff"]),
    "conv1d": lambda c: (c["out_channels"] * (c["in_channels"] // c["groups"]) * c["kernel"]
                         + c["out_channels"] * c["bias"]),
    "conv_transpose2d": lambda c: (c["in_channels"] * c["out_channels"] * c["kernel"] * c["kernel"]
                                   + c["out_channels"] * c["bias"]),
    "batchnorm1d": lambda c: 2 * c["channels"],
    "groupnorm": lambda c: 2 * c["channels"],
    "prelu": lambda c: 1 if c["shared"] else c["channels"],
    # in_proj (3d x d) and out_proj (d x d) weights and biases
    "mha": lambda c: 4 * c["embed_dim"] * c["embed_dim"] + 4 * c["embed_dim"],
    "gru": lambda c: sum(3 * c["hidden_size"] * (i + c["hidden_size"] + 2) for i in _rnn_layer_inputs(c)),
    "lstm_cell": lambda c: 4 * c["hidden_size"] * (c["input_size"] + c["hidden_size"] + 2),
    "gru_cell": lambda c: 3 * c["hidden_size"] * (c["input_size"] + c["hidden_size"] + 2),
}

# parameters read by the forward when not all of them (an embedding looks up seq_len rows)
_FWD_PARAM_READS = {
    "embedding": lambda c: c["seq_len"] * c["embedding_dim"] * (1 + c["positional"]),
}


def _tb_saved(c):
    t, inner = c["seq_len"], c["n_heads"] * c["head_dim"]
    return 2.0 * t * t * c["n_heads"] + t * (4.0 * inner + 4.0 * c["d_model"] + 2.0 * c["d_ff"])


def _saved_passes(runs):
    """Passes over memory of work a layer saves for its backward: written by the forward, and read back by the
    backward where it runs (``backward_runs``)."""
    return 2.0 if runs else 1.0


# kind-specific extra bytes per sample, f(config, backward_runs): saved work the generic formula misses
_EXTRA_BYTES = {
    # its gates and cell state (lstm), gates and hidden state (gru) per time step and layer, written by the forward and
    # read back by the backward; without a backward (frozen, reading the data) written once: over host profiles 64-76
    # the law's 10-fold ln error, median lstm 0.230 -> 0.169 (lower in 12 of 13), lstm_cell 0.126 -> 0.108 (11 of 13),
    # gru 0.150 -> 0.142 (9 of 13), gru_cell 0.117 -> 0.116 (``bench/results/launch-share-host-20261130-2350-*``)
    "lstm": lambda c, runs: _saved_passes(runs) * 4.0 * c["seq_len"] * c["num_layers"] * 5 * c["hidden_size"],
    "gru": lambda c, runs: _saved_passes(runs) * 4.0 * c["seq_len"] * c["num_layers"] * 4 * c["hidden_size"],
    # per call, as those kinds count a step
    "lstm_cell": lambda c, runs: _saved_passes(runs) * 4.0 * c["steps"] * 5 * c["hidden_size"],
    "gru_cell": lambda c, runs: _saved_passes(runs) * 4.0 * c["steps"] * 4 * c["hidden_size"],
    # an attention layer's saved activations, likewise written once where the backward never runs (a fine-tune's
    # frozen encoder blocks, which PyTorch still runs in training mode: no fused inference path); the law's 10-fold ln
    # error on profiles 81 / 82: transformer_block 0.123 / 0.135 -> 0.068 / 0.062, mha 0.186 / 0.187 -> 0.184 / 0.131
    # (``bench/results/launch-share-host-20261201-*-attn-p8*``)
    "transformer_block": lambda c, runs: _saved_passes(runs) * 4.0 * _tb_saved(c),
    # the row statistics of the softmax (a fused kernel saves them for its backward); with dropout the probabilities
    # and their mask (the explicit path)
    # (sdpa's kept at two passes where its backward never runs too: written once, its forward-only samples read 0.43
    # (ln) over the law on profile 82 and its law's error rose on profiles 81 and 82, 0.39 -> 0.44-0.50. The backend
    # is the same with or without gradients (``torch._fused_sdp_choice``: flash without dropout, math with), and most
    # forward-only samples have dropout: the math path's forward passes over its scores, probabilities and mask, which
    # the generic terms do not count, cost 0.71x a trained step at 128 tokens, batch 4)
    "sdpa": lambda c, runs: 2 * 4.0 * c["num_heads"] * c["seq_len"] * (1.0 + 2.0 * c["kv_len"] * (c["p"] > 0)),
    # queries, keys, values and the heads' output saved, and the attention probabilities (and their dropout
    # mask) where the explicit path keeps them
    "mha": lambda c, runs: _saved_passes(runs) * 4.0 * (2.0 * c["embed_dim"] * (c["seq_len"] + c["kv_len"])
                                                        + c["num_heads"] * c["seq_len"] * c["kv_len"]
                                                        * (c["need_weights"] + (c["p"] > 0))),
    "maxpool2d": lambda c, runs: 2 * 8.0 * _prod(_SHAPES["maxpool2d"][1](c)) if runs else 0.0,
    "maxpool1d": lambda c, runs: 2 * 8.0 * _prod(_SHAPES["maxpool1d"][1](c)) if runs else 0.0,
    # its int64 argmax, written by the forward (always: the kernel returns it) and read by the backward's scatter
    "adaptive_maxpool2d": lambda c, runs: _saved_passes(runs) * 8.0 * c["channels"] * c["out_size"] ** 2,
    # torch.max's int64 argmax, written in the forward and read by the backward's scatter
    "reduce_max": lambda c, runs: _saved_passes(runs) * 8.0 * c["rows"] * c["inner"] * c["indices"],
    "dropout": lambda c, runs: _saved_passes(runs) * c["numel"],
    "dropout2d": lambda c, runs: _saved_passes(runs) * 4.0 * c["channels"],  # its float mask, one per channel
    "add": lambda c, runs: 4.0 * c["numel"],
    # the second operand, and the backward's negated gradient of it (read and written)
    "sub": lambda c, runs: 4.0 * c["numel"] * (3.0 if runs else 1.0),
    "mul": lambda c, runs: 0.0 if c["broadcast"] else 4.0 * c["numel"] * (3.0 if runs else 1.0),
}


def get_kind(name):
    try:
        return KINDS[name]
    except KeyError:
        raise NotFoundError(f"unknown layer kind {name!r}; known: {', '.join(KINDS)}") from None


def list_kinds():
    """All kinds, as plain dicts (name, features, description, ...)."""
    return [k.to_dict() for k in KINDS.values()]


def cost_terms(kind_name, config, batch_size, role):
    """``{"flops": train_flops, "bytes": train_bytes}`` of one training step of one layer."""
    kind = get_kind(kind_name)
    return {"flops": kind.train_flops(config, batch_size, role),
            "bytes": kind.train_bytes(config, batch_size, role)}


#: padded features: ``<feature>_pad<N>`` is a config feature rounded up to a multiple of ``N``, over itself
#: (1.0 for a multiple of N, 2.0 for 1 channel in blocks of 2, 16/9 for 9 channels in blocks of 8). CPU
#: convolution kernels compute channels in blocks of the vector width (oneDNN: 8 float32 lanes on AVX2, 16 on
#: AVX-512), so a layer with 9 channels costs about what one with 16 does; the ratio tells the GP how much of
#: the work is padding, and each block's length scale which block the device uses (on the AVX-512 host a 3x3
#: conv takes the same time with 24, 28 or 32 channels). A reader always derives such a feature from its base
#: feature, never takes it from a config.
PADDED_FEATURES = {
    "conv1d": (("in_channels", 8), ("out_channels", 8), ("in_channels", 16), ("out_channels", 16)),
    "conv2d": (("in_channels", 8), ("out_channels", 8), ("in_channels", 16), ("out_channels", 16)),
    "conv_transpose2d": (("in_channels", 8), ("out_channels", 8), ("in_channels", 16), ("out_channels", 16)),
}
PAD_MARK = "_pad"
MAX_PAD_BLOCK = 1024


def padded_name(feature, block):
    return f"{feature}{PAD_MARK}{int(block)}"


def parse_padded(name):
    """``(base feature, block)`` of a padded feature's name (``"in_channels_pad8"`` -> ``("in_channels", 8)``),
    None for any other name. The block is a decimal integer in [1, MAX_PAD_BLOCK] without a leading zero."""
    base, mark, digits = name.rpartition(PAD_MARK)
    if not mark or not base or not digits or len(digits) > 4 or digits[0] == "0":
        return None
    if any(ch not in "0123456789" for ch in digits):
        return None
    block = int(digits)
    return (base, block) if block <= MAX_PAD_BLOCK else None


def padded_value(x, block):
    """``ceil(x / block) * block / x`` for a count ``x >= 1``: the work padding to blocks adds, as a ratio."""
    x = float(x)
    if not (x >= 1.0) or not math.isfinite(x):
        raise UsageError(f"a padded feature needs a finite count >= 1, got {x!r}")
    return math.ceil(x / block) * block / x


def gp_features(kind_name):
    """Feature names of a kind's GP input vector: its config features, its padded features, the batch size,
    the role."""
    kind = get_kind(kind_name)
    extra = ("batch_size",) if kind.roles == ("output",) or len(kind.roles) == 1 else ("batch_size", "role")
    padded = [padded_name(f, n) for f, n in PADDED_FEATURES.get(kind_name, ())]
    return list(kind.features) + padded + list(extra)


def feature_vector(kind_name, config, batch_size, role, names=None):
    """The raw (untransformed) GP input vector for one layer; role encoded input=1, hidden=0. ``names``: another
    set of inputs (a GP's own ``features``; ``bench/bench_rect_kernels.py``'s variants), else ``gp_features``."""
    names = gp_features(kind_name) if names is None else names
    values = dict(complete_config(kind_name, config), batch_size=batch_size, role=1 if role == "input" else 0)
    out = []
    for n in names:
        p = parse_padded(n)
        out.append(padded_value(values[p[0]], p[1]) if p else float(values[n]))
    return out


#: structural variants: a depthwise layer of one of these kinds (config ``groups > 1`` and no more input channels
#: than groups: one input channel per group) is costed by the estimator's ``"<kind>:grouped"`` model when the
#: estimator has one, else by the kind's own. Depthwise convolutions run other kernels than dense ones (on the
#: host 5-10x the time per FLOP), a step no smooth model of one kind bridges: one GP over both pulled dense
#: estimates up by 50-80%. A grouped convolution of several input channels per group (ResNeXt, RegNetX,
#: ShuffleNetV1) is costed by the dense entry: in the variant, one mean function fitted on mostly depthwise
#: samples read a user's ``groups=2`` conv at 6-46 ms from profile to profile, where the dense entries of three
#: profiles read it at 6.3-8.8 ms, as its own probe does (``bench/results/gp-vs-probes-host-20261129-1925-grouped.md``).
GROUPED_KINDS = ("conv1d", "conv2d")
VARIANT_SEP = ":"
#: the second variant, ``"<kind>:gemm"``: a dense convolution that PyTorch on a CPU at one intra-op thread runs
#: by im2col and one matrix product (ATen's ``Slow2d`` backend) instead of oneDNN's blocked kernels (``Mkldnn``):
#: ATen's ``use_mkldnn`` (``aten/src/ATen/native/Convolution.cpp``, torch 2.x) keeps 1x1, stride-1, undilated
#: convs at a batch below 16 off oneDNN at one thread ("THNN is faster when single-threaded"), and a batch-1 conv
#: whose kernel is at most 3 along a side over an input of at most 20480 numbers ("native is faster").
#: ``torch._C._select_conv_backend`` says so for every case here (conv1d runs as a conv2d of height 1). On the
#: host, 25 of a profile's 189 conv2d samples took that path and sat 1.35 (ln) under the kind's law, the rest
#: +0.08: one smooth model over both read the smallest convs 3x high (``docs/evaluations.md``).
GEMM_BATCH = 16
GEMM_BATCH1_NUMEL = 20480


def runs_as_gemm(kind_name, config, batch_size):
    """True for a dense ``conv1d``/``conv2d`` layer that PyTorch's CPU backend at one thread runs by im2col and a
    matrix product rather than oneDNN (``GEMM_BATCH``); False for anything else or a config it cannot read."""
    if kind_name not in GROUPED_KINDS or not isinstance(config, dict) or not _is_number(batch_size):
        return False

    def num(key, default=None):
        v = config.get(key, default)
        return v if _is_number(v) else None

    if kind_name == "conv2d":
        kh, sh, h, w = num("kernel"), num("stride"), num("height"), num("width")
        kw, sw, area = num("kernel_w", kh), num("stride_w", sh), None if h is None or w is None else h * w
    else:
        kh, kw, sh, sw, area = 1, num("kernel"), 1, num("stride"), num("length")
    cin, dilation, groups = num("in_channels"), num("dilation", 1), num("groups", 1)
    if None in (kh, kw, sh, sw, area, cin, dilation, groups):
        return False
    pointwise = kh == kw == sh == sw == dilation == 1 and batch_size < GEMM_BATCH
    small = batch_size <= 1 and groups == 1 and not (kh > 3 and kw > 3) and batch_size * cin * area <= GEMM_BATCH1_NUMEL
    return pointwise or small


def model_key(kind_name, config, batch_size=None):
    """The estimator entry that costs a layer: ``"<kind>:grouped"`` for a depthwise convolution (``groups > 1``,
    ``in_channels`` absent or at most ``groups``); with ``batch_size``, ``"<kind>:gemm"`` for a convolution that
    PyTorch at one thread runs off oneDNN (``runs_as_gemm``); else the kind itself, grouped convolutions of
    several channels per group included (``docs/estimator-format.md``, structural variants). Without
    ``batch_size`` only the first applies: a profile groups its zoo's configs (which have no batch) so, then splits
    each group's probes by their entries at their batch sizes."""
    if kind_name in GROUPED_KINDS and isinstance(config, dict):
        g, cin = config.get("groups", 1), config.get("in_channels")
        if _is_number(g) and g > 1 and not (_is_number(cin) and cin > g):
            return kind_name + VARIANT_SEP + "grouped"
        if batch_size is not None and runs_as_gemm(kind_name, config, batch_size):
            return kind_name + VARIANT_SEP + "gemm"
    return kind_name


def entry_key(kind_name, config, batch_size, entries):
    """The entry of ``entries`` (a collection of entry names) that costs a layer: its ``model_key`` where
    ``entries`` has it, else its kind's (an estimator, or a campaign's working models, without the variant)."""
    key = model_key(kind_name, config, batch_size)
    return key if key in entries else kind_name


def base_kind(key):
    """The layer kind of an estimator entry name (``"conv2d:grouped"`` -> ``"conv2d"``)."""
    return key.split(VARIANT_SEP, 1)[0]
