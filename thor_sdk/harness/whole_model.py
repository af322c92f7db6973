"""Any model form `measure` takes -> one network, one random batch and its loss: what a whole-model run trains.

The forms are those ``estimate`` takes (see ``thor_sdk.layers.layers_of``):

- a reference or zoo network name (``lenet5``): built by name, with its own example batch;
- ``path/file.py:Class`` (built with no arguments) or a ``torch.nn.Module`` instance, with a per-sample
  ``input_shape`` (and ``input_dtype`` ``int64`` for token ids, drawn below ``vocab``): the module runs once
  on a random batch; (B, C) logits get random class labels and (B, T, C) logits per-token labels, both
  with cross-entropy; any other output trains with a mean-squared loss against zeros;
- a layer-list JSON or an ONNX file: the network is rebuilt **layer by layer from its kinds**
  (``thor_sdk.layers.build.build_layer``), with a reshape between two layers whose per-sample shapes
  differ but whose element counts agree; the final ``output`` kind is the head (Linear + cross-entropy),
  and a list without one trains with the mean-squared loss.

``resolve_model`` checks a model at the edge (files exist, shapes are positive integers, a layer list
chains) without importing torch; ``build_training`` builds the network and its batch (imports torch).
"""

import copy
import math
import operator
import os
import sys
import dataclasses
from dataclasses import dataclass

from thor_sdk.errors import ModelError, NotFoundError, UsageError

DTYPES = ("float32", "int64")


@dataclass
class ModelSource:
    """A model checked and resolved, nothing built yet.

    ``form``: ``name`` (``ref`` is the network's name), ``file`` (``ref`` is ``path.py:Class``),
    ``layers`` (``ref`` is the ``ModelLayers`` of a layer-list JSON or an ONNX file) or ``module``
    (``ref`` is the ``torch.nn.Module``). ``label`` is the model as the user gave it (a module: its
    class name); ``reshapes[i]`` is the per-sample shape layer ``i`` of a layer list is reshaped to
    before it runs (``None``: it takes the previous layer's output as is). ``input_dtype`` ``None`` (a file or
    module given no dtype): read from the module when it is built, as ``layers_of`` reads it (token ids when
    its input only feeds embedding lookups, else float32). ``trainable``: parameter name patterns
    (``thor_sdk.layers.trainable``), the only parameters that train when the network is built (None: as the
    model says); a layer list or ONNX file carries them as its layers' ``frozen`` marks instead.
    """

    label: str
    form: str
    ref: object
    input_shape: tuple = ()
    input_dtype: str = "float32"
    vocab: int = None
    reshapes: tuple = ()
    trainable: tuple = None

    @property
    def name(self):
        """The reference network's name, or ``None`` for every other form (and for one fine-tuned by
        ``trainable``: it is built here, not by a device that builds networks by name)."""
        return self.ref if self.form == "name" and not self.trainable else None


@dataclass
class Training:
    """A network to train on one fixed batch: ``loss`` is ``ce`` (cross-entropy on class labels) or
    ``mse`` (mean-squared error against zeros)."""

    module: object
    x: object
    y: object
    loss: str

    @property
    def loss_fn(self):
        """``loss_fn(out, y)``: the function itself, looked up once (it runs every training step)."""
        if self.loss == "ce":
            from thor_sdk.probes.torch_build import cross_entropy

            return cross_entropy
        from torch.nn import functional as F

        return F.mse_loss


# ---------------------------------------------------------------------------------------------
# the edge: check and resolve (no torch)
# ---------------------------------------------------------------------------------------------
def _shape(input_shape):
    from thor_sdk.layers import parse_input_shape

    if isinstance(input_shape, str):
        return tuple(parse_input_shape(input_shape))
    try:
        shape = tuple(operator.index(s) for s in input_shape)
    except TypeError:
        shape = ()
    if not shape or any(isinstance(s, bool) for s in input_shape) or any(s <= 0 for s in shape):
        raise UsageError(f"input shape must be positive integers, got {input_shape!r}")
    return shape


def _dtype(input_dtype):
    dtype = input_dtype or "float32"
    if dtype not in DTYPES:
        raise UsageError(f"input dtype must be one of {', '.join(DTYPES)}, got {input_dtype!r}")
    return dtype


def _vocab(vocab, dtype):
    if vocab is None:
        return None
    if dtype != "int64":
        raise UsageError("--vocab applies to int64 (token id) inputs only (--input-dtype int64)")
    if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
        raise UsageError(f"vocab must be an integer >= 1, got {vocab!r}")
    return vocab


def _module_dtype(input_dtype, vocab):
    """``(dtype, vocab)`` of a file or module source, checked: ``dtype`` None when not given (read from the module
    when it is built); a vocabulary goes with token ids, given or not yet read."""
    dtype = _dtype(input_dtype) if input_dtype is not None else None
    return dtype, _vocab(vocab, dtype or "int64")


def _refuse_extras(model, what, input_shape=None, input_dtype=None, vocab=None):
    given = [opt for opt, v in (("input shape", input_shape), ("input dtype", input_dtype), ("vocab", vocab))
             if v is not None]
    if given:
        raise UsageError(f"{model} is {what}, which fixes its own input: {', '.join(given)} applies only to "
                         "file.py:Class models and torch.nn.Module instances")


def _per_sample(shape):
    return tuple(int(round(s)) for s in shape)


def _numel(shape):
    return math.prod(shape)


def chain_reshapes(layers, source="layer list"):
    """Per layer, the per-sample shape its input is reshaped to (``None``: none needed); a ``ModelError``
    naming both layers where one's output cannot feed the next (different element counts)."""
    from thor_sdk.layers.kinds import get_kind

    def label(i, l):
        return f"layer {i} ({l.get('name', i)!s}: {l['kind']})"

    out, prev = [None], None
    for i, layer in enumerate(layers):
        kind = get_kind(layer["kind"])
        shape_in, shape_out = _per_sample(kind.in_shape(layer["config"])), _per_sample(kind.out_shape(layer["config"]))
        if any(s <= 0 for s in shape_in + shape_out):
            raise ModelError(f"{source}: {label(i, layer)} has a per-sample shape with no elements "
                             f"(in {list(shape_in)}, out {list(shape_out)})")
        if prev is not None:
            j, prev_out = prev
            if prev_out == shape_in:
                out.append(None)
            elif _numel(prev_out) == _numel(shape_in):
                out.append(shape_in)
            else:
                raise ModelError(
                    f"{source}: {label(j, layers[j])} outputs {list(prev_out)} per sample ({_numel(prev_out)} "
                    f"elements) but {label(i, layer)} takes {list(shape_in)} ({_numel(shape_in)} elements): "
                    "the two layers do not chain, so the list cannot be built as one network")
        prev = (i, shape_out)
    return tuple(out)


def resolve_model(model, input_shape=None, input_dtype=None, vocab=None, trainable=None):
    """A ``ModelSource`` for ``model`` in any form, checked before any work: unknown names, missing
    files, malformed shapes and layer lists that do not chain fail here. ``trainable``: name patterns of
    the only parameters that train (``thor_sdk.layers.trainable``; checked against the parameters when the
    network is built, an ONNX file's here)."""
    from thor_sdk import models
    from thor_sdk.layers.trainable import check_patterns, label as tuned_label

    trainable = check_patterns(trainable)
    if isinstance(model, ModelSource):
        if trainable and trainable != model.trainable:
            raise UsageError(f"{model.label} is already resolved: give trainable to resolve_model")
        return model
    if isinstance(model, str):
        if model in models.SPECS:
            _refuse_extras(model, "a reference network", input_shape, input_dtype, vocab)
            return ModelSource(tuned_label(model, trainable), "name", model, tuple(models.SPECS[model].input_shape),
                               models.SPECS[model].input_dtype, trainable=trainable)
        if model.endswith(".json") or model.endswith(".onnx"):
            from thor_sdk.layers import layers_of, read_layer_list

            if not os.path.isfile(model):
                raise NotFoundError(f"no such file: {model}")
            if model.endswith(".json"):
                _refuse_extras(model, "a layer list", input_shape, input_dtype, vocab)
                if trainable:
                    raise UsageError(f"{model}: a layer list marks its frozen layers itself (\"frozen\": 1 in a "
                                     "layer's config); --trainable is for models with named parameters")
                ml = read_layer_list(model)  # a list may end in any kind: then it trains with the MSE loss
            else:
                _refuse_extras(model, "an ONNX model", None, input_dtype, vocab)
                ml = layers_of(model, input_shape=None if input_shape is None else list(_shape(input_shape)),
                               trainable=trainable)  # its frozen layers are built frozen
            reshapes = chain_reshapes(ml.layers, model)
            first = ml.layers[0]
            from thor_sdk.layers.kinds import get_kind

            kind = get_kind(first["kind"])
            return ModelSource(tuned_label(model, trainable), "layers", ml, _per_sample(kind.in_shape(first["config"])),
                               kind.input_dtype,
                               reshapes=reshapes)
        if ".py:" in model:
            path, _, cls_name = model.rpartition(":")
            if not os.path.isfile(path):
                raise NotFoundError(f"no such model file: {path}")
            if not cls_name.isidentifier():
                raise UsageError(f"{model}: give the class as path/file.py:ClassName")
            if input_shape is None:
                raise UsageError(f"{model}: give the per-sample input shape (--input-shape, e.g. 3,32,32)")
            return ModelSource(tuned_label(model, trainable), "file", model, _shape(input_shape),
                               *_module_dtype(input_dtype, vocab), trainable=trainable)
        raise NotFoundError(
            f"unknown model {model!r}: not a reference network ({', '.join(models.SPECS)}), "
            "a .json layer list, a .onnx file or a file.py:Class"
        )
    torch = sys.modules.get("torch")  # a torch.nn.Module exists only once torch is imported
    if torch is not None and isinstance(model, torch.nn.Module):
        if input_shape is None:
            raise UsageError("give input_shape (per sample) with a torch.nn.Module")
        return ModelSource(tuned_label(type(model).__name__, trainable), "module", model, _shape(input_shape),
                           *_module_dtype(input_dtype, vocab), trainable=trainable)
    raise UsageError(f"cannot measure an object of type {type(model).__name__}: give a model name, file.py:Class, "
                     "a .json layer list, a .onnx file or a torch.nn.Module")


# ---------------------------------------------------------------------------------------------
# building (torch)
# ---------------------------------------------------------------------------------------------
def network_of_layers(source):
    """The ``nn.Sequential`` of a layer list's kinds, reshapes inserted where ``resolve_model`` found them."""
    from torch import nn

    from thor_sdk.layers.build import Reshape, build_layer
    from thor_sdk.probes.torch_build import Head

    mods = []
    for layer, reshape in zip(source.ref.layers, source.reshapes):
        if reshape is not None:
            mods.append(Reshape(reshape))
        c = layer["config"]
        try:
            mods.append(Head(c["in_features"], c["out_features"], c["tokens"]) if layer["kind"] == "output"
                        else build_layer(layer["kind"], c))
        except (ValueError, RuntimeError, TypeError) as e:
            raise ModelError(f"{source.label}: layer {layer.get('name')} ({layer['kind']}) cannot be built from "
                             f"{c}: {e}") from e
    return nn.Sequential(*mods)


def _vocab_of(module, source):
    from torch import nn

    if source.vocab:
        return source.vocab
    emb = next((m for m in module.modules() if isinstance(m, nn.Embedding)), None)
    if emb is None:
        raise UsageError(f"{source.label}: int64 inputs need the vocabulary size (--vocab N): the module has "
                         "no nn.Embedding to read it from")
    return int(emb.num_embeddings)


def _labels_for_output(module, x, source, g):
    """Run ``module`` once (eval mode, no grad) and pick labels and loss from its output's shape."""
    import torch

    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            out = module(x)
    except Exception as e:  # the user's own forward: any error means it cannot take this batch
        raise ModelError(f"{source.label} fails on a batch of shape {list(x.shape)} ({x.dtype}): "
                         f"{type(e).__name__}: {e}") from e
    finally:
        module.train(was_training)
    key = None
    if isinstance(out, (tuple, list, dict)):  # (logits, features), (logits, None), {"logits": ...}: the first
        items = list(out.items()) if isinstance(out, dict) else list(enumerate(out))
        key, out = next(((k, v) for k, v in items if isinstance(v, torch.Tensor) and v.is_floating_point()),
                        (None, out))
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        what = out.dtype if isinstance(out, torch.Tensor) else type(out).__name__
        raise ModelError(f"{source.label} returns {what}: measure trains on one floating-point output tensor (a "
                         "tensor, or the first of a tuple, list or dict)")
    b = x.shape[0]
    if out.dim() in (2, 3) and out.shape[0] == b:
        return torch.randint(0, int(out.shape[-1]), tuple(out.shape[:-1]), generator=g), "ce", key
    return torch.zeros_like(out), "mse", key


def _output_of(module, key):
    """``module`` trained on its output's element ``key`` (an index or a dict key: its first floating-point
    tensor), the module itself where its output is that tensor (``key`` None)."""
    if key is None:
        return module
    from torch import nn

    class FirstOutput(nn.Module):
        """The first floating-point tensor of the wrapped model's tuple, list or dict output."""

        def __init__(self, inner, at):
            super().__init__()
            self.inner, self.at = inner, at

        def forward(self, x):
            return self.inner(x)[self.at]

    return FirstOutput(module, key)


def build_training(source, batch_size, seed=0):
    """A freshly built network (seeded) for ``source`` with one random batch of ``batch_size`` and its loss."""
    import torch

    from thor_sdk.layers.trainable import apply_trainable
    from thor_sdk.models import build_model, example_batch

    source = resolve_model(source)
    b = int(batch_size)
    if b < 1:
        raise UsageError(f"batch size must be >= 1, got {batch_size}")
    if source.form == "name":
        x, y = example_batch(source.ref, b, seed)
        module = build_model(source.ref, seed)
        apply_trainable(module, source.trainable, source.label)
        return Training(module, x, y, "ce")
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    if source.form == "layers":
        from thor_sdk.layers.build import example_input
        from thor_sdk.layers.kinds import get_kind

        layers = source.ref.layers
        module = network_of_layers(source)
        x = example_input(get_kind(layers[0]["kind"]), layers[0]["config"], b, generator=g)
        last = layers[-1]
        if last["kind"] == "output":
            c = last["config"]
            tokens = int(round(c["tokens"]))
            y = torch.randint(0, int(round(c["out_features"])), (b, tokens) if tokens > 1 else (b,), generator=g)
            return Training(module, x, y, "ce")
        with torch.no_grad():
            y = torch.zeros_like(module.eval()(x))
        return Training(module.train(), x, y, "mse")
    if source.form == "file":
        from thor_sdk.layers import load_module_from_file

        module = load_module_from_file(source.ref)
    else:
        module = copy.deepcopy(source.ref)  # training it must not change the caller's module
    apply_trainable(module, source.trainable, source.label)
    shape = (b, *source.input_shape)
    if source.input_dtype is None:
        from thor_sdk.layers.extract import input_dtype_of

        source = dataclasses.replace(source, input_dtype=input_dtype_of(module, source.input_shape))
    if source.input_dtype == "int64":
        x = torch.randint(0, _vocab_of(module, source), shape, generator=g)
    else:
        x = torch.randn(shape, generator=g)
    y, loss, key = _labels_for_output(module, x, source, g)
    return Training(_output_of(module, key).train(), x, y, loss)


__all__ = ["ModelSource", "Training", "resolve_model", "build_training", "chain_reshapes", "network_of_layers"]
