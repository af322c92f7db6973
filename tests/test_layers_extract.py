"""torch.fx path of the layer list, user model files, the layer-list JSON and their one-line errors."""

import json
import os
import textwrap
from collections import Counter

import pytest
from click.testing import CliRunner

from thor_sdk.cli.main import cli, main
from thor_sdk.errors import FormatError, ModelError, NotFoundError, UnsupportedOperatorError, UsageError
from thor_sdk.layers import layers_of, read_layer_list

# Layer counts by kind, derived from the definitions in models/nets.py.
EXPECTED_KINDS = {
    "lenet5": {"conv2d": 2, "relu": 4, "maxpool2d": 2, "flatten": 1, "linear": 2, "output": 1},
    "cnn5": {"conv2d": 4, "relu": 4, "maxpool2d": 4, "flatten": 1, "output": 1},
    "har": {"linear": 2, "relu": 2, "dropout": 2, "output": 1},
    "lstm": {"embedding": 1, "lstm": 1, "output": 1},
    "transformer": {"embedding": 1, "transformer_block": 6, "layernorm": 1, "output": 1},
    # stem conv + 8 basic blocks x 2 convs + 3 downsampling shortcuts; a ReLU after the stem and 2 per block
    "resnet18": {"conv2d": 20, "batchnorm2d": 20, "relu": 17, "add": 8, "adaptive_avgpool2d": 1, "flatten": 1,
                 "output": 1},
    # stem + 17 inverted residuals (the first without expansion: 2 convs, the others 3) + the 1x1 to 1280;
    # 10 of the blocks keep stride 1 and width, so they add their input back
    "mobilenetv2": {"conv2d": 52, "batchnorm2d": 52, "relu6": 35, "add": 10, "adaptive_avgpool2d": 1,
                    "flatten": 1, "dropout": 1, "output": 1},
}


@pytest.fixture(scope="session")
def reference_layers():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = layers_of(name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(EXPECTED_KINDS))
def test_reference_net_layer_counts_and_roles(reference_layers, name):
    ml = reference_layers(name)
    assert dict(Counter(l["kind"] for l in ml.layers)) == EXPECTED_KINDS[name]
    roles = [l["role"] for l in ml.layers]
    # every reference net starts with a layer that has parameters, so all later layers need input gradients
    assert roles[0] == "input"
    assert set(roles[1:-1]) == {"hidden"}
    assert ml.layers[-1]["kind"] == "output" and roles[-1] == "output"


def test_reference_configs(reference_layers):
    lenet = reference_layers("lenet5").layers
    assert lenet[0]["config"] == {"in_channels": 1, "out_channels": 6, "kernel": 5, "stride": 1, "padding": 2,
                                  "groups": 1, "height": 28, "width": 28, "bias": 1, "dilation": 1, "kernel_w": 5,
                                  "stride_w": 1, "padding_w": 2}
    assert lenet[6] == {"name": "6", "kind": "flatten", "role": "hidden", "config": {"numel": 400}, "op": "Flatten"}
    assert lenet[-1]["config"] == {"in_features": 84, "out_features": 10, "tokens": 1}
    lstm = reference_layers("lstm").layers
    assert lstm[0]["config"] == {"num_embeddings": 65, "embedding_dim": 64, "seq_len": 64, "positional": 0}
    assert lstm[1]["config"] == {"input_size": 64, "hidden_size": 256, "seq_len": 64, "num_layers": 1}
    assert lstm[2]["config"] == {"in_features": 256, "out_features": 65, "tokens": 64}
    tr = reference_layers("transformer").layers
    assert tr[0]["config"]["positional"] == 1
    assert tr[1]["config"] == {"d_model": 256, "n_heads": 6, "head_dim": 64, "d_ff": 1024, "seq_len": 64}
    mobile = reference_layers("mobilenetv2").layers
    depthwise = [l["config"] for l in mobile if l["kind"] == "conv2d" and l["config"]["groups"] > 1]
    assert len(depthwise) == 17 and all(c["groups"] == c["in_channels"] == c["out_channels"] for c in depthwise)
    assert [l["config"]["p"] for l in reference_layers("har").layers if l["kind"] == "dropout"] == [0.2, 0.2]


# -- user model files -----------------------------------------------------------------------------------

def _write(tmp_path, name, source):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


MY_NET = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            h = torch.relu(self.bn(self.conv(x)))
            return self.fc(torch.flatten(self.pool(h), 1))
"""


def test_user_model_file_through_cli(tmp_path):
    ref = _write(tmp_path, "my_net.py", MY_NET) + ":Net"
    result = CliRunner().invoke(cli, ["layers", ref, "--input-shape", "3,16,16", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["input_shape"] == [3, 16, 16] and doc["input_dtype"] == "float32"
    assert [(l["kind"], l["role"]) for l in doc["layers"]] == [
        ("conv2d", "input"), ("batchnorm2d", "hidden"), ("relu", "hidden"), ("adaptive_avgpool2d", "hidden"),
        ("flatten", "hidden"), ("output", "output"),
    ]
    assert doc["layers"][0]["config"]["bias"] == 0 and doc["layers"][0]["config"]["height"] == 16
    assert doc["layers"][-1]["config"] == {"in_features": 8, "out_features": 4, "tokens": 1}


def test_user_model_file_needs_input_shape(tmp_path, capsys):
    ref = _write(tmp_path, "my_net.py", MY_NET) + ":Net"
    _assert_one_line_error(capsys, ["layers", ref], UsageError.exit_code, "--input-shape")
    _assert_one_line_error(capsys, ["layers", str(tmp_path / "none.py") + ":Net", "--input-shape", "3"],
                           NotFoundError.exit_code, "no such model file")
    _assert_one_line_error(capsys, ["layers", ref, "--input-shape", "3,a,16"], UsageError.exit_code,
                           "comma-separated integers")


# -- layer-list JSON ------------------------------------------------------------------------------------

def test_layer_list_json_round_trip(tmp_path):
    out = tmp_path / "f.json"
    runner = CliRunner()
    first = runner.invoke(cli, ["layers", "lenet5", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "conv2d" in first.output  # the table is still printed
    saved = json.loads(out.read_text())
    again = runner.invoke(cli, ["layers", str(out), "--json"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output) == saved
    direct = runner.invoke(cli, ["layers", "lenet5", "--json"])
    assert json.loads(direct.output) == saved


def test_layer_list_without_roles_gets_them_from_parameters(tmp_path):
    path = tmp_path / "noroles.json"
    path.write_text(json.dumps({"format": "thor-sdk/layers", "version": 1, "layers": [
        {"kind": "relu", "config": {"numel": 10}},
        {"kind": "linear", "config": {"in_features": 10, "out_features": 5, "tokens": 1, "bias": 1}},
        {"kind": "relu", "config": {"numel": 5}},
        {"kind": "linear", "config": {"in_features": 5, "out_features": 2, "tokens": 1, "bias": 1}},
    ]}))
    ml = read_layer_list(str(path))
    assert [(l["kind"], l["role"]) for l in ml.layers] == [
        ("relu", "input"), ("linear", "input"), ("relu", "hidden"), ("output", "output")]
    assert ml.name == "noroles.json" and ml.input_dtype == "float32"


def _layer_doc(layers, **top):
    return {"format": "thor-sdk/layers", "version": 1, **top, "layers": layers}


HEAD = {"kind": "linear", "config": {"in_features": 4, "out_features": 2, "tokens": 1, "bias": 1}}


@pytest.mark.parametrize("doc, error, text", [
    (_layer_doc([{"kind": "conv2d", "config": {"in_channels": -3}}, HEAD]), FormatError,
     "breaks its schema at layers/0/config/in_channels"),
    (dict(_layer_doc([HEAD]), version=2), FormatError, "breaks its schema at version"),
    (_layer_doc([]), FormatError, "breaks its schema at layers"),
    (_layer_doc([{"kind": "relu"}, HEAD]), FormatError, "breaks its schema at layers/0"),
    (_layer_doc([HEAD], input_dtype="float16"), FormatError, "breaks its schema at input_dtype"),
    (_layer_doc([{"kind": "conv3d", "config": {}}, HEAD]), NotFoundError, "unknown layer kind 'conv3d'"),
    (_layer_doc([{"kind": "relu", "config": {"numel": 4}, "role": "sideways"}, HEAD]), FormatError,
     "breaks its schema"),
    (_layer_doc([{"kind": "linear", "config": {"in_features": 4}}]), UsageError, "lacks config features"),
    (_layer_doc([{"kind": "output", "config": {"in_features": 4, "out_features": 4, "tokens": 1}}, HEAD]),
     FormatError, "layer 0 is an output head"),
    (_layer_doc([{"kind": "relu", "config": {"numel": 4}, "role": "output"}, HEAD]), FormatError,
     "layer 0 is an output head"),
    (_layer_doc([HEAD, {"kind": "embedding", "role": "hidden",
                        "config": {"num_embeddings": 9, "embedding_dim": 4, "seq_len": 3, "positional": 0}}, HEAD]),
     FormatError, "layer 1 of kind 'embedding' cannot have role 'hidden'"),
])
def test_bad_layer_list_is_one_error_line(tmp_path, capsys, doc, error, text):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(error, match=text.replace("(", r"\(")):
        read_layer_list(str(path))
    _assert_one_line_error(capsys, ["layers", str(path)], error.exit_code, text)


def test_layer_list_that_is_not_json(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "thor-sdk/layers", "layers": [')
    _assert_one_line_error(capsys, ["layers", str(path)], FormatError.exit_code, "is not valid JSON")
    _assert_one_line_error(capsys, ["layers", str(tmp_path / "absent.json")], NotFoundError.exit_code, "no such file")


# -- models the torch path cannot describe ----------------------------------------------------------------

UNSUPPORTED_NET = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv3d(1, 2, 3)
            self.fc = nn.Linear(16, 2)

        def forward(self, x):
            h = torch.flatten(self.conv(x), 1)
            return self.fc(torch.cumsum(h, dim=1))
"""

UNTRACEABLE_NET = """
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            if x.sum() > 0:
                x = x * 2
            return self.fc(x)
"""


def test_unsupported_torch_ops_are_all_named_in_one_error(tmp_path, capsys):
    ref = _write(tmp_path, "conv3d_net.py", UNSUPPORTED_NET) + ":Net"
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(ref, input_shape=[1, 4, 4, 4])
    assert err.value.ops == ["Conv3d", "torch.cumsum"]
    _assert_one_line_error(capsys, ["layers", ref, "--input-shape", "1,4,4,4"], UnsupportedOperatorError.exit_code,
                           "uses operators with no thor-sdk layer kind: Conv3d, torch.cumsum")


def test_untraceable_and_wrongly_shaped_models(tmp_path, capsys):
    ref = _write(tmp_path, "branchy.py", UNTRACEABLE_NET) + ":Net"
    _assert_one_line_error(capsys, ["layers", ref, "--input-shape", "4"], ModelError.exit_code,
                           "could not trace")
    ok = _write(tmp_path, "my_net.py", MY_NET) + ":Net"
    _assert_one_line_error(capsys, ["layers", ok, "--input-shape", "5,16,16"], ModelError.exit_code,
                           "does not run on inputs of shape [5, 16, 16]")


def test_unknown_model_name(capsys):
    _assert_one_line_error(capsys, ["layers", "resnet1000"], NotFoundError.exit_code, "unknown model 'resnet1000'")


def _assert_one_line_error(capsys, argv, code, text):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    captured = capsys.readouterr()
    assert exit_info.value.code == code != 0
    assert captured.err.startswith("Error: ")
    assert len(captured.err.strip().splitlines()) == 1, captured.err
    assert "Traceback" not in captured.err
    assert text in captured.err


def test_a_text_model_file_is_traced_with_token_ids_without_being_told(tmp_path):
    """A user's file.py:Class whose input only feeds nn.Embedding: before, tracing it with float inputs failed
    ("Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int");
    a model that also uses its input otherwise stays float32, and an explicit dtype wins."""
    text = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "user_nets.py") + ":TextGRU"
    f = tmp_path / "mixed.py"
    f.write_text(textwrap.dedent("""
        from torch import nn

        class Mixed(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(20, 3)
                self.act = nn.ReLU()

            def forward(self, x):
                return self.fc(self.act(x))
    """))
    ml = layers_of(text, input_shape="20")  # nn.Embedding(500, 32), a GRU, a Linear
    assert ml.input_dtype == "int64"
    assert [l["kind"] for l in ml.layers] == ["embedding", "gru", "output"]
    assert ml.layers[0]["config"]["num_embeddings"] == 500 and ml.layers[1]["config"]["seq_len"] == 20
    assert layers_of(f"{f}:Mixed", input_shape="20").input_dtype == "float32"
    with pytest.raises(ModelError, match="does not run on inputs"):
        layers_of(text, input_shape="20", input_dtype="float32")


def test_a_layernorm_over_several_trailing_dimensions_is_a_layernorm_over_their_product():
    """nn.LayerNorm([H, W]) or ([C, H, W]) is the same computation as over H x W (C x H x W) flattened: torch
    normalises an (M, N) view. So it is the layernorm kind itself, not a stand-in; its parameters match. (One over
    the batch axis cannot be traced at two batch sizes; the ONNX reader, where an axis can say so, refuses it.)"""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, norm, out):
            super().__init__()
            self.conv, self.norm, self.fc = nn.Conv2d(3, 8, 3, padding=1), norm, nn.Linear(out, 4)

        def forward(self, x):
            return self.fc(torch.flatten(self.norm(self.conv(x)), 1))

    for shape, config in (([16, 16], {"normalized": 256, "tokens": 8}),
                          ([8, 16, 16], {"normalized": 2048, "tokens": 1})):
        norm = nn.LayerNorm(shape)
        layers = layers_of(Net(norm, 2048), input_shape=[3, 16, 16]).layers
        ln = [l for l in layers if l["kind"] == "layernorm"]
        assert [l["config"] for l in ln] == [config] and "approx" not in ln[0]
        assert sum(p.numel() for p in norm.parameters()) == 2 * config["normalized"]  # the kind's own count


def test_tensors_made_from_sizes_are_free_and_meet_the_activations_in_their_products():
    """An RNN's zero initial state sized by the batch (PyTorch's tutorial LSTM: ``torch.zeros(layers, x.size(0),
    hidden)`` passed to nn.LSTM), DropPath's mask (``x.new_empty(shape).bernoulli_(keep).div_(keep)``) and noise
    (``torch.randn_like``) carry no gradient and hold none of the input's values: no layer of their own (all three
    were refused: torch.zeros, Tensor.new_empty, Tensor.bernoulli_, torch.randn_like); the product with the mask is
    the broadcast product it is. ConvNeXt's channels-first LayerNorm (timm's LayerNorm2d: permute,
    ``F.layer_norm``, permute) is kind layernorm, as the module."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class TutorialLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = nn.LSTM(28, 64, 2, batch_first=True), nn.Linear(64, 10)

        def forward(self, x):
            h0 = torch.zeros(2, x.size(0), 64).to(x.device)
            c0 = torch.zeros(2, x.size(0), 64, device=x.device)
            out, _ = self.lstm(x, (h0, c0))
            return self.fc(out[:, -1, :])

    class Plain(TutorialLSTM):
        def forward(self, x):
            return self.fc(self.lstm(x)[0][:, -1, :])

    def layers(model, shape):
        return [(l["kind"], l["role"], l["config"]) for l in layers_of(model, input_shape=shape).layers]

    assert layers(TutorialLSTM(), [28, 28]) == layers(Plain(), [28, 28])

    class DropPathBlock(nn.Module):
        def __init__(self, noise):
            super().__init__()
            self.noise, self.conv, self.gamma = noise, nn.Conv2d(8, 8, 3, padding=1), nn.Parameter(torch.ones(8, 1, 1))
            self.head = nn.Linear(8, 3)

        def forward(self, x):
            y = self.gamma * self.conv(x)
            if self.noise:
                y = y + 0.1 * torch.randn_like(y)
            mask = y.new_empty((y.shape[0],) + (1,) * (y.ndim - 1)).bernoulli_(0.9)
            mask.div_(0.9)
            z = (x + y * mask).permute(0, 2, 3, 1)
            z = F.layer_norm(z, (8,), None, None, 1e-6).permute(0, 3, 1, 2)
            return self.head(z.mean((2, 3)))

    got = layers(DropPathBlock(False), [8, 6, 6])
    assert [k for k, _, _ in got] == ["conv2d", "mul", "mul", "add", "permute", "layernorm", "permute",
                                      "adaptive_avgpool2d", "output"]
    assert got[2][2] == {"numel": 8 * 36, "broadcast": 1}  # y * mask, mask (B, 1, 1, 1)
    assert got[5][2] == {"normalized": 8, "tokens": 36}
    noisy = layers(DropPathBlock(True), [8, 6, 6])  # the noise's sum with y is a layer; its fill and scale are not
    assert [k for k, _, _ in noisy][:4] == ["conv2d", "mul", "add", "mul"]


def test_a_token_and_a_positional_lookup_summed_are_one_positional_embedding():
    """nanoGPT's ``wte(idx) + wpe(torch.arange(t))``, GPT-2's positions ``arange(t).unsqueeze(0)`` and BERT's
    position-id buffer sliced to the sequence read as the zoo's TokenPositionalEmbedding reads (``embedding`` with
    ``positional`` 1, no add): the positional lookup was a layer of its own at one row per sample, outside every
    profile's samples. BERT's token-type lookup (ids made of zeros, sized by the batch) stays a lookup and a sum; a
    positional lookup used twice is left as it was."""
    import torch
    from torch import nn

    class Embed(nn.Module):
        def __init__(self, form):
            super().__init__()
            self.form, self.wte, self.wpe = form, nn.Embedding(50, 16), nn.Embedding(32, 16)
            self.tt = nn.Embedding(2, 16)
            self.register_buffer("position_ids", torch.arange(32).expand((1, -1)))
            self.head = nn.Linear(16, 50)

        def forward(self, idx):
            t = idx.size(1)
            if self.form == "bert":
                x = self.wte(idx) + self.wpe(self.position_ids[:, :t])
                x = x + self.tt(torch.zeros_like(idx))
            elif self.form == "twice":
                p = self.wpe(torch.arange(t, device=idx.device))
                x = self.wte(idx) + p + p
            else:
                pos = torch.arange(0, t, dtype=torch.long)
                x = self.wte(idx) + self.wpe(pos.unsqueeze(0) if self.form == "gpt2" else pos)
            return self.head(x)

    merged = {"num_embeddings": 50, "embedding_dim": 16, "seq_len": 12, "positional": 1}
    for form in ("nanogpt", "gpt2", "bert"):
        got = [(l["kind"], l["config"]) for l in layers_of(Embed(form), input_shape=[12]).layers]
        assert got[0] == ("embedding", merged), form
        extra = [("embedding", {"num_embeddings": 2, "embedding_dim": 16, "seq_len": 12, "positional": 0}),
                 ("add", {"numel": 12 * 16})] if form == "bert" else []
        assert got[1:] == extra + [("output", {"in_features": 16, "out_features": 50, "tokens": 12})], form
    twice = [l["kind"] for l in layers_of(Embed("twice"), input_shape=[12]).layers]
    assert twice == ["embedding", "embedding", "add", "add", "output"]
