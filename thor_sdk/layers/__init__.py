"""Model -> ordered list of THOR layers.

A model can be given as a reference-network name (``lenet5``), a Python class (``my_net.py:Net``),
an ONNX file (``model.onnx``), a layer-list JSON (``layers.json``, schema in
``thor_sdk/schemas/layers.schema.json``), or a ``torch.nn.Module`` instance.
"""

import os
from dataclasses import dataclass

from thor_sdk.errors import FormatError, NotFoundError, UsageError

LAYERS_FORMAT = "thor-sdk/layers"
LAYERS_VERSION = 1


@dataclass
class ModelLayers:
    """A model's layer list plus what its input looks like (per sample)."""

    name: str
    input_shape: list
    input_dtype: str
    layers: list  # [{"name", "kind", "role", "config"}]

    def to_dict(self):
        """The layer-list document; every layer carries its ``cost`` terms (training FLOPs and bytes per
        sample and per step), which the Java and Swift estimator runtimes read."""
        from thor_sdk.runtime.terms import cost_terms

        layers = [dict(l, cost=cost_terms(l["kind"], l["config"], l.get("role", "hidden"))) for l in self.layers]
        return {"format": LAYERS_FORMAT, "version": LAYERS_VERSION, "name": self.name,
                "input_shape": list(self.input_shape), "input_dtype": self.input_dtype, "layers": layers}


#: bounds of a per-sample input shape: dimensions, and elements per sample (as a layer's, MAX_NUMEL)
MAX_INPUT_DIMS = 8
#: bound of a layer's given cost terms (training FLOPs or bytes per sample or fixed), and of its launches
MAX_COST_TERM = 1e18
MAX_LAUNCHES = 1e9


def check_input_shape(shape, given=None):
    """``shape`` as a list of positive integers, at most MAX_INPUT_DIMS of them and at most MAX_NUMEL
    elements in all; UsageError naming ``given`` (what the user wrote) otherwise."""
    from .kinds import MAX_NUMEL

    given = shape if given is None else given
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise UsageError(f"input shape must be a list of positive integers, got {given!r}")
    shape = list(shape)
    if not shape or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in shape):
        raise UsageError(f"input shape must be positive integers, got {given!r}")
    if len(shape) > MAX_INPUT_DIMS:
        raise UsageError(f"input shape has {len(shape)} dimensions; at most {MAX_INPUT_DIMS}, got {given!r}")
    numel = 1
    for s in shape:
        numel *= s
    if numel > MAX_NUMEL:
        raise UsageError(f"input shape {given!r} is {numel:g} elements per sample; at most {MAX_NUMEL:g}")
    return shape


def parse_input_shape(text):
    parts = str(text).replace("x", ",").split(",")
    if any(not s.strip() for s in parts[:-1]) or any(len(s.strip()) > 12 for s in parts):
        raise UsageError(f"input shape must be comma-separated integers, got {text!r}")
    try:
        shape = [int(s) for s in parts if s.strip()]
    except ValueError:
        raise UsageError(f"input shape must be comma-separated integers, got {text!r}") from None
    return check_input_shape(shape, text)


def load_module_from_file(ref):
    """``path/to/file.py:ClassName`` -> an instance built with no arguments. This RUNS the file's code
    (as ``python file.py`` would): see ``user_code``."""
    from .user_code import load_module_from_file as load

    return load(ref)


def layers_of(model, input_shape=None, input_dtype=None, vocab=None, unknown_ops="error", trainable=None):
    """The ``ModelLayers`` of a model given in any of the supported forms.

    ``unknown_ops``: ``"error"`` (default) refuses operators without a layer kind, naming them all;
    ``"approx"`` turns elementwise and reshaping ones into layers of the generic ``elementwise`` kind,
    marked ``"approx"`` (estimates widen their uncertainty for them). A registered net whose spec declares
    ``unknown_ops="stand-ins"`` (a zoo ViT calling ``F.scaled_dot_product_attention``) is extracted with its
    stand-ins under ``"error"`` too.

    ``trainable``: parameter name patterns (``thor_sdk.layers.trainable``): only the parameters they match
    train, the rest are frozen (a fine-tune), whatever the model's own ``requires_grad`` says; None: as the
    model says. A layer list carries its frozen layers itself (refused with patterns); a ``torch.nn.Module``
    given is copied, never changed."""
    from thor_sdk import models

    from .trainable import apply_trainable, check_patterns

    trainable = check_patterns(trainable)  # before any file is read or code run
    if isinstance(model, str):
        if model in models.SPECS:
            spec = models.model_spec(model)
            from .extract import layers_from_module

            mode = spec.unknown_ops if unknown_ops == "error" else unknown_ops
            module = models.build_model(model)
            apply_trainable(module, trainable, model)
            layers = layers_from_module(module, spec.input_shape, spec.input_dtype,
                                        spec.vocab, source=model, unknown_ops=mode)
            return ModelLayers(model, list(spec.input_shape), spec.input_dtype, layers)
        if model.endswith(".json"):
            if trainable:
                raise UsageError(f"{model}: a layer list marks its frozen layers itself (\"frozen\": 1 in a layer's "
                                 "config); --trainable is for models with named parameters")
            return read_layer_list(model)
        if model.endswith(".onnx"):
            from .onnx_import import layers_from_onnx

            shape = parse_input_shape(input_shape) if isinstance(input_shape, str) else input_shape
            return layers_from_onnx(model, input_shape=shape, unknown_ops=unknown_ops, trainable=trainable)
        if ".py:" in model:
            if input_shape is None:
                raise UsageError(f"{model}: give the per-sample input shape (--input-shape, e.g. 3,32,32)")
            # checked before the file's code runs or torch is imported
            shape = parse_input_shape(input_shape) if isinstance(input_shape, str) else check_input_shape(input_shape)
            module = load_module_from_file(model)
            apply_trainable(module, trainable, model)
            from .extract import input_dtype_of, layers_from_module
            from .user_code import running_user_code

            with running_user_code(f"could not trace {model}"):  # its forward is the user's code too
                dtype = input_dtype or input_dtype_of(module, shape)  # a text model's token ids without being told
                layers = layers_from_module(module, shape, dtype, vocab, source=model, unknown_ops=unknown_ops)
            return ModelLayers(model, shape, dtype, layers)
        raise NotFoundError(
            f"unknown model {model!r}: not a reference network ({', '.join(models.SPECS)}), "
            "a .json layer list, a .onnx file or a file.py:Class"
        )
    # a torch.nn.Module instance
    if input_shape is None:
        raise UsageError("give input_shape (per sample) with a torch.nn.Module")
    from .extract import input_dtype_of, layers_from_module

    shape = list(input_shape)
    if trainable:
        import copy

        model = copy.deepcopy(model)  # the caller's module keeps its own requires_grad
        apply_trainable(model, trainable, type(model).__name__)
    dtype = input_dtype or input_dtype_of(model, shape)
    return ModelLayers(type(model).__name__, shape, dtype,
                       layers_from_module(model, shape, dtype, vocab, unknown_ops=unknown_ops))


def target_layers(model, input_shape=None, unknown_ops="error", trainable=None):
    """A campaign target's ``ModelLayers`` (``probe``, ``profile --model``, ``bundle --model``): ``model`` split into
    layers, a fine-tune (``trainable``) named as one (``trainable.label``: ``net [trainable fc]``), so a campaign holds
    a net and its fine-tunes apart; a ``ModelLayers`` given is taken as it is."""
    from .trainable import label

    if isinstance(model, ModelLayers):
        return model
    ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops, trainable=trainable)
    return ModelLayers(label(ml.name, trainable), ml.input_shape, ml.input_dtype, ml.layers) if trainable else ml


def schema_error(e, what):
    """One short line for a jsonschema ``ValidationError`` (``thor_sdk.store.files.schema_error``, where JSON
    Schema validation lives: ``validate_schema``)."""
    from thor_sdk.store.files import schema_error as one_line

    return one_line(e, what)


def read_json(path, what):
    """A JSON file read strictly (``thor_sdk.store.files.read_json``): FormatError naming it when malformed."""
    from thor_sdk.store.files import read_json as read

    return read(path, what)


def _check_cost(cost, where):
    """A layer's given cost terms: finite, >= 0 and at most MAX_COST_TERM (launches: above 0, at most MAX_LAUNCHES;
    a forward-only convolution's is a quarter, ``runtime.terms.FORWARD_ONLY_SHARED``)."""
    from thor_sdk.runtime.terms import TERM_KEYS

    for key in TERM_KEYS:
        v = cost.get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= MAX_COST_TERM:
            raise FormatError(f"{where}: cost.{key} must be a number in [0, {MAX_COST_TERM:g}], got {v!r}")
    n = cost.get("launches", 1)
    if not isinstance(n, (int, float)) or isinstance(n, bool) or not 0 < n <= MAX_LAUNCHES:
        raise FormatError(f"{where}: cost.launches must be a number in (0, {MAX_LAUNCHES:g}], got {n!r}")


def read_layer_list(path):
    from .extract import finish_layers
    from .kinds import ROLES

    from thor_sdk.runtime.estimator import MAX_LAYERS
    from thor_sdk.store.files import validate_schema

    doc = read_json(path, "layer list")
    validate_schema(doc, "layers.schema.json", f"layer list {path}")
    if len(doc["layers"]) > MAX_LAYERS:
        raise FormatError(f"layer list {path} has {len(doc['layers'])} layers; at most {MAX_LAYERS} are read")
    layers, upstream = [], False
    last = len(doc["layers"]) - 1
    for i, layer in enumerate(doc["layers"]):
        from .kinds import get_kind

        kind = get_kind(layer["kind"])
        role = layer.get("role") or ("output" if kind.name == "output" else "hidden" if upstream else "input")
        if role not in ROLES + ("output",):
            raise FormatError(f"{path}: layer {i} has unknown role {role!r}")
        if (role == "output" or kind.name == "output") and i != last:
            raise FormatError(f"{path}: layer {i} is an output head (kind/role 'output') but not the last layer")
        if role not in kind.roles and not (role == "output" and kind.name == "linear"):
            raise FormatError(f"{path}: layer {i} of kind {kind.name!r} cannot have role {role!r} "
                              f"(its roles: {', '.join(kind.roles)})")
        upstream = upstream or kind.trains(layer["config"])
        entry = {"name": layer.get("name", str(i)), "kind": layer["kind"], "role": role,
                 "config": dict(layer["config"])}
        if "cost" in layer:  # recomputed from the config here, but read as given by the Java and Swift runtimes
            _check_cost(layer["cost"], f"{path}: layer {i}")
        for key in ("op", "approx", "recompute"):  # what the layer came from, why it is approximated (non-empty
            if key in layer:  # strings: schema), the share of its step recomputed (a number in [0, 1]: schema)
                entry[key] = layer[key]
        layers.append(entry)
    shape = doc.get("input_shape")
    if shape:  # absent or empty: unknown
        try:
            check_input_shape(shape)
        except UsageError as e:
            raise FormatError(f"{path}: {e}") from None
    return ModelLayers(doc.get("name", os.path.basename(path)), doc.get("input_shape", []),
                       doc.get("input_dtype", "float32"), finish_layers(layers, path))


def approximation_warnings(approximated, where=""):
    """One warning line each for an estimate's approximated layers (``approximated``: the runtime's list):
    layers setting a feature their kind's model predates (``unread_feature``: a dilation read by an estimator fitted
    before it was a feature), stand-ins (a kind the estimator has, standing in for an operator without one of its
    own: nothing to probe), layers run under ``torch.utils.checkpoint`` (``recompute``) and the rest (the generic
    elementwise kind, or a kind the estimator lacks: probing it would help).
    ``where``: what the layers are approximated in (" in the time estimate")."""
    from .trace import RECOMPUTE_REASON

    unread = [a for a in approximated if a.get("unread_feature")]
    recomputed = [a for a in approximated if a.get("recompute")]
    others = [a for a in approximated if not str(a.get("reason", "")).startswith(RECOMPUTE_REASON)]
    stand_ins = [a for a in others if a["kind"] != "elementwise" and not a.get("missing_kind") and a not in unread]
    generic = [a for a in others if a not in stand_ins and a not in unread]
    out = []
    if recomputed:
        out.append(f"{len(recomputed)} layer(s){where} run under torch.utils.checkpoint: the forward they run again in "
                   "backward is added as its FLOPs' share of their step, their std widened (docs/layer-list.md, "
                   "activation checkpointing)")
    if unread:
        kinds = ", ".join(sorted({a["kind"] for a in unread}))
        out.append(f"{len(unread)} layer(s){where} set a feature their kind's model was fitted without ({kinds}: "
                   "e.g. a dilation, before it was a feature): estimated at its default, their std widened; refit "
                   "the campaign with this thor-sdk, or profile such layers, for their own cost")
    if stand_ins:
        ops = ", ".join(sorted({a.get("op") or a["kind"] for a in stand_ins}))
        out.append(f"{len(stand_ins)} layer(s){where} stand in for operators without a kind of their own ({ops}): "
                   "estimated through kinds of the same sizes and FLOPs, their std widened "
                   "(docs/layer-list.md, stand-ins)")
    if generic:
        ops = ", ".join(sorted({a.get("op") or a["kind"] for a in generic}))
        out.append(f"{len(generic)} layer(s) approximated{where} ({ops}): their std is wide; probe their kinds "
                   "for a real estimate")
    return out

