"""Split a ``torch.nn.Module`` into THOR's ordered layer list (torch.fx trace + shape propagation)."""

import contextlib
import io
import operator

from thor_sdk.errors import ModelError, UnsupportedOperatorError

from .kinds import get_kind


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


def _module_layer(mod, in_shape, out_shape, unsupported):
    """(kind, config) for a leaf module, None for a free one (Identity), or records it unsupported."""
    from torch import nn

    from thor_sdk.models.blocks import LSTMSequence, TokenPositionalEmbedding, TransformerBlock

    label = type(mod).__name__
    if isinstance(mod, nn.Conv2d):
        if isinstance(mod.padding, str):
            unsupported.append(f"Conv2d(padding={mod.padding!r})")
            return None
        if _pair(mod.dilation, "dilation", unsupported, label) != 1:
            unsupported.append("Conv2d(dilation>1)")
        return "conv2d", {
            "in_channels": mod.in_channels, "out_channels": mod.out_channels,
            "kernel": _pair(mod.kernel_size, "kernel", unsupported, label),
            "stride": _pair(mod.stride, "stride", unsupported, label),
            "padding": _pair(mod.padding, "padding", unsupported, label),
            "groups": mod.groups, "height": in_shape[-2], "width": in_shape[-1], "bias": int(mod.bias is not None),
        }
    if isinstance(mod, nn.Linear):
        return "linear", {"in_features": mod.in_features, "out_features": mod.out_features,
                          "tokens": _prod(in_shape[:-1]), "bias": int(mod.bias is not None)}
    if isinstance(mod, (nn.MaxPool2d, nn.AvgPool2d)):
        if isinstance(mod, nn.MaxPool2d) and (_pair(mod.dilation, "dilation", unsupported, label) != 1 or mod.ceil_mode):
            unsupported.append("MaxPool2d(dilation/ceil_mode)")
        k = _pair(mod.kernel_size, "kernel", unsupported, label)
        return ("maxpool2d" if isinstance(mod, nn.MaxPool2d) else "avgpool2d"), {
            "channels": in_shape[0], "height": in_shape[1], "width": in_shape[2], "kernel": k,
            "stride": _pair(mod.stride if mod.stride is not None else k, "stride", unsupported, label),
            "padding": _pair(mod.padding, "padding", unsupported, label),
        }
    if isinstance(mod, nn.AdaptiveAvgPool2d):
        return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                      "out_size": _pair(mod.output_size, "output size", unsupported, label)}
    if isinstance(mod, nn.BatchNorm2d):
        return "batchnorm2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2]}
    if isinstance(mod, nn.LayerNorm):
        if len(mod.normalized_shape) != 1:
            unsupported.append("LayerNorm(over several dimensions)")
        return "layernorm", {"normalized": mod.normalized_shape[-1], "tokens": _prod(in_shape[:-1])}
    if isinstance(mod, TokenPositionalEmbedding):
        return "embedding", {"num_embeddings": mod.tok.num_embeddings, "embedding_dim": mod.tok.embedding_dim,
                             "seq_len": in_shape[-1], "positional": 1}
    if isinstance(mod, nn.Embedding):
        return "embedding", {"num_embeddings": mod.num_embeddings, "embedding_dim": mod.embedding_dim,
                             "seq_len": _prod(in_shape), "positional": 0}
    if isinstance(mod, (LSTMSequence, nn.LSTM)):
        lstm = mod.lstm if isinstance(mod, LSTMSequence) else mod
        if not lstm.batch_first or lstm.bidirectional or lstm.proj_size:
            unsupported.append("LSTM(batch_first=False, bidirectional or projected)")
        return "lstm", {"input_size": lstm.input_size, "hidden_size": lstm.hidden_size,
                        "seq_len": in_shape[0], "num_layers": lstm.num_layers}
    if isinstance(mod, TransformerBlock):
        return "transformer_block", {"d_model": mod.ln1.normalized_shape[0], "n_heads": mod.n_heads,
                                     "head_dim": mod.head_dim, "d_ff": mod.ff1.out_features, "seq_len": in_shape[0]}
    if isinstance(mod, nn.Dropout):
        return "dropout", {"numel": _prod(in_shape), "p": float(mod.p)}
    if isinstance(mod, nn.Flatten):
        return "flatten", {"numel": _prod(in_shape)}
    if isinstance(mod, nn.Identity):
        return None
    simple = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.GELU: "gelu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid"}
    for cls, kind in simple.items():
        if type(mod) is cls:
            return kind, {"numel": _prod(in_shape)}
    unsupported.append(label)
    return None


def _leaf_types():
    from torch import nn

    from thor_sdk.models.blocks import LSTMSequence, TokenPositionalEmbedding, TransformerBlock

    return (LSTMSequence, TokenPositionalEmbedding, TransformerBlock, nn.LSTM)


_FREE_FUNCS = {operator.getitem, getattr}
_FREE_METHODS = {"size", "dim", "contiguous", "clone", "detach", "float", "type_as", "to"}
_RESHAPE_METHODS = {"view", "reshape", "flatten"}
_ELEMENTWISE_METHODS = {"relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid"}


def _function_layer(node, in_shape, out_shape, unsupported):
    import torch
    from torch.nn import functional as F

    t = node.target
    if node.op == "call_method":
        if t in _FREE_METHODS:
            return None
        if t in _RESHAPE_METHODS:
            return "flatten", {"numel": _prod(in_shape)}
        if t in _ELEMENTWISE_METHODS:
            return _ELEMENTWISE_METHODS[t], {"numel": _prod(in_shape)}
        if t in ("add", "add_"):
            return "add", {"numel": _prod(out_shape)}
        if t == "mean" and len(in_shape) == 3 and len(out_shape) <= 3:
            return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2], "out_size": 1}
        unsupported.append(f"Tensor.{t}")
        return None
    if t in _FREE_FUNCS:
        return None
    if t in (operator.add, operator.iadd, torch.add):
        return "add", {"numel": _prod(out_shape)}
    if t in (torch.flatten, torch.reshape):
        return "flatten", {"numel": _prod(in_shape)}
    table = {F.relu: "relu", torch.relu: "relu", F.relu6: "relu6", F.gelu: "gelu", torch.tanh: "tanh",
             torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", F.tanh: "tanh"}
    if t in table:
        return table[t], {"numel": _prod(in_shape)}
    if t is F.dropout:
        p = node.kwargs.get("p", node.args[1] if len(node.args) > 1 else 0.5)
        return "dropout", {"numel": _prod(in_shape), "p": float(p)}
    if t is F.adaptive_avg_pool2d:
        size = node.args[1] if len(node.args) > 1 else node.kwargs["output_size"]
        return "adaptive_avgpool2d", {"channels": in_shape[0], "height": in_shape[1], "width": in_shape[2],
                                      "out_size": int(size if isinstance(size, int) else size[0])}
    # __name__ first: torch.cat, not torch._VariableFunctionsClass.cat
    name = getattr(t, "__name__", None) or getattr(t, "__qualname__", None) or str(t)
    module = getattr(t, "__module__", "") or ""
    unsupported.append(f"{module + '.' if module and module != 'builtins' else ''}{name}")
    return None


def layers_from_module(module, input_shape, input_dtype="float32", vocab=None, source="model"):
    """The ordered layer list of ``module`` for inputs of per-sample ``input_shape``.

    Returns a list of ``{"name", "kind", "role", "config"}``; the last layer is kind ``output``.
    Raises ``UnsupportedOperatorError`` naming every operator without a layer kind.
    """
    import torch
    from torch import fx
    from torch.fx.passes.shape_prop import ShapeProp

    leaves = _leaf_types()

    class _Tracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, leaves) or super().is_leaf_module(m, qualname)

    try:
        graph = _Tracer().trace(module)
    except Exception as e:  # fx raises many types for untraceable Python control flow
        raise ModelError(
            f"could not trace {source} with torch.fx ({type(e).__name__}: {e}); "
            "describe it as a layer-list JSON instead (see docs/layer-list.md)"
        ) from e
    gm = fx.GraphModule(module, graph)
    if input_dtype == "int64":
        example = torch.randint(0, max(int(vocab or 2), 2), (2, *input_shape))
    else:
        example = torch.randn(2, *input_shape)
    was_training = module.training
    gm.eval()
    try:
        # ShapeProp prints the traceback of a failing node itself; keep it off the user's terminal
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            ShapeProp(gm).propagate(example)
    except Exception as e:
        cause = e.__cause__ or e  # ShapeProp wraps the model's own error in a RuntimeError naming the node
        lines = str(cause).strip().splitlines() or [""]
        raise ModelError(f"{source} does not run on inputs of shape {list(input_shape)} "
                         f"({type(cause).__name__}: {lines[0]})") from e
    finally:
        module.train(was_training)

    def shape_of(n):
        meta = n.meta.get("tensor_meta") if isinstance(n, fx.Node) else None
        if meta is None or not hasattr(meta, "shape"):
            return None
        return tuple(int(s) for s in meta.shape[1:])

    layers, unsupported = [], []
    needs_grad = {}  # node -> whether its value requires grad in training
    for node in gm.graph.nodes:
        arg_nodes = [a for a in node.all_input_nodes]
        upstream = any(needs_grad.get(a, False) for a in arg_nodes)
        if node.op in ("placeholder", "output"):
            needs_grad[node] = False
            continue
        if node.op == "get_attr":
            needs_grad[node] = True
            continue
        tensor_args = [a for a in arg_nodes if shape_of(a) is not None]
        in_shape = shape_of(tensor_args[0]) if tensor_args else None
        out_shape = shape_of(node)
        if node.op == "call_module":
            mod = gm.get_submodule(node.target)
            got = _module_layer(mod, in_shape, out_shape, unsupported)
            has_params = any(p.requires_grad for p in mod.parameters())
        else:
            got = _function_layer(node, in_shape or (), out_shape or (), unsupported)
            has_params = False
        needs_grad[node] = upstream or has_params
        if got is None:
            continue
        kind, config = got
        layers.append({"name": str(node.target) if node.op == "call_module" else node.name,
                       "kind": kind, "role": "hidden" if upstream else "input", "config": config})
    if unsupported:
        raise UnsupportedOperatorError(unsupported, source)
    return finish_layers(layers, source)


def finish_layers(layers, source="model"):
    """Drop trailing reshapes and turn the final Linear into the ``output`` head."""
    while layers and layers[-1]["kind"] == "flatten":
        layers.pop()
    if not layers or layers[-1]["kind"] not in ("linear", "output"):
        last = layers[-1]["kind"] if layers else "nothing"
        raise ModelError(f"{source} ends in {last}; THOR needs the last layer to be a Linear (the output head "
                         "that the loss is computed on)")
    for layer in layers:
        get_kind(layer["kind"]).check_config(layer["config"])
    last = layers[-1]
    if last["kind"] == "linear":
        c = last["config"]
        last = dict(last, kind="output", role="output",
                    config={"in_features": c["in_features"], "out_features": c["out_features"], "tokens": c["tokens"]})
        layers = layers[:-1] + [last]
    return layers
