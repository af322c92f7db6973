"""Width groups of a layer list: which layers' units can be cut, and the list with one layer's width cut.

A *group* is a **producer** (a ``conv2d``/``conv1d`` with ``groups == 1`` or a ``conv_transpose2d``: its
``out_channels``; a hidden ``linear``: its ``out_features``) together with every layer its units flow into up to
and including the next layer with weights, the **consumer**:

- followers between them keep one value per unit: elementwise kinds (``relu``, ``dropout``, ``flatten``, ...:
  ``numel`` scales with the units), per-channel kinds (``maxpool2d``, ``avgpool2d``, adaptive average and max pools,
  ``batchnorm2d``/``batchnorm1d``, ``maxpool1d``, ``upsample``, ``upsample_bilinear``: ``channels``) and, after a
  ``linear``, ``layernorm`` (``normalized``);
- the consumer takes the units as its input: a ``conv2d``/``conv1d`` with ``groups == 1`` or a
  ``conv_transpose2d`` (``in_channels``),
  a ``linear`` or the ``output`` head (``in_features``, scaled when a flatten put the spatial positions
  into it), an ``lstm``/``gru`` (``input_size``).

Any other layer on the way (``add``, ``sub``, ``cat``, ``mul``: a residual or a branch whose other side the layer
list does not show; ``softmax``, ``permute``, depthwise convolutions, transformer blocks) ends the
group: its producer is left as it is. The model's input (the first layer's input) and its output (the
last layer's output: the head's classes, or a final layer's units) are never changed: a producer needs
a consumer after it. Plain data, no torch.
"""

from thor_sdk.errors import ModelError, UsageError

#: producer kind -> the feature holding its units
PRODUCERS = {"conv2d": "out_channels", "conv1d": "out_channels", "conv_transpose2d": "out_channels",
             "linear": "out_features"}
#: follower kinds whose ``numel`` holds every unit's values
NUMEL_KINDS = ("relu", "relu6", "gelu", "tanh", "sigmoid", "dropout", "flatten", "hardswish", "hardsigmoid", "silu",
               "leaky_relu", "elu", "elementwise")
#: follower kinds with one channel per unit
CHANNEL_KINDS = ("maxpool2d", "avgpool2d", "adaptive_avgpool2d", "adaptive_maxpool2d", "batchnorm2d", "batchnorm1d", "maxpool1d",
                 "adaptive_avgpool1d", "upsample", "upsample_bilinear")
#: kinds whose input channels are a consumer's units (without groups, or with ``groups == 1``)
CONV_KINDS = ("conv2d", "conv1d", "conv_transpose2d")


def units_of(layer):
    """The units (channels or features) of a producer layer."""
    return int(round(layer["config"][PRODUCERS[layer["kind"]]]))


def _is_producer(layer):
    kind = layer["kind"]
    if kind not in PRODUCERS or layer.get("role") == "output":
        return False
    return kind == "linear" or int(round(layer["config"].get("groups", 1))) == 1


def _follow(layer, producer_kind, old):
    """``"follower"``, ``"consumer"`` or ``None`` (the group ends here: the producer cannot be cut)."""
    kind, c = layer["kind"], layer["config"]
    if kind in NUMEL_KINDS:
        return "follower" if c["numel"] % old == 0 else None
    if kind in CHANNEL_KINDS:
        return "follower" if c["channels"] == old else None
    if kind == "layernorm":
        return "follower" if producer_kind == "linear" and c["normalized"] == old else None
    if kind in CONV_KINDS:
        return "consumer" if int(round(c.get("groups", 1))) == 1 and c["in_channels"] == old else None
    if kind in ("linear", "output"):
        return "consumer" if c["in_features"] % old == 0 else None
    if kind in ("lstm", "gru"):
        return "consumer" if c["input_size"] == old else None
    return None


def find_groups(layers):
    """``{producer index: [indices of its followers and consumer]}`` of every layer whose width can be cut."""
    groups = {}
    for i, layer in enumerate(layers):
        if not _is_producer(layer):
            continue
        old, members = units_of(layer), []
        for j in range(i + 1, len(layers)):
            what = _follow(layers[j], layer["kind"], old)
            if what is None:
                break
            members.append(j)
            if what == "consumer":
                groups[i] = members
                break
    return groups


def _scaled(v, old, new):
    n = int(round(v)) * new
    if n % old:
        raise ModelError(f"{v} elements do not split into {old} units")
    return n // old


def cut(layers, producer, new_units, groups=None):
    """(a new layer list with the producer at index ``producer`` cut to ``new_units`` and its group made to
    match, the edits ``[{"index", "layer", "kind", "feature", "from", "to"}]``); unchanged layers are
    shared with ``layers``, changed ones are copies (never the caller's dicts)."""
    from thor_sdk.layers.kinds import get_kind

    groups = find_groups(layers) if groups is None else groups
    if producer not in groups:
        raise UsageError(f"layer {producer} is not a layer whose width can be cut")
    old = units_of(layers[producer])
    new_units = int(new_units)
    if not 1 <= new_units <= old:
        raise UsageError(f"a width cut must keep between 1 and {old} units, got {new_units}")
    out, edits = list(layers), []

    def edit(i, feature, value):
        layer = out[i]
        before = layer["config"][feature]
        if value == before:
            return
        config = dict(layer["config"], **{feature: value})
        out[i] = {k: v for k, v in layer.items() if k != "cost"}  # cost terms are recomputed from the config
        out[i]["config"] = config
        edits.append({"index": i, "layer": layer.get("name", str(i)), "kind": layer["kind"], "feature": feature,
                      "from": before, "to": value})

    p = layers[producer]
    edit(producer, PRODUCERS[p["kind"]], new_units)
    for j in groups[producer]:
        kind, c = layers[j]["kind"], layers[j]["config"]
        if kind in NUMEL_KINDS:
            edit(j, "numel", _scaled(c["numel"], old, new_units))
        elif kind in CHANNEL_KINDS:
            edit(j, "channels", new_units)
        elif kind == "layernorm":
            edit(j, "normalized", new_units)
        elif kind in CONV_KINDS:
            edit(j, "in_channels", new_units)
        elif kind in ("linear", "output"):
            edit(j, "in_features", _scaled(c["in_features"], old, new_units))
        elif kind in ("lstm", "gru"):
            edit(j, "input_size", new_units)
    for e in edits:
        get_kind(out[e["index"]]["kind"]).check_config(out[e["index"]]["config"])
    return out, edits


def params_of(layers):
    """Trainable parameters of a layer list (each kind's own count)."""
    from thor_sdk.layers.kinds import get_kind

    return sum(get_kind(l["kind"]).num_params(l["config"]) for l in layers)
