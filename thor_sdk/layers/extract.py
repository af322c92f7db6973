"""Split a ``torch.nn.Module`` into THOR's ordered layer list (torch.fx trace + shape propagation)."""

import contextlib
import io
import operator

from thor_sdk.errors import ModelError, UnsupportedOperatorError, UsageError
from thor_sdk.runtime.terms import CELLS

from .kinds import FREEZABLE, IN_PLACE, SPARSE_FEATURES, complete_config, get_kind
from .trace import RECOMPUTE_REASON, RECOMPUTED
from .trainable import trained_in_part


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _pair(v, what, unsupported, label):
    if isinstance(v, (tuple, list)):
        if len(set(v)) != 1:
            unsupported.append(f"{label}(non-square {what})")
            return int(v[0])
        return int(v[0])
    return int(v)


def _conv_layer(mod, kind, sides, unsupported, label):
    """(kind, config) of an nn.Conv1d / nn.Conv2d. A conv2d's kernel, stride and padding may differ along height and
    width (``kernel`` and ``kernel_w``, ...); its dilation is one number for both (``conv_dilation``). Its padding a
    number per side, or ``"valid"`` (none) or ``"same"`` where that is one number per side (PyTorch pads
    ``dilation x (kernel - 1)`` in all, the odd element at the end: an even kernel pads unevenly, recorded
    unsupported)."""
    name = "Conv1d" if kind == "conv1d" else "Conv2d"
    kernels = _sides(mod.kernel_size)
    dilation = conv_dilation(_sides(mod.dilation), kernels, unsupported, label)
    padding = mod.padding
    if padding == "valid":
        padding = 0
    elif padding == "same" and all(dilation * (k - 1) % 2 == 0 for k in kernels):
        padding = tuple(dilation * (k - 1) // 2 for k in kernels)
    elif isinstance(padding, str):
        unsupported.append(f"{name}(padding={padding!r}, uneven)")
        return None
    (kernel, kernel_w), (stride, stride_w), (pad, pad_w) = kernels, _sides(mod.stride), _sides(padding)
    c = {"in_channels": mod.in_channels, "out_channels": mod.out_channels, "kernel": kernel, "stride": stride,
         "padding": pad, "groups": mod.groups, **sides, "bias": int(mod.bias is not None), "dilation": dilation}
    if kind == "conv2d":
        c.update(kernel_w=kernel_w, stride_w=stride_w, padding_w=pad_w)
    return kind, c


def conv_dilation(dilations, kernels, unsupported, label):
    """A conv's one dilation from its dilation along each side (``dilations``, ``kernels``: along the height, along
    the width): a side whose kernel is 1 takes any (it spaces no taps: ERFNet's 3x1 conv dilated (d, 1) is the 3x1
    conv dilated d), else the sides' must be one number (a non-square one is recorded unsupported). Both readers use
    it."""
    used = {int(d) for d, k in zip(dilations, kernels) if int(k) > 1} or {int(dilations[0])}
    if len(used) != 1:
        unsupported.append(f"{label}(non-square dilation)")
    return min(used)


def _sides(v):
    """A conv's kernel, stride or padding as (along the height, along the width): a number is both, a pair is
    (height, width), a conv1d's 1-tuple its one side twice."""
    if isinstance(v, (tuple, list)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


def _pool_layer(kind, kernel, stride, padding, dilation, ceil_mode, in_shape, out_shape, unsupported, label,
                divisor_override=None):
    """(kind, config) of a max or average pooling (module or function: ``nn.MaxPool2d`` and ``F.max_pool2d`` alike)
    over (C, H, W) or (C, L) per sample, a 2-D one's kernel, stride and padding per side (``kernel`` along the
    height, ``kernel_w`` along the width: an audio net's (2, 1) over time); recorded unsupported with dilation, a
    divisor override, or a ``ceil_mode`` that changes the output's shape (where it does not, the pooling is the
    same)."""
    if not isinstance(kernel, (int, tuple, list)):
        unsupported.append(f"{label}(kernel not a number)")
        return None
    sides = len(in_shape) - 1
    if sides not in (1, 2) or len(out_shape) != len(in_shape):
        unsupported.append(f"{label}({len(in_shape)}-D per sample)")
        return None
    if _pair(dilation, "dilation", unsupported, label) != 1 or divisor_override:
        unsupported.append(f"{label}(dilation or divisor_override)")
        return None
    if sides == 1:
        k = _pair(kernel, "kernel", unsupported, label)
        stride = k if stride is None or isinstance(stride, (tuple, list)) and not stride else stride
        c = {"channels": in_shape[0], "length": in_shape[1], "kernel": k,
             "stride": _pair(stride, "stride", unsupported, label),
             "padding": _pair(padding, "padding", unsupported, label)}
    else:
        k = _sides(kernel)
        s = k if stride is None or isinstance(stride, (tuple, list)) and not stride else _sides(stride)
        p = _sides(padding)
        c = {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2], "kernel": k[0], "stride": s[0],
             "padding": p[0], "kernel_w": k[1], "stride_w": s[1], "padding_w": p[1]}
    if ceil_mode and tuple(get_kind(kind).out_shape(c)) != tuple(out_shape):
        unsupported.append(f"{label}(ceil_mode)")
        return None
    return kind, c


def _avg_pool1d_layer(kernel, stride, padding, ceil_mode, in_shape, out_shape, unsupported, label):
    """``nn.AvgPool1d`` / ``F.avg_pool1d`` over (C, L): kind ``avgpool2d`` over (C, 1, L) with a 1 x k kernel, the
    kernel PyTorch runs it with (``avg_pool1d`` calls ``avg_pool2d`` on the input unsqueezed; timed 0.97-1.04x here,
    ``bench/results/pool1d-host-20261128.md``)."""
    if len(in_shape) != 2 or len(out_shape) != 2:
        unsupported.append(f"{label}({len(in_shape)}-D per sample)")
        return None
    one = (lambda v: v[0] if isinstance(v, (tuple, list)) and len(v) == 1 else v)
    stride = kernel if stride is None or isinstance(stride, (tuple, list)) and not stride else stride
    return _pool_layer("avgpool2d", (1, one(kernel)), (1, one(stride)), (0, one(padding)), 1, ceil_mode,
                       (in_shape[0], 1, in_shape[1]), (out_shape[0], 1, out_shape[1]), unsupported, label)


def _adaptive_max_layer(output_size, return_indices, in_shape, unsupported, label):
    """Adaptive max pooling (``nn.AdaptiveMaxPool2d``, ``F.adaptive_max_pool2d`` and their 1-D forms): kind
    ``adaptive_maxpool2d`` to a square output; a 1-D one only to 1 (global max pooling over time, which PyTorch runs
    as the 2-D kernel over (C, 1, L)); others, and the indices returned to the caller, recorded unsupported."""
    if return_indices:
        unsupported.append(f"{label}(return_indices)")
        return None
    if len(in_shape) not in (2, 3):
        unsupported.append(f"{label}({len(in_shape) - 1}-D)")
        return None
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,)
    if any(s is None or not isinstance(s, int) for s in sizes) or len(set(sizes)) != 1 \
            or len(sizes) not in (1, len(in_shape) - 1):
        unsupported.append(f"{label}(output size {output_size!r}: only a square one has a kind)")
        return None
    if len(in_shape) == 2 and sizes[0] != 1:
        unsupported.append(f"{label}(1-D to {sizes[0]}: only global max pooling, to 1, has a kind)")
        return None
    h, w = (1, in_shape[1]) if len(in_shape) == 2 else in_shape[1:]
    return "adaptive_maxpool2d", {"channels": in_shape[0], "height": h, "width": w, "out_size": sizes[0]}


def _channel_dropout(label, p, spatial_axes, in_shape, unsupported):
    """(kind, config) of a channel dropout (``nn.Dropout2d``, ``F.dropout1d``, ...) over ``spatial_axes`` (1, 2 or
    3: its digit): kind ``dropout2d`` over the channels (axis 0 per sample) and the rest as ``spatial``; None
    (free: PyTorch returns its input) at p = 0. Recorded unsupported on an input of another rank than its own
    (``nn.Dropout2d`` on (C, L) per sample reads it as one unbatched image, as PyTorch warns) or a p that is not a
    number in [0, 1)."""
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p < 1:
        unsupported.append(f"{label}(p not a number in [0, 1))")
        return None
    if len(in_shape) != 1 + spatial_axes:
        unsupported.append(f"{label}(an input of {len(in_shape)} axes per sample)")
        return None
    if p == 0:
        return None
    return "dropout2d", {"channels": in_shape[0], "spatial": _prod(in_shape[1:]), "p": float(p)}


def _batch_first_ok(rnn_batch_first, in_axis):
    """Whether a recurrent or attention module reads its input's batch where the tensor has it: axis 0 when
    ``batch_first``, else axis 1 (a sequence-first model that transposed its batch-first input)."""
    return in_axis == (0 if rnn_batch_first else 1)


def _module_layer(mod, in_shape, out_shape, unsupported, in_axis=0):
    """(kind, config) for a leaf module, None for a free one (Identity), or records it unsupported.
    ``in_axis``: the batch axis of the module's input (recurrent modules with ``batch_first=False`` read it at
    axis 1)."""
    from torch import nn

    from thor_sdk.models.blocks import (GRUCellLoop, GRUSequence, LSTMCellLoop, LSTMSequence, TokenPositionalEmbedding,
                                        TransformerBlock)

    label = type(mod).__name__
    if isinstance(mod, nn.Conv1d):
        return _conv_layer(mod, "conv1d", {"length": in_shape[-1]}, unsupported, label)
    if isinstance(mod, nn.BatchNorm1d):
        return "batchnorm1d", {"channels": in_shape[0], "length": in_shape[1] if len(in_shape) > 1 else 1}
    if isinstance(mod, nn.MaxPool1d):
        return _pool_layer("maxpool1d", mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.ceil_mode,
                           in_shape, out_shape, unsupported, label)
    if isinstance(mod, nn.AdaptiveAvgPool1d):
        return "adaptive_avgpool1d", {"channels": in_shape[0], "length": in_shape[1],
                                      "out_size": _pair(mod.output_size, "output size", unsupported, label)}
    if isinstance(mod, (nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d)):
        return _adaptive_max_layer(mod.output_size, mod.return_indices, in_shape, unsupported, label)
    if isinstance(mod, nn.AvgPool1d):
        return _avg_pool1d_layer(mod.kernel_size, mod.stride, mod.padding, mod.ceil_mode, in_shape, out_shape,
                                 unsupported, label)
    if isinstance(mod, (GRUSequence, nn.GRU)):
        gru = mod.gru if isinstance(mod, GRUSequence) else mod
        if not _batch_first_ok(gru.batch_first, in_axis):
            unsupported.append(f"GRU(batch_first={gru.batch_first} on an input whose batch is axis {in_axis})")
        elif gru.bidirectional:  # (an nn.GRU's directions are read as layers, _bidirectional_gru_parts)
            unsupported.append("GRU(bidirectional)")
        return "gru", {"input_size": gru.input_size, "hidden_size": gru.hidden_size,
                       "seq_len": in_shape[0], "num_layers": gru.num_layers}
    if isinstance(mod, (nn.LSTMCell, nn.GRUCell, LSTMCellLoop, GRUCellLoop)):
        return _cell_layer(mod, in_shape, in_axis, unsupported)
    if isinstance(mod, nn.Softmax):
        return _softmax_layer(_batch_first_dims(mod.dim, in_axis, len(in_shape) + 1), in_shape, unsupported,
                              "Softmax")
    if isinstance(mod, nn.Upsample):
        return _upsample_layer(mod.mode, in_shape, out_shape, unsupported, type(mod).__name__)
    if isinstance(mod, nn.ConvTranspose2d):
        return _deconv_layer(mod, in_shape, in_axis, unsupported)
    if isinstance(mod, nn.modules.padding._ConstantPadNd):
        return _pad_layer(mod.padding, "constant", in_shape, out_shape, in_axis, unsupported, label)
    if isinstance(mod, nn.ChannelShuffle):
        return "permute", {"numel": _prod(in_shape)}
    if isinstance(mod, nn.Conv2d):
        return _conv_layer(mod, "conv2d", {"height": in_shape[-2], "width": in_shape[-1]}, unsupported, label)
    if isinstance(mod, nn.Linear):
        return "linear", {"in_features": mod.in_features, "out_features": mod.out_features,
                          "tokens": _prod(in_shape[:-1]), "bias": int(mod.bias is not None)}
    if isinstance(mod, nn.MaxPool2d):
        return _pool_layer("maxpool2d", mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.ceil_mode,
                           in_shape, out_shape, unsupported, label)
    if isinstance(mod, nn.AvgPool2d):
        return _pool_layer("avgpool2d", mod.kernel_size, mod.stride, mod.padding, 1, mod.ceil_mode, in_shape,
                           out_shape, unsupported, label, mod.divisor_override)
    if isinstance(mod, nn.AdaptiveAvgPool2d):
        return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                      "out_size": _pair(mod.output_size, "output size", unsupported, label)}
    if isinstance(mod, nn.PReLU):
        shared = mod.num_parameters == 1
        if not in_shape or not shared and (in_axis != 0 or in_shape[0] != mod.num_parameters):
            unsupported.append("PReLU(its slopes not along the channels)")
            return None
        return "prelu", {"channels": int(in_shape[0]), "spatial": _prod(in_shape[1:]), "shared": int(shared)}
    if isinstance(mod, nn.GroupNorm):
        if not mod.affine or in_axis != 0 or not in_shape or in_shape[0] != mod.num_channels:
            unsupported.append("GroupNorm(without its affine, or not channels first)")
            return None
        return "groupnorm", {"channels": mod.num_channels, "num_groups": mod.num_groups,
                             "spatial": _prod(in_shape[1:])}
    if isinstance(mod, nn.BatchNorm2d):
        return "batchnorm2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2]}
    if isinstance(mod, nn.LayerNorm):
        return layernorm_layer(len(mod.normalized_shape), in_shape, in_axis, unsupported, label)
    if isinstance(mod, TokenPositionalEmbedding):
        return "embedding", {"num_embeddings": mod.tok.num_embeddings, "embedding_dim": mod.tok.embedding_dim,
                             "seq_len": in_shape[-1], "positional": 1}
    if isinstance(mod, nn.Embedding):
        return "embedding", {"num_embeddings": mod.num_embeddings, "embedding_dim": mod.embedding_dim,
                             "seq_len": _prod(in_shape), "positional": 0}
    if isinstance(mod, (LSTMSequence, nn.LSTM)):
        lstm = mod.lstm if isinstance(mod, LSTMSequence) else mod
        if lstm.bidirectional or lstm.proj_size:
            unsupported.append("LSTM(bidirectional or projected)")
        elif not _batch_first_ok(lstm.batch_first, in_axis):
            unsupported.append(f"LSTM(batch_first={lstm.batch_first} on an input whose batch is axis {in_axis})")
        return "lstm", {"input_size": lstm.input_size, "hidden_size": lstm.hidden_size,
                        "seq_len": in_shape[0], "num_layers": lstm.num_layers}
    if isinstance(mod, TransformerBlock):
        return "transformer_block", {"d_model": mod.ln1.normalized_shape[0], "n_heads": mod.n_heads,
                                     "head_dim": mod.head_dim, "d_ff": mod.ff1.out_features, "seq_len": in_shape[0]}
    if isinstance(mod, nn.Dropout):
        return "dropout", {"numel": _prod(in_shape), "p": float(mod.p)}
    for axes, cls in enumerate((nn.Dropout1d, nn.Dropout2d, nn.Dropout3d), 1):
        if isinstance(mod, cls):
            return _channel_dropout(type(mod).__name__, mod.p, axes, in_shape, unsupported)
    if isinstance(mod, (nn.Flatten, nn.Unflatten)):
        return "flatten", {"numel": _prod(in_shape)}
    if isinstance(mod, nn.Identity):
        return None
    simple = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.Hardtanh: "relu6", nn.GELU: "gelu", nn.Tanh: "tanh",
              nn.Sigmoid: "sigmoid", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid", nn.SiLU: "silu",
              nn.LeakyReLU: "leaky_relu", nn.ELU: "elu", nn.SELU: "elu", nn.CELU: "elu",
              nn.Softplus: "elementwise", nn.LogSigmoid: "elementwise"}  # kinds whose kernels they run or cost
    for cls, kind in simple.items():
        if type(mod) is cls:
            return kind, {"numel": _prod(in_shape)}
    unsupported.append(label)
    return None


def _is_mha(mod):
    from torch import nn

    return isinstance(mod, nn.MultiheadAttention)


def _qkv(node):
    """The query, key and value arguments of an attention call (``nn.MultiheadAttention``,
    ``F.scaled_dot_product_attention``), positional or by name."""
    return [_arg(node, i, name) for i, name in enumerate(("query", "key", "value"))]


def _plain_attention(att):
    """Whether an ``nn.MultiheadAttention`` is laid out as kind ``mha`` measures it: one embedding width for
    queries, keys and values, whole heads, its input and output projections' biases, no extra key/value bias and
    no zero attention."""
    return bool(att._qkv_same_embed_dim and att.in_proj_bias is not None and att.out_proj.bias is not None
                and att.bias_k is None and not att.add_zero_attn and att.embed_dim % att.num_heads == 0)


def _mha_config(att, seq_len, kv_len, cross, need_weights, mask=False, causal=False):
    """Kind ``mha``'s config of the module ``att`` called on ``seq_len`` queries over ``kv_len`` keys."""
    return {"embed_dim": att.embed_dim, "num_heads": att.num_heads, "seq_len": seq_len, "kv_len": kv_len,
            "cross": int(cross), "need_weights": int(need_weights), "p": float(att.dropout), "mask": int(mask),
            "causal": int(causal)}


def _fixed_mask(mask, seq_len, kv_len, fixed_shape, why):
    """Whether an attention mask argument is one tensor of ``seq_len x kv_len`` made without the input's values or
    parameters (a buffer, or ``nn.Transformer.generate_square_subsequent_mask`` in forward: the same for every
    sample, so PyTorch broadcasts it over the batch and heads). Records why not in ``why`` otherwise (a per-sample or
    per-head mask, a learned bias, a padding mask computed from the input)."""
    if mask is None:
        return False
    if not hasattr(mask, "meta") or fixed_shape(mask) != (seq_len, kv_len):
        why.append("a mask other than one fixed seq_len x kv_len tensor")
    return True


def _is_causal_mask(value):
    """Whether a mask's value is the causal mask PyTorch's ``nn.TransformerEncoder`` recognises (``-inf``, or
    True, above the diagonal and 0/False elsewhere, as ``generate_square_subsequent_mask`` makes it): the stack
    then runs its layers' attention with ``is_causal``."""
    import torch

    if value is None or value.dim() != 2 or value.shape[0] != value.shape[1]:
        return False
    causal = torch.triu(torch.full(tuple(value.shape), float("-inf"), dtype=value.dtype), 1)
    return bool((value == causal).all())


#: nn.MultiheadAttention.forward's arguments after query, key and value, in order, with their defaults
_MHA_OPTIONS = {"key_padding_mask": None, "need_weights": True, "attn_mask": None, "average_attn_weights": True,
                "is_causal": False}


def _mha_layer(node, att, shape_of, batch_axis, unsupported, fixed_shape=lambda n: None):
    """``("mha", config)`` of an ``nn.MultiheadAttention`` call the kind covers (one embedding width, biases, no
    extra key/value bias, no zero attention, no key padding mask, an ``attn_mask`` only as one fixed
    ``seq_len x kv_len`` tensor (``_fixed_mask``; ``fixed_shape``: a node's shape where it is such a tensor),
    self-attention or keys that are the values), else None with the reason recorded unsupported (a stand-in of
    linear layers and a softmax may then take it). PyTorch's ``is_causal`` hint runs the fused kernel causally
    where the weights are not returned (feature ``causal``); otherwise the mask is added (feature ``mask``)."""
    tensors = _qkv(node)
    options = {name: _arg(node, 3 + i, name, default) for i, (name, default) in enumerate(_MHA_OPTIONS.items())}
    q, k, v = tensors
    shapes = [shape_of(a) if hasattr(a, "meta") else None for a in tensors]
    why = []
    if any(s is None or len(s) != 2 for s in shapes):
        why.append("inputs not (tokens, features) per sample")
    elif not all(_batch_first_ok(att.batch_first, batch_axis(a)) for a in tensors):
        why.append(f"batch_first={att.batch_first} on inputs whose batch is elsewhere")
    if not _plain_attention(att):
        why.append("kdim/vdim, bias=False, add_bias_kv or add_zero_attn")
    if options["key_padding_mask"] is not None:
        why.append("a key padding mask")
    masked = shapes[0] is not None and shapes[1] is not None and len(shapes[0]) == len(shapes[1]) == 2 \
        and _fixed_mask(options["attn_mask"], shapes[0][0], shapes[1][0], fixed_shape, why)
    if options["is_causal"] not in (True, False):
        why.append("a computed is_causal")
    if options["need_weights"] not in (True, False) or options["average_attn_weights"] is not True:
        why.append("per-head or computed need_weights")
    cross = not (q is k is v)
    if cross and k is not v:
        why.append("keys that are not the values")
    if why:
        unsupported.append(f"MultiheadAttention({'; '.join(why)})")
        return None
    causal = masked and options["is_causal"] is True and not options["need_weights"]
    return "mha", _mha_config(att, shapes[0][0], shapes[1][0], cross, options["need_weights"], masked and not causal,
                              causal)


def _mask_arguments(gm):
    """The nodes passed as (source or target) masks to ``nn.TransformerEncoder``, ``nn.TransformerDecoder`` and
    ``nn.Transformer`` calls in ``gm``: a stack decides from the mask's value whether its layers run causally, so
    ``layers_from_module`` keeps their values."""
    from torch import nn

    out = set()
    for node in gm.graph.nodes:
        mod = gm.get_submodule(node.target) if node.op == "call_module" else None
        if isinstance(mod, (nn.TransformerEncoder, nn.TransformerDecoder, nn.Transformer)):
            for _, _, _, options, _, _ in _transformer_args(node, mod):
                if hasattr(options["tgt_mask"], "meta"):
                    out.add(options["tgt_mask"])
    return out


def _is_sdpa(node):
    from torch.nn import functional as F

    return node.op == "call_function" and node.target is F.scaled_dot_product_attention


def _sdpa_layer(node, shape_of, batch_axis, unsupported):
    """``("sdpa", config)`` of an ``F.scaled_dot_product_attention`` call the kind covers: queries, keys and values
    of one head dimension with the same heads, the batch first, no mask tensor (``is_causal`` and a dropout
    probability are features; a scale changes no cost), else None with the reason recorded unsupported (its
    stand-in of linear layers and a softmax may then take it)."""
    tensors = _qkv(node)
    mask, p, causal = _arg(node, 3, "attn_mask"), _arg(node, 4, "dropout_p", 0.0), _arg(node, 5, "is_causal", False)
    shapes = [shape_of(a) if hasattr(a, "meta") else None for a in tensors]
    why = []
    if any(s is None or len(s) < 2 for s in shapes) or any(batch_axis(a) for a in tensors):
        why.append("inputs not (..., tokens, features) per sample, batch first")
    else:
        q, k, v = shapes
        if not (q[:-2] == k[:-2] == v[:-2] and q[-1] == k[-1] == v[-1] and k[-2] == v[-2]):
            why.append("keys, values and queries of other heads or widths")
    if mask is not None:
        why.append("a mask")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1 or causal not in (True, False) \
            or node.kwargs.get("enable_gqa", False) is not False:
        why.append("a computed dropout or causal flag, or grouped-query attention")
    if why:
        unsupported.append(f"F.scaled_dot_product_attention({'; '.join(why)})")
        return None
    q, k, _ = shapes
    return "sdpa", {"num_heads": _prod(q[:-2]), "seq_len": q[-2], "kv_len": k[-2], "head_dim": q[-1],
                    "causal": int(causal), "p": float(p)}


#: functions and methods that take views of a tensor apart without copying it (a q, k, v split)
_SPLITS = {"unbind", "chunk", "split", "tensor_split"}


def _view_into_attention(node):
    """Whether ``node`` is a transpose or permute whose value only reaches ``F.scaled_dot_product_attention`` calls
    as their queries, keys or values, directly or through indexing and splits (attention code's
    ``qkv.permute(2, 0, 3, 1, 4)`` then ``q, k, v = qkv``, or ``q.transpose(1, 2)``): a strided view the kernel
    reads as it is, which kind ``sdpa``'s probe reads the same way (its queries, keys and values are such views),
    so it costs nothing of its own. Anywhere else a permute is kind ``permute``, a copy."""
    import torch

    if not (node.op == "call_method" and node.target in _PERMUTE_METHODS
            or node.op == "call_function" and node.target in (torch.transpose, torch.permute)):
        return False

    def only_attention(n, depth=0):
        if depth > 4 or not n.users:
            return False
        for user in n.users:
            if _is_sdpa(user):
                if any(a is n for a in list(user.args[3:]) + [v for k, v in user.kwargs.items()
                                                             if k not in ("query", "key", "value")]):
                    return False  # a mask, not an operand
                continue
            if user.op == "call_function" and user.target is operator.getitem \
                    or user.op == "call_method" and user.target in _SPLITS \
                    or user.op == "call_function" and getattr(user.target, "__name__", "") in _SPLITS:
                if not only_attention(user, depth + 1):
                    return False
                continue
            return False
        return True

    return only_attention(node)


#: the arguments of the transformer modules after their first input, in order, as (PyTorch's name, the name
#: ``_transformer_args`` gives it): the mask, key padding mask and causal hint of the module's own sequence (an
#: encoder's source, a decoder's target), and a decoder's memory with its mask, padding and hint
_TRANSFORMER_ARGS = {
    "encoder": (("mask", "tgt_mask"), ("src_key_padding_mask", "tgt_key_padding_mask"), ("is_causal", "tgt_is_causal")),
    "encoder_layer": (("src_mask", "tgt_mask"), ("src_key_padding_mask", "tgt_key_padding_mask"),
                      ("is_causal", "tgt_is_causal")),
    "decoder": tuple((name, name) for name in ("memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask",
                                               "memory_key_padding_mask", "tgt_is_causal", "memory_is_causal")),
}


def _transformer_args(node, mod):
    """The stacks an ``nn.TransformerEncoder``/``Decoder``, one of their layers or an ``nn.Transformer`` runs, as
    ``[(suffix, module, layers, options, sequence, memory)]``: each stack's layers and its arguments under the names
    of ``_TRANSFORMER_ARGS`` (masks, hints), PyTorch's defaults filled in (a stack's causal hint None: it reads its
    mask; a layer's False), the node of its own sequence, and a decoder's memory (a node, or ``"src"``: an
    ``nn.Transformer``'s decoder reads its encoder's output, of the source's shape). None for any other module."""
    from torch import nn

    if isinstance(mod, nn.Transformer):
        names = ("src", "tgt", "src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                 "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "memory_is_causal")
        a = {name: _arg(node, i, name, False if name == "memory_is_causal" else None) for i, name in enumerate(names)}
        enc = {"tgt_mask": a["src_mask"], "tgt_key_padding_mask": a["src_key_padding_mask"],
               "tgt_is_causal": a["src_is_causal"]}
        dec = {k: a[k] for k in names[3:] if not k.startswith("src")}
        return [(".encoder", mod.encoder, list(getattr(mod.encoder, "layers", [])), enc, a["src"], None),
                (".decoder", mod.decoder, list(getattr(mod.decoder, "layers", [])), dec, a["tgt"], "src")]
    kinds = ((nn.TransformerEncoder, "encoder"), (nn.TransformerEncoderLayer, "encoder_layer"),
             (nn.TransformerDecoder, "decoder"), (nn.TransformerDecoderLayer, "decoder"))
    kind = next((k for t, k in kinds if isinstance(mod, t)), None)
    if kind is None:
        return None
    stacked = isinstance(mod, (nn.TransformerEncoder, nn.TransformerDecoder))
    defaults = {"tgt_is_causal": None if stacked else False, "memory_is_causal": False}
    options = {ours: _arg(node, i + 1, theirs, defaults.get(ours))
               for i, (theirs, ours) in enumerate(_TRANSFORMER_ARGS[kind])}
    return [("", mod, list(mod.layers) if stacked else [mod], options, _arg(node, 0, "src" if "encoder" in kind
                                                                             else "tgt"), options.get("memory"))]


def _transformer_parts(node, mod, unsupported, fixed_shape=lambda n: None, value_of=lambda n: None,
                       shape_of=lambda n: None, batch_axis=lambda n: 0):
    """The layers of an ``nn.TransformerEncoderLayer`` or ``nn.TransformerDecoderLayer`` (or an
    ``nn.TransformerEncoder``'s or ``nn.TransformerDecoder``'s stack of them and its final norm, or an
    ``nn.Transformer``'s encoder then decoder) called without a key padding mask, as
    ``[(suffix, (kind, config), reads_input)]``: its self-attention (kind ``mha``, need_weights off, as the layer
    calls it), a decoder's cross-attention over its memory (``mha`` with ``cross``: the memory's tokens are the
    keys and values), the dropouts, residual adds and layer norms, and the feed-forward linears with their ReLU or
    GELU, in the order of ``norm_first``; the same modules the layer runs, so not a stand-in. A mask of one fixed
    tensor (``_fixed_mask``) is the attention's ``mask``, or ``causal`` where the layer runs the fused kernel
    causally: the hint (``is_causal``, ``tgt_is_causal``, ...) given True, or a stack's mask that is PyTorch's
    causal mask (the stack checks its value, ``value_of``). None for any other module; None with the reason
    recorded unsupported for a layer outside that (a key padding mask, bias=False, another activation), which its
    stand-in may then take."""
    calls = _transformer_args(node, mod)
    if calls is None:
        return None
    why, parts, src = [], [], calls[0][4]
    for suffix, stack_mod, stack, options, seq, memory in calls:
        seq_shape = shape_of(seq) if hasattr(seq, "meta") else None
        if isinstance(memory, str):  # "src": an nn.Transformer's decoder reads its encoder's output
            memory = src
        mem = (shape_of(memory), batch_axis(memory)) if hasattr(memory, "meta") else None
        parts += [(suffix + s, part, reads) for s, part, reads in
                  _stack_parts(stack_mod, stack, options, seq_shape, batch_axis(seq) if seq_shape else 0, mem,
                               fixed_shape, value_of, why)]
    if why:
        unsupported.append(f"{type(mod).__name__}({'; '.join(dict.fromkeys(why))})")
        return None
    return parts


def _stack_parts(mod, stack, options, in_shape, in_axis, memory, fixed_shape, value_of, why):
    """``_transformer_parts`` of one stack (or layer) ``mod`` running ``stack`` on a sequence of per-sample
    ``in_shape`` (batch at ``in_axis``); ``memory``: a decoder's memory as (per-sample shape, batch axis). Appends
    to ``why`` what it cannot take."""
    from torch import nn
    from torch.nn import functional as F

    decoder = "memory_mask" in options  # every decoder's options name its memory's mask
    layer_type = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    n_why = len(why)
    if any(options.get(p) is not None for p in ("tgt_key_padding_mask", "memory_key_padding_mask")):
        why.append("a key padding mask")
    if any(options.get(h, False) not in (True, False, None) for h in ("tgt_is_causal", "memory_is_causal")):
        why.append("a computed is_causal")
    masked = mem_masked = False
    mem_shape, mem_axis = memory if memory is not None else (None, 0)
    if in_shape is None or len(in_shape) != 2:
        why.append("input not (tokens, features) per sample")
    else:
        masked = _fixed_mask(options["tgt_mask"], in_shape[0], in_shape[0], fixed_shape, why)
    if decoder:
        if mem_shape is None or len(mem_shape) != 2:
            why.append("memory not (tokens, features) per sample")
        elif in_shape is not None and len(in_shape) == 2:
            mem_masked = _fixed_mask(options["memory_mask"], in_shape[0], mem_shape[0], fixed_shape, why)
    hint = options["tgt_is_causal"]
    causal = masked and (hint is True or hint is None and _is_causal_mask(value_of(options["tgt_mask"])))
    mem_causal = mem_masked and options.get("memory_is_causal") is True
    parts = []
    for n, layer in enumerate(stack):
        if not isinstance(layer, layer_type):
            why.append(f"a layer that is not a {layer_type.__name__}")
            break
        atts = [layer.self_attn] + ([layer.multihead_attn] if decoder else [])
        if in_shape is not None and not _batch_first_ok(atts[0].batch_first, in_axis):
            why.append(f"batch_first={atts[0].batch_first} on an input whose batch is axis {in_axis}")
        if decoder and mem_shape is not None and not _batch_first_ok(atts[0].batch_first, mem_axis):
            why.append(f"batch_first={atts[0].batch_first} on a memory whose batch is axis {mem_axis}")
        if not all(_plain_attention(a) for a in atts) or layer.linear1.bias is None \
                or decoder and mem_shape is not None and mem_shape[-1] != atts[1].embed_dim:
            why.append("bias=False or another attention layout")
        act = layer.activation
        act_kind = ("relu" if act is F.relu or isinstance(act, nn.ReLU) else
                    "gelu" if (act is F.gelu or isinstance(act, nn.GELU)) and getattr(act, "approximate", "none")
                    == "none" else None)
        if act_kind is None:
            why.append("an activation other than ReLU or GELU")
        if len(why) > n_why:
            break
        t, d, ff = in_shape[0], atts[0].embed_dim, layer.linear1.out_features
        pre = f".layers.{n}" if mod is not layer else ""

        def drop(name, numel, p):
            return pre + name, ("dropout", {"numel": numel, "p": float(p)}), False

        def norm(name):
            return pre + name, ("layernorm", {"normalized": d, "tokens": t}), False

        def add(name):
            return pre + name, ("add", {"numel": t * d}), False

        blocks = [[(pre + ".self_attn", ("mha", _mha_config(atts[0], t, t, False, False, masked and not causal,
                                                             causal)), False),
                   drop(".dropout1", t * d, layer.dropout1.p), add(".add1")]]
        if decoder:
            s_len = mem_shape[0]
            blocks.append([(pre + ".multihead_attn", ("mha", _mha_config(atts[1], t, s_len, True, False,
                                                                         mem_masked and not mem_causal, mem_causal)),
                            False), drop(".dropout2", t * d, layer.dropout2.p), add(".add2")])
        last = len(blocks) + 1  # the feed-forward's dropout and add: dropout2/add2 in an encoder layer, 3 in a decoder
        blocks.append([
            (pre + ".linear1", ("linear", {"in_features": d, "out_features": ff, "tokens": t, "bias": 1}), False),
            (pre + ".activation", (act_kind, {"numel": t * ff}), False), drop(".dropout", t * ff, layer.dropout.p),
            (pre + ".linear2", ("linear", {"in_features": ff, "out_features": d, "tokens": t, "bias": 1}), False),
            drop(f".dropout{last}", t * d, getattr(layer, f"dropout{last}").p), add(f".add{last}")])
        block = []
        for i, b in enumerate(blocks, 1):  # each sub-block with its norm before (norm_first) or after it
            block += [norm(f".norm{i}"), *b] if layer.norm_first else [*b, norm(f".norm{i}")]
        if n == 0:  # the stack's first layer reads the stack's input
            block[0] = (block[0][0], block[0][1], True)
        parts += block
    if len(why) == n_why and stack and mod is not stack[0] and getattr(mod, "norm", None) is not None:
        if isinstance(mod.norm, nn.LayerNorm) and tuple(mod.norm.normalized_shape) == (in_shape[1],):
            parts.append((".norm", ("layernorm", {"normalized": in_shape[1], "tokens": in_shape[0]}), False))
        else:
            why.append("a final norm other than a LayerNorm over the features")
    return parts


def layernorm_layer(k, in_shape, in_axis, unsupported, label):
    """``("layernorm", config)`` of a LayerNorm over the last ``k`` dimensions of a per-sample ``in_shape`` whose batch
    is at ``in_axis``: normalized = their product, tokens = the rest. Over several dimensions it is the same
    computation as over their product (torch normalises an (M, N) view of the input), so it is no stand-in. One whose
    dimensions take in the batch axis is recorded unsupported. Both readers use it."""
    if in_shape is None:
        unsupported.append(f"{label}(input shape unknown)")
        return None
    if not 1 <= k <= len(in_shape) or in_axis >= len(in_shape) + 1 - k:
        unsupported.append(f"{label}(over the batch axis)")
        return None
    cut = len(in_shape) - k
    return "layernorm", {"normalized": _prod(in_shape[cut:]), "tokens": _prod(in_shape[:cut])}


def _stand_in(node, gm, in_shape, full_shape, in_axis, shape_of, batch_axis):
    """``([(suffix, (kind, config), reads_input)], reason)``: the kinds that stand in for an operator without one
    of its own under ``unknown_ops="approx"`` (each marked, so the runtime widens its std by
    APPROX_OP_REL_STD), or None. ``in_axis``, ``shape_of``, ``batch_axis``: the batch axis of the operator's
    input, a node's per-sample shape and batch axis (recurrent and attention modules
    with ``batch_first=False`` read their batch at axis 1). ``reads_input``: the layer reads the operator's input (its role follows the
    operator's); the others read another stand-in layer's output (hidden). Each is costed at the module's
    exact FLOPs where the kinds allow; how far each stand-in's own cost is from the operator's on this
    project's host is measured by ``bench/bench_stand_ins.py`` (``bench/results/stand-ins-host-*.md``):

    - ``nn.TransformerEncoderLayer`` (batch first) outside what ``_transformer_parts`` takes (a key padding mask,
      ``bias=False``, another activation): the ``transformer_block`` of the same sizes (a pre-norm GELU block
      with causal attention).
    - bidirectional ``nn.LSTM`` (batch first): per layer, one ``lstm`` layer per direction (the second and later
      layers read both directions, 2 x hidden) and the ``cat`` of the two (a bidirectional ``nn.GRU`` is read so by
      default, ``_bidirectional_gru_parts``).
    - projected ``nn.LSTM`` (``proj_size``): per layer and direction, the ``lstm`` of the full hidden size (not
      of the same FLOPs: PyTorch runs it unfused, at about that cost) and the projection as a bias-free
      ``linear`` over the time steps; bidirectional, the ``cat`` of the two projections.
    - ``nn.ConvTranspose1d`` / ``nn.ConvTranspose2d``: the stride-1 conv of the same kernel whose output has the
      transposed conv's *input* size: the same FLOPs (every input element meets the whole kernel).
    - ``nn.MultiheadAttention`` outside kind ``mha`` (a key padding or per-sample mask, ``bias=False``,
      ``kdim``/``vdim``, keys that are not the values, per-head weights): the input projection (``linear``
      d -> 3d; for cross-attention the query projection over the queries and the key and value projections over the keys, from their own widths
      ``kdim``/``vdim`` where the module has them), the scores and
      the weighted sum as ``linear`` layers of the same FLOPs, their ``softmax``, the output projection.
    - ``torch.einsum`` of two operands, batch first (``"bhqd,bhkd->bhqk"``; an ellipsis spelled out,
      ``spell_out_ellipsis``): a ``linear`` of the same FLOPs; of three: its two pairwise contractions
      (``einsum_chain_stand_in``).
    - ``x @ y``, ``torch.matmul``, ``torch.bmm`` (both operands at least 2-D): a ``linear`` of the same FLOPs
      (in = the contracted size, out = the result's last size, tokens = the rest of the result).
    - ``F.scaled_dot_product_attention`` outside kind ``sdpa`` (a mask tensor, other widths): scores, ``softmax``,
      weighted sum, as above.
    - ``nn.InstanceNorm1d`` / ``nn.InstanceNorm2d`` (batch first): the ``batchnorm1d`` / ``batchnorm2d`` of the same
      sizes (``instance_norm_stand_in``); ``nn.GroupNorm`` without its affine: the ``layernorm`` of the same
      statistics.
    """
    import torch
    from torch import nn
    from torch.nn import functional as F

    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        if isinstance(mod, nn.TransformerEncoderLayer) and in_shape is not None and len(in_shape) == 2:
            att = mod.self_attn
            if not _batch_first_ok(att.batch_first, in_axis) or att.embed_dim % att.num_heads:
                return None
            return ([("", ("transformer_block", {"d_model": att.embed_dim, "n_heads": att.num_heads,
                                                  "head_dim": att.embed_dim // att.num_heads,
                                                  "d_ff": mod.linear1.out_features, "seq_len": in_shape[0]}),
                      True)],
                    "TransformerEncoderLayer has no kind: estimated as the transformer_block kind of the same "
                    "sizes (a pre-norm GELU block with causal attention)")
        if isinstance(mod, nn.LSTM) and mod.proj_size:
            return _projected_lstm_stand_in(mod, in_shape, in_axis)
        if isinstance(mod, (nn.LSTM, nn.GRU)) and mod.bidirectional:
            return _bidirectional_stand_in(mod, in_shape, in_axis)
        if isinstance(mod, (nn.ConvTranspose1d, nn.ConvTranspose2d)):
            return _transposed_stand_in(mod, in_shape)
        if isinstance(mod, nn.MultiheadAttention):
            return _attention_stand_in(node, mod, shape_of, batch_axis)
        if isinstance(mod, nn.GroupNorm) and in_axis == 0:
            return _one(_group_norm_stand_in(mod, in_shape))
        if isinstance(mod, (nn.InstanceNorm1d, nn.InstanceNorm2d)) and in_axis == 0:  # torch checks each one's rank
            return _one(instance_norm_stand_in(in_shape, type(mod).__name__))
        return None
    if node.op == "call_method" and node.target in ("matmul", "bmm", "__matmul__") \
            or node.op == "call_function" and node.target in (operator.matmul, torch.matmul, torch.bmm):
        if len(node.args) < 2:
            return None
        a, b, out = full_shape(node.args[0]), full_shape(node.args[1]), full_shape(node)
        if any(s is None or len(s) < 2 for s in (a, b, out)):
            return None
        return _one(matmul_stand_in(a[-1], shape_of(node), op_label(node)))  # per sample, the batch where it is
    if node.op == "call_function" and node.target is torch.einsum and node.args:
        operands = node.args[1:]
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = operands[0]
        if any(batch_axis(n) for n in (node, *operands)):  # its subscripts are read with the batch first
            return None
        shapes = [full_shape(a) for a in operands]
        if len(operands) == 3:  # contracted pairwise, in the order this torch would take
            from torch.backends import opt_einsum

            return einsum_chain_stand_in(node.args[0], shapes, full_shape(node),
                                         cheapest=bool(opt_einsum.is_available() and opt_einsum.enabled))
        return _one(einsum_stand_in(node.args[0], shapes, full_shape(node)))
    if node.op == "call_function" and node.target is F.scaled_dot_product_attention:
        args = _qkv(node)
        q, k, v = (full_shape(a) for a in args)
        if any(s is None or len(s) < 3 for s in (q, k, v)) or q[-1] != k[-1] or k[-2] != v[-2] \
                or any(batch_axis(a) >= len(s) - 2 for a, s in zip(args, (q, k, v))):
            return None  # the batch among the tokens or features: not attention per sample
        rows, tk = _prod(shape_of(args[0])[:-1]), k[-2]
        return (_score_layers(rows, q[-1], tk, v[-1], reads_input=True),
                "F.scaled_dot_product_attention has no kind: estimated as its scores and weighted sum "
                "(linear layers of the same FLOPs) and their softmax")
    return None


def _group_norm_stand_in(mod, in_shape):
    """``(("layernorm", config), reason)``: ``nn.GroupNorm`` (G groups) on a channels-first per-sample ``in_shape``
    as the layer norm of the same statistics: one row per group (tokens = G) over its channels' elements
    (normalized = C / G x the spatial size). Its affine parameters differ (per channel, not per element). On this
    project's host, five runs of three cases: 0.70-1.34x this stand-in (mean |ln ratio| 0.13) where the generic
    elementwise kind read 0.66-1.28x (0.23) (``bench/bench_stand_ins.py``). None where the channels do not split into
    the groups."""
    if in_shape is None or len(in_shape) < 2 or mod.num_groups < 1 or int(in_shape[0]) % mod.num_groups:
        return None
    config = {"normalized": int(in_shape[0]) // mod.num_groups * _prod(in_shape[1:]), "tokens": mod.num_groups}
    if not valid_config("layernorm", config):
        return None
    return ("layernorm", config), "GroupNorm without its affine has no kind: estimated as the layernorm of the same " \
                                  "statistics (one row per group)"


def instance_norm_stand_in(shape, label):
    """``((kind, config), reason)``: an instance norm of a channels-first per-sample ``shape`` ((C, L) or (C, H, W))
    as the ``batchnorm1d`` / ``batchnorm2d`` of the same sizes: torch computes an instance norm as a batch norm over
    the (1, B x C, ...) view, the same kernels over the same elements. On this project's host it cost 0.82-1.44x that
    stand-in, where the generic elementwise kind under-read it 1.6-2.1x (``bench/bench_stand_ins.py``). None for
    another shape. Both readers use it."""
    if shape is None or len(shape) not in (2, 3):
        return None
    kind, config = (("batchnorm2d", {"channels": shape[0], "height": shape[1], "width": shape[2]}) if len(shape) == 3
                    else ("batchnorm1d", {"channels": shape[0], "length": shape[1]}))
    if not valid_config(kind, config):
        return None
    return (kind, config), f"{label} has no kind: estimated as the {kind} of the same sizes"


def bidirectional_layers(kind, input_size, hidden_size, seq_len, num_layers):
    """``[(suffix, (kind, config), reads_input)]`` of a bidirectional recurrent stack (both readers): per layer one
    ``kind`` layer per direction (later layers read both, 2 x hidden) and the ``cat`` of the two."""
    layers = []
    for i in range(num_layers):
        size = input_size if i == 0 else 2 * hidden_size
        for d in ("fwd", "rev"):
            layers.append((f".{d}{i}", (kind, {"input_size": size, "hidden_size": hidden_size, "seq_len": seq_len,
                                               "num_layers": 1}), i == 0))
        layers.append((f".cat{i}", ("cat", {"numel": seq_len * 2 * hidden_size, "parts": 2}), False))
    return layers


def _bidirectional_gru_parts(mod, in_shape, in_axis=0):
    """A bidirectional ``nn.GRU`` (batch first) as ``[(suffix, (kind, config), reads_input)]``: per layer, one
    ``gru`` per direction (later layers read both, 2 x hidden) and the ``cat`` of the two; None for any other module
    (or one fed another layout: recorded unsupported by ``_module_layer``). Not a stand-in: PyTorch runs the two
    directions as two GRU passes on CPU, and the module's training step took 0.93-1.10x these layers' probes summed
    here over five shapes (a keyword spotter's, a HAR window's, a stacked text encoder's;
    ``bench/results/stand-ins-host-20261128-bigru.md``), 0.77-1.04x over eleven runs of a 2-layer one. A
    bidirectional ``nn.LSTM`` stays a stand-in (``_bidirectional_stand_in``): it took 0.94-1.52x its directions'
    lstm layers, PyTorch's fused one-direction kernel being what an lstm probe times."""
    from torch import nn

    if not isinstance(mod, nn.GRU) or not mod.bidirectional:
        return None
    got = _bidirectional_stand_in(mod, in_shape, in_axis)
    return None if got is None else got[0]


def _bidirectional_stand_in(rnn, in_shape, in_axis=0):
    from torch import nn

    kind = "lstm" if isinstance(rnn, nn.LSTM) else "gru"
    if not _batch_first_ok(rnn.batch_first, in_axis) or getattr(rnn, "proj_size", 0) or in_shape is None \
            or len(in_shape) != 2:
        return None
    layers = bidirectional_layers(kind, rnn.input_size, rnn.hidden_size, in_shape[0], rnn.num_layers)
    name = "LSTM" if kind == "lstm" else "GRU"
    return layers, (f"{name}(bidirectional) has no kind: estimated as one {kind} layer per direction and layer, "
                    "and the cat of the two directions")


def _projected_lstm_stand_in(lstm, in_shape, in_axis=0):
    """A projected ``nn.LSTM`` (``proj_size`` P < hidden H): per layer and direction, the ``lstm`` of the full
    hidden size H and the projection, a bias-free ``linear`` H -> P over the time steps; bidirectional, the ``cat``
    of the two directions' projections too, and the layers after the first read 2P (else P). Not the lstm of the
    same multiply-adds (its recurrence reads P, not H): PyTorch runs a projected LSTM step by step outside its
    fused kernels (oneDNN has no projection), and on this project's host it cost 2.1-2.2x the same-FLOPs stand-in
    and 0.99-1.19x this one at hidden 256-320, but 1.52-1.92x at hidden 128 (one direction or two): there the
    unfused path's per-step ops weigh more than the fused lstm's (``bench/bench_stand_ins.py``)."""
    if not _batch_first_ok(lstm.batch_first, in_axis) or in_shape is None or len(in_shape) != 2:
        return None
    h, p, t = lstm.hidden_size, lstm.proj_size, in_shape[0]
    dirs = ("fwd", "rev") if lstm.bidirectional else ("",)
    layers = []
    for i in range(lstm.num_layers):
        size = lstm.input_size if i == 0 else p * len(dirs)
        for d in dirs:
            layers.append((f".{d or 'lstm'}{i}", ("lstm", {"input_size": size, "hidden_size": h, "seq_len": t,
                                                          "num_layers": 1}), i == 0))
            layers.append((f".proj{'_' + d if d else ''}{i}",
                           ("linear", {"in_features": h, "out_features": p, "tokens": t, "bias": 0}), False))
        if lstm.bidirectional:
            layers.append((f".cat{i}", ("cat", {"numel": t * 2 * p, "parts": 2}), False))
    name, each, cat = (("LSTM(projected, bidirectional)", "layer and direction", ", and the cat of the two directions")
                       if lstm.bidirectional else ("LSTM(projected)", "layer", ""))
    return layers, (f"{name} has no kind: estimated per {each} as the lstm of its full hidden size (PyTorch runs a "
                    f"projected LSTM unfused) and its projection, a linear over the time steps{cat}")


def _one(stand_in):
    """A one-layer stand-in ``((kind, config), reason)`` (or None) as ``_stand_in`` returns it: reading the
    operator's input."""
    return None if stand_in is None else ([("", stand_in[0], True)], stand_in[1])


def transposed_conv_stand_in(kind, in_channels, out_channels, kernel, groups, bias, sides, label):
    """``((kind, config), reason)``: the stride-1 conv of the same square ``kernel`` standing in for a transposed
    one whose per-sample input has spatial ``sides``: its output has the input's size, so every input element meets
    the whole kernel, as in the transposed conv (the same FLOPs); None where that config is out of bounds. Both
    readers use it."""
    names = ("length",) if kind == "conv1d" else ("height", "width")
    c = {"in_channels": in_channels, "out_channels": out_channels, "kernel": kernel, "stride": 1, "padding": 0,
         "groups": groups, "bias": int(bias), **{side: int(n) + kernel - 1 for side, n in zip(names, sides)}}
    if len(sides) != len(names) or not valid_config(kind, c):
        return None
    return (kind, c), (f"{label} has no kind: estimated as the stride-1 {kind} of the same kernel and FLOPs (its "
                       "output the size of the transposed conv's input)")


def matmul_stand_in(contracted, out_shape, label):
    """``(("linear", config), reason)``: a product of two activations (``out_shape``: the result per sample) as a
    linear layer of the same FLOPs: in = the ``contracted`` size, out = the result's last size, tokens = the rest.
    Both readers use it."""
    return (("linear", {"in_features": contracted, "out_features": out_shape[-1], "tokens": _prod(out_shape[:-1]),
                        "bias": 0}),
            f"{label} has no kind: estimated as a linear layer of the same FLOPs")


def _transposed_stand_in(conv, in_shape):
    from torch import nn

    unsupported = []
    name = type(conv).__name__
    k = _pair(conv.kernel_size, "kernel", unsupported, name)
    if _pair(conv.dilation, "dilation", unsupported, name) != 1 or unsupported or in_shape is None:
        return None
    return _one(transposed_conv_stand_in("conv1d" if isinstance(conv, nn.ConvTranspose1d) else "conv2d",
                                         conv.in_channels, conv.out_channels, k, conv.groups, conv.bias is not None,
                                         in_shape[1:], name))


def _score_layers(rows, head_dim, keys, value_dim, reads_input):
    """Attention's scores (rows x head_dim @ head_dim x keys), softmax and weighted sum (rows x keys @ keys x
    value_dim) as linear / softmax / linear layers of the same FLOPs; ``rows``: heads x queries per sample."""
    return [(".scores", ("linear", {"in_features": head_dim, "out_features": keys, "tokens": rows, "bias": 0}),
             reads_input),
            (".softmax", ("softmax", {"numel": rows * keys, "last_dim": keys}), False),
            (".weighted", ("linear", {"in_features": keys, "out_features": value_dim, "tokens": rows, "bias": 0}),
             False)]


def _attention_stand_in(node, att, shape_of, batch_axis):
    """Self-attention (query, key and value one tensor): one input projection d -> 3d. Cross-attention (the
    queries from one tensor, keys and values from another, or all three apart): the query projection over the
    queries, the key and value projections over the keys (one d -> 2d layer when key is value), and scores
    of every query against every key. ``shape_of``/``batch_axis``: a node's per-sample shape and batch axis
    (0 for ``batch_first``, else 1)."""
    args = _qkv(node)
    q, k, v = (shape_of(a) for a in args)
    if att.embed_dim % att.num_heads or any(s is None or len(s) != 2 for s in (q, k, v)) or k[0] != v[0] \
            or not all(_batch_first_ok(att.batch_first, batch_axis(a)) for a in args):
        return None
    d, h, tq, tk = att.embed_dim, att.num_heads, q[0], k[0]
    bias = int(att.in_proj_bias is not None)

    def proj(suffix, width, out, tokens):
        return suffix, ("linear", {"in_features": width, "out_features": out, "tokens": tokens, "bias": bias}), True

    if not att._qkv_same_embed_dim:  # keys and values of their own widths (kdim, vdim): three projections
        projections, what = [proj(".q_proj", d, d, tq), proj(".k_proj", att.kdim, d, tk),
                             proj(".v_proj", att.vdim, d, tk)], "its query, key and value projections"
    elif args[0] is args[1] is args[2]:
        projections, what = [proj(".in_proj", d, 3 * d, tq)], "its input projection"
    elif args[1] is args[2]:
        projections, what = [proj(".q_proj", d, d, tq), proj(".kv_proj", d, 2 * d, tk)], \
            "its query and key-value projections"
    else:
        projections, what = [proj(".q_proj", d, d, tq), proj(".k_proj", d, d, tk), proj(".v_proj", d, d, tk)], \
            "its query, key and value projections"
    layers = [*projections, *_score_layers(h * tq, d // h, tk, d // h, reads_input=False),
              (".out_proj", ("linear", {"in_features": d, "out_features": d, "tokens": tq,
                                        "bias": int(att.out_proj.bias is not None)}), False)]
    return layers, (f"MultiheadAttention has no kind: estimated as {what}, scores and weighted sum "
                    "(linear layers of the same FLOPs), their softmax and its output projection")


def spell_out_ellipsis(equation, shapes):
    """An einsum equation with each ``...`` written as letters no subscript uses, as many as the dimensions it
    covers in each operand (right-aligned, as torch broadcasts them; in the output, those of the operand that
    covers most); the equation itself when it has none; None where it cannot be (no ``->``, an operand shape
    unknown, two ellipses in one subscript, fewer dimensions than letters, too few free letters)."""
    if not isinstance(equation, str) or "..." not in equation:
        return equation
    lhs, arrow, out = equation.replace(" ", "").partition("->")
    ins = lhs.split(",")
    if not arrow or len(ins) != len(shapes) or any(s is None for s in shapes) \
            or any(sub.count("...") > 1 for sub in ins + [out]):
        return None
    covers = []
    for sub, shape in zip(ins, shapes):
        n = len(shape) - (len(sub) - 3) if "..." in sub else 0
        if n < 0 or ("..." not in sub and len(sub) != len(shape)):
            return None
        covers.append(n)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in equation]
    n = max(covers)
    if n > len(free):
        return None
    letters = "".join(free[:n])
    ins = [sub.replace("...", letters[n - k:]) for sub, k in zip(ins, covers)]
    return ",".join(ins) + "->" + out.replace("...", letters)


def _einsum_subscripts(equation, shapes, out_shape, n):
    """``(operand subscripts, output subscript, {letter: size})`` of an einsum of ``n`` operands (full shapes, batch
    first; an ellipsis spelled out), or None where it cannot be read: an implicit output, a subscript that does not
    match its shape, sizes that do not broadcast, a batch letter that is not every subscript's first."""
    spelled = spell_out_ellipsis(equation, shapes) if len(shapes) == n else None
    if not isinstance(spelled, str) or "->" not in spelled:
        return None
    lhs, out = spelled.replace(" ", "").split("->")
    ins = lhs.split(",")
    if len(ins) != n or any(s is None or len(s) != len(sub) for s, sub in zip(shapes, ins)) \
            or out_shape is None or len(out) != len(out_shape) or len(out) < 2:
        return None
    size = {}
    for sub, shape in zip(ins, shapes):
        for letter, k in zip(sub, shape):
            if size.setdefault(letter, k) != k and 1 not in (k, size[letter]):
                return None
            size[letter] = max(size[letter], k)
    if not all(sub[:1] == out[:1] for sub in ins) or any(letter not in size for letter in out):
        return None
    return ins, out, size


def einsum_stand_in(equation, shapes, out_shape):
    """``(("linear", config), reason)`` for ``torch.einsum`` of two operands (full shapes, batch first) as a
    linear layer of the same multiply-adds: every output element sums over the letters it lacks (in = their
    sizes' product, out and tokens from the result per sample); an ellipsis is read as the letters it stands for
    (``spell_out_ellipsis``). None for what it cannot say (an implicit output, one or three operands (three:
    ``einsum_chain_stand_in``), a batch axis that is not every subscript's first letter, no letter summed over)."""
    read = _einsum_subscripts(equation, shapes, out_shape, 2)
    if read is None:
        return None
    ins, out, size = read
    contracted = _prod([n for letter, n in size.items() if letter not in out])
    if contracted < 2:
        return None
    return matmul_stand_in(int(contracted), [int(n) for n in out_shape[1:]], f"torch.einsum({equation!r})")


def einsum_chain_stand_in(equation, shapes, out_shape, cheapest=False):
    """``([(suffix, ("linear", config), reads_input)], reason)`` for ``torch.einsum`` of three operands (full shapes,
    batch first): its two pairwise contractions, each a linear layer of the same multiply-adds (the first reads the
    operator's inputs, the second the intermediate). The order is torch's: left to right, or with ``cheapest``
    (torch with opt_einsum, whose optimal path for three operands is the pairing of fewest multiply-adds) that
    pairing. The intermediate keeps the letters the third operand or the output still needs. None for what it
    cannot say: an implicit output, a batch letter that is not every subscript's first, a contraction that sums
    over nothing (a broadcast product, not a matmul), an intermediate with nothing beside the batch."""
    read = _einsum_subscripts(equation, shapes, out_shape, 3)
    if read is None:
        return None
    ins, out, size = read

    def contract(a, b, needed):  # (result letters, summed-over size, multiply-adds)
        letters = "".join(dict.fromkeys(a + b))
        return ("".join(x for x in letters if x in needed), _prod([size[x] for x in letters if x not in needed]),
                _prod([size[x] for x in letters]))

    best = None
    for i, j, k in [(0, 1, 2)] + ([(0, 2, 1), (1, 2, 0)] if cheapest else []):
        mid, s1, f1 = contract(ins[i], ins[j], ins[k] + out)
        _, s2, f2 = contract(mid, ins[k], out)
        if best is None or f1 + f2 < best[0]:
            best = (f1 + f2, (i, j, k), mid, s1, s2)
    _, (i, j, k), mid, s1, s2 = best
    if s1 < 2 or s2 < 2 or len(mid) < 2:
        return None
    what = f"torch.einsum({equation!r})"
    first = matmul_stand_in(int(s1), [int(size[x]) for x in mid[1:]], what)[0]
    second = matmul_stand_in(int(s2), [int(n) for n in out_shape[1:]], what)[0]
    if not (valid_config(*first) and valid_config(*second)):
        return None
    order = "left to right" if (i, j) == (0, 1) and not cheapest else \
        f"operands {i + 1} and {j + 1} first (the fewest multiply-adds, as opt_einsum contracts them)"
    return ([(".contract0", first, True), (".contract1", second, False)],
            f"{what} has no kind: estimated as its two pairwise contractions ({order}), linear layers of the same FLOPs")


def valid_config(kind, config):
    """Whether ``config`` passes its kind's bounds (``Kind.check_config``)."""
    try:
        get_kind(kind).check_config(config)
    except (UsageError, ValueError):
        return False
    return True


def _leaf_types():
    from torch import nn

    from thor_sdk.models.blocks import (GRUCellLoop, GRUSequence, LSTMCellLoop, LSTMSequence, TokenPositionalEmbedding,
                                        TransformerBlock)

    return (LSTMSequence, GRUSequence, TokenPositionalEmbedding, TransformerBlock, LSTMCellLoop, GRUCellLoop, nn.LSTM,
            nn.GRU)


def _cell_layer(mod, in_shape, in_axis, unsupported):
    """One call of ``nn.LSTMCell`` / ``nn.GRUCell`` on a batch of inputs (batch first) as an ``lstm_cell`` /
    ``gru_cell`` of 1 step (``layers_from_module`` counts a module's calls into its first call's layer); its probes,
    ``LSTMCellLoop`` / ``GRUCellLoop``, as themselves."""
    from torch import nn

    cell = mod.cell if hasattr(mod, "cell") else mod  # a probe's loop holds its cell
    name = type(cell).__name__
    if not cell.bias:
        unsupported.append(f"{name}(bias=False)")
        return None
    shape = tuple(in_shape or ())
    if in_axis != 0 or shape[-1:] != (cell.input_size,) or len(shape) != (1 if mod is cell else 2):
        unsupported.append(f"{name}(an input of per-sample shape {list(shape)}, not [{cell.input_size}])")
        return None
    steps = 1 if mod is cell else shape[0]
    return ("lstm_cell" if isinstance(cell, nn.LSTMCell) else "gru_cell",
            {"input_size": cell.input_size, "hidden_size": cell.hidden_size, "steps": steps})


def _batch_first_dims(dims, axis, ndim):
    """``dims`` of a tensor whose batch is at ``axis`` (of ``ndim``) numbered as if its batch came first (the
    batch itself as 0), so that the helpers below, which count the batch as axis 0, read any tensor."""
    def one(d):
        if not isinstance(d, int) or not axis:
            return d
        d %= ndim
        return 0 if d == axis else (d + 1 if d < axis else d)

    if isinstance(dims, (list, tuple)):
        return type(dims)(one(d) for d in dims)
    return one(dims)


def _softmax_layer(dim, in_shape, unsupported, label):
    """softmax over the last axis of a per-sample ``in_shape`` (``dim`` counts the batch axis)."""
    ndim = len(in_shape) + 1
    if not isinstance(dim, int) or not in_shape or dim % ndim != ndim - 1:
        unsupported.append(f"{label}(dim={dim!r}, not the last dimension)")
        return None
    return "softmax", {"numel": _prod(in_shape), "last_dim": int(in_shape[-1])}


def _log_softmax_dim(node, gm):
    """``(label, dim)`` of a log-softmax node (``nn.LogSoftmax``, ``F.log_softmax``, ``torch.log_softmax``,
    ``Tensor.log_softmax``), None for any other node."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        return ("LogSoftmax", mod.dim) if isinstance(mod, nn.LogSoftmax) else None
    if node.op == "call_method" and node.target == "log_softmax":
        return "Tensor.log_softmax", _arg(node, 1, "dim")
    if node.op == "call_function" and node.target in (F.log_softmax, torch.log_softmax):
        return "log_softmax", _arg(node, 1, "dim")
    return None


def _loss_log_softmax(node, gm, in_shape, in_axis, unsupported):
    """Whether ``node`` is a log-softmax over the last axis whose value is the model's output, alone (PyTorch's MNIST
    example ends in ``F.log_softmax(x, dim=1)`` and trains with ``F.nll_loss``): the log-softmax of the
    cross-entropy that the ``output`` head's cost already holds (as a trailing Softmax or LogSoftmax of an ONNX
    model is), so no layer of its own. A log-softmax elsewhere, or over another axis, is recorded unsupported
    (and True returned: nothing else reads it). False for any other node."""
    found = _log_softmax_dim(node, gm)
    if found is None:
        return False
    label, dim = found
    ndim = len(in_shape or ()) + 1
    if _softmax_layer(_batch_first_dims(dim, in_axis, ndim), in_shape, unsupported, label) is not None \
            and not all(u.op == "output" and u.args[0] is node for u in node.users):
        unsupported.append(f"{label}(not the model's output)")
    return True


def _upsample_layer(mode, in_shape, out_shape, unsupported, label):
    """Nearest-neighbour (kind ``upsample``) or bilinear (kind ``upsample_bilinear``, either ``align_corners``)
    upsampling of (C, H, W) by one integer scale (read from the shapes)."""
    if mode not in _UPSAMPLE_KINDS or len(in_shape) != 3 or len(out_shape) != 3:
        unsupported.append(f"{label}(mode={mode!r}, {len(in_shape)}-D per sample)")
        return None
    scales = {o / i for o, i in zip(out_shape[1:], in_shape[1:]) if i}
    scale = scales.pop() if len(scales) == 1 else 0
    if scale < 1 or scale != int(scale):
        unsupported.append(f"{label}(scale not one integer)")
        return None
    return _UPSAMPLE_KINDS[mode], {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                   "scale": int(scale)}


_UPSAMPLE_KINDS = {"nearest": "upsample", "bilinear": "upsample_bilinear"}


def _deconv_layer(mod, in_shape, in_axis, unsupported):
    """(kind, config) of an ``nn.ConvTranspose2d`` on (C, H, W) per sample, batch first: kind ``conv_transpose2d``
    for a square kernel, stride, padding and output padding without groups or dilation; else recorded unsupported
    (``--unknown-ops approx`` then takes the stride-1 conv of the same FLOPs, ``_transposed_stand_in``)."""
    why = [what for what, bad in (
        ("groups>1", mod.groups != 1), ("dilation>1", any(int(d) != 1 for d in mod.dilation)),
        ("non-square kernel, stride or padding",
         any(len({int(v) for v in t}) != 1 for t in (mod.kernel_size, mod.stride, mod.padding, mod.output_padding))),
        ("not batch first (C, H, W)", in_axis != 0 or len(in_shape) != 3)) if bad]
    if why:
        unsupported.append(f"ConvTranspose2d({', '.join(why)})")
        return None
    return "conv_transpose2d", {"in_channels": mod.in_channels, "out_channels": mod.out_channels,
                                "kernel": int(mod.kernel_size[0]), "stride": int(mod.stride[0]),
                                "padding": int(mod.padding[0]), "output_padding": int(mod.output_padding[0]),
                                "height": int(in_shape[1]), "width": int(in_shape[2]),
                                "bias": int(mod.bias is not None)}


def pad_config(pads, in_shape, out_shape):
    """The kind ``pad`` config of a constant padding ``pads`` (F.pad's order: the last axis' before and after, then
    the axis before it's, ...) of a per-sample ``in_shape``, or the reason it is not one: the last three axes are
    (channels, height, width) (fewer: leading 1s; more: the leading ones merged into the channels, unpadded). Both
    readers (torch.fx and ONNX) use it."""
    if not isinstance(pads, (tuple, list)) or len(pads) % 2 or not pads \
            or not all(isinstance(p, int) and not isinstance(p, bool) for p in pads):
        return "pads not constant integers"
    if any(p < 0 for p in pads):
        return "a negative pad (a crop)"
    if len(pads) // 2 > len(in_shape):
        return "pads the batch axis"
    totals = [pads[2 * i] + pads[2 * i + 1] for i in range(len(pads) // 2)] + [0, 0, 0]
    if any(totals[3:]) or len(in_shape) > 3 and totals[2]:
        return "pads an axis merged into the channels (an input of more than three axes)"
    shape = (1, 1, *in_shape)[-3:] if len(in_shape) < 3 else (_prod(in_shape[:-2]), *in_shape[-2:])
    c = {"channels": int(shape[0]), "height": int(shape[1]), "width": int(shape[2]), "pad_c": totals[2],
         "pad_h": totals[1], "pad_w": totals[0]}
    if out_shape is not None and _prod(get_kind("pad").out_shape(c)) != _prod(out_shape):
        return "an output of another size"
    return c


def _pad_layer(pads, mode, in_shape, out_shape, in_axis, unsupported, label):
    """(kind, config) of a constant padding (``F.pad``, ``nn.ZeroPad2d``, ``nn.ConstantPad1d`` ...): kind ``pad``;
    another mode (reflect, replicate, circular: other kernels) or a padding ``pad_config`` refuses is recorded
    unsupported."""
    if mode != "constant":
        unsupported.append(f"{label}(mode={mode!r}: only constant padding has a kind)")
        return None
    got = pad_config(pads, in_shape or (), out_shape) if in_axis == 0 else "not batch first"
    if isinstance(got, str):
        unsupported.append(f"{label}({got})")
        return None
    return "pad", got


def _mean_layer(dims, in_shape, unsupported, label):
    """``mean`` over the spatial axes of (C, H, W) -> adaptive_avgpool2d; over the last axis of (C, L)
    -> adaptive_avgpool1d; over the sequence of (T, D) (dim 1) -> adaptive_avgpool1d of D channels (the kernels
    those run); over other adjacent axes (the channels of an image, as CBAM pools them) -> reduce_mean, which
    took 1.09-1.84x a sum of the same elements here: a kind of its own."""
    ndim = len(in_shape) + 1
    dims = (dims,) if isinstance(dims, int) else tuple(dims or ())
    axes = {d % ndim for d in dims if isinstance(d, int)}
    if len(in_shape) == 3 and axes == {2, 3}:
        return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                      "out_size": 1}
    if len(in_shape) == 2 and axes == {2}:
        return "adaptive_avgpool1d", {"channels": in_shape[0], "length": in_shape[1], "out_size": 1}
    if len(in_shape) == 2 and axes == {1}:
        return "adaptive_avgpool1d", {"channels": in_shape[1], "length": in_shape[0], "out_size": 1}
    return _reduce_layer("reduce_mean", dims or None, in_shape, unsupported, label)


def reduce_config(dims, in_shape):
    """``{"rows", "reduced", "inner"}`` of a reduction over ``dims`` (numbered with the batch as axis 0, negative from
    the end) of a per-sample ``in_shape``: the elements before the reduced axes, of them, and after them; or the
    reason it is no such reduction (the batch among them, axes that are not adjacent, no axes named)."""
    ndim = len(in_shape) + 1
    if dims is None:
        return "over every axis, the batch's too"
    dims = (dims,) if isinstance(dims, int) else dims
    if not isinstance(dims, (tuple, list)) or not dims \
            or not all(isinstance(d, int) and not isinstance(d, bool) and -ndim <= d < ndim for d in dims):
        return "its axes not given as integers"
    axes = sorted({d % ndim for d in dims})
    if axes[0] == 0:
        return "over the batch"
    if axes != list(range(axes[0], axes[-1] + 1)):
        return "over axes that are not adjacent"
    first, last = axes[0] - 1, axes[-1]  # per-sample positions of the reduced axes: [first, last)
    return {"rows": _prod(in_shape[:first]), "reduced": _prod(in_shape[first:last]), "inner": _prod(in_shape[last:])}


def _reduce_layer(kind, dims, in_shape, unsupported, label, indices=None):
    """(kind, config) of a sum (``reduce_sum``), mean (``reduce_mean``) or max (``reduce_max``, ``indices`` 1 with the
    argmax kept) over adjacent axes, or recorded unsupported with the reason."""
    got = reduce_config(dims, in_shape)
    if isinstance(got, str):
        unsupported.append(f"{label}({got})")
        return None
    return kind, got if indices is None else dict(got, indices=int(indices))


#: reductions read as kinds, by their method's (and torch function's) name: (kind, indices)
_REDUCTIONS = {"sum": ("reduce_sum", None), "amax": ("reduce_max", 0), "max": ("reduce_max", 1)}


def _reduction(name, node, dim_arg, in_shape, unsupported, label):
    """A ``_REDUCTIONS`` method or function (``x.sum(dim)``, ``torch.amax``, ...) as its kind. ``torch.max(x, dim)`` /
    ``x.max(dim)`` keeps its argmax; the elementwise maximum of two tensors and the max of every element are other
    operators (recorded unsupported)."""
    kind, indices = _REDUCTIONS[name]
    if name == "max":
        dim = _arg(node, 1, "dim")
        if dim is None or hasattr(dim, "op"):  # torch.max(x), or torch.max(x, y) (positional, or other=y)
            two = dim is not None or "other" in node.kwargs
            unsupported.append(f"{label}({'of two tensors' if two else 'of every element'})")
            return None
    return _reduce_layer(kind, dim_arg(1, "dim"), in_shape, unsupported, label, indices)


def _arg(node, i, name, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


_FREE_FUNCS = {operator.getitem, getattr}
#: views repeating a tensor along axes of size 1 (SENet's ``x * y.expand_as(x)``): no copy; a product reading one
#: is a broadcast product (``_unexpanded``)
_EXPANDS = {"expand", "expand_as", "broadcast_to"}
#: (with _SPLITS: views of a tensor's parts, timm's ``q, k, v = qkv.unbind(0)`` among them)
_FREE_METHODS = {"size", "dim", "contiguous", "clone", "detach", "float", "type_as", "to"} | _SPLITS | _EXPANDS
_RESHAPE_METHODS = {"view", "reshape", "flatten", "unsqueeze", "squeeze", "unflatten", "view_as", "reshape_as"}
_ELEMENTWISE_METHODS = {"relu": "relu", "relu_": "relu", "tanh": "tanh", "sigmoid": "sigmoid"}
_PERMUTE_METHODS = {"transpose", "permute"}
_CLAMP_METHODS = {"clamp", "clamp_", "clip", "clip_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_"}


def _clamp_layer(node, name, in_shape, unsupported, label):
    """``("clamp", config)`` of a clamp or clip (``name``: its function or method name) whose bounds are numbers
    (Python numbers, or computed from sizes); a tensor bound, or none at all, is recorded unsupported."""
    if name.rstrip("_") in ("clamp_min", "clamp_max"):
        bounds = [_arg(node, 1, "min" if "min" in name else "max")]
    else:
        bounds = [_arg(node, 1, "min"), _arg(node, 2, "max")]
    given = [b for b in bounds if b is not None]
    if not given or not all(_is_constant(b) for b in given):
        unsupported.append(f"{label}({'a tensor bound' if given else 'no bound'})")
        return None
    return "clamp", {"numel": _prod(in_shape)}


def _is_constant(a):
    """Whether an operand is a number for the step: a Python number, or a node computing one (from sizes:
    ``x.size(-1) ** -0.5``), not a tensor."""
    if isinstance(a, bool):
        return False
    return isinstance(a, (int, float)) or hasattr(a, "meta") and a.op != "placeholder" \
        and a.meta.get("tensor_meta") is None and a.meta.get("type") in (None, int, float)


def _is_size(v):
    """Whether a traced value is a size: an int (not a bool), or a non-empty tuple of them (a ``torch.Size``)."""
    def one(x):
        return isinstance(x, int) and not isinstance(x, bool)

    return one(v) or isinstance(v, tuple) and bool(v) and all(one(x) for x in v)


def _by_number(divisor, node):
    """Whether a division ``node`` divides by a number (``_is_constant``) as true division (no ``rounding_mode``):
    kind ``scale``, as the product with its inverse."""
    return _is_constant(divisor) and "rounding_mode" not in node.kwargs


def _unexpanded(a):
    """The tensor ``a`` repeats where it is an expanding view of one (``y.expand_as(x)``, ``torch.broadcast_to``),
    else ``a``."""
    import torch
    from torch import fx

    while isinstance(a, fx.Node) and (a.op == "call_method" and a.target in _EXPANDS
                                      or a.op == "call_function" and a.target is torch.broadcast_to) and a.args:
        a = a.args[0]
    return a


def _mul_layer(node, out_shape, full_shape, unsupported, label):
    """``a * b`` of two tensors: numel of the output; broadcast when one operand is smaller (a scale). A tensor
    times a number is kind ``scale``."""
    args = list(node.args[:2])
    shapes = [full_shape(_unexpanded(a)) for a in args]
    if len(shapes) == 2 and sum(s is not None for s in shapes) == 1 and any(_is_constant(a) for a in args):
        return "scale", {"numel": _prod(out_shape)}
    if len(shapes) < 2 or any(s is None for s in shapes):
        unsupported.append("x * constant" if label == "x * y" else f"{label}(by a constant)")
        return None
    full = full_shape(node)
    full = _prod(full) if full is not None else max(_prod(s) for s in shapes)
    return "mul", {"numel": _prod(out_shape), "broadcast": int(any(_prod(s) < full for s in shapes))}


def _sub_layer(node, out_shape, full_shape, unsupported, label):
    """``x - y`` of two tensors: kind ``sub`` over the output's elements (one operand may be smaller, broadcast, as
    ``add`` takes it). ``x - c``, a number subtracted, runs add's kernel (``x + (-c)``): kind ``add``. ``c - x``, a
    number minus a tensor (``1 - z`` of a gate), is one elementwise pass forward and a negation of the gradient
    backward, as ``-x``: kind ``scale``, as ``-x`` is. An ``alpha`` is recorded unsupported."""
    a, b = _arg(node, 0, "input"), _arg(node, 1, "other")
    if "alpha" in node.kwargs or len(node.args) > 2:
        unsupported.append(f"{label}(with alpha)")
        return None
    tensors = [full_shape(v) is not None for v in (a, b)]
    if all(tensors):
        return "sub", {"numel": _prod(out_shape)}
    if tensors[0] and _is_constant(b):
        return "add", {"numel": _prod(out_shape)}
    if tensors[1] and _is_constant(a):
        return "scale", {"numel": _prod(out_shape)}
    unsupported.append(label)
    return None


def _cat_layer(node, out_shape, unsupported, label, axis=0):
    """``torch.cat`` of a list of tensors along any axis but the batch (at ``axis``): numel of the output, parts."""
    tensors = _arg(node, 0, "tensors")
    ndim = len(out_shape) + 1
    dim = _batch_first_dims(_arg(node, 1, "dim", 0), axis, ndim)
    if not isinstance(dim, int) or dim % ndim == 0:
        unsupported.append(f"{label}(along the batch)")
        return None
    if not isinstance(tensors, (list, tuple)):  # one node holding a tuple (x.chunk(2)[::-1]): count its metadata
        meta = getattr(tensors, "meta", {}).get("tensor_meta")
        tensors = meta if isinstance(meta, (list, tuple)) else None
    if not tensors:
        unsupported.append(f"{label}(of an unknown number of tensors)")
        return None
    return "cat", {"numel": _prod(out_shape), "parts": len(tensors)}


def _stack_layer(node, out_shape, unsupported):
    """``torch.stack`` of a list of tensors: the ``cat`` of their views with the new axis (PyTorch's own
    implementation; an export writes ``Unsqueeze`` and ``Concat``), at any axis: the new axis is never the batch's."""
    tensors = _arg(node, 0, "tensors")
    if not isinstance(tensors, (list, tuple)) or not tensors:
        unsupported.append("torch.stack(of an unknown number of tensors)")
        return None
    return "cat", {"numel": _prod(out_shape), "parts": len(tensors)}


def _pool_functions():
    """The pooling functions with a kind: ``{function: (kind, is a max pooling)}`` (``F.max_pool2d`` and its
    ``torch.max_pool2d`` alias, ``F.avg_pool2d``, ``F.max_pool1d``)."""
    import torch
    from torch.nn import functional as F

    return {F.max_pool2d: ("maxpool2d", True), torch.max_pool2d: ("maxpool2d", True),
            F.avg_pool2d: ("avgpool2d", False), F.max_pool1d: ("maxpool1d", True),
            torch.max_pool1d: ("maxpool1d", True)}


def _function_layer(node, in_shape, out_shape, unsupported, full_shape=lambda n: None, axis=0,
                    size_of=lambda a: a):
    """(kind, config) of a function or method node, None when free or unsupported (recorded). ``axis``: the
    batch axis of its input; a ``dim`` argument is read relative to it. ``size_of``: a pooling's kernel, stride
    or padding computed from sizes (``F.max_pool1d(x, x.size(2))``, a text CNN's max over time) as its value."""
    import torch
    from torch.nn import functional as F

    t = node.target
    ndim = len(in_shape) + 1

    def dim_arg(i, name):
        return _batch_first_dims(_arg(node, i, name), axis, ndim)

    if node.op == "call_method":
        if t in _FREE_METHODS:
            return None
        if t in _RESHAPE_METHODS:
            return "flatten", {"numel": _prod(in_shape)}
        if t in _ELEMENTWISE_METHODS:
            return _ELEMENTWISE_METHODS[t], {"numel": _prod(in_shape)}
        if t in _CLAMP_METHODS:
            return _clamp_layer(node, t, in_shape, unsupported, f"Tensor.{t}")
        if t in ("add", "add_"):
            return "add", {"numel": _prod(out_shape)}
        if t in ("sub", "sub_", "subtract"):
            return _sub_layer(node, out_shape, full_shape, unsupported, f"Tensor.{t}")
        if t in ("mul", "mul_"):
            return _mul_layer(node, out_shape, full_shape, unsupported, f"Tensor.{t}")
        if t in ("neg", "neg_") or t in ("div", "div_", "true_divide") and _by_number(_arg(node, 1, "other"), node):
            return "scale", {"numel": _prod(out_shape)}
        if t in _PERMUTE_METHODS:
            return "permute", {"numel": _prod(in_shape)}
        if t == "softmax":
            return _softmax_layer(dim_arg(1, "dim"), in_shape, unsupported, "Tensor.softmax")
        if t == "mean":
            return _mean_layer(dim_arg(1, "dim"), in_shape, unsupported, "Tensor.mean")
        if t in _REDUCTIONS:
            return _reduction(t, node, dim_arg, in_shape, unsupported, f"Tensor.{t}")
        unsupported.append(f"Tensor.{t}")
        return None
    if t in _FREE_FUNCS or t in (torch.chunk, torch.split, torch.tensor_split, torch.unbind, torch.broadcast_to):
        return None
    if t in (operator.add, operator.iadd, torch.add):
        return "add", {"numel": _prod(out_shape)}
    if t in (operator.sub, operator.isub, torch.sub, torch.subtract):
        return _sub_layer(node, out_shape, full_shape, unsupported, op_label(node))
    if t in (operator.mul, operator.imul, torch.mul):
        return _mul_layer(node, out_shape, full_shape, unsupported, op_label(node))
    if t in (operator.neg, torch.neg) or t in (operator.truediv, operator.itruediv, torch.div, torch.true_divide) \
            and full_shape(_arg(node, 0, "input")) is not None and _by_number(_arg(node, 1, "other"), node):
        return "scale", {"numel": _prod(out_shape)}
    if t in (torch.cat, torch.concat, torch.concatenate):
        return _cat_layer(node, out_shape, unsupported, "torch.cat", axis)
    if t is torch.stack:
        return _stack_layer(node, out_shape, unsupported)
    if t in (F.layer_norm, torch.layer_norm):  # timm's LayerNorm2d: permute, F.layer_norm(x, self.normalized_shape..)
        shape = size_of(_arg(node, 1, "normalized_shape"))
        shape = (shape,) if isinstance(shape, int) else shape
        if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) for d in shape):
            unsupported.append("F.layer_norm(of a normalized shape that is not numbers)")
            return None
        return layernorm_layer(len(shape), in_shape, axis, unsupported, "F.layer_norm")
    if t in (torch.transpose, torch.permute):
        return "permute", {"numel": _prod(in_shape)}
    if t in (torch.softmax, F.softmax):
        return _softmax_layer(dim_arg(1, "dim"), in_shape, unsupported, "softmax")
    if t is torch.mean:
        return _mean_layer(dim_arg(1, "dim"), in_shape, unsupported, "torch.mean")
    if t in (torch.sum, torch.amax, torch.max):
        return _reduction(t.__name__, node, dim_arg, in_shape, unsupported, f"torch.{t.__name__}")
    if t is F.pad:  # pads computed from sizes (a U-Net's to match its skip's: diff // 2) as their values
        pads = _arg(node, 1, "pad")
        pads = [size_of(p) for p in pads] if isinstance(pads, (tuple, list)) else pads
        return _pad_layer(pads, _arg(node, 2, "mode", "constant"), in_shape, out_shape, axis, unsupported, "F.pad")
    if t is F.interpolate:
        return _upsample_layer(_arg(node, 3, "mode", "nearest"), in_shape, out_shape, unsupported, "interpolate")
    if t in (torch.flatten, torch.reshape, torch.unsqueeze, torch.squeeze, torch.unflatten):
        return "flatten", {"numel": _prod(in_shape)}
    table = {F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", F.hardtanh: "relu6", F.hardtanh_: "relu6",
             F.gelu: "gelu", torch.tanh: "tanh",
             torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.tanh: "tanh", F.hardswish: "hardswish",
             F.hardsigmoid: "hardsigmoid", F.silu: "silu", F.leaky_relu: "leaky_relu", F.leaky_relu_: "leaky_relu",
             F.elu: "elu", F.elu_: "elu", F.selu: "elu", torch.selu: "elu", torch.selu_: "elu", F.celu: "elu",
             torch.celu: "elu", torch.celu_: "elu", F.softplus: "elementwise", F.logsigmoid: "elementwise"}
    if t in table:
        return table[t], {"numel": _prod(in_shape)}
    if t in (torch.clamp, torch.clip, torch.clamp_min, torch.clamp_max):
        return _clamp_layer(node, t.__name__, in_shape, unsupported, f"torch.{t.__name__}")
    pool = _pool_functions().get(t)
    if pool:
        kind, max_pool = pool
        name = f"F.{'max' if max_pool else 'avg'}_pool{kind[-2:]}"  # with return_indices, torch calls another
        return _pool_layer(kind, size_of(_arg(node, 1, "kernel_size")), size_of(_arg(node, 2, "stride")),
                           size_of(_arg(node, 3, "padding", 0)),
                           _arg(node, 4, "dilation", 1) if max_pool else 1,
                           _arg(node, 5 if max_pool else 4, "ceil_mode", False), in_shape, out_shape, unsupported,
                           name, None if max_pool else _arg(node, 6, "divisor_override"))
    if t is F.dropout:
        p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)
        return "dropout", {"numel": _prod(in_shape), "p": float(p)}
    if t in (F.dropout1d, F.dropout2d, F.dropout3d):
        axes = (F.dropout1d, F.dropout2d, F.dropout3d).index(t) + 1
        return _channel_dropout(f"F.{t.__name__}", _arg(node, 1, "p", 0.5), axes, in_shape, unsupported)
    if t is F.adaptive_avg_pool1d:
        size = _arg(node, 1, "output_size")
        return "adaptive_avgpool1d", {"channels": in_shape[0], "length": in_shape[1],
                                      "out_size": int(size if isinstance(size, int) else size[0])}
    if t in (F.adaptive_max_pool1d, F.adaptive_max_pool2d):
        return _adaptive_max_layer(_arg(node, 1, "output_size"), _arg(node, 2, "return_indices", False), in_shape,
                                   unsupported, f"F.{t.__name__}")
    if t is F.avg_pool1d:
        return _avg_pool1d_layer(size_of(_arg(node, 1, "kernel_size")), size_of(_arg(node, 2, "stride")),
                                 size_of(_arg(node, 3, "padding", 0)), _arg(node, 4, "ceil_mode", False), in_shape,
                                 out_shape, unsupported, "F.avg_pool1d")
    if t is F.adaptive_avg_pool2d:
        size = node.args[1] if len(node.args) > 1 else node.kwargs["output_size"]
        return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                      "out_size": int(size if isinstance(size, int) else size[0])}
    unsupported.append(op_label(node))
    return None


UNKNOWN_OPS = ("error", "approx")
#: what a registered net that declares its stand-ins extracts under (``ModelSpec.unknown_ops``): an operator with
#: a stand-in of known kinds (scaled_dot_product_attention, MultiheadAttention, x @ y, ...) becomes those layers,
#: marked ``approx``; one without stays refused (no generic ``elementwise`` layer)
STAND_INS = "stand-ins"
_OPERATOR_SYMBOLS = {operator.add: "+", operator.iadd: "+=", operator.mul: "*", operator.imul: "*=",
                     operator.sub: "-", operator.isub: "-=", operator.truediv: "/", operator.itruediv: "/=",
                     operator.floordiv: "//", operator.pow: "**", operator.matmul: "@", operator.mod: "%"}
_UNARY_SYMBOLS = {operator.neg: "-x", operator.pos: "+x", operator.invert: "~x", operator.abs: "abs(x)"}
#: functions and methods that do dense linear algebra: never approximated as a memory-bound op
_COMPUTE_BOUND = {"matmul", "mm", "bmm", "einsum", "linear", "bilinear", "conv1d", "conv2d", "conv3d",
                  "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "addmm", "baddbmm", "addbmm",
                  "scaled_dot_product_attention", "multi_head_attention_forward", "lstm", "gru", "rnn_tanh",
                  "rnn_relu", "__matmul__", "tensordot", "kron", "inner", "outer", "cdist"}
#: parameterised module families that are memory-bound (normalisations, parametric activations)
_MEMORY_BOUND_MODULES = ("torch.nn.modules.activation", "torch.nn.modules.normalization",
                         "torch.nn.modules.instancenorm", "torch.nn.modules.batchnorm")


def op_label(node, gm=None):
    """How a user names the operator of an fx node: the module's class (``LeakyReLU``), ``torch.cat``,
    ``Tensor.view``, or the Python expression of a builtin operator (``x * y``)."""
    if node.op == "call_module":
        return type(gm.get_submodule(node.target)).__name__ if gm is not None else str(node.target)
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    t = node.target
    if t in _OPERATOR_SYMBOLS:
        return f"x {_OPERATOR_SYMBOLS[t]} y"
    if t in _UNARY_SYMBOLS:
        return _UNARY_SYMBOLS[t]
    name = getattr(t, "__name__", None) or getattr(t, "__qualname__", None) or str(t)
    module = getattr(t, "__module__", "") or ""
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if module.startswith("torch.nn.functional") or module == "torch._C._nn":
        return f"F.{name}"
    if module.startswith("torch"):
        return f"torch.{name}"
    return f"{module + '.' if module and module != 'builtins' else ''}{name}"


def _approximable(node, gm):
    """Whether an operator without a kind may be estimated as a generic elementwise (memory-bound) op:
    parameter-free ops and normalisation/activation modules, never dense linear algebra."""
    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        if type(mod).__name__ in ("MultiheadAttention", "Bilinear"):
            return False
        has_params = any(True for _ in mod.parameters())
        return not has_params or type(mod).__module__ in _MEMORY_BOUND_MODULES
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return node.target is not operator.matmul and str(name).lstrip("_").rstrip("_") not in _COMPUTE_BOUND \
        and name not in _COMPUTE_BOUND


#: functions making a tensor from sizes and numbers alone (values that never depend on the input's)
_MADE_FUNCS = ("zeros", "ones", "empty", "full", "rand", "randn", "randint", "zeros_like", "ones_like", "empty_like",
               "full_like", "rand_like", "randn_like", "randint_like")
#: methods making a new tensor from the one they are called on, its size and dtype alone
_NEW_METHODS = {"new_zeros", "new_ones", "new_empty", "new_full"}
#: in-place fills: free on a tensor that is itself made (a mask's x.new_empty(shape).bernoulli_(keep))
_FILL_METHODS = {"bernoulli_", "uniform_", "normal_", "fill_", "zero_", "random_", "exponential_", "geometric_",
                 "cauchy_", "log_normal_"}


def _torch_factory(target):
    """The name of ``target`` where it is one of torch's factories in ``_MADE_FUNCS`` (``torch.zeros``,
    ``torch.zeros_like``, ...), else None."""
    import torch

    name = getattr(target, "__name__", None)
    return name if name in _MADE_FUNCS and getattr(torch, name, None) is target else None


def _makes_a_tensor(node, made, fixed):
    """Whether ``node`` makes a tensor that carries no gradient and depends on no value of the input or the
    parameters: a factory (``torch.zeros(...)``, ``torch.randn_like(x)``, ``x.new_empty(...)``), an in-place fill of
    such a tensor, or any function or method of such tensors (and fixed ones) alone (``mask.div_(keep)``,
    ``h0.to(x.device)``). Such a tensor is not a layer: filling it runs forward only (its cost is not counted; a
    full-size noise tensor's fill is of the order of one elementwise pass forward)."""
    if node.op == "call_function":
        if _torch_factory(node.target):
            return True
    elif node.op == "call_method":
        if node.target in _NEW_METHODS:
            return True
        if node.target in _FILL_METHODS:
            return bool(node.args) and node.args[0] in made
    else:
        return False
    tensors = [a for a in node.all_input_nodes if a.meta.get("tensor_meta") is not None]
    return bool(tensors) and any(a in made for a in tensors) and all(a in made or a in fixed for a in tensors)


def _positional_sum(node, lookups, full_shape, layers):
    """Whether ``node`` adds a token embedding's lookup and a learned positional embedding's lookup of fixed
    position ids (nanoGPT's and GPT-2's ``wte(idx) + wpe(torch.arange(t))``): then the token layer becomes the
    ``embedding`` kind with ``positional`` 1 (what the zoo's ``TokenPositionalEmbedding`` reads as: tokens and
    positions, the same rows), the positional lookup's own layer is dropped and the sum is no layer (the kind's
    probe adds them). Each lookup must be used by the sum alone, and the positions be the tokens' sequence."""
    import torch

    if node.op != "call_function" or node.target not in (operator.add, torch.add) or len(node.args) != 2 \
            or node.kwargs or not all(a in lookups and len(a.users) == 1 for a in node.args):
        return False
    # the token lookup first, the lookup of fixed ids second (where there is one of each)
    (_, tok, tok_fixed), (positions, pos, pos_fixed) = sorted(((a, *lookups[a]) for a in node.args),
                                                              key=lambda entry: entry[2])
    shape = full_shape(positions)
    c = tok["config"]
    if tok_fixed or not pos_fixed or c["positional"] or shape is None or len(shape) < 2 \
            or _prod(shape[:-1]) != c["seq_len"] or shape[-1] != c["embedding_dim"]:
        return False
    c["positional"] = 1
    if c.get("frozen") != pos["config"].get("frozen"):  # one table frozen, the other trained: a trained layer
        c.pop("frozen", None)
    layers.remove(pos)
    return True


def _checks_a_default(node):
    """Whether ``node`` is the check fx adds where an argument is traced at its default (``trace.defaults``):
    ``_assert_is_none`` (None) or ``torch._assert`` of it; no cost."""
    import torch

    return node.op == "call_function" and (node.target is torch._assert or
                                           getattr(node.target, "__name__", "") == "_assert_is_none"
                                           and getattr(node.target, "__module__", "").startswith("torch.fx"))


def _reads_token_ids(gm):
    """Whether every use of the traced module's input is an embedding lookup (token ids, not values), apart from
    reading what it is (``idx.size()``, ``idx.device``: nanoGPT's position ids; ``torch.zeros_like(idx)``: BERT's
    token types) and at least one lookup."""
    from torch import nn
    from torch.nn import functional as F

    from thor_sdk.models.blocks import TokenPositionalEmbedding

    x = next((n for n in gm.graph.nodes if n.op == "placeholder"), None)  # the input; the rest are at defaults

    def lookup(u):
        embeddings = (nn.Embedding, TokenPositionalEmbedding)
        return u.op == "call_module" and isinstance(gm.get_submodule(u.target), embeddings) \
            or u.op == "call_function" and u.target is F.embedding and u.args[:1] == (x,)

    def metadata(u):  # reads the input's size, device or dtype, not its values (BERT's zeros_like(input_ids))
        return u.op == "call_method" and u.target in ("size", "dim", *_NEW_METHODS) \
            or u.op == "call_function" and u.target is getattr and u.args[1:] in (("shape",), ("device",),
                                                                                   ("dtype",), ("ndim",)) \
            or u.op == "call_function" and (_torch_factory(u.target) or "").endswith("_like")

    uses = list(x.users) if x is not None else []
    return any(lookup(u) for u in uses) and all(lookup(u) or metadata(u) for u in uses)


def _trace(module, example=None):
    """``module`` as a torch.fx GraphModule, this project's layer modules (``_leaf_types``) kept whole, traced
    symbolically or, with ``example``, with its sizes (``trace.trace``); fx's own exception for untraceable
    Python control flow."""
    from .trace import trace

    return trace(module, _leaf_types(), example)


def _sized_traces(module, example, error, source, input_shape):
    """Where fx's symbolic trace of ``module`` failed with ``error``: its graphs traced with the sizes of inputs
    at batch 2 and at batch 3 (``trace.trace``), which must run the same operators (a graph whose operators
    change with the batch size is not one layer list). ``ModelError`` where they cannot be had: the module's
    code failing on the inputs, or code neither trace follows (the symbolic trace's reason)."""
    from .trace import ModelRunError, same_graph

    try:
        gm, gm3 = _trace(module, example(2)), _trace(module, example(3))
    except ModelRunError as e:
        raise ModelError(f"{source} does not run on inputs of shape {list(input_shape)} ({e})") from e
    except Exception as e:  # the reason it still fails (tensor values in control flow) over the symbolic one
        raise ModelError(
            f"could not trace {source} with torch.fx ({type(e).__name__}: {e}); "
            "describe it as a layer-list JSON instead (see docs/layer-list.md)"
        ) from error
    if not same_graph(gm, gm3):
        raise ModelError(
            f"could not trace {source} with torch.fx ({type(error).__name__}: {error}); traced with the input's "
            "sizes, its operators change with the batch size; describe it as a layer-list JSON instead "
            "(see docs/layer-list.md)") from error
    return gm, gm3


def input_dtype_of(module, input_shape=None):
    """``"int64"`` when ``module``'s input only feeds embedding lookups (a text model's token ids), else
    ``"float32"``: the dtype ``layers_of`` traces a module with when none is given. A module that fx cannot trace
    symbolically is traced with its sizes on token ids of per-sample ``input_shape`` where given (a model that
    reads values fails on them: float32)."""
    try:
        gm = _trace(module)
    except Exception:  # untraceable: layers_from_module says so with the reason
        if input_shape is None:
            return "float32"
        import torch

        try:
            gm = _trace(module, torch.zeros((2, *input_shape), dtype=torch.int64))
        except Exception:
            return "float32"
    return "int64" if _reads_token_ids(gm) else "float32"


def layers_from_module(module, input_shape, input_dtype="float32", vocab=None, source="model", unknown_ops="error"):
    """The ordered layer list of ``module`` for inputs of per-sample ``input_shape``.

    Returns a list of ``{"name", "kind", "role", "config", "op"}`` (``op``: the operator it came from);
    a final Linear becomes the ``output`` head. Raises ``UnsupportedOperatorError`` naming every
    operator without a layer kind, unless ``unknown_ops="approx"``: then each such operator that is
    elementwise or reshaping (parameter-free, or a normalisation/activation module; never dense linear
    algebra) becomes a layer of the generic ``elementwise`` kind over its output's elements, marked
    ``"approx"`` with the reason; the rest still raise. ``unknown_ops="stand-ins"`` (``STAND_INS``) takes the
    stand-ins of known kinds but no generic layer.
    """
    if unknown_ops not in UNKNOWN_OPS + (STAND_INS,):

        raise UsageError(f"unknown_ops must be one of {', '.join(UNKNOWN_OPS)}, got {unknown_ops!r}")
    import torch
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    def example(batch):
        if input_dtype == "int64":
            return torch.randint(0, max(int(vocab or 2), 2), (batch, *input_shape))
        return torch.randn(batch, *input_shape)

    gm3 = None  # where the graph was traced with its sizes: the one traced at batch 3
    try:
        gm = _trace(module)
    except Exception as e:  # fx raises many types for untraceable Python control flow
        gm, gm3 = _sized_traces(module, example, e, source, input_shape)

    def full_shape(n):
        meta = n.meta.get("tensor_meta") if isinstance(n, fx.Node) else None
        if meta is None or not hasattr(meta, "shape"):
            return None
        return tuple(int(s) for s in meta.shape)

    wanted, values, sizes = _mask_arguments(gm), {}, {2: {}, 3: {}}

    class _Prop(ShapeProp):  # keeps the sizes it computes and, at batch 2, the values of attention masks
        def __init__(self, module, batch):
            super().__init__(module)
            self.batch, self.sizes = batch, sizes[batch]

        def run_node(self, n):
            result = super().run_node(n)
            if self.batch == 2 and n in wanted and isinstance(result, torch.Tensor):
                values[n] = result.detach().clone()
            if _is_size(result):
                self.sizes[n] = tuple(result) if isinstance(result, tuple) else result
            return result

    was_training = module.training
    gm.eval()
    try:
        # ShapeProp prints the traceback of a failing node itself; keep it off the user's terminal
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            try:  # node -> its shape at batch 3: the axis that differs from batch 2 is the batch axis
                _Prop(gm3 or gm, 3).propagate(example(3))
                at_3 = {n: full_shape(m) for n, m in zip(gm.graph.nodes, (gm3 or gm).graph.nodes)}
                if gm3 is not None:  # the sizes read at batch 3, by the nodes of the graph traced at batch 2
                    at = dict(zip(gm3.graph.nodes, gm.graph.nodes))
                    sizes[3] = {at[n]: v for n, v in sizes[3].items()}
            except Exception:  # batch 2 says why below, or the batch axis is taken as axis 0
                at_3 = {}
            _Prop(gm, 2).propagate(example(2))
    except Exception as e:
        cause = e.__cause__ or e  # ShapeProp wraps the model's own error in a RuntimeError naming the node
        lines = str(cause).strip().splitlines() or [""]
        raise ModelError(f"{source} does not run on inputs of shape {list(input_shape)} "
                         f"({type(cause).__name__}: {lines[0]})") from e
    finally:
        module.train(was_training)

    def size_of(a):
        """``a`` itself, or where it is a node computing a size (``x.size(2)``, ``x.size()[2:]``), that size: one
        that is the same at both batch sizes (else the node)."""
        if isinstance(a, fx.Node) and a in sizes[2] and sizes[2][a] == sizes[3].get(a):
            return sizes[2][a]
        return a

    def batch_axis(n):
        """The axis of ``n``'s value that is the batch: the one axis whose size went from 3 to 2 with the
        input's batch (a sequence-first RNN's input has it at 1); 0 where that cannot be told."""
        a, b = full_shape(n), at_3.get(n)
        if a is None or b is None or len(a) != len(b):
            return 0
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return diff[0] if len(diff) == 1 and 3 * a[diff[0]] == 2 * b[diff[0]] else 0

    def shape_of(n):
        """Per-sample shape: the full shape without its batch axis."""
        full = full_shape(n)
        if full is None:
            return None
        i = batch_axis(n)
        return full[:i] + full[i + 1:]

    layers, unsupported = [], []
    needs_grad = {}  # node -> whether its value requires grad in training
    fixed = set()  # tensors made without the input's values or parameters, the same at every batch size
    made = set()  # tensors made without the input's values or parameters, sized by the batch (_makes_a_tensor)
    lookups = {}  # embedding node -> (its layer, whether its ids are fixed: positions); _positional_sum
    cells = {}  # a cell module's target -> the layer of its first call, which counts its calls (steps)

    def fixed_shape(n):
        """The full shape of a tensor in ``fixed`` (a mask, position ids), else None."""
        return full_shape(n) if n in fixed else None

    pending = (0, None)  # where the last node's layers start in ``layers``, and that node
    for node in gm.graph.nodes:
        _mark_node(layers, *pending, gm, unknown_ops, unsupported)
        pending = (len(layers), node)
        arg_nodes = [a for a in node.all_input_nodes]
        upstream = any(needs_grad.get(a, False) for a in arg_nodes)
        if node.op in ("placeholder", "output"):
            needs_grad[node] = False
            continue
        if node.op == "get_attr":  # a parameter needs a gradient; a buffer (a fixed mask, a running stat) does not
            try:
                value = operator.attrgetter(str(node.target))(gm)
            except AttributeError:
                value = None
            needs_grad[node] = bool(getattr(value, "requires_grad", True))
            if not needs_grad[node] and full_shape(node) is not None:
                fixed.add(node)
            continue
        if node.op in ("call_function", "call_method") and full_shape(node) is not None \
                and at_3.get(node) == full_shape(node) \
                and all(a in fixed for a in arg_nodes if a.meta.get("tensor_meta") is not None):
            # made from sizes, constants and buffers only (a causal mask from generate_square_subsequent_mask,
            # torch.arange position ids): the same small tensor at every batch size, not a cost of the batch;
            # a size read off a tensor that needs a gradient (h.size(1)) carries none
            needs_grad[node] = False
            fixed.add(node)
            continue
        if _makes_a_tensor(node, made, fixed):
            # a tensor made without the input's values and carrying no gradient, at any batch size (an RNN's zero
            # initial state torch.zeros(layers, x.size(0), hidden), DropPath's mask x.new_empty(...).bernoulli_(p),
            # noise torch.randn_like(x)): no layer; a product with it is costed where it meets the activations
            needs_grad[node] = False
            made.add(node)
            continue
        tensor_args = [a for a in arg_nodes if shape_of(a) is not None]
        in_shape = shape_of(tensor_args[0]) if tensor_args else None
        in_axis = batch_axis(tensor_args[0]) if tensor_args else 0
        out_shape = shape_of(node)
        n_unsupported = len(unsupported)
        if _loss_log_softmax(node, gm, in_shape, in_axis, unsupported):
            needs_grad[node] = upstream
            continue
        if _positional_sum(node, lookups, full_shape, layers):
            needs_grad[node] = upstream  # either table trained (a frozen pair, as LoRA leaves it: no gradient)
            continue
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            parts = _transformer_parts(node, mod, unsupported, fixed_shape, values.get, shape_of, batch_axis)
            if parts is None:
                parts = _bidirectional_gru_parts(mod, in_shape, in_axis)
            if parts is not None:  # an encoder layer (or stack): its attention, norms and feed-forward layers; a
                # bidirectional GRU's directions and their cats
                for suffix, part, reads_input in parts:
                    add_layer(layers, str(node.target) + suffix, part, upstream or not reads_input,
                              op_label(node, gm))
                needs_grad[node] = True
                continue
            if len(unsupported) > n_unsupported:
                got = None
            elif _is_mha(mod):
                got = _mha_layer(node, mod, shape_of, batch_axis, unsupported, fixed_shape)
            else:
                got = _module_layer(mod, in_shape, out_shape, unsupported, in_axis)
            has_params = any(p.requires_grad for p in mod.parameters())
        elif _checks_a_default(node):
            got, has_params = None, False
        elif out_shape is None and getattr(node.target, "__module__", None) in ("_operator", "math"):
            got, has_params = None, False  # arithmetic on sizes (c // 2, math.sqrt(d)), not on tensors: free
        elif _is_sdpa(node):
            got, has_params = _sdpa_layer(node, shape_of, batch_axis, unsupported), False
        elif _view_into_attention(node):
            got, has_params = None, False
        else:
            got = _function_layer(node, in_shape or (), out_shape or (), unsupported, full_shape, in_axis, size_of)
            has_params = False
        needs_grad[node] = upstream or has_params
        approx = None
        name = str(node.target) if node.op == "call_module" else node.name
        if len(unsupported) > n_unsupported and unknown_ops in ("approx", STAND_INS):
            stand_in = _stand_in(node, gm, in_shape, full_shape, in_axis, shape_of, batch_axis)
            if stand_in is not None:
                del unsupported[n_unsupported:]
                add_stand_in_layers(layers, name, *stand_in, upstream, op_label(node, gm))
                continue
        if got is None and len(unsupported) > n_unsupported and unknown_ops == "approx" and _approximable(node, gm):
            shape = out_shape if out_shape is not None else in_shape
            if shape is not None:
                approx = f"{unsupported[-1]} has no kind: estimated as a generic elementwise op"
                del unsupported[n_unsupported:]
                got = ("elementwise", {"numel": _prod(shape)})
        if got is None:
            continue
        if node.op == "call_module" and got[0] in CELLS:
            # a cell's calls are one layer (one weight update): at its first call, counting steps; its role is its
            # input's (the state a call passes to the next is the layer's own)
            x_grad = bool(node.args) and needs_grad.get(node.args[0], False)
            first = cells.get(node.target)
            if first is None:
                add_layer(layers, name, got, x_grad, op_label(node, gm), approx)
                cells[node.target] = layers[-1]
            else:
                first["config"]["steps"] += 1
                if x_grad:
                    first["role"] = "hidden"
            continue
        add_layer(layers, name, got, upstream, op_label(node, gm), approx)
        if node.op == "call_module" and got[0] == "embedding" and not approx:
            lookups[node] = (layers[-1], bool(node.args) and node.args[0] in fixed)
    _mark_node(layers, *pending, gm, unknown_ops, unsupported)
    recomputed = [layer["name"] for layer in layers if layer.get(RECOMPUTED)]
    if recomputed and unknown_ops == "error":
        which = (recomputed[0] if len(recomputed) == 1
                 else f"{len(recomputed)} layers, {recomputed[0]} .. {recomputed[-1]}")
        unsupported.append(f"torch.utils.checkpoint ({which}: their forward runs again in backward, which no "
                           "probe measures; --unknown-ops approx adds it as their forward FLOPs' share)")
    refuse_unsupported(unsupported, source, unknown_ops)
    layers = finish_layers(layers, source)
    for layer in layers:
        if layer.pop(RECOMPUTED, False):
            share = get_kind(layer["kind"]).forward_share(layer["config"], layer["role"])
            layer["recompute"] = share
            why = f"{RECOMPUTE_REASON}: {share:.2f} of its training step added, its forward FLOPs' share"
            layer["approx"] = f"{layer['approx']}; {why}" if layer.get("approx") else why
    return layers


def _mark_node(layers, start, node, gm, unknown_ops, unsupported):
    """What a node's layers (``layers[start:]``) carry from how the node ran, once they are all added: recomputed
    under ``torch.utils.checkpoint``, frozen, run in place."""
    _mark_recomputed(layers, start, node)
    _mark_frozen(layers, start, node, gm, unknown_ops, unsupported)
    _mark_in_place(layers, start, node, gm)


def _params_of(node, gm, suffix=""):
    """The parameters a node's layer computes with: a module's (``suffix``: the part's own submodule, a
    transformer layer's ``.linear1``, where the module has one), else the parameters a function reads (``get_attr``
    inputs: timm's LayerNorm2d calls ``F.layer_norm`` with its own weight)."""
    import torch

    if node.op == "call_module":
        mod = gm.get_submodule(node.target)
        if suffix:
            try:
                mod = mod.get_submodule(suffix.lstrip("."))
            except AttributeError:
                pass
        return list(mod.parameters())
    out = []
    for a in node.all_input_nodes:
        if a.op == "get_attr":
            try:
                value = operator.attrgetter(str(a.target))(gm)
            except AttributeError:
                continue
            if isinstance(value, torch.nn.Parameter):
                out.append(value)
    return out


def _mark_frozen(layers, start, node, gm, unknown_ops, unsupported):
    """Set ``frozen`` 1 on the layers from ``start`` on (those ``node`` gave) whose kind has weights and none of
    whose parameters requires a gradient (a fine-tuned net's frozen backbone). A layer trained in part (some of
    its parameter tensors frozen: a bias-only fine-tune) is refused, or under ``--unknown-ops approx`` estimated as
    trained and marked approx: no probe measures it."""
    if node is None or len(layers) == start:
        return
    name = str(node.target) if node.op == "call_module" else node.name
    for layer in layers[start:]:
        if layer["kind"] not in FREEZABLE:
            continue
        suffix = layer["name"][len(name):] if layer["name"].startswith(name) else ""
        params = _params_of(node, gm, suffix)
        trained = sum(bool(p.requires_grad) for p in params)
        if not params or trained == len(params):
            continue
        if trained == 0:
            layer["config"] = dict(layer["config"], frozen=1)
            continue
        why = trained_in_part(trained, len(params))
        if unknown_ops == "approx":
            layer.setdefault("approx", f"{layer.get('op') or op_label(node, gm)}: {why}")
        elif not any(u.startswith(layer["name"] + " ") for u in unsupported):
            unsupported.append(f"{layer['name']} ({layer.get('op') or op_label(node, gm)}: {why}; --unknown-ops "
                               "approx estimates it so)")


#: the position of ``inplace`` among the functional activations' positional arguments
_INPLACE_ARG = {"relu": 1, "relu6": 1, "hardswish": 1, "hardsigmoid": 1, "silu": 1, "selu": 1, "hardtanh": 3,
                "leaky_relu": 2, "elu": 2, "celu": 2}


def _runs_in_place(node, gm):
    """Whether an activation node overwrites its input: a module built ``inplace=True``, a function given
    ``inplace=True`` (by keyword or position), or the underscore form (``x.relu_()``, ``F.leaky_relu_``)."""
    if node.op == "call_module":
        return getattr(gm.get_submodule(node.target), "inplace", False) is True
    name = str(node.target if node.op == "call_method" else getattr(node.target, "__name__", ""))
    if name.endswith("_") and not name.endswith("__"):
        return True
    if node.kwargs.get("inplace") is True:
        return True
    pos = _INPLACE_ARG.get(name) if node.op == "call_function" else None
    return pos is not None and len(node.args) > pos and node.args[pos] is True


def _mark_in_place(layers, start, node, gm):
    """Set ``inplace`` 1 on the layers from ``start`` on (those ``node`` gave) of a kind that can run in place, where
    ``node`` does and the layer runs forward only (role ``input``: behind a frozen backbone's layers). Behind a
    trained layer no probe can run it in place: it stays out of place (``kinds.IN_PLACE``)."""
    if node is None or len(layers) == start:
        return
    for layer in layers[start:]:
        if layer["kind"] in IN_PLACE and layer["role"] == "input" and "approx" not in layer \
                and _runs_in_place(node, gm):
            layer["config"] = dict(layer["config"], inplace=1)


def _mark_recomputed(layers, start, node):
    """Mark the layers from ``start`` on (those ``node`` gave) as recomputed where ``node`` was traced inside
    ``torch.utils.checkpoint`` (``trace.checkpoints_marked``)."""
    if node is not None and node.meta.get(RECOMPUTED):
        for layer in layers[start:]:
            layer[RECOMPUTED] = True


def add_layer(layers, name, got, upstream, op, approx=None):
    """Append the layer ``got = (kind, config)`` (the torch.fx and ONNX readers alike): its role is
    ``hidden`` once a parameter or gradient is upstream, else ``input``; ``approx`` says why it is estimated."""
    kind, config = got
    layer = {"name": name, "kind": kind, "role": "hidden" if upstream else "input", "config": config, "op": op}
    if approx:
        layer["approx"] = approx
    layers.append(layer)


def add_stand_in_layers(layers, name, parts, reason, upstream, op):
    """Append a stand-in's layers ``parts = [(suffix, (kind, config), reads_input)]`` (the torch.fx and ONNX readers
    alike), each marked with ``reason``: one reading the operator's input takes its role from ``upstream``, the
    others read an earlier stand-in layer's output (hidden)."""
    for suffix, part, reads_input in parts:
        add_layer(layers, name + suffix, part, upstream or not reads_input, op, reason)


def refuse_unsupported(unsupported, source, unknown_ops):
    """One ``UnsupportedOperatorError`` naming every operator with no layer kind (none: nothing)."""
    if unsupported:
        raise UnsupportedOperatorError(unsupported, source,
                                       hint=None if unknown_ops == "approx" else
                                       "or pass --unknown-ops approx to estimate elementwise ones as a generic op")


def finish_layers(layers, source="model"):
    """Drop trailing reshapes and turn a final Linear into the ``output`` head (the layer the loss is
    computed on), unless it stands in for another operator (``approx``). A list ending in another kind (a
    segmentation head's conv, a final softmax, one layer alone) keeps that layer as it is: its loss's own cost
    is then not in the estimate."""
    while len(layers) > 1 and layers[-1]["kind"] == "flatten":
        layers.pop()
    if not layers:
        raise ModelError(f"{source} has no layers with a cost (only free reshapes or none at all)")
    for layer in layers:
        layer["config"] = complete_config(layer["kind"], layer["config"])  # every feature spelled out, as written,
        get_kind(layer["kind"]).check_config(layer["config"])
        if any(layer["config"].get(f) == 0 for f in SPARSE_FEATURES):  # but frozen and inplace: written where 1
            layer["config"] = {k: v for k, v in layer["config"].items() if not (k in SPARSE_FEATURES and v == 0)}
    last = layers[-1]
    if last["kind"] == "linear" and "approx" not in last:  # a stand-in (a matmul of two activations) has no weights
        c = last["config"]
        last = dict(last, kind="output", role="output",
                    config={"in_features": c["in_features"], "out_features": c["out_features"], "tokens": c["tokens"]})
        if c.get("frozen"):  # the head kind is always trained: a frozen last Linear is estimated as one
            last["approx"] = ("a frozen last Linear: estimated as the output head, which is trained (its weight "
                              "gradient and update counted)")
        layers = layers[:-1] + [last]
    return layers
