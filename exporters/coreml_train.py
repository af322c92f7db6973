"""Updatable Core ML (NeuralNetwork) models: on-device training with Core ML's ``MLUpdateTask``.

Core ML's update engine is narrow, and this exporter says exactly what it can and cannot train:

- only **convolution** and **inner-product** layers can be updatable;
- the gradient reaches an updatable layer only through layers Core ML can back-propagate:
  convolution, inner product, flatten, pooling, batchnorm, reshape and ReLU/sigmoid/tanh
  activations (Core ML's ``UpdatableNeuralNetworkValidator``). A residual ``add`` or a ReLU6
  (``clip``) between a layer and the loss freezes that layer and everything before it;
- batch norm runs with its running statistics and is never updated;
- Core ML neural networks have no dropout layer: dropout is removed from the exported model;
- categorical cross-entropy takes a softmax's output, so a softmax is appended to the logits
  (``probs``); the label input is ``probs_true`` (one class index per sample);
- embeddings, LSTMs and attention blocks are not converted: such models are refused with an
  error naming the layers.

The network is converted layer by layer from a ``torch.fx`` trace (layer names are the torch
module names), weights copied as float32. ``export_coreml`` returns which layers are updatable and
which stay frozen, and why. Prediction and updates cannot run off macOS/iOS, so here the spec is
only validated structurally (``validate_updatable``: reload, ``isUpdatable``, updatable weights,
loss, optimizer, epochs).
"""

import contextlib
import io
import os

from thor_sdk.errors import ExportError, UsageError

from .onnx_train import ADAM_BETAS, ADAM_EPS

_BACKPROP_LAYERS = ("convolution", "innerProduct", "flatten", "pooling", "batchnorm", "reshape")
_BACKPROP_ACTIVATIONS = ("ReLU", "sigmoid", "tanh")
_NOT_CONVERTED = ("Embedding", "LSTM", "GRU", "RNN", "LSTMSequence", "TokenPositionalEmbedding", "TransformerBlock",
                  "MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder", "LayerNorm", "LSTMCell",
                  "GRUCell", "RNNCell", "LSTMCellLoop", "GRUCellLoop")


def _tracer():
    import torch.fx

    class LeafTracer(torch.fx.Tracer):
        def is_leaf_module(self, m, qualname):
            if type(m).__name__ in _NOT_CONVERTED:
                return True
            return super().is_leaf_module(m, qualname)

    return LeafTracer()


@contextlib.contextmanager
def _quiet_coremltools():
    """coremltools warns on import (no native libraries off macOS, an untested torch or scikit-learn
    version): not about this export. Logger level and warning filters are restored afterwards."""
    import logging
    import warnings

    logger = logging.getLogger("coremltools")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def export_coreml(module, input_shape, num_classes, path, *, optimizer="sgd", lr=0.01, batch_size=32, epochs=1,
                  loss="ce"):
    """Convert ``module`` (per-sample ``input_shape``, ``num_classes`` logits) to an updatable Core ML
    NeuralNetwork at ``path`` (``.mlmodel``).

    Returns ``{"updatable": [layer names], "frozen": [{"layer", "type", "reason"}], "removed":
    [{"layer", "type", "reason"}], "loss", "optimizer", ...}``.
    """
    if optimizer not in ("sgd", "adam"):
        raise UsageError(f"unknown optimizer {optimizer!r} (known: sgd, adam)")
    if loss not in ("ce", "mse"):
        raise UsageError(f"unknown loss {loss!r} (known: ce, mse)")
    if batch_size < 1:
        raise UsageError(f"batch size must be >= 1, got {batch_size}")
    was_training = module.training
    module.eval()
    try:
        with _quiet_coremltools():
            return _export(module, input_shape, num_classes, path, optimizer, lr, batch_size, epochs, loss)
    finally:
        module.train(was_training)


def _export(module, input_shape, num_classes, path, optimizer, lr, batch_size, epochs, loss):
    from coremltools.models import datatypes
    from coremltools.models.neural_network import AdamParams, NeuralNetworkBuilder, SgdParams
    from coremltools.models.utils import save_spec
    from torch.nn import functional as F

    try:
        graph = _tracer().trace(module)
    except Exception as e:  # torch.fx raises TraceError, TypeError, ... on dynamic Python
        raise ExportError(f"Core ML export: cannot trace the model with torch.fx ({type(e).__name__}: "
                          f"{str(e).strip().splitlines()[0] if str(e).strip() else e})") from e
    modules = dict(module.named_modules())
    blocked = [(n.target, type(modules[n.target]).__name__) for n in graph.nodes
               if n.op == "call_module" and type(modules[n.target]).__name__ in _NOT_CONVERTED]
    blocked += [(n.name, "F.scaled_dot_product_attention") for n in graph.nodes
                if n.op == "call_function" and n.target is F.scaled_dot_product_attention]
    if blocked:
        names = ", ".join(f"{t} ({k})" for t, k in blocked)
        raise ExportError(f"Core ML export: the model has layers thor-sdk does not convert to an updatable Core ML "
                          f"model: {names}. Core ML updates only convolution and inner-product layers, and cannot "
                          "back-propagate through embeddings, recurrent or attention layers; export this model as "
                          "ONNX or TorchScript instead")

    in_shape = tuple(int(s) for s in input_shape)
    builder = NeuralNetworkBuilder([("input", datatypes.Array(*in_shape))], [("probs", datatypes.Array(num_classes))]
                                   if loss == "ce" else [("logits", datatypes.Array(num_classes))],
                                   disable_rank5_shape_mapping=False)
    conv = _Converter(builder, modules)
    blob = {}
    for n in graph.nodes:
        if n.op == "placeholder":
            blob[n] = "input"
        elif n.op == "output":
            out = n.args[0]
            blob_out = blob[out]
        else:
            blob[n] = conv.node(n, blob)
    final = "logits" if loss == "mse" else "logits_"
    conv.rename_output(blob_out, final)
    if loss == "ce":
        builder.add_softmax("softmax", final, "probs")
        conv.register("softmax", "softmax", [final], "probs")
    # which conv/inner-product layers Core ML can update (replays the validator's graph walk)
    updatable, frozen = conv.updatable_layers("probs" if loss == "ce" else final)
    if not updatable:
        raise ExportError("Core ML export: no convolution or inner-product layer can be updated (every one is "
                          "behind a layer Core ML cannot back-propagate through)")
    builder.make_updatable(updatable)
    with contextlib.redirect_stdout(io.StringIO()):  # coremltools print()s a note about the label input
        if loss == "ce":
            builder.set_categorical_cross_entropy_loss(name="loss", input="probs")
        else:
            builder.set_mean_squared_error_loss(name="loss", input_feature=("logits", datatypes.Array(num_classes)))
    if optimizer == "sgd":
        builder.set_sgd_optimizer(SgdParams(lr=float(lr), batch=int(batch_size)))
    else:
        builder.set_adam_optimizer(AdamParams(lr=float(lr), batch=int(batch_size), beta1=ADAM_BETAS[0],
                                              beta2=ADAM_BETAS[1], eps=ADAM_EPS))
    builder.set_epochs(int(epochs))
    spec = builder.spec
    spec.description.metadata.shortDescription = "updatable training model written by thor-sdk export"
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    from thor_sdk.store.files import atomic_output

    with atomic_output(path, "Core ML model", suffix=".mlmodel") as tmp:
        save_spec(spec, tmp)
    return {"format": "coreml-neuralnetwork", "updatable": updatable, "frozen": frozen, "removed": conv.removed,
            "loss": "categorical_cross_entropy" if loss == "ce" else "mean_squared_error",
            "loss_input": "probs" if loss == "ce" else "logits",
            "label_input": "probs_true" if loss == "ce" else "logits_true",
            "optimizer": optimizer, "lr": float(lr), "batch_size": int(batch_size), "epochs": int(epochs),
            "specification_version": int(spec.specificationVersion)}


class _Converter:
    """torch.fx node -> NeuralNetworkBuilder layer (rank-5 blobs: [C, H, W] per sample)."""

    def __init__(self, builder, modules):
        self.b = builder
        self.modules = modules
        self.types = {}  # layer name -> (NN layer type, activation or None)
        self.inputs = {}  # layer name -> input blob names
        self.outputs = {}  # blob -> producing layer
        self.removed = []
        self.alias = {}

    def _name(self, n):
        return str(n.target) if n.op == "call_module" else n.name

    def register(self, name, kind, inputs, out, act=None):
        return self._add(name, kind, inputs, out, act)

    def _add(self, name, kind, inputs, out, act=None):
        self.types[name] = (kind, act)
        self.inputs[name] = list(inputs)
        self.outputs[out] = name
        return out

    def rename_output(self, blob, new):
        """Point the layer producing ``blob`` at ``new`` (the graph's final logits blob)."""
        layer = self.outputs[blob]
        for spec_layer in self.b.nn_spec.layers:
            if spec_layer.name == layer:
                spec_layer.output[:] = [new]
        for name, ins in self.inputs.items():
            self.inputs[name] = [new if i == blob else i for i in ins]
        self.outputs[new] = self.outputs.pop(blob)

    def node(self, n, blob):
        import operator

        import torch
        from torch import nn

        name = self._name(n)
        out = name
        if n.op == "call_module":
            m = self.modules[n.target]
            src = blob[n.args[0]]
            if isinstance(m, nn.Conv2d):
                if m.padding_mode != "zeros" or isinstance(m.padding, str):
                    raise ExportError(f"Core ML export: conv {name} uses padding {m.padding!r}/{m.padding_mode}")
                w = m.weight.detach().float().permute(2, 3, 1, 0).contiguous().numpy()
                b = m.bias.detach().float().numpy() if m.bias is not None else None
                ph, pw = m.padding
                self.b.add_convolution(name, kernel_channels=m.in_channels // m.groups, output_channels=m.out_channels,
                                       height=m.kernel_size[0], width=m.kernel_size[1], stride_height=m.stride[0],
                                       stride_width=m.stride[1], border_mode="valid", groups=m.groups, W=w, b=b,
                                       has_bias=b is not None, input_name=src, output_name=out,
                                       dilation_factors=list(m.dilation), padding_top=ph, padding_bottom=ph,
                                       padding_left=pw, padding_right=pw)
                return self._add(name, "convolution", [src], out)
            if isinstance(m, nn.Linear):
                b = m.bias.detach().float().numpy() if m.bias is not None else None
                self.b.add_inner_product(name, W=m.weight.detach().float().numpy(), b=b,
                                         input_channels=m.in_features, output_channels=m.out_features,
                                         has_bias=b is not None, input_name=src, output_name=out)
                return self._add(name, "innerProduct", [src], out)
            if isinstance(m, (nn.ReLU, nn.Sigmoid, nn.Tanh)):
                act = {nn.ReLU: "RELU", nn.Sigmoid: "SIGMOID", nn.Tanh: "TANH"}[type(m)]
                self.b.add_activation(name, act, src, out)
                return self._add(name, "activation", [src], out, {"RELU": "ReLU", "SIGMOID": "sigmoid",
                                                                   "TANH": "tanh"}[act])
            if isinstance(m, nn.ReLU6):
                self.b.add_clip(name, src, out, 0.0, 6.0)
                return self._add(name, "clip", [src], out)
            if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
                k = _pair(m.kernel_size)
                s = _pair(m.stride or m.kernel_size)
                p = _pair(m.padding)
                if getattr(m, "ceil_mode", False) or _pair(getattr(m, "dilation", 1)) != [1, 1]:
                    raise ExportError(f"Core ML export: pooling {name} uses ceil_mode or dilation")
                self.b.add_pooling(name, height=k[0], width=k[1], stride_height=s[0], stride_width=s[1],
                                   layer_type="MAX" if isinstance(m, nn.MaxPool2d) else "AVERAGE",
                                   padding_type="VALID", input_name=src, output_name=out,
                                   exclude_pad_area=not getattr(m, "count_include_pad", True),
                                   padding_top=p[0], padding_bottom=p[0], padding_left=p[1], padding_right=p[1])
                return self._add(name, "pooling", [src], out)
            if isinstance(m, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
                if _pair(m.output_size) != [1, 1]:
                    raise ExportError(f"Core ML export: {name}: only global adaptive pooling (output 1) converts")
                self.b.add_pooling(name, height=1, width=1, stride_height=1, stride_width=1,
                                   layer_type="AVERAGE" if isinstance(m, nn.AdaptiveAvgPool2d) else "MAX",
                                   padding_type="VALID", input_name=src, output_name=out, is_global=True)
                return self._add(name, "pooling", [src], out)
            if isinstance(m, nn.Flatten) or type(m).__name__ == "Flatten":
                self.b.add_flatten(name, 0, src, out)
                return self._add(name, "flatten", [src], out)
            if isinstance(m, nn.BatchNorm2d):
                self.b.add_batchnorm(name, m.num_features, m.weight.detach().float().numpy(),
                                     m.bias.detach().float().numpy(), m.running_mean.detach().float().numpy(),
                                     m.running_var.detach().float().numpy(), input_name=src, output_name=out,
                                     epsilon=float(m.eps))
                return self._add(name, "batchnorm", [src], out)
            if isinstance(m, nn.Dropout):
                self.removed.append({"layer": name, "type": "Dropout",
                                     "reason": "Core ML neural networks have no dropout layer; updates run without it"})
                return src
            if isinstance(m, (nn.Identity, nn.Sequential)) and not list(m.children()):
                return src
            raise ExportError(f"Core ML export: no Core ML conversion for layer {name} ({type(m).__name__})")
        if n.op == "call_function" and n.target in (operator.add, torch.add) and len(n.args) == 2 \
                and all(hasattr(a, "op") for a in n.args):
            ins = [blob[a] for a in n.args]
            self.b.add_elementwise(name, ins, out, "ADD")
            return self._add(name, "add", ins, out)
        is_flatten = (n.op == "call_function" and n.target is torch.flatten) or \
            (n.op == "call_method" and n.target == "flatten")
        if is_flatten and tuple(n.args[1:]) == (1,) and not n.kwargs:
            src = blob[n.args[0]]
            self.b.add_flatten(name, 0, src, out)
            return self._add(name, "flatten", [src], out)
        what = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        raise ExportError(f"Core ML export: no Core ML conversion for operation {what!r} ({n.name})")

    def updatable_layers(self, loss_input):
        """Replay Core ML's validator: BFS from the loss; conv/inner-product layers found before the
        first layer that cannot back-propagate are updatable; the others are frozen (with why)."""
        producers = dict(self.outputs)
        order, first_blocker, seen = [], None, set()
        queue = [("__loss__", [loss_input])]
        while queue:
            cur, blobs = queue.pop(0)
            for blob in blobs:
                parent = producers.get(blob)
                if parent is None or parent in seen:
                    continue
                seen.add(parent)
                queue.append((parent, self.inputs.get(parent, [])))
                order.append(parent)
                kind, act = self.types[parent]
                if kind == "softmax" and cur == "__loss__":
                    continue  # softmax feeding categorical cross-entropy is allowed
                backprop = kind in _BACKPROP_LAYERS or (kind == "activation" and act in _BACKPROP_ACTIVATIONS)
                if not backprop and first_blocker is None:
                    first_blocker = (parent, kind)
        updatable, frozen = [], []
        blocked = False
        for layer in order:
            if first_blocker is not None and layer == first_blocker[0]:
                blocked = True
            kind, _ = self.types[layer]
            mod = self.modules.get(layer)
            if kind in ("convolution", "innerProduct") and mod is not None \
                    and not any(p.requires_grad for p in mod.parameters()):
                frozen.append({"layer": layer, "type": kind,
                               "reason": "frozen in the model (its parameters' requires_grad is False)"})
            elif kind in ("convolution", "innerProduct"):
                if blocked:
                    frozen.append({"layer": layer, "type": kind,
                                   "reason": f"behind {first_blocker[0]} ({first_blocker[1]}), which Core ML cannot "
                                             "back-propagate through"})
                else:
                    updatable.append(layer)
            elif kind == "batchnorm":
                frozen.append({"layer": layer, "type": kind,
                               "reason": "Core ML updates only convolution and inner-product layers; batch norm "
                                         "runs with its running statistics"})
        return sorted(updatable, key=self._order), sorted(frozen, key=lambda f: self._order(f["layer"]))

    def _order(self, layer):
        return list(self.types).index(layer)


def _pair(v):
    if isinstance(v, (list, tuple)):
        return [int(v[0]), int(v[1] if len(v) > 1 else v[0])]
    return [int(v), int(v)]


def validate_updatable(path):
    """Reload a saved spec and check it is an updatable NeuralNetwork Core ML would accept for
    training; returns a summary dict, ExportError on the first problem. (Structural only: Core ML
    itself, and so prediction and updates, exist only on macOS/iOS.)"""
    try:
        with _quiet_coremltools():
            from coremltools.models.utils import load_spec

            spec = load_spec(os.fspath(path))
    except Exception as e:  # protobuf DecodeError, OSError: not a Core ML model
        raise ExportError(f"{path} is not a Core ML model: {type(e).__name__}") from e
    if not spec.isUpdatable:
        raise ExportError(f"{path}: model is not marked updatable")
    if spec.WhichOneof("Type") != "neuralNetwork":
        raise ExportError(f"{path}: expected a NeuralNetwork model, found {spec.WhichOneof('Type')}")
    nn = spec.neuralNetwork
    updatable = []
    for layer in nn.layers:
        if not layer.isUpdatable:
            continue
        kind = layer.WhichOneof("layer")
        if kind not in ("convolution", "innerProduct"):
            raise ExportError(f"{path}: layer {layer.name} ({kind}) is marked updatable; Core ML updates only "
                              "convolution and inner-product layers")
        typed = getattr(layer, kind)
        if not typed.weights.isUpdatable or (typed.hasBias and not typed.bias.isUpdatable):
            raise ExportError(f"{path}: updatable layer {layer.name} has weights not marked updatable")
        updatable.append(layer.name)
    if not updatable:
        raise ExportError(f"{path}: no updatable layer")
    up = nn.updateParams
    if len(up.lossLayers) != 1:
        raise ExportError(f"{path}: expected one loss layer, found {len(up.lossLayers)}")
    if up.optimizer.WhichOneof("OptimizerType") is None:
        raise ExportError(f"{path}: no optimizer")
    if up.epochs.defaultValue < 1:
        raise ExportError(f"{path}: epochs not set")
    loss = up.lossLayers[0]
    if loss.WhichOneof("LossLayerType") == "categoricalCrossEntropyLossLayer":
        src = loss.categoricalCrossEntropyLossLayer.input
        producers = [l for l in nn.layers if src in l.output]
        if not producers or producers[0].WhichOneof("layer") != "softmax":
            raise ExportError(f"{path}: categorical cross-entropy input {src} is not a softmax output")
    return {"updatable": updatable, "loss": loss.WhichOneof("LossLayerType"),
            "optimizer": up.optimizer.WhichOneof("OptimizerType"), "epochs": int(up.epochs.defaultValue),
            "specification_version": int(spec.specificationVersion),
            "training_inputs": [f.name for f in spec.description.trainingInput]}
