"""Kinds conv_transpose2d, upsample_bilinear and pad: read from torch.fx and ONNX as the operators users write
(a U-Net's ups, LR-ASPP's bilinear upsampling, a ResNet's option-A shortcut), refused where they are other
kernels, costed with torch's own shapes and parameter counts, their ONNX training steps decomposed, the prior's
neighbours, and the pruner's groups through a transposed conv."""

import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402
from thor_sdk.layers.build import build_layer  # noqa: E402
from thor_sdk.layers.kinds import get_kind  # noqa: E402


class _Op(nn.Module):
    """A 3x3 conv (so a gradient reaches the op: role hidden), the op ``f`` (given ``mods``), global pooling, a
    Linear head."""

    def __init__(self, f, *mods, cin=4):
        super().__init__()
        self.f, self.mods = f, nn.ModuleList(mods)
        self.conv = nn.Conv2d(cin, cin, 3, padding=1)
        self.fc = nn.LazyLinear(3)

    def forward(self, x):
        return self.fc(self.f(self, self.conv(x)).mean((2, 3)))


def _layer(f, shape, *mods, kind):
    net = _Op(f, *mods, cin=shape[0])
    net(torch.zeros(1, *shape))  # materialise the LazyLinear
    (layer,) = [l for l in layers_of(net, input_shape=list(shape)).layers if l["kind"] == kind]
    assert layer["role"] == "hidden" and "approx" not in layer
    return layer


def _refused(f, shape, *mods):
    net = _Op(f, *mods, cin=shape[0])
    net(torch.zeros(1, *shape))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(net, input_shape=list(shape))
    return err.value.ops


# -- conv_transpose2d ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("conv, side", [
    (nn.ConvTranspose2d(8, 4, 2, stride=2), 7),  # U-Net's
    (nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1, bias=False), 5),  # ERFNet's, autoencoders'
    (nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1), 6),  # DCGAN's
    (nn.ConvTranspose2d(8, 8, 3, stride=1, padding=1), 4),
])
def test_a_transposed_conv_is_its_kind_with_torchs_shape_parameters_and_flops(conv, side):
    layer = _layer(lambda s, x: s.mods[0](x), (8, side, side), conv, kind="conv_transpose2d")
    c, k = layer["config"], get_kind("conv_transpose2d")
    assert c == {"in_channels": 8, "out_channels": conv.out_channels, "kernel": conv.kernel_size[0],
                 "stride": conv.stride[0], "padding": conv.padding[0], "output_padding": conv.output_padding[0],
                 "height": side, "width": side, "bias": int(conv.bias is not None)}
    out = conv(torch.zeros(1, 8, side, side))
    assert list(k.out_shape(c)) == list(out.shape[1:])
    assert k.num_params(c) == sum(p.numel() for p in conv.parameters())
    # every input element meets the whole kernel for every output channel: 2 x multiply-adds
    assert k.forward_flops(c) == 2 * 8 * side * side * conv.weight[0].numel()
    built = build_layer("conv_transpose2d", c)
    assert tuple(built(torch.zeros(2, 8, side, side)).shape[1:]) == tuple(out.shape[1:])


@pytest.mark.parametrize("conv, why", [
    (nn.ConvTranspose2d(8, 4, 2, stride=2, groups=2), "groups>1"),
    (nn.ConvTranspose2d(8, 4, 3, stride=2, dilation=2), "dilation>1"),
    (nn.ConvTranspose2d(8, 4, (3, 1), stride=2), "non-square"),
    (nn.ConvTranspose2d(8, 4, 2, stride=(2, 1)), "non-square"),
])
def test_other_transposed_convs_are_refused_with_the_reason(conv, why):
    ops = _refused(lambda s, x: s.mods[0](x), (8, 6, 6), conv)
    assert any(op.startswith("ConvTranspose2d(") and why in op for op in ops), ops


def test_output_padding_must_be_below_the_stride():
    from thor_sdk.errors import UsageError

    c = dict(in_channels=2, out_channels=2, kernel=3, stride=2, padding=1, output_padding=2, height=4, width=4, bias=1)
    with pytest.raises(UsageError, match="output_padding"):
        get_kind("conv_transpose2d").check_config(c)


# -- upsample_bilinear -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("f, mods, scale", [
    (lambda s, x: s.mods[0](x), (nn.Upsample(scale_factor=2, mode="bilinear"),), 2),
    (lambda s, x: s.mods[0](x), (nn.Upsample(scale_factor=4, mode="bilinear", align_corners=True),), 4),
    (lambda s, x: s.mods[0](x), (nn.UpsamplingBilinear2d(scale_factor=2),), 2),
    (lambda s, x: F.interpolate(x, scale_factor=3, mode="bilinear", align_corners=False), (), 3),
    (lambda s, x: F.interpolate(x, size=(12, 12), mode="bilinear"), (), 2),  # to a size (LR-ASPP's), read off shapes
])
def test_bilinear_upsampling_is_its_kind(f, mods, scale):
    layer = _layer(f, (4, 6, 6), *mods, kind="upsample_bilinear")
    assert layer["config"] == {"channels": 4, "height": 6, "width": 6, "scale": scale}


def test_other_interpolations_are_refused():
    ops = _refused(lambda s, x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), (4, 6, 6))
    assert any("scale not one integer" in op for op in ops), ops
    ops = _refused(lambda s, x: F.interpolate(x, scale_factor=2, mode="bicubic"), (4, 6, 6))
    assert any("bicubic" in op for op in ops), ops


# -- pad -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("f, mods, pads", [
    (lambda s, x: F.pad(x, (1, 1, 1, 1)), (), (0, 2, 2)),
    (lambda s, x: F.pad(x, [0, 1, 0, 1], "constant", 0.0), (), (0, 1, 1)),  # TensorFlow's "same" before a stride 2
    (lambda s, x: F.pad(x, pad=(0, 0, 0, 0, 2, 2), value=1.0), (), (4, 0, 0)),  # channels: option A
    (lambda s, x: F.pad(x, (0, 0)), (), (0, 0, 0)),  # still a copy, as PyTorch makes one
    (lambda s, x: s.mods[0](x), (nn.ZeroPad2d((1, 0, 2, 1)),), (0, 3, 1)),
    (lambda s, x: s.mods[0](x), (nn.ConstantPad2d(2, 0.5),), (0, 4, 4)),
    (lambda s, x: s.mods[0](x), (nn.ConstantPad3d((0, 0, 0, 0, 1, 1), 0.0),), (2, 0, 0)),
])
def test_constant_padding_is_kind_pad(f, mods, pads):
    layer = _layer(f, (4, 6, 6), *mods, kind="pad")
    c = layer["config"]
    assert c == {"channels": 4, "height": 6, "width": 6, "pad_c": pads[0], "pad_h": pads[1], "pad_w": pads[2]}
    got = f(_Op(f, *mods), torch.zeros(1, 4, 6, 6))
    assert list(get_kind("pad").out_shape(c)) == list(got.shape[1:])
    assert tuple(build_layer("pad", c)(torch.zeros(2, 4, 6, 6)).shape[1:]) == tuple(got.shape[1:])


def test_a_pad_of_a_sequence_and_of_a_vector():
    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.pad, self.fc = nn.Conv1d(3, 5, 3), nn.ConstantPad1d((2, 1), 0.0), nn.Linear(5, 2)

        def forward(self, x):
            return self.fc(F.pad(self.pad(self.conv(x)).mean(2), (0, 0)))

    layers = layers_of(Seq(), input_shape=[3, 10]).layers
    pads = [l["config"] for l in layers if l["kind"] == "pad"]
    assert pads == [{"channels": 1, "height": 5, "width": 8, "pad_c": 0, "pad_h": 0, "pad_w": 3},
                    {"channels": 1, "height": 1, "width": 5, "pad_c": 0, "pad_h": 0, "pad_w": 0}]


@pytest.mark.parametrize("f, mods, why", [
    (lambda s, x: F.pad(x, (1, 1, 1, 1), mode="reflect"), (), "mode='reflect'"),
    (lambda s, x: s.mods[0](x), (nn.ReplicationPad2d(1),), "ReplicationPad2d"),
    (lambda s, x: F.pad(x, (-1, -1)), (), "a negative pad"),
    (lambda s, x: F.pad(x, (0, 0, 0, 0, 0, 0, 1, 0)), (), "pads the batch axis"),
])
def test_other_paddings_are_refused_with_the_reason(f, mods, why):
    ops = _refused(f, (4, 6, 6), *mods)
    assert any(why in op for op in ops), ops


def test_a_pad_read_off_the_batch_is_refused():
    """Pads computed from sizes are their values where they are the same at every batch size (a U-Net's); one
    read off the batch is no constant."""
    ops = _refused(lambda s, x: F.pad(x, (0, x.size(0))), (4, 6, 6))
    assert any("pads not constant integers" in op for op in ops), ops


def test_a_unet_reads_its_pads_from_the_skip_sizes():
    """milesial's U-Net on an odd size: each up step pads its upsampled tensor by one to the skip's size."""
    from thor_sdk.models.zoo import _UNet

    layers = layers_of(_UNet(3, 4, 2), input_shape=[3, 33, 33]).layers
    pads = [l["config"] for l in layers if l["kind"] == "pad"]
    assert [(p["height"], p["pad_h"], p["pad_w"]) for p in pads] == [(4, 0, 0), (8, 0, 0), (16, 0, 0), (32, 1, 1)]
    assert [l["kind"] for l in layers].count("conv_transpose2d") == 4


# -- ONNX ------------------------------------------------------------------------------------------------------

def _export(module, shape, path):
    module.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(2, *shape),), str(path), dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
    return str(path)


class _Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.pad = nn.ConvTranspose2d(8, 4, 3, 2, 1, 1), nn.ZeroPad2d((1, 0, 2, 1))
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        x = self.pad(self.up(x))
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        x = F.pad(x, (0, 0, 0, 0, 2, 2))
        return self.fc(x.mean((2, 3))[:, :4])


@pytest.mark.parametrize("name", ["decoder", "unet", "lraspp_mbv3_small", "resnet20_cifar"])
def test_onnx_reads_the_decoders_as_torch_fx_does(tmp_path, name):
    """torch.onnx writes F.pad's pads and Resize's sizes through ops on shapes that ONNX shape inference does not
    follow; the reader folds them and reads ConvTranspose, Pad, Resize, Concat, Mul, HardSwish and HardSigmoid as
    the torch.fx path reads the modules."""
    from thor_sdk.layers.onnx_import import layers_from_onnx
    from thor_sdk.models import build_model, model_spec
    from thor_sdk.models.zoo import _UNet

    if name == "decoder":
        module, shape = _Decoder(), [8, 5, 5]
    elif name == "unet":
        module, shape = _UNet(3, 4, 2), [3, 33, 33]
    else:
        module, shape = build_model(name), list(model_spec(name).input_shape)
    want = layers_of(module, input_shape=shape).layers
    got = layers_from_onnx(_export(module, shape, tmp_path / f"{name}.onnx")).layers
    assert [(l["kind"], l["role"], l["config"]) for l in got] == [(l["kind"], l["role"], l["config"]) for l in want]
    assert {"pad", "conv_transpose2d", "upsample_bilinear", "mul", "cat"} & {l["kind"] for l in got}


# -- the ONNX training step's decompositions --------------------------------------------------------------------

@pytest.mark.parametrize("cin, cout, k, s, p, op, g, d", [
    (4, 3, 2, 2, 0, 0, 1, 1), (4, 6, 3, 2, 1, 1, 2, 1), (2, 2, 3, 1, 1, 0, 1, 2), (3, 5, 4, 2, 1, 0, 1, 1)])
def test_the_transposed_convolution_backward_matches_autograd(cin, cout, k, s, p, op, g, d):
    from thor_sdk.exporters.decompositions import convolution_backward

    torch.manual_seed(0)
    conv = nn.ConvTranspose2d(cin, cout, k, s, p, op, groups=g, dilation=d)
    x = torch.randn(2, cin, 5, 4, requires_grad=True)
    y = conv(x)
    gy = torch.randn_like(y)
    y.backward(gy)
    gx, gw, gb = convolution_backward(gy, x.detach(), conv.weight.detach(), [cout], [s, s], [p, p], [d, d], True,
                                      [op, op], g, [True, True, True])
    assert torch.allclose(gx, x.grad, atol=1e-5)
    assert torch.allclose(gw, conv.weight.grad, atol=1e-5)
    assert torch.allclose(gb, conv.bias.grad, atol=1e-5)


@pytest.mark.parametrize("h, w, sh, sw, corners", [(4, 5, 2, 2, False), (3, 3, 3, 2, True), (1, 3, 2, 4, True)])
def test_the_bilinear_upsampling_backward_matches_autograd(h, w, sh, sw, corners):
    from thor_sdk.exporters.decompositions import upsample_bilinear2d_backward

    x = torch.randn(2, 3, h, w, requires_grad=True)
    y = F.interpolate(x, scale_factor=(sh, sw), mode="bilinear", align_corners=corners)
    gy = torch.randn_like(y)
    y.backward(gy)
    got = upsample_bilinear2d_backward(gy, y.shape[2:], x.shape, corners, float(sh), float(sw))
    assert torch.allclose(got, x.grad, atol=1e-5)


# -- prior and pruning -----------------------------------------------------------------------------------------

def test_the_prior_places_the_new_kinds_and_their_neighbours():
    from thor_sdk.campaign.prior import DECONV_SHAPES, _valid, candidates, load_prior

    prior = load_prior()
    zoo = {(c["config"]["kernel"], c["config"]["padding"], c["config"]["output_padding"])
           for c in prior["kinds"]["conv_transpose2d"]["configs"]}
    assert zoo == {DECONV_SHAPES[0], DECONV_SHAPES[1]}  # U-Net's and ERFNet's
    got = candidates(prior, "conv_transpose2d", 60, seed=0)
    assert all(_valid("conv_transpose2d", c) for c, _, _ in got)
    assert {(c["kernel"], c["padding"], c["output_padding"]) for c, _, _ in got} == set(DECONV_SHAPES)
    pads = candidates(prior, "pad", 60, seed=0)
    assert all(_valid("pad", c) for c, _, _ in pads)
    shapes = {(c["pad_c"] > 0, c["pad_h"], c["pad_w"]) for c, _, _ in pads}
    assert {(True, 0, 0), (False, 0, 0), (False, 2, 2), (False, 1, 1)} <= shapes
    scales = {c["scale"] for c, _, _ in candidates(prior, "upsample_bilinear", 60, seed=0)}
    assert {c["config"]["scale"] for c in prior["kinds"]["upsample_bilinear"]["configs"]} == {4, 8}
    assert scales == {2, 4, 8}


def test_a_transposed_conv_is_a_producer_and_a_consumer_of_width_cuts(tmp_path):
    from thor_sdk.prune.groups import cut, find_groups
    from thor_sdk.prune.module import module_source

    conv = dict(in_channels=3, out_channels=16, kernel=3, stride=1, padding=1, groups=1, height=8, width=8, bias=1)
    deconv = dict(in_channels=16, out_channels=8, kernel=2, stride=2, padding=0, output_padding=0, height=8, width=8,
                  bias=1)
    layers = [{"kind": "conv2d", "role": "input", "config": conv},
              {"kind": "relu", "role": "hidden", "config": {"numel": 16 * 64}},
              {"kind": "conv_transpose2d", "role": "hidden", "config": deconv},
              {"kind": "upsample_bilinear", "role": "hidden", "config": dict(channels=8, height=16, width=16, scale=2)},
              {"kind": "conv2d", "role": "hidden", "config": dict(conv, in_channels=8, height=32, width=32)}]
    groups = find_groups(layers)
    assert groups == {0: [1, 2], 2: [3, 4]}
    out, _ = cut(layers, 2, 6, groups)
    assert out[2]["config"]["out_channels"] == 6 and out[3]["config"]["channels"] == 6
    assert out[4]["config"]["in_channels"] == 6

    from thor_sdk.layers import ModelLayers

    src = module_source(ModelLayers("decoder", [3, 8, 8], "float32", out))
    assert "nn.ConvTranspose2d(16, 6, 2, stride=2, padding=0, output_padding=0, bias=True)" in src
    assert 'nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)' in src
    path = tmp_path / "decoder.py"
    path.write_text(src)
    from thor_sdk.layers import load_module_from_file

    net = load_module_from_file(f"{path}:PrunedModel")
    assert tuple(net(torch.zeros(2, 3, 8, 8)).shape) == (2, 16, 32, 32)
