"""Rectangular conv2d and 2-D pooling kernels: ``kernel``/``stride``/``padding`` along the height, ``*_w`` along the
width.

Read from torch.fx and ONNX, built as probes, costed by the same FLOPs and bytes as torch's own conv, stored
and read back by older campaigns (whose conv2d samples had no ``*_w``: square), written back as source by the
pruner, and placed in the profile's prior (the zoo's keyword spotter and the factorised neighbours)."""

import json
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError, UsageError  # noqa: E402
from thor_sdk.layers.extract import layers_from_module  # noqa: E402
from thor_sdk.layers.kinds import complete_config, get_kind, with_added_features  # noqa: E402

CONV = get_kind("conv2d")


class _Net(nn.Module):
    def __init__(self, conv, cout, classes=3):
        super().__init__()
        self.conv, self.fc = conv, nn.Linear(cout, classes)

    def forward(self, x):
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def _conv_layer(conv, shape):
    layers = layers_from_module(_Net(conv, conv.out_channels), shape)
    assert layers[0]["kind"] == "conv2d"
    return layers[0]["config"]


@pytest.mark.parametrize("kernel,stride,padding,shape", [
    ((10, 4), (2, 2), (5, 1), (1, 49, 10)),  # DS-CNN's first conv over MFCCs
    ((1, 7), 1, (0, 3), (8, 17, 17)),
    ((7, 1), 1, (3, 0), (8, 17, 17)),
    ((3, 1), (2, 1), (1, 0), (4, 20, 12)),
    (3, 1, 1, (4, 9, 9)),
])
def test_a_conv2d_reads_per_side_and_its_shape_and_flops_are_torchs(kernel, stride, padding, shape):
    conv = nn.Conv2d(shape[0], 8, kernel, stride, padding)
    c = _conv_layer(conv, shape)
    kh, kw = conv.kernel_size
    assert (c["kernel"], c["kernel_w"]) == (kh, kw)
    assert (c["stride"], c["stride_w"]) == tuple(conv.stride)
    assert (c["padding"], c["padding_w"]) == tuple(conv.padding)
    out = conv(torch.randn(1, *shape)).shape[1:]
    assert tuple(CONV.out_shape(c)) == tuple(out)
    assert CONV.forward_flops(c) == 2.0 * out.numel() * shape[0] * kh * kw
    assert CONV.num_params(c) == sum(p.numel() for p in conv.parameters())


def test_padding_same_is_per_side():
    c = _conv_layer(nn.Conv2d(4, 4, (1, 7), padding="same"), (4, 12, 12))
    assert (c["padding"], c["padding_w"]) == (0, 3)
    with pytest.raises(UnsupportedOperatorError, match="uneven"):
        _conv_layer(nn.Conv2d(4, 4, (3, 4), padding="same"), (4, 12, 12))


def test_a_rectangular_dilation_stays_refused():
    with pytest.raises(UnsupportedOperatorError, match="non-square dilation"):
        _conv_layer(nn.Conv2d(4, 4, 3, dilation=(2, 1)), (4, 12, 12))


@pytest.mark.parametrize("conv", [nn.Conv2d(4, 8, (3, 5), dilation=2), nn.Conv2d(4, 8, (3, 1), dilation=(3, 1)),
                                  nn.Conv2d(4, 8, (1, 3), padding=(0, 2), dilation=(5, 2))])
def test_a_dilated_rectangular_conv_keeps_its_sides_and_dilation(conv):
    """A dilated rectangular kernel is kind conv2d with one dilation: a side of one tap takes any (ERFNet's 3x1
    dilated (d, 1)), so (1, 3) dilated (5, 2) is dilated 2; its output is the module's."""
    layers = layers_from_module(_Net(conv, 8), (4, 20, 20))
    c = layers[0]["config"]
    assert "approx" not in layers[0] and (c["height"], c["width"]) == (20, 20)
    assert c["dilation"] == max(d for d, k in zip(conv.dilation, conv.kernel_size) if k > 1)
    assert (c["kernel"], c["kernel_w"]) == conv.kernel_size
    assert tuple(CONV.out_shape(c)) == tuple(conv(torch.randn(1, 4, 20, 20)).shape[1:])


def test_a_config_without_the_width_side_is_square():
    square = dict(in_channels=3, out_channels=8, kernel=3, stride=2, padding=1, groups=1, height=9, width=9, bias=1)
    full = complete_config("conv2d", square)
    assert (full["kernel_w"], full["stride_w"], full["padding_w"]) == (3, 2, 1)
    assert complete_config("conv2d", full) is full
    CONV.check_config(square)
    assert CONV.out_shape(square) == CONV.out_shape(full)
    assert CONV.forward_flops(square) == CONV.forward_flops(full)
    assert with_added_features("conv2d", square) == full  # an older campaign's sample reads as square


@pytest.mark.parametrize("bad,match", [
    (dict(kernel_w=12), "empty"),  # wider than the padded input
    (dict(padding_w=-1), "non-negative"),
    (dict(stride_w=0), "at least 1"),
    (dict(kernel_w=2.5), "integer"),
])
def test_the_width_side_is_checked(bad, match):
    c = dict(in_channels=3, out_channels=8, kernel=3, stride=1, padding=1, groups=1, height=9, width=9, bias=1)
    with pytest.raises(UsageError, match=match):
        CONV.check_config(dict(c, **bad))


def test_a_probe_builds_the_rectangular_conv():
    from thor_sdk.layers.build import build_layer

    c = dict(in_channels=1, out_channels=16, kernel=10, stride=2, padding=5, groups=1, height=49, width=10, bias=0,
             kernel_w=4, stride_w=2, padding_w=1)
    m = build_layer("conv2d", c)
    assert m.kernel_size == (10, 4) and m.stride == (2, 2) and m.padding == (5, 1)
    assert tuple(m(torch.randn(2, 1, 49, 10)).shape[1:]) == tuple(CONV.out_shape(c))
    square = {k: v for k, v in c.items() if not k.endswith("_w")}
    assert build_layer("conv2d", square).kernel_size == (10, 10)


def test_onnx_reads_a_rectangular_conv(tmp_path):
    pytest.importorskip("onnx")
    from thor_sdk.layers.onnx_import import layers_from_onnx

    net = _Net(nn.Conv2d(1, 8, (10, 4), (2, 2), (5, 1)), 8)
    path = tmp_path / "kws.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(2, 1, 49, 10),), str(path), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
    from_onnx = layers_from_onnx(str(path)).layers[0]["config"]
    assert from_onnx == layers_from_module(net, (1, 49, 10))[0]["config"]
    assert (from_onnx["kernel_w"], from_onnx["padding_w"]) == (4, 1)


def test_the_pruner_writes_the_rectangular_conv_back():
    from thor_sdk.prune.module import _expr

    c = dict(in_channels=1, out_channels=16, kernel=10, stride=2, padding=5, groups=1, height=49, width=10, bias=0,
             kernel_w=4, stride_w=2, padding_w=1)
    src = _expr("conv2d", c)
    assert src == "nn.Conv2d(1, 16, (10, 4), stride=2, padding=(5, 1), groups=1, bias=False)"
    m = eval(src, {"nn": nn})
    assert m.kernel_size == (10, 4) and m.padding == (5, 1)
    assert _expr("conv2d", complete_config("conv2d", dict(c, kernel=3, kernel_w=3, padding=1, padding_w=1))) == \
        "nn.Conv2d(1, 16, 3, stride=2, padding=1, groups=1, bias=False)"


def test_the_zoo_keyword_spotter_has_its_10x4_conv_and_the_prior_keeps_it():
    from thor_sdk.campaign.prior import load_prior
    from thor_sdk.layers import layers_of

    first = layers_of("dscnn_kws").layers[0]["config"]
    assert (first["kernel"], first["kernel_w"], first["stride"], first["stride_w"]) == (10, 4, 2, 2)
    assert CONV.out_shape(first)[1:] == (25, 5)
    prior = load_prior()
    convs = prior["kinds"]["conv2d"]["configs"]
    assert any(c["config"]["kernel_w"] == 4 and c["config"]["kernel"] == 10 for c in convs)
    for entry in prior["kinds"]["conv2d"]["configs"]:  # every zoo conv2d spelled out
        assert {"kernel_w", "stride_w", "padding_w"} <= set(entry["config"])


def test_profile_candidates_take_factorised_halves_of_square_kernels():
    from thor_sdk.campaign.prior import _rect_neighbour, _valid, candidates, load_prior

    cands = candidates(load_prior(), "conv2d", 600)
    shapes = [(c["kernel"], c["kernel_w"]) for c, _, _ in cands]
    rect = [s for s in shapes if s[0] != s[1]]
    assert 0.02 * len(cands) < len(rect) < 0.15 * len(cands)  # a share, not the bulk
    assert {(3, 1), (1, 3)} <= set(rect)
    for c, _, _ in cands:
        assert _valid("conv2d", c)
        if c["kernel"] != c["kernel_w"] and 1 in (c["kernel"], c["kernel_w"]):
            k = max(c["kernel"], c["kernel_w"])  # "same" along k where the square one was, none along the 1
            pad_k, pad_1 = (c["padding"], c["padding_w"]) if c["kernel"] == k else (c["padding_w"], c["padding"])
            assert pad_1 == 0 and pad_k <= c.get("dilation", 1) * (k - 1) // 2
    base = dict(in_channels=8, out_channels=8, kernel=5, stride=1, padding=2, groups=1, height=9, width=9, bias=1,
                kernel_w=5, stride_w=1, padding_w=2)
    assert _rect_neighbour("conv2d", base, tall=True) == dict(base, kernel_w=1, padding_w=0)
    assert _rect_neighbour("conv2d", base, tall=False) == dict(base, kernel=1, padding=0)
    assert _rect_neighbour("conv2d", dict(base, kernel_w=3), tall=True) is None  # already rectangular
    assert _rect_neighbour("conv2d", dict(base, kernel=1, kernel_w=1, padding=0, padding_w=0), tall=True) is None
    pool = dict(channels=8, height=16, width=16, kernel=2, stride=2, padding=0, kernel_w=2, stride_w=2, padding_w=0)
    assert _rect_neighbour("maxpool2d", pool, tall=True) == dict(pool, kernel_w=1, stride_w=1)  # (2, 1) over time
    assert _rect_neighbour("avgpool2d", pool, tall=False) == dict(pool, kernel=1, stride=1)


def test_a_layer_list_written_before_rectangular_kernels_reads_square(tmp_path):
    from thor_sdk.layers import read_layer_list

    doc = {"format": "thor-sdk/layers", "version": 1, "name": "old", "input_shape": [3, 8, 8],
           "input_dtype": "float32", "layers": [
               {"name": "c", "kind": "conv2d", "role": "input",
                "config": dict(in_channels=3, out_channels=4, kernel=3, stride=1, padding=1, groups=1, height=8,
                               width=8, bias=1)},
               {"name": "f", "kind": "flatten", "role": "hidden", "config": {"numel": 256}},
               {"name": "o", "kind": "output", "role": "output",
                "config": {"in_features": 256, "out_features": 2, "tokens": 1}}]}
    path = tmp_path / "old.layers.json"
    path.write_text(json.dumps(doc))
    c = read_layer_list(str(path)).layers[0]["config"]
    assert (c["kernel_w"], c["stride_w"], c["padding_w"]) == (3, 1, 1)


def test_a_square_probe_keeps_the_id_it_had_before_kernel_w():
    from thor_sdk.probes.build import Probe

    square = dict(in_channels=16, out_channels=16, kernel=3, stride=1, padding=1, groups=1, height=16, width=16, bias=1)
    old, new = Probe("conv2d", square, 16, "hidden"), Probe("conv2d", complete_config("conv2d", square), 16, "hidden")
    assert new.id == old.id and new.config == old.config  # a profile resumes an older campaign's probes
    rect = Probe("conv2d", dict(square, kernel_w=1, padding_w=0), 16, "hidden")
    assert rect.id != old.id and (rect.config["kernel_w"], rect.config["padding_w"]) == (1, 0)
    assert "stride_w" not in rect.config  # the same as stride: left out
    from thor_sdk.layers.build import build_layer

    assert build_layer("conv2d", rect.config).kernel_size == (3, 1)


@pytest.mark.parametrize("make,shape", [
    (lambda: nn.MaxPool2d((2, 1)), (4, 20, 10)),
    (lambda: nn.MaxPool2d((1, 3), stride=(1, 2), padding=(0, 1)), (4, 20, 10)),
    (lambda: nn.AvgPool2d((3, 2), stride=(2, 1)), (4, 20, 10)),
    (lambda: nn.MaxPool2d(2), (4, 20, 10)),
])
def test_a_rectangular_pooling_reads_per_side(make, shape):
    from thor_sdk.layers.build import build_layer

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.pool, self.fc = nn.Conv2d(shape[0], shape[0], 1), make(), nn.Linear(shape[0], 2)

        def forward(self, x):
            return self.fc(self.pool(self.conv(x)).mean(dim=(2, 3)))

    net = Net()
    layer = layers_from_module(net, shape)[1]
    kind, c = layer["kind"], layer["config"]
    assert kind in ("maxpool2d", "avgpool2d")
    out = net.pool(torch.randn(1, *shape)).shape[1:]
    assert tuple(get_kind(kind).out_shape(c)) == tuple(out)
    rebuilt = build_layer(kind, c)
    assert tuple(rebuilt(torch.randn(1, *shape)).shape[1:]) == tuple(out)
    pool = net.pool
    k = pool.kernel_size if isinstance(pool.kernel_size, tuple) else (pool.kernel_size,) * 2
    assert get_kind(kind).forward_flops(c) == out.numel() * k[0] * k[1]


def test_a_functional_rectangular_pooling_reads_per_side():
    from torch.nn import functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4 * 10 * 5, 2)

        def forward(self, x):
            return self.fc(torch.flatten(F.max_pool2d(x, (2, 1)), 1))

    c = layers_from_module(Net(), (4, 20, 5))[0]["config"]
    assert (c["kernel"], c["kernel_w"], c["stride"], c["stride_w"]) == (2, 1, 2, 1)


def test_onnx_reads_a_rectangular_pooling(tmp_path):
    pytest.importorskip("onnx")
    from thor_sdk.layers.onnx_import import layers_from_onnx

    net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.MaxPool2d((2, 1)), nn.Flatten(), nn.Linear(4 * 10 * 5, 2))
    path = tmp_path / "pool.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(2, 1, 20, 5),), str(path), dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
    from_onnx = [(l["kind"], l["config"]) for l in layers_from_onnx(str(path)).layers]
    assert from_onnx == [(l["kind"], l["config"]) for l in layers_from_module(net, (1, 20, 5))]
    assert from_onnx[1][0] == "maxpool2d" and from_onnx[1][1]["kernel_w"] == 1


def test_profile_candidates_take_one_sided_poolings():
    from thor_sdk.campaign.prior import _valid, candidates, load_prior

    cands = candidates(load_prior(), "maxpool2d", 300)
    rect = [c for c, _, _ in cands if c["kernel"] != c["kernel_w"]]
    assert 0.02 * len(cands) < len(rect) < 0.2 * len(cands)
    assert all(_valid("maxpool2d", c) and 1 in (c["kernel"], c["kernel_w"]) for c in rect)


def test_kinds_lists_the_optional_keys_apart_from_the_gp_inputs():
    from click.testing import CliRunner

    from thor_sdk.cli.main import cli

    res = CliRunner().invoke(cli, ["kinds", "--json"])
    assert res.exit_code == 0, res.output
    kinds = {k["name"]: k for k in json.loads(res.output)["kinds"]}
    for name in ("conv2d", "maxpool2d", "avgpool2d"):
        assert kinds[name]["optional_keys"] == {"kernel_w": "kernel", "stride_w": "stride", "padding_w": "padding"}
        assert not {"kernel_w", "stride_w", "padding_w"} & set(kinds[name]["gp_features"])
    assert kinds["conv1d"]["optional_keys"] == {}
    text = CliRunner().invoke(cli, ["kinds"]).output
    assert "[kernel_w]" in text and "optional config key" in text
