"""Every layer kind: build alone, shapes, train_flops/train_bytes, 2- and 3-layer probes, and the torch.fx
extraction of the kinds added for the model zoo (1-D CNNs, GRU, SE blocks, DenseNet/ShuffleNet ops)."""

import math

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError  # noqa: E402
from thor_sdk.harness.torch_trainer import trainer_for_probe_model  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402
from thor_sdk.layers.build import build_layer, example_input  # noqa: E402
from thor_sdk.layers.kinds import KINDS, cost_terms, get_kind  # noqa: E402
from thor_sdk.models.blocks import GRUSequence  # noqa: E402
from thor_sdk.probes import Probe  # noqa: E402

# one small valid config per kind (several for kinds whose shape rules branch)
CONFIGS = {
    "conv2d": [dict(in_channels=3, out_channels=4, kernel=3, stride=2, padding=1, groups=1, height=8, width=8,
                    bias=1),
               dict(in_channels=3, out_channels=4, kernel=5, stride=2, padding=2, groups=1, height=9, width=8,
                    bias=1, kernel_w=1, stride_w=1, padding_w=0)],
    "linear": [dict(in_features=6, out_features=5, tokens=1, bias=1), dict(in_features=6, out_features=5, tokens=3,
                                                                           bias=0)],
    "maxpool2d": [dict(channels=3, height=6, width=6, kernel=2, stride=2, padding=0),
                  dict(channels=3, height=6, width=6, kernel=2, stride=2, padding=0, kernel_w=1, stride_w=1,
                       padding_w=0)],
    "avgpool2d": [dict(channels=3, height=6, width=6, kernel=3, stride=1, padding=1)],
    "adaptive_avgpool2d": [dict(channels=3, height=4, width=4, out_size=1)],
    "batchnorm2d": [dict(channels=3, height=4, width=4)],
    "layernorm": [dict(normalized=8, tokens=3)],
    "relu": [dict(numel=12)],
    "relu6": [dict(numel=12)],
    "gelu": [dict(numel=12)],
    "tanh": [dict(numel=12)],
    "sigmoid": [dict(numel=12)],
    "dropout": [dict(numel=12, p=0.2)],
    "dropout2d": [dict(channels=4, spatial=6, p=0.2)],
    "flatten": [dict(numel=12)],
    "add": [dict(numel=12)],
    "embedding": [dict(num_embeddings=11, embedding_dim=4, seq_len=5, positional=0),
                  dict(num_embeddings=11, embedding_dim=4, seq_len=5, positional=1)],
    "lstm": [dict(input_size=4, hidden_size=6, seq_len=5, num_layers=2)],
    "transformer_block": [dict(d_model=8, n_heads=2, head_dim=4, d_ff=16, seq_len=5)],
    "conv1d": [dict(in_channels=3, out_channels=4, kernel=3, stride=1, padding=1, groups=1, length=10, bias=1),
               dict(in_channels=4, out_channels=4, kernel=5, stride=2, padding=2, groups=4, length=9, bias=0)],
    "batchnorm1d": [dict(channels=4, length=7), dict(channels=6, length=1)],
    "groupnorm": [dict(channels=6, num_groups=3, spatial=10), dict(channels=4, num_groups=1, spatial=1)],
    "prelu": [dict(channels=6, spatial=10, shared=0), dict(channels=4, spatial=1, shared=1)],
    "maxpool1d": [dict(channels=3, length=9, kernel=3, stride=2, padding=1)],
    "adaptive_avgpool1d": [dict(channels=3, length=9, out_size=1), dict(channels=3, length=9, out_size=3)],
    "gru": [dict(input_size=4, hidden_size=6, seq_len=5, num_layers=1),
            dict(input_size=4, hidden_size=6, seq_len=5, num_layers=2)],
    "lstm_cell": [dict(input_size=4, hidden_size=6, steps=5), dict(input_size=1, hidden_size=3, steps=1)],
    "gru_cell": [dict(input_size=4, hidden_size=6, steps=3)],
    "softmax": [dict(numel=24, last_dim=6), dict(numel=7, last_dim=7)],
    "hardswish": [dict(numel=12)],
    "hardsigmoid": [dict(numel=12)],
    "silu": [dict(numel=12)],
    "leaky_relu": [dict(numel=12)],
    "elu": [dict(numel=12)],
    "upsample": [dict(channels=2, height=3, width=4, scale=2)],
    "upsample_bilinear": [dict(channels=2, height=3, width=4, scale=2), dict(channels=1, height=2, width=2, scale=3)],
    "conv_transpose2d": [dict(in_channels=4, out_channels=3, kernel=2, stride=2, padding=0, output_padding=0, height=3,
                              width=5, bias=1),
                         dict(in_channels=3, out_channels=2, kernel=3, stride=2, padding=1, output_padding=1, height=4,
                              width=4, bias=0)],
    "reduce_sum": [dict(rows=1, reduced=5, inner=4), dict(rows=3, reduced=4, inner=1)],
    "reduce_max": [dict(rows=3, reduced=5, inner=1, indices=1), dict(rows=1, reduced=4, inner=6, indices=0)],
    "sub": [dict(numel=12)],
    "reduce_mean": [dict(rows=1, reduced=5, inner=4), dict(rows=3, reduced=4, inner=1)],
    "adaptive_maxpool2d": [dict(channels=3, height=5, width=5, out_size=1), dict(channels=2, height=6, width=6,
                                                                                 out_size=2),
                           dict(channels=4, height=1, width=9, out_size=1)],
    "pad": [dict(channels=2, height=3, width=4, pad_c=0, pad_h=2, pad_w=1),
            dict(channels=3, height=1, width=5, pad_c=4, pad_h=0, pad_w=0)],
    "mul": [dict(numel=12, broadcast=0), dict(numel=12, broadcast=1)],
    "cat": [dict(numel=12, parts=2), dict(numel=13, parts=3)],
    "permute": [dict(numel=12), dict(numel=13)],
    "elementwise": [dict(numel=24)],
    "clamp": [dict(numel=24)],
    "scale": [dict(numel=24)],
    "mha": [dict(embed_dim=8, num_heads=2, seq_len=5, kv_len=5, cross=0, need_weights=1, p=0.0, mask=0, causal=0),
            dict(embed_dim=8, num_heads=4, seq_len=5, kv_len=3, cross=1, need_weights=0, p=0.1, mask=0, causal=0),
            dict(embed_dim=8, num_heads=2, seq_len=5, kv_len=5, cross=0, need_weights=1, p=0.0, mask=1, causal=0),
            dict(embed_dim=8, num_heads=2, seq_len=5, kv_len=3, cross=1, need_weights=0, p=0.0, mask=1, causal=0),
            dict(embed_dim=8, num_heads=2, seq_len=5, kv_len=5, cross=0, need_weights=0, p=0.1, mask=0, causal=1)],
    "sdpa": [dict(num_heads=2, seq_len=5, kv_len=5, head_dim=4, causal=0, p=0.0),
             dict(num_heads=3, seq_len=4, kv_len=6, head_dim=8, causal=1, p=0.1)],
    "output": [dict(in_features=6, out_features=4, tokens=1)],
}
CASES = [(k, i) for k, cs in CONFIGS.items() for i in range(len(cs))]


def test_every_kind_has_a_test_config():
    assert set(CONFIGS) == set(KINDS)


@pytest.mark.parametrize("kind, i", CASES)
def test_layer_builds_and_trains_with_its_declared_shapes(kind, i):
    k, c = get_kind(kind), CONFIGS[kind][i]
    k.check_config(c)
    torch.manual_seed(0)
    layer = build_layer(kind, c).train()
    x = example_input(k, c, 2)
    if k.input_dtype == "float32":
        x.requires_grad_(True)
    out = layer(x)
    assert tuple(out.shape) == (2, *k.out_shape(c))
    out.float().square().sum().backward()
    if k.input_dtype == "float32":
        assert x.grad is not None and x.grad.shape == x.shape
    assert sum(p.numel() for p in layer.parameters()) == k.num_params(c)
    assert k.has_params == (k.num_params(c) > 0)


@pytest.mark.parametrize("kind, i", CASES)
def test_flops_and_bytes_are_positive_finite_and_grow_with_the_batch(kind, i):
    k, c = get_kind(kind), CONFIGS[kind][i]
    for role in k.roles:
        t1, t4 = cost_terms(kind, c, 1, role), cost_terms(kind, c, 4, role)
        assert t1 == {"flops": k.train_flops(c, 1, role), "bytes": k.train_bytes(c, 1, role)}
        assert math.isfinite(t4["flops"]) and math.isfinite(t4["bytes"])
        assert t1["bytes"] > 0 and t4["bytes"] > t1["bytes"]
        if kind == "flatten":
            assert t4["flops"] == 0
        else:
            assert t1["flops"] > 0 and t4["flops"] > t1["flops"]
        # affine in the batch size (the runtime splits them into per-sample and per-step terms)
        t2 = cost_terms(kind, c, 2, role)
        assert t4["bytes"] - t2["bytes"] == pytest.approx(2 * (t2["bytes"] - t1["bytes"]))
    if len(k.roles) == 2:
        # the input gradient is extra work
        assert k.train_bytes(c, 4, "hidden") > k.train_bytes(c, 4, "input")


def test_bytes_formula_on_a_linear_layer():
    c = dict(in_features=10, out_features=5, tokens=1, bias=1)
    p, b = 55, 3
    forward = 4 * b * 10 + 4 * p + 4 * b * 5
    backward = 4 * b * 5 + 4 * b * 10 + 4 * p + 4 * p  # output grad, saved input, weight grad; + params read
    update = 12 * p
    assert get_kind("linear").train_bytes(c, b, "input") == forward + backward - 4 * p + update
    assert get_kind("linear").train_bytes(c, b, "hidden") == forward + backward + 4 * b * 10 + update
    relu = get_kind("relu")
    assert relu.train_bytes({"numel": 10}, b, "input") == 4 * b * 20  # no backward at all


def test_kind_specific_extra_bytes():
    lstm, gru = get_kind("lstm"), get_kind("gru")
    c = dict(input_size=8, hidden_size=8, seq_len=16, num_layers=1)
    assert lstm.train_bytes(c, 2, "hidden") > gru.train_bytes(c, 2, "hidden")
    tb = get_kind("transformer_block")
    c1 = dict(d_model=16, n_heads=2, head_dim=8, d_ff=32, seq_len=8)
    c2 = dict(c1, seq_len=16)
    # attention matrices grow with seq_len^2: more than twice the bytes at twice the sequence
    assert tb.train_bytes(c2, 1, "hidden") - tb.train_bytes(c1, 1, "hidden") > (
        tb.train_bytes(c1, 1, "hidden") - 12 * 4 * tb.num_params(c1))
    emb = get_kind("embedding")
    small, big = (dict(num_embeddings=n, embedding_dim=4, seq_len=5, positional=0) for n in (10, 10000))
    # a bigger table costs its gradient and update, not reads in the forward
    diff = emb.train_bytes(big, 8, "input") - emb.train_bytes(small, 8, "input")
    assert diff == (4 + 12) * (10000 - 10) * 4  # weight grad written, SGD update
    mul = get_kind("mul")
    assert mul.train_bytes(dict(numel=100, broadcast=0), 2, "hidden") > mul.train_bytes(
        dict(numel=100, broadcast=1), 2, "hidden")


@pytest.mark.parametrize("kind, i", CASES)
def test_probe_parts_build_and_train_one_step(kind, i):
    k, c = get_kind(kind), CONFIGS[kind][i]
    for role in ("output",) if kind == "output" else k.roles:
        probe = Probe(kind, c, 2, role)
        for part in probe.parts():
            pm = probe.build(part)
            trainer = trainer_for_probe_model(pm)
            trainer.step()
            assert math.isfinite(float(trainer.last_loss))
            if part == "hidden":
                assert trainer.x.grad is not None


# -- extraction of the new kinds ---------------------------------------------------------------------------

class CNN1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 8, 5, padding=2)
        self.bn = nn.BatchNorm1d(8)
        self.pool = nn.MaxPool1d(2)
        self.conv2 = nn.Conv1d(8, 8, 3, groups=8, bias=False)
        self.gap = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(8, 16)
        self.bn2 = nn.BatchNorm1d(16)
        self.out = nn.Linear(16, 4)

    def forward(self, x):
        h = self.pool(F.elu(self.bn(self.conv(x))))
        h = F.leaky_relu(self.conv2(h), 0.1)
        h = torch.flatten(self.gap(h), 1)
        h = F.silu(self.bn2(self.fc(h)))
        return self.out(h)


class GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 12, batch_first=True)
        self.seq = GRUSequence(12, 10, num_layers=2)
        self.fc = nn.Linear(10, 3)

    def forward(self, x):
        h, _ = self.gru(x)
        h = self.seq(h)
        return self.fc(h.mean(dim=1))


class SEBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.Hardswish()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(8, 2, 1)
        self.fc2 = nn.Conv2d(2, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        h = self.act(self.conv(x))
        s = F.hardsigmoid(self.fc2(F.relu(self.fc1(self.pool(h)))))
        h = h * s
        return self.fc(h.mean((2, 3)))


class DenseAndShuffle(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.fc = nn.Linear(8 * 8 * 8, 2)

    def forward(self, x):
        h = torch.cat([x, self.conv(x)], dim=1)  # DenseNet: 8 channels
        b, c, hh, ww = h.shape
        h = h.view(b, 2, c // 2, hh, ww).transpose(1, 2).contiguous().view(b, c, hh, ww)  # channel shuffle
        a, r = h.chunk(2, dim=1)
        h = torch.cat((a, r * torch.sigmoid(r)), 1)
        h = self.up(self.conv2(h))
        h = F.interpolate(h, scale_factor=1, mode="nearest")
        return self.fc(torch.softmax(h, dim=-1).flatten(1))


def _kinds(net, shape):
    return [(l["kind"], l["role"]) for l in layers_of(net, input_shape=shape).layers]


def test_extract_1d_cnn():
    layers = layers_of(CNN1d(), input_shape=[3, 20]).layers
    assert [l["kind"] for l in layers] == ["conv1d", "batchnorm1d", "elu", "maxpool1d", "conv1d", "leaky_relu",
                                           "adaptive_avgpool1d", "flatten", "linear", "batchnorm1d", "silu",
                                           "output"]
    assert layers[0]["config"] == dict(in_channels=3, out_channels=8, kernel=5, stride=1, padding=2, groups=1,
                                       length=20, bias=1, dilation=1)
    assert layers[1]["config"] == dict(channels=8, length=20)
    assert layers[3]["config"] == dict(channels=8, length=20, kernel=2, stride=2, padding=0)
    assert layers[4]["config"]["groups"] == 8 and layers[4]["config"]["length"] == 10
    assert layers[6]["config"] == dict(channels=8, length=8, out_size=1)
    assert layers[9]["config"] == dict(channels=16, length=1)


def test_extract_gru_net():
    layers = layers_of(GRUNet(), input_shape=[7, 6]).layers
    assert [(l["kind"], l["role"]) for l in layers] == [("gru", "input"), ("gru", "hidden"),
                                                         ("adaptive_avgpool1d", "hidden"), ("output", "output")]
    assert layers[0]["config"] == dict(input_size=6, hidden_size=12, seq_len=7, num_layers=1)
    assert layers[1]["config"] == dict(input_size=12, hidden_size=10, seq_len=7, num_layers=2)
    assert layers[2]["config"] == dict(channels=10, length=7, out_size=1)


def test_extract_squeeze_and_excitation():
    layers = layers_of(SEBlock(), input_shape=[3, 6, 6]).layers
    assert [l["kind"] for l in layers] == ["conv2d", "hardswish", "adaptive_avgpool2d", "conv2d", "relu", "conv2d",
                                           "hardsigmoid", "mul", "adaptive_avgpool2d", "output"]
    assert layers[7] == {"name": "mul", "kind": "mul", "role": "hidden", "config": {"numel": 8 * 36, "broadcast": 1},
                         "op": "x * y"}


def test_extract_densenet_cat_shuffle_and_upsample():
    kinds = _kinds(DenseAndShuffle(), [4, 4, 4])
    # the concatenation reads the raw input too, but one input needs a gradient (the conv's output)
    assert kinds == [("conv2d", "input"), ("cat", "hidden"), ("flatten", "hidden"), ("permute", "hidden"),
                     ("flatten", "hidden"), ("sigmoid", "hidden"), ("mul", "hidden"), ("cat", "hidden"),
                     ("conv2d", "hidden"), ("upsample", "hidden"), ("upsample", "hidden"), ("softmax", "hidden"),
                     ("flatten", "hidden"), ("output", "output")]
    layers = layers_of(DenseAndShuffle(), input_shape=[4, 4, 4]).layers
    assert layers[1]["config"] == {"numel": 128, "parts": 2}
    assert layers[3]["config"] == {"numel": 128}
    assert layers[6]["config"] == {"numel": 64, "broadcast": 0}
    assert layers[9]["config"] == {"channels": 8, "height": 4, "width": 4, "scale": 2}
    assert layers[10]["config"]["scale"] == 1
    assert layers[11]["config"] == {"numel": 512, "last_dim": 8}


class _One(nn.Module):
    """Linear(8 -> 8), viewed as ``shape`` per sample, one op ``f``, flattened, then a Linear head."""

    def __init__(self, f, shape=(8,), head_in=8):
        super().__init__()
        self.f, self.shape = f, shape
        self.inp = nn.Linear(8, 8)
        self.fc = nn.Linear(head_in, 2)

    def forward(self, x):
        h = self.f(self.inp(x).view(-1, *self.shape))
        return self.fc(h.reshape(h.shape[0], -1))


def _middle(layers):
    """The layers between the input Linear and the head, reshapes left out."""
    assert layers[0]["kind"] == "linear" and layers[-1]["kind"] == "output"
    return [l for l in layers[1:-1] if l["kind"] != "flatten"]


@pytest.mark.parametrize("f, kind", [
    (nn.Hardswish(), "hardswish"), (F.hardswish, "hardswish"), (nn.Hardsigmoid(), "hardsigmoid"),
    (F.hardsigmoid, "hardsigmoid"), (nn.SiLU(), "silu"), (F.silu, "silu"), (nn.LeakyReLU(0.2), "leaky_relu"),
    (F.leaky_relu, "leaky_relu"), (nn.ELU(), "elu"), (F.elu, "elu"), (nn.Softmax(dim=-1), "softmax"),
    (lambda x: F.softmax(x, dim=-1), "softmax"), (lambda x: x.softmax(-1), "softmax"),
    (lambda x: torch.softmax(x, 1), "softmax"), (lambda x: x * x, "mul"), (lambda x: torch.mul(x, x), "mul"),
    (lambda x: x.mul(x), "mul"),
    # ELU's kernel with other constants, and softplus's cost (bench/bench_unary_ops.py): read by default, not approx
    (nn.SELU(), "elu"), (F.selu, "elu"), (torch.selu, "elu"), (nn.CELU(0.5), "elu"), (F.celu, "elu"),
    (nn.Softplus(beta=2), "elementwise"), (F.softplus, "elementwise"), (nn.LogSigmoid(), "elementwise"),
    (F.logsigmoid, "elementwise"),
    # clamp with number bounds: its own kind (its backward is not hardtanh's)
    (lambda x: x.clamp(-1, 1), "clamp"), (lambda x: torch.clamp(x, min=0.0), "clamp"),
    (lambda x: x.clip(0, 6), "clamp"),
    (lambda x: torch.clamp_min(x, 0.1), "clamp"), (lambda x: x.clamp_max_(2.0), "clamp"),
    (lambda x: x.clamp(max=x.size(1) * 0.5), "clamp"),
])
def test_single_op_forms(f, kind):
    (layer,) = _middle(layers_of(_One(f), input_shape=[8]).layers)
    assert layer["kind"] == kind and layer["role"] == "hidden" and layer["config"]["numel"] == 8
    assert "approx" not in layer


@pytest.mark.parametrize("f, why", [(lambda x: x.clamp(min=x.mean()), "a tensor bound"),
                                     (lambda x: torch.clamp(x, x, x + 1), "a tensor bound")])
def test_a_clamp_by_tensors_is_refused_by_name(f, why):
    with pytest.raises(UnsupportedOperatorError, match=why):
        layers_of(_One(f), input_shape=[8])


def test_the_clamp_probe_is_torch_clamp():
    """Kind clamp's probe runs ``torch.clamp`` itself: the same values and gradients as the operator."""
    from thor_sdk.layers.build import build_layer

    x = torch.randn(4, 8, requires_grad=True)
    y = build_layer("clamp", {"numel": 8})(x)
    y.sum().backward()
    assert torch.equal(y, torch.clamp(x, -1.0, 1.0)) and torch.equal(x.grad, ((x >= -1) & (x <= 1)).float())


@pytest.mark.parametrize("f, head_in, kind, config", [
    (lambda x: x.transpose(1, 2), 8, "permute", {"numel": 8}),
    (lambda x: torch.transpose(x, 1, 2), 8, "permute", {"numel": 8}),
    (lambda x: x.permute(0, 2, 1), 8, "permute", {"numel": 8}),
    (lambda x: x.mean(-1), 2, "adaptive_avgpool1d", {"channels": 2, "length": 4, "out_size": 1}),
    (lambda x: torch.mean(x, dim=2, keepdim=True), 2, "adaptive_avgpool1d",
     {"channels": 2, "length": 4, "out_size": 1}),
    (lambda x: F.adaptive_avg_pool1d(x, 2), 4, "adaptive_avgpool1d", {"channels": 2, "length": 4, "out_size": 2}),
    (lambda x: torch.cat(x.chunk(2, dim=1)[::-1], dim=1), 8, "cat", {"numel": 8, "parts": 2}),
    (lambda x: torch.cat(torch.split(x, 2, dim=2), dim=-1), 8, "cat", {"numel": 8, "parts": 2}),
])
def test_single_op_forms_on_sequences(f, head_in, kind, config):
    (layer,) = _middle(layers_of(_One(f, (2, 4), head_in), input_shape=[8]).layers)
    assert layer["kind"] == kind and layer["config"] == config


def test_channel_shuffle_module():
    (layer,) = _middle(layers_of(_One(nn.ChannelShuffle(2), (4, 2, 1)), input_shape=[8]).layers)
    assert layer["kind"] == "permute" and layer["config"] == {"numel": 8}


class _Bad(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(self.f(x))


@pytest.mark.parametrize("f", [lambda x: x * 2.0, lambda x: 0.5 * x, lambda x: x / 3, lambda x: -x,
                               lambda x: torch.mul(x, 0.5), lambda x: x.div(2.0), lambda x: torch.div(x, 4),
                               lambda x: x * x.size(-1) ** -0.5])
def test_a_tensor_times_a_number_is_kind_scale(f):
    """x * c, c * x, x / c and -x (the number a constant or computed from sizes, as attention scales its scores)
    are kind scale over the output's elements, not refused and not approx."""
    layers = layers_of(_Bad(lambda x: f(x).mean((2, 3))), input_shape=[8, 2, 4]).layers
    scale = [l for l in layers if l["kind"] == "scale"]
    assert len(scale) == 1 and scale[0]["config"] == {"numel": 64} and "approx" not in scale[0]


@pytest.mark.parametrize("f, name", [
    (lambda x: torch.softmax(x, dim=1).mean((2, 3)), "softmax(dim=1, not the last dimension)"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic").mean((2, 3)), "interpolate(mode='bicubic'"),
    (lambda x: torch.sub(x, x, alpha=2).mean((2, 3)), "torch.sub(with alpha)"),
    (lambda x: (1.0 / x).mean((2, 3)), "x / y"),
    (lambda x: torch.cat([x, x], 0).mean((2, 3))[:2], "torch.cat(along the batch)"),
    (lambda x: (x * x.mean((1, 3), keepdim=True)).mean((2, 3)), "Tensor.mean(over axes that are not adjacent)"),
])
def test_unsupported_variants_are_named(f, name):
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(_Bad(f), input_shape=[8, 2, 4])
    assert any(op.startswith(name) for op in err.value.ops), err.value.ops


class _Image(nn.Module):
    """Conv(3 -> 4, 3x3, padding 1) on 3x8x8 (or ``d`` x 8 when ``seq``), one op ``f``, flattened, a Linear head."""

    def __init__(self, f, seq=False):
        super().__init__()
        self.f = f
        self.inp = nn.Conv1d(3, 4, 3, padding=1) if seq else nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.LazyLinear(2)

    def forward(self, x):
        return self.fc(torch.flatten(self.f(self.inp(x)), 1))


def _image_middle(f, seq=False):
    model = _Image(f, seq)
    shape = [3, 8] if seq else [3, 8, 8]
    model(torch.zeros(1, *shape))  # the head's width
    layers = layers_of(model, input_shape=shape).layers
    return [l for l in layers[1:-1] if l["kind"] != "flatten"]


@pytest.mark.parametrize("f, module", [
    (lambda x: F.max_pool2d(x, 2), nn.MaxPool2d(2)),
    (lambda x: torch.max_pool2d(x, 2), nn.MaxPool2d(2)),
    (lambda x: F.max_pool2d(x, kernel_size=3, stride=2, padding=1), nn.MaxPool2d(3, 2, 1)),
    (lambda x: F.max_pool2d(x, (2, 2), (2, 2)), nn.MaxPool2d(2)),
    (lambda x: F.avg_pool2d(x, 2), nn.AvgPool2d(2)),
    (lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False), nn.AvgPool2d(3, 1, 1)),
    (lambda x: F.max_pool2d(x, 2, ceil_mode=True), nn.MaxPool2d(2)),  # 8 -> 4 either way
])
def test_a_pooling_function_is_the_layer_of_its_module(f, module):
    """PyTorch's MNIST example pools with F.max_pool2d: the function reads as its module does, whatever way its
    arguments are passed; ceil_mode where it leaves the output's size as is."""
    (got,) = _image_middle(f)
    (want,) = _image_middle(module)
    assert got["kind"] == want["kind"] and got["config"] == want["config"] and "approx" not in got


def test_a_1d_pooling_function_is_maxpool1d():
    (got,) = _image_middle(lambda x: F.max_pool1d(x, 2), seq=True)
    assert got["kind"] == "maxpool1d" and got["config"] == {"channels": 4, "length": 8, "kernel": 2, "stride": 2,
                                                           "padding": 0}


@pytest.mark.parametrize("f, name", [
    (lambda x: F.max_pool2d(x, 3, 2, ceil_mode=True), "F.max_pool2d(ceil_mode)"),  # 8 -> 4, not 3
    (lambda x: F.avg_pool2d(x, 3, 2, 0, True), "F.avg_pool2d(ceil_mode)"),
    (lambda x: F.max_pool2d(x, 2, dilation=2), "F.max_pool2d(dilation"),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=3), "F.avg_pool2d(dilation or divisor_override)"),
    (lambda x: F.max_pool2d(x, 2, return_indices=True)[0], "F.max_pool2d_with_indices"),
])
def test_pooling_outside_its_kind_is_named(f, name):
    model = _Bad(lambda x: f(x).mean((2, 3)))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(model, input_shape=[8, 8, 8])
    assert any(op.startswith(name) for op in err.value.ops), err.value.ops


class _Pool(nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool, self.fc = pool, nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(self.pool(x).mean((2, 3)))


@pytest.mark.parametrize("pool, ok", [(nn.AvgPool2d(3, 2, ceil_mode=True), False),
                                      (nn.AvgPool2d(2, ceil_mode=True), True),
                                      (nn.MaxPool2d(3, 2, ceil_mode=True), False),
                                      (nn.MaxPool2d(2, ceil_mode=True), True)])
def test_a_pooling_module_with_ceil_mode_is_its_kind_only_where_the_output_is_the_same(pool, ok):
    if ok:
        layers = layers_of(_Pool(pool), input_shape=[8, 8, 8]).layers
        (layer,) = [l for l in layers if l["kind"] in ("maxpool2d", "avgpool2d")]
        assert layer["config"]["kernel"] == 2 and get_kind(layer["kind"]).out_shape(layer["config"]) == (8, 4, 4)
    else:
        with pytest.raises(UnsupportedOperatorError) as err:
            layers_of(_Pool(pool), input_shape=[8, 8, 8])
        assert err.value.ops == [f"{type(pool).__name__}(ceil_mode)"]


@pytest.mark.parametrize("conv, padding", [
    (nn.Conv2d(3, 4, 3, padding="same"), 1), (nn.Conv2d(3, 4, 5, padding="same"), 2),
    (nn.Conv2d(3, 4, 3, padding="valid"), 0), (nn.Conv1d(3, 4, 7, padding="same"), 3),
])
def test_conv_padding_same_and_valid_are_their_numbers(conv, padding):
    shape = [3, 8] if isinstance(conv, nn.Conv1d) else [3, 8, 8]
    model = nn.Sequential(conv, nn.Flatten(), nn.LazyLinear(2))
    model(torch.zeros(1, *shape))
    (layer,) = [l for l in layers_of(model, input_shape=shape).layers if l["kind"].startswith("conv")]
    assert layer["config"]["padding"] == padding
    assert tuple(get_kind(layer["kind"]).out_shape(layer["config"])) == tuple(conv(torch.zeros(1, *shape)).shape[1:])


def test_conv_padding_same_with_an_even_kernel_is_refused_as_uneven():
    model = nn.Sequential(nn.Conv2d(3, 4, 2, padding="same"), nn.Flatten(), nn.Linear(256, 2))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(model, input_shape=[3, 8, 8])
    assert err.value.ops == ["Conv2d(padding='same', uneven)"]


def test_a_dilated_same_conv_pads_its_dilated_kernel():
    """padding="same" with dilation 2 pads dilation x (kernel - 1) / 2 = 2 per side: the output has the input's
    size, as the module's."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding="same", dilation=2), nn.Flatten(), nn.Linear(256, 2))
    (conv,) = [l for l in layers_of(model, input_shape=[3, 8, 8]).layers if l["kind"] == "conv2d"]
    assert "approx" not in conv and (conv["config"]["padding"], conv["config"]["dilation"]) == (2, 2)
    assert tuple(get_kind("conv2d").out_shape(conv["config"])) == (4, 8, 8)


@pytest.mark.parametrize("f", [nn.Hardtanh(), nn.Hardtanh(0.0, 6.0), lambda x: F.hardtanh(x, -2.0, 2.0),
                               F.relu6, nn.ReLU6()])
def test_hardtanh_is_relu6_the_kernel_relu6_runs(f):
    (layer,) = _middle(layers_of(_One(f), input_shape=[8]).layers)
    assert layer["kind"] == "relu6" and layer["config"] == {"numel": 8}


@pytest.mark.parametrize("f", [lambda x: x.unsqueeze(1).squeeze(1), lambda x: torch.unsqueeze(x, -1),
                               lambda x: x.unflatten(1, (2, 4)), lambda x: torch.squeeze(x.view(-1, 1, 8), 1)])
def test_unsqueeze_and_squeeze_are_reshapes(f):
    layers = layers_of(_One(f), input_shape=[8]).layers
    assert [l["kind"] for l in layers if l["kind"] != "flatten"] == ["linear", "output"]


class _Classifier(nn.Module):
    """Linear(8 -> 16), ReLU, Linear(16 -> 4), then ``f`` (the model's output)."""

    def __init__(self, f):
        super().__init__()
        self.f = f
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.f(self.b(torch.relu(self.a(x))))


@pytest.mark.parametrize("f", [lambda x: F.log_softmax(x, dim=1), nn.LogSoftmax(dim=-1), lambda x: x.log_softmax(-1),
                               lambda x: torch.log_softmax(x, 1), lambda x: F.log_softmax(x.view(-1, 2, 2), -1)])
def test_a_log_softmax_output_is_the_heads_loss(f):
    """A classifier returning log-probabilities (PyTorch's MNIST example, trained with nll_loss) costs what one
    returning logits trained with cross-entropy does: its final Linear is the output head, no layer of its own."""
    got = layers_of(_Classifier(f), input_shape=[8]).layers
    want = layers_of(_Classifier(lambda x: x), input_shape=[8]).layers
    assert [(l["kind"], l["config"]) for l in got] == [(l["kind"], l["config"]) for l in want]
    assert got[-1]["kind"] == "output" and got[-1]["config"]["out_features"] == 4


@pytest.mark.parametrize("f, name", [
    (lambda x: F.log_softmax(x, dim=-1) * 2.0, "log_softmax(not the model's output)"),
    (lambda x: (x.log_softmax(-1), x), "Tensor.log_softmax(not the model's output)"),
    (lambda x: F.log_softmax(x.view(-1, 2, 2), 1), "log_softmax(dim=1, not the last dimension)"),
])
def test_a_log_softmax_elsewhere_is_named(f, name):
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(_Classifier(f), input_shape=[8])
    assert name in err.value.ops, err.value.ops


class _TextCNN(nn.Module):
    """Kim's text CNN pattern: embeddings, a Conv1d, max over time as ``F.max_pool1d(x, x.size(2))``."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool
        self.emb, self.conv, self.fc = nn.Embedding(50, 8), nn.Conv1d(8, 6, 3), nn.Linear(6, 2)

    def forward(self, x):
        h = torch.relu(self.conv(self.emb(x).transpose(1, 2)))
        return self.fc(self.pool(h))


@pytest.mark.parametrize("pool", [lambda h: F.max_pool1d(h, h.size(2)).squeeze(2),
                                  lambda h: F.max_pool1d(h, h.shape[-1]).squeeze(2)])
def test_a_pooling_sized_from_its_input_reads_that_size(pool):
    layers = layers_of(_TextCNN(pool), input_shape=[12], input_dtype="int64").layers
    (got,) = [l for l in layers if l["kind"] == "maxpool1d"]
    assert got["config"] == {"channels": 6, "length": 10, "kernel": 10, "stride": 10, "padding": 0}


def test_a_global_average_pool_sized_from_its_input_is_avgpool2d():
    (got,) = _image_middle(lambda x: F.avg_pool2d(x, x.size()[2:]))
    assert got["kind"] == "avgpool2d" and got["config"] == {"channels": 4, "height": 8, "width": 8, "kernel": 8,
                                                           "stride": 8, "padding": 0, "kernel_w": 8, "stride_w": 8,
                                                           "padding_w": 0}


def test_a_pooling_sized_by_the_batch_is_refused():
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(_TextCNN(lambda h: F.max_pool1d(h[:, :, :6], h.size(0)).mean(2)), input_shape=[12],
                  input_dtype="int64")
    assert "F.max_pool1d(kernel not a number)" in err.value.ops


@pytest.mark.parametrize("act, shape, config", [
    (nn.PReLU(8), [8, 4, 4], {"channels": 8, "spatial": 16, "shared": 0}),
    (nn.PReLU(), [8, 4, 4], {"channels": 8, "spatial": 16, "shared": 1}),
    (nn.PReLU(), [12], {"channels": 12, "spatial": 1, "shared": 1}),
    (nn.PReLU(12), [12], {"channels": 12, "spatial": 1, "shared": 0}),
])
def test_prelu_is_its_kind_per_channel_or_shared(act, shape, config):
    model = nn.Sequential(nn.Flatten(), nn.Linear(_n(shape), _n(shape)), nn.Unflatten(1, shape), act, nn.Flatten(),
                          nn.Linear(_n(shape), 2))
    (layer,) = [l for l in layers_of(model, input_shape=shape).layers if l["kind"] == "prelu"]
    assert layer["config"] == config and layer["role"] == "hidden"
    built = build_layer("prelu", config)
    assert sum(p.numel() for p in built.parameters()) == get_kind("prelu").num_params(config)


def test_prelu_with_slopes_along_another_axis_is_refused():
    model = nn.Sequential(nn.Linear(6, 6), nn.Unflatten(1, (2, 3)), nn.PReLU(3), nn.Flatten(), nn.Linear(6, 2))
    with pytest.raises(Exception):  # torch itself refuses 3 slopes on 2 channels
        layers_of(model, input_shape=[6])


def _n(shape):
    return math.prod(shape)


class _CellLoop(nn.Module):
    """A cell stepped over time in a Python loop, zero states sized by the batch, read from the last state."""

    def __init__(self, cell):
        super().__init__()
        self.cell, self.fc = cell, nn.Linear(cell.hidden_size, 3)

    def forward(self, x):  # (B, T, features)
        h = torch.zeros(x.size(0), self.cell.hidden_size)
        state = (h, torch.zeros_like(h)) if isinstance(self.cell, nn.LSTMCell) else h
        for t in range(x.size(1)):
            state = self.cell(x[:, t], state)
        return self.fc(state[0] if isinstance(self.cell, nn.LSTMCell) else state)


@pytest.mark.parametrize("cell, kind", [(nn.LSTMCell(5, 7), "lstm_cell"), (nn.GRUCell(5, 7), "gru_cell")])
def test_a_cell_stepped_over_time_is_one_layer_counting_its_calls(cell, kind):
    ml = layers_of(_CellLoop(cell), input_shape=[4, 5])
    assert [l["kind"] for l in ml.layers] == [kind, "output"]
    (layer,) = ml.layers[:1]
    # the raw input needs no gradient (the state each call passes on is the layer's own): input
    assert layer["config"] == {"input_size": 5, "hidden_size": 7, "steps": 4} and layer["role"] == "input"
    assert layer["op"] == type(cell).__name__
    # its probe module reads the same, and has the cell's parameters (once: one weight update for all calls)
    built = build_layer(kind, layer["config"])
    assert sum(p.numel() for p in built.parameters()) == sum(p.numel() for p in cell.parameters())
    assert layers_of(nn.Sequential(built, nn.Linear(7, 2)), input_shape=[4, 5]).layers[0]["config"] == \
        layer["config"]


class _StackedCells(nn.Module):
    """Two cells stacked in one loop (the second reads the first's state) after a linear encoder of each step."""

    def __init__(self):
        super().__init__()
        self.enc, self.c1, self.c2, self.fc = nn.Linear(3, 6), nn.GRUCell(6, 8), nn.LSTMCell(8, 4), nn.Linear(4, 2)

    def forward(self, x):
        h1 = torch.zeros(x.size(0), 8)
        h2 = c2 = torch.zeros(x.size(0), 4)
        for x_t in self.enc(x).unbind(1):
            h1 = self.c1(x_t, h1)
            h2, c2 = self.c2(h1, (h2, c2))
        return self.fc(h2)


def test_stacked_cells_are_a_layer_each_whose_input_needs_its_gradient():
    ml = layers_of(_StackedCells(), input_shape=[5, 3])
    assert [(l["kind"], l["role"], l["config"].get("steps")) for l in ml.layers] == [
        ("linear", "input", None), ("gru_cell", "hidden", 5), ("lstm_cell", "hidden", 5), ("output", "output", None)]


@pytest.mark.parametrize("cell, name", [(nn.LSTMCell(5, 7, bias=False), "LSTMCell(bias=False)"),
                                        (nn.GRUCell(5, 7, bias=False), "GRUCell(bias=False)")])
def test_a_cell_without_biases_is_refused_by_name(cell, name):
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(_CellLoop(cell), input_shape=[3, 5])
    assert name in err.value.ops


def test_a_cells_calls_are_launches_of_its_cost_terms():
    from thor_sdk.runtime.terms import cost_terms as terms

    c = dict(input_size=3, hidden_size=4, steps=7)
    assert terms("lstm_cell", c, "hidden")["launches"] == 7.0
    one = get_kind("lstm_cell").forward_flops(dict(c, steps=1))
    assert get_kind("lstm_cell").forward_flops(c) == 7 * one


class _TwiceLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared, self.fc = nn.Linear(6, 6), nn.Linear(6, 2)

    def forward(self, x):
        return self.fc(self.shared(torch.relu(self.shared(x))))


def test_a_module_with_weights_called_twice_is_named_in_a_warning_a_cell_loop_is_not():
    from thor_sdk.api import repeated_module_warnings

    (line,) = repeated_module_warnings(layers_of(_TwiceLinear(), input_shape=[6]).layers)
    assert "1 module(s) with weights called more than once" in line and "shared x2" in line
    assert repeated_module_warnings(layers_of(_CellLoop(nn.GRUCell(5, 7)), input_shape=[4, 5]).layers) == []
    assert repeated_module_warnings(layers_of(nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2)),
                                              input_shape=[6]).layers) == []
