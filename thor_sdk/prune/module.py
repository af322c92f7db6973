"""The pruned network as PyTorch source: a ``.py`` file with one ``nn.Module`` class built with no arguments.

The class is the layer list rebuilt layer by layer, as ``thor-sdk measure`` rebuilds a layer-list JSON
(``thor_sdk.harness.whole_model``): plain ``torch.nn`` modules for the common kinds, a per-sample
``Reshape`` where two layers' shapes differ but their element counts agree, and
``thor_sdk.layers.build.build_layer`` for the kinds with no single ``torch.nn`` module (residual add,
token embeddings, recurrent and transformer blocks). Widths only: the weights are freshly initialised.
Writing it needs no torch (the text is generated); importing it does.
"""

_PLAIN = {"relu": "nn.ReLU()", "relu6": "nn.ReLU6()", "gelu": "nn.GELU()", "tanh": "nn.Tanh()",
          "sigmoid": "nn.Sigmoid()", "hardswish": "nn.Hardswish()", "hardsigmoid": "nn.Hardsigmoid()",
          "silu": "nn.SiLU()", "leaky_relu": "nn.LeakyReLU()", "elu": "nn.ELU()", "flatten": "nn.Flatten(1)",
          "softmax": "nn.Softmax(dim=-1)"}


#: kinds computed element by element, whatever the tensor's shape (``flatten`` is not one: it makes a vector)
_ANY_SHAPE = ("relu", "relu6", "gelu", "tanh", "sigmoid", "hardswish", "hardsigmoid", "silu", "leaky_relu", "elu",
              "dropout", "elementwise")


def _i(v):
    return int(round(v))


def _side(c, feature):
    """A conv's or pooling's ``feature`` (kernel, stride, padding) as source: one number, or (height, width) where
    a 2-D one's ``<feature>_w`` differs."""
    h, w = _i(c[feature]), _i(c.get(f"{feature}_w", c[feature]))
    return str(h) if h == w else f"({h}, {w})"


def _expr(kind, c):
    """The Python expression building one layer (``None``: no plain ``torch.nn`` module for it)."""
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind in ("conv2d", "conv1d"):
        cls = "nn.Conv2d" if kind == "conv2d" else "nn.Conv1d"
        kernel, stride, padding = (_side(c, f) for f in ("kernel", "stride", "padding"))
        return (f"{cls}({_i(c['in_channels'])}, {_i(c['out_channels'])}, {kernel}, stride={stride}, "
                f"padding={padding}, groups={_i(c['groups'])}, bias={bool(c['bias'])})")
    if kind == "linear":
        return f"nn.Linear({_i(c['in_features'])}, {_i(c['out_features'])}, bias={bool(c['bias'])})"
    if kind == "output":
        return f"nn.Linear({_i(c['in_features'])}, {_i(c['out_features'])})"
    if kind in ("maxpool2d", "avgpool2d", "maxpool1d"):
        cls = {"maxpool2d": "nn.MaxPool2d", "avgpool2d": "nn.AvgPool2d", "maxpool1d": "nn.MaxPool1d"}[kind]
        return f"{cls}({_side(c, 'kernel')}, stride={_side(c, 'stride')}, padding={_side(c, 'padding')})"
    if kind in ("adaptive_avgpool2d", "adaptive_avgpool1d", "adaptive_maxpool2d"):
        cls = {"adaptive_avgpool2d": "nn.AdaptiveAvgPool2d", "adaptive_avgpool1d": "nn.AdaptiveAvgPool1d",
               "adaptive_maxpool2d": "nn.AdaptiveMaxPool2d"}[kind]
        return f"{cls}({_i(c['out_size'])})"
    if kind in ("batchnorm2d", "batchnorm1d"):
        return f"nn.{'BatchNorm2d' if kind == 'batchnorm2d' else 'BatchNorm1d'}({_i(c['channels'])})"
    if kind == "layernorm":
        return f"nn.LayerNorm({_i(c['normalized'])})"
    if kind == "dropout":
        return f"nn.Dropout({float(c['p'])!r})"
    if kind == "upsample":
        return f"nn.Upsample(scale_factor={_i(c['scale'])}, mode=\"nearest\")"
    if kind == "upsample_bilinear":
        return f"nn.Upsample(scale_factor={_i(c['scale'])}, mode=\"bilinear\", align_corners=False)"
    if kind == "conv_transpose2d":
        return (f"nn.ConvTranspose2d({_i(c['in_channels'])}, {_i(c['out_channels'])}, {_i(c['kernel'])}, "
                f"stride={_i(c['stride'])}, padding={_i(c['padding'])}, output_padding={_i(c['output_padding'])}, "
                f"bias={bool(c['bias'])})")
    return None


def _notes(result):
    """``{layer index: "feature a -> b, ..."}`` of the cut widths."""
    notes = {}
    for change in (result or {}).get("changes") or ():
        notes.setdefault(change["index"], []).append(f"{change['feature']} {change['from']:g} -> {change['to']:g}")
        for f in change.get("follow") or ():
            notes.setdefault(f["index"], []).append(f"{f['feature']} {f['from']:g} -> {f['to']:g}")
    return {i: ", ".join(v) for i, v in notes.items()}


def module_source(ml, class_name="PrunedModel", result=None):
    """Python source of a module class that builds ``ml``'s layer list (``result``: the plan, for comments)."""
    from thor_sdk.harness.whole_model import chain_reshapes
    from thor_sdk.layers.kinds import get_kind

    chain_reshapes(ml.layers, ml.name)  # a ModelError naming the two layers where the list does not chain
    notes = _notes(result)
    lines, fallback, reshape_used = [], False, False
    shape_now = None  # per-sample shape of the tensor flowing between layers
    for i, layer in enumerate(ml.layers):
        kind = get_kind(layer["kind"])
        if layer["kind"] in _ANY_SHAPE and shape_now is not None:
            pass  # an elementwise op keeps whatever shape it is given: no reshape around it
        elif layer["kind"] == "flatten" and shape_now is not None:
            shape_now = (_i(layer["config"]["numel"]),)  # flattens whatever it is given
        else:
            need = tuple(_i(s) for s in kind.in_shape(layer["config"]))
            if shape_now is not None and need != shape_now:
                reshape_used = True
                lines.append(f"            Reshape({', '.join(str(s) for s in need)}),")
            shape_now = tuple(_i(s) for s in kind.out_shape(layer["config"]))
        expr = _expr(layer["kind"], layer["config"])
        if expr is None:
            fallback = True
            config = {k: layer["config"][k] for k in sorted(layer["config"])}
            expr = f"build_layer({layer['kind']!r}, {config!r})"
        name = str(layer.get("name", i))
        note = f"  # {i}{'' if name == str(i) else ' ' + name}: {layer['kind']}"
        if i in notes:
            note += f" ({notes[i]})"
        lines.append(f"            {expr},{note}")
    shape = "x".join(str(_i(s)) for s in ml.input_shape)
    per_sample = ",".join(str(_i(s)) for s in ml.input_shape)
    head = ml.layers[-1]
    classes = f", {_i(head['config']['out_features'])} classes" if head["kind"] == "output" else ""
    saving = ""
    if result:
        u = result.get("unit")
        saving = (f"Estimated by the plan ({result.get('device')} / {result.get('runtime')}, batch "
                  f"{result.get('batch_size')}):\n{result['estimated_before']:.6g} {u} -> "
                  f"{result['estimated_after']:.6g} {u} per training step "
                  f"({result['estimated_saving']:.1%} less) for {result.get('model')}.")
    out = [
        f'"""{ml.name}: the architecture `thor-sdk prune-plan` planned (widths only: the weights start fresh).',
        *([saving] if saving else []),
        "",
        "Accuracy after pruning is out of scope of the plan, which is about cost only: train or fine-tune this",
        "network and check its accuracy yourself. Measure it on a device:",
        "",
        f"    thor-sdk measure --model THIS_FILE.py:{class_name} --input-shape {per_sample}",
        '"""',
        "",
        "from torch import nn",
        "",
    ]
    if fallback:
        out += ["from thor_sdk.layers.build import build_layer  # kinds with no single torch.nn module", ""]
    if reshape_used:
        out += [
            "",
            "class Reshape(nn.Module):",
            '    """Reshape each sample (between two layers whose element counts agree)."""',
            "",
            "    def __init__(self, *shape):",
            "        super().__init__()",
            "        self.shape = shape",
            "",
            "    def forward(self, x):",
            "        return x.reshape(x.shape[0], *self.shape)",
            "",
        ]
    out += [
        "",
        f"class {class_name}(nn.Module):",
        f'    """{ml.name}: input {shape} per sample ({ml.input_dtype}){classes}."""',
        "",
        f"    input_shape = {tuple(_i(s) for s in ml.input_shape)!r}",
        "",
        "    def __init__(self):",
        "        super().__init__()",
        "        self.layers = nn.Sequential(",
        *lines,
        "        )",
        "",
        "    def forward(self, x):",
        "        return self.layers(x)",
        "",
    ]
    return "\n".join(out)
