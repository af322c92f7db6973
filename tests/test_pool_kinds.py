"""Global max pooling (kind adaptive_maxpool2d), 1-D average pooling (kind avgpool2d over one row, the kernel
PyTorch runs it with) and a mean over other axes than a pooling's (kind reduce_mean): how users write them, what
stays refused, the layers built for probes against torch's own modules, the ONNX reader, and the prior."""

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402
from thor_sdk.layers.build import build_layer  # noqa: E402
from thor_sdk.layers.kinds import get_kind  # noqa: E402


class _Net(nn.Module):
    """A conv (so a gradient reaches the op: role hidden), the op ``f``, a flatten and a Linear head."""

    def __init__(self, f, shape):
        super().__init__()
        self.f = f
        conv = nn.Conv2d if len(shape) == 3 else nn.Conv1d
        self.conv = conv(shape[0], shape[0], 3, padding=1)
        self.fc = nn.LazyLinear(3)

    def forward(self, x):
        return self.fc(torch.flatten(self.f(self.conv(x)), 1))


def _layers(f, shape):
    net = _Net(f, shape)
    net(torch.zeros(2, *shape))  # materialise the LazyLinear
    return [l for l in layers_of(net, input_shape=list(shape)).layers if l["kind"] not in ("conv2d", "conv1d")]


def _built_matches(kind, config, op, x):
    """The probe's layer run on ``x`` reshaped to the kind's input gives ``op(x)``'s values, gradients flowing."""
    k = get_kind(kind)
    built = build_layer(kind, config)
    xin = x.reshape(x.shape[0], *k.in_shape(config)).clone().requires_grad_(True)
    y = built(xin)
    assert tuple(y.shape[1:]) == tuple(k.out_shape(config))
    torch.testing.assert_close(y.reshape(x.shape[0], -1), op(x).reshape(x.shape[0], -1))
    y.sum().backward()
    assert xin.grad is not None and xin.grad.shape == xin.shape


@pytest.mark.parametrize("f, shape, config", [
    (nn.AdaptiveMaxPool2d(1), [4, 6, 5], dict(channels=4, height=6, width=5, out_size=1)),
    (nn.AdaptiveMaxPool2d((2, 2)), [4, 6, 6], dict(channels=4, height=6, width=6, out_size=2)),
    (lambda x: F.adaptive_max_pool2d(x, 1), [4, 6, 6], dict(channels=4, height=6, width=6, out_size=1)),
    (nn.AdaptiveMaxPool1d(1), [5, 12], dict(channels=5, height=1, width=12, out_size=1)),
    (lambda x: F.adaptive_max_pool1d(x, output_size=1), [5, 12], dict(channels=5, height=1, width=12, out_size=1)),
])
def test_global_max_pooling_is_its_kind(f, shape, config):
    (layer, flat) = _layers(f, shape)[:2]
    assert (layer["kind"], layer["config"], layer["role"]) == ("adaptive_maxpool2d", config, "hidden")
    assert "approx" not in layer and flat["kind"] == "flatten"
    _built_matches("adaptive_maxpool2d", config, f, torch.randn(3, *shape))


@pytest.mark.parametrize("f, shape, why", [
    (nn.AdaptiveMaxPool1d(3), [5, 12], "only global max pooling"),
    (lambda x: F.adaptive_max_pool2d(x, (2, 3)), [4, 6, 6], "only a square one"),
    (lambda x: F.adaptive_max_pool2d(x, 1, return_indices=True)[0], [4, 6, 6], "with_indices"),  # another op
])
def test_other_adaptive_max_poolings_are_refused_with_the_reason(f, shape, why):
    net = _Net(f, shape)
    net(torch.zeros(2, *shape))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(net, input_shape=list(shape))
    assert any(why in op for op in err.value.ops), err.value.ops


@pytest.mark.parametrize("f, config", [
    (nn.AvgPool1d(4), dict(kernel_w=4, stride_w=4, padding_w=0)),
    (nn.AvgPool1d(3, stride=2, padding=1), dict(kernel_w=3, stride_w=2, padding_w=1)),
    (lambda x: F.avg_pool1d(x, 2), dict(kernel_w=2, stride_w=2, padding_w=0)),
    (lambda x: F.avg_pool1d(x, x.size(2)), dict(kernel_w=12, stride_w=12, padding_w=0)),  # pooled over time
])
def test_1d_average_pooling_is_a_one_row_2d_pooling(f, config):
    (layer,) = [l for l in _layers(f, [5, 12]) if l["kind"] == "avgpool2d"]
    want = dict(channels=5, height=1, width=12, kernel=1, stride=1, padding=0, **config)
    assert layer["config"] == want and "approx" not in layer
    _built_matches("avgpool2d", want, f, torch.randn(3, 5, 12))


def test_1d_average_pooling_with_ceil_mode_that_changes_the_shape_stays_refused():
    net = _Net(nn.AvgPool1d(5, ceil_mode=True), [5, 12])
    net(torch.zeros(2, 5, 12))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(net, input_shape=[5, 12])
    assert any("ceil_mode" in op for op in err.value.ops)


@pytest.mark.parametrize("f, shape, config", [
    (lambda x: torch.mean(x, dim=1, keepdim=True), [4, 6, 5], dict(rows=1, reduced=4, inner=30)),  # CBAM's
    (lambda x: x.mean(dim=-1), [4, 6, 5], dict(rows=24, reduced=5, inner=1)),
    (lambda x: x.mean(dim=(1, 2)), [4, 6, 5], dict(rows=1, reduced=24, inner=5)),
])
def test_a_mean_no_pooling_runs_is_reduce_mean(f, shape, config):
    (layer,) = [l for l in _layers(f, shape) if l["kind"] == "reduce_mean"]
    assert layer["config"] == config and "approx" not in layer
    _built_matches("reduce_mean", config, f, torch.randn(3, *shape))


def test_means_that_are_poolings_keep_their_pooling_kinds():
    assert _layers(lambda x: x.mean((2, 3)), [4, 6, 5])[0]["kind"] == "adaptive_avgpool2d"
    assert _layers(lambda x: x.mean(-1), [4, 12])[0]["kind"] == "adaptive_avgpool1d"


def test_the_argmax_of_adaptive_max_pooling_is_in_its_bytes_even_without_a_backward():
    k = get_kind("adaptive_maxpool2d")
    avg = get_kind("adaptive_avgpool2d")
    c = dict(channels=8, height=6, width=6, out_size=2)
    assert k.train_bytes(c, 4, "hidden") - avg.train_bytes(c, 4, "hidden") == pytest.approx(4 * 2 * 8 * 8 * 4)
    assert k.train_bytes(c, 4, "input") - avg.train_bytes(c, 4, "input") == pytest.approx(4 * 8 * 8 * 4)
    assert k.train_flops(c, 4, "hidden") == avg.train_flops(c, 4, "hidden") > 0
    m = get_kind("reduce_mean")
    r = dict(rows=2, reduced=5, inner=3)
    assert m.train_flops(r, 1, "input") == 2 * 3 * 6 > get_kind("reduce_sum").train_flops(r, 1, "input")


def _onnx_graph(op, in_shape, out_shape, **attrs):
    import onnx
    from onnx import TensorProto, helper

    inputs = ["x"]
    inits = []
    if "axes_input" in attrs:
        inits.append(helper.make_tensor("axes", TensorProto.INT64, [len(attrs["axes_input"])], attrs.pop("axes_input")))
        inputs.append("axes")
    node = helper.make_node(op, inputs, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *in_shape])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *out_shape])], inits)
    return onnx.helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("op, in_shape, out_shape, attrs, kind, config", [
    ("GlobalMaxPool", [4, 6, 5], [4, 1, 1], {}, "adaptive_maxpool2d", dict(channels=4, height=6, width=5, out_size=1)),
    ("GlobalMaxPool", [4, 9], [4, 1], {}, "adaptive_maxpool2d", dict(channels=4, height=1, width=9, out_size=1)),
    ("ReduceMean", [4, 6, 5], [1, 6, 5], dict(axes_input=[1]), "reduce_mean", dict(rows=1, reduced=4, inner=30)),
    # means that are poolings, as torch.fx reads x.mean(-1) of [C, L] and x.mean((2, 3)) of an image
    ("ReduceMean", [4, 9], [4, 1], dict(axes_input=[-1]), "adaptive_avgpool1d", dict(channels=4, length=9,
                                                                                  out_size=1)),
    ("ReduceMean", [4, 6, 5], [4, 1, 1], dict(axes_input=[2, 3]), "adaptive_avgpool2d",
     dict(channels=4, height=6, width=5, out_size=1)),
    ("ReduceSum", [6, 8], [8], dict(axes_input=[1], keepdims=0), "reduce_sum", dict(rows=1, reduced=6, inner=8)),
    ("ReduceMax", [4, 6, 5], [4, 6], dict(axes_input=[-1], keepdims=0), "reduce_max",
     dict(rows=24, reduced=5, inner=1, indices=0)),
])
def test_the_onnx_reader_reads_the_reductions_and_global_max_pooling(tmp_path, op, in_shape, out_shape, attrs, kind,
                                                                     config):
    import onnx

    from thor_sdk.layers.onnx_import import layers_from_onnx

    path = tmp_path / "m.onnx"
    onnx.save(_onnx_graph(op, in_shape, out_shape, **attrs), str(path))
    (layer,) = layers_from_onnx(str(path)).layers
    assert (layer["kind"], layer["config"]) == (kind, config)


def test_the_onnx_reader_refuses_a_reduction_over_the_batch_or_unknown_axes(tmp_path):
    import onnx

    from thor_sdk.layers.onnx_import import layers_from_onnx

    for attrs, why in ((dict(axes_input=[0]), "over the batch"), ({}, "axes not known")):
        path = tmp_path / "m.onnx"
        onnx.save(_onnx_graph("ReduceSum", [6, 8], [6, 8], **attrs), str(path))
        with pytest.raises(UnsupportedOperatorError) as err:
            layers_from_onnx(str(path))
        assert any(why in o for o in err.value.ops), err.value.ops


def test_the_prior_places_the_new_kinds_and_keeps_1d_rows_at_one():
    from thor_sdk.campaign.prior import _scaled, _valid, candidates, load_prior

    prior = load_prior()
    for kind in ("adaptive_maxpool2d", "reduce_mean"):
        assert prior["kinds"][kind]["configs"]
        got = candidates(prior, kind, 40, seed=0)
        assert got and all(_valid(kind, c) for c, _, _ in got)
    pools = [c for c, _, _ in candidates(prior, "avgpool2d", 200, seed=0)]
    assert any(c["height"] == 1 for c in pools) and any(c["height"] > 1 for c in pools)  # EEGNet's and DenseNet's
    one_row = dict(channels=16, height=1, width=256, kernel=1, stride=1, padding=0, kernel_w=4, stride_w=4,
                   padding_w=0)
    scaled = _scaled("avgpool2d", one_row, {"channels": 1.9, "height": 1.7, "width": 1.7})
    assert (scaled["height"], scaled["width"], scaled["channels"]) == (1, 435, 32)  # 1-D data stays one row
    square = _scaled("avgpool2d", dict(one_row, height=16, width=16), {"height": 1.7, "width": 1.7})
    assert square["height"] == square["width"] == 27


class _Two(nn.Module):
    """Two Linear branches of one input (both carry gradients), the op ``f`` of them, a Linear head."""

    def __init__(self, f):
        super().__init__()
        self.f, self.a, self.b, self.fc = f, nn.Linear(8, 6), nn.Linear(8, 6), nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(self.f(self.a(x), self.b(x)))


@pytest.mark.parametrize("f, kind", [
    (lambda a, b: a - b, "sub"), (lambda a, b: torch.sub(a, b), "sub"), (lambda a, b: a.sub(b), "sub"),
    (lambda a, b: a - b.mean(-1, keepdim=True), "sub"),  # broadcast, as add takes it
    (lambda a, b: a - 1.5 + b, "add"),  # a number subtracted: add's kernel (x + (-c))
    (lambda a, b: (1.0 - a) * b, "scale"),  # a number minus a tensor (a gate's 1 - z): as -x
])
def test_a_difference_of_tensors_is_kind_sub_and_a_number_subtracted_is_add(f, kind):
    layers = layers_of(_Two(f), input_shape=[8]).layers
    ops = [l for l in layers if l["op"] in ("x - y", "torch.sub", "Tensor.sub")]
    assert [l["kind"] for l in ops] == [kind] and ops[0]["config"] == {"numel": 6} and "approx" not in ops[0]


@pytest.mark.parametrize("f, why", [(lambda a, b: torch.sub(a, b, alpha=2), "with alpha"),
                                    (lambda a, b: a.sub(b, alpha=0.5), "with alpha")])
def test_other_subtractions_are_refused_with_the_reason(f, why):
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(_Two(f), input_shape=[8])
    assert any(why in op for op in err.value.ops), err.value.ops


def test_the_sub_probe_runs_both_gradient_paths_and_costs_more_bytes_than_add():
    built = build_layer("sub", {"numel": 6})
    x = torch.randn(2, 6, requires_grad=True)
    y = built(x)
    assert tuple(y.shape) == (2, 6) and y.grad_fn.name() == "SubBackward0"
    y.sum().backward()
    assert torch.equal(x.grad, torch.zeros(2, 6))  # d(x - x)/dx: the two paths, one negated, cancel
    sub, add = get_kind("sub"), get_kind("add")
    c = {"numel": 6}
    assert sub.train_bytes(c, 4, "hidden") - add.train_bytes(c, 4, "hidden") == pytest.approx(4 * 8 * 6)
    assert sub.train_flops(c, 4, "hidden") == add.train_flops(c, 4, "hidden")


@pytest.mark.parametrize("second, kind", [("act", "sub"), ("scalar", "add"), ("scalar-first", "scale"),
                                          ("tensor", None)])
def test_the_onnx_reader_reads_sub(tmp_path, second, kind):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from thor_sdk.layers.onnx_import import layers_from_onnx

    relu = helper.make_node("Relu", ["x"], ["r"])
    inits = []
    if second.startswith("scalar"):
        inits.append(numpy_helper.from_array(np.array(1.5, dtype=np.float32), "c"))
    elif second == "tensor":
        inits.append(numpy_helper.from_array(np.ones((1, 6), dtype=np.float32), "c"))
    node = helper.make_node("Sub", {"act": ["x", "r"], "scalar": ["r", "c"], "scalar-first": ["c", "r"],
                                    "tensor": ["c", "r"]}[second], ["y"])
    g = helper.make_graph([relu, node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])], inits)
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    if kind is None:
        with pytest.raises(UnsupportedOperatorError):
            layers_from_onnx(str(path))
        return
    layers = layers_from_onnx(str(path)).layers
    assert [(l["kind"], l["config"]) for l in layers] == [("relu", {"numel": 6}), (kind, {"numel": 6})]


def test_a_pad_after_a_reduction_to_a_scalar_is_refused_not_a_crash(tmp_path):
    # found by the fuzz suite once reductions joined it: shape inference makes the Pad's input rank 0, and the
    # reader indexed its batch axis (IndexError)
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from thor_sdk.errors import ThorError
    from thor_sdk.layers.onnx_import import layers_from_onnx

    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Pad", ["s", "p"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros(0, np.int64), "p")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    with pytest.raises(ThorError) as err:
        layers_from_onnx(str(path))
    assert any("without a batch axis" in op or "every axis" in op for op in getattr(err.value, "ops", [str(err.value)]))
