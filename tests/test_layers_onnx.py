"""ONNX file -> THOR layer list (thor_sdk.layers.onnx_import).

Small graphs are written with onnx.helper directly; reference nets are exported with
torch.onnx.export (training mode, so BatchNorm and Dropout stay in the graph) and their ONNX layer
lists must equal the torch.fx layer lists of the same models.
"""

import json
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from thor_sdk.errors import FormatError, ModelError, NotFoundError, UnsupportedOperatorError, UsageError
from thor_sdk.layers import layers_of
from thor_sdk.layers.onnx_import import layers_from_onnx

F = TensorProto.FLOAT


def _init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


def _const(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def _save(path, nodes, x_shape, inits=(), out="y", x_type=F, opset=17, extra_inputs=()):
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", x_type, x_shape), *extra_inputs],
        [helper.make_tensor_value_info(out, F, None)],
        initializer=list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, str(path))
    return str(path)


def _summary(layers):
    return [(l["kind"], l["role"], l["config"]) for l in layers]


# -- small hand-built graphs --------------------------------------------------------------------------

def test_conv_pool_flatten_gemm(tmp_path):
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], group=4, auto_pad="SAME_UPPER"),
        helper.make_node("Flatten", ["c2"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = [_init("w1", (4, 3, 3, 3)), _init("b1", (4,)), _init("w2", (4, 1, 3, 3)),
             _init("wf", (10, 64)), _init("bf", (10,))]
    ml = layers_from_onnx(_save(tmp_path / "small.onnx", nodes, ["N", 3, 8, 8], inits))
    assert ml.name == "small" and ml.input_shape == [3, 8, 8] and ml.input_dtype == "float32"
    assert _summary(ml.layers) == [
        ("conv2d", "input", {"in_channels": 3, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1,
                             "groups": 1, "height": 8, "width": 8, "bias": 1, "dilation": 1, "kernel_w": 3,
                             "stride_w": 1, "padding_w": 1}),
        ("relu", "hidden", {"numel": 256}),
        ("maxpool2d", "hidden", {"channels": 4, "height": 8, "width": 8, "kernel": 2, "stride": 2, "padding": 0,
                                 "kernel_w": 2, "stride_w": 2, "padding_w": 0}),
        ("conv2d", "hidden", {"in_channels": 4, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1,
                              "groups": 4, "height": 4, "width": 4, "bias": 0, "dilation": 1, "kernel_w": 3,
                              "stride_w": 1, "padding_w": 1}),
        ("flatten", "hidden", {"numel": 64}),
        ("output", "output", {"in_features": 64, "out_features": 10, "tokens": 1}),
    ]


def test_roles_stay_input_until_a_parameter_layer(tmp_path):
    # x -> ReLU -> AvgPool -> Conv -> BN -> ReLU -> Add(residual) -> GlobalAvgPool -> Gemm
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("AveragePool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Add", ["r", "p"], ["res"]),
        helper.make_node("GlobalAveragePool", ["res"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"]),
    ]
    inits = [_init("w", (2, 2, 1, 1)), _init("s", (2,)), _init("bb", (2,)), _init("m", (2,)), _init("v", (2,)),
             _init("wf", (2, 5))]
    ml = layers_from_onnx(_save(tmp_path / "roles.onnx", nodes, [1, 2, 6, 6], inits))
    assert [(l["kind"], l["role"]) for l in ml.layers] == [
        ("relu", "input"), ("avgpool2d", "input"), ("conv2d", "input"), ("batchnorm2d", "hidden"),
        ("relu", "hidden"), ("add", "hidden"), ("adaptive_avgpool2d", "hidden"), ("flatten", "hidden"),
        ("output", "output"),
    ]
    assert ml.layers[5]["config"] == {"numel": 18}
    assert ml.layers[6]["config"] == {"channels": 2, "height": 3, "width": 3, "out_size": 1}
    assert ml.layers[-1]["config"] == {"in_features": 2, "out_features": 5, "tokens": 1}  # Gemm, transB=0


def test_matmul_with_bias_add_is_one_linear_with_tokens(tmp_path):
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("MatMul", ["t", "w2"], ["y"]),
    ]
    inits = [_init("w1", (16, 32)), _init("b1", (32,)), _init("w2", (32, 4))]
    ml = layers_from_onnx(_save(tmp_path / "mlp.onnx", nodes, ["batch", 5, 16], inits))
    assert _summary(ml.layers) == [
        ("linear", "input", {"in_features": 16, "out_features": 32, "tokens": 5, "bias": 1}),
        ("tanh", "hidden", {"numel": 160}),
        ("output", "output", {"in_features": 32, "out_features": 4, "tokens": 5}),
    ]


@pytest.mark.parametrize("order", ["x_times_then_half", "half_of_one_plus_erf", "half_x_first"])
def test_erf_decomposed_gelu_is_one_gelu(tmp_path, order):
    nodes = [_const("sqrt2", 2 ** 0.5), _const("one", 1.0), _const("half", 0.5),
             helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Div", ["h", "sqrt2"], ["d"]),
             helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["e1"])]
    if order == "x_times_then_half":
        nodes += [helper.make_node("Mul", ["h", "e1"], ["m"]), helper.make_node("Mul", ["m", "half"], ["g"])]
    elif order == "half_of_one_plus_erf":
        nodes += [helper.make_node("Mul", ["e1", "half"], ["m"]), helper.make_node("Mul", ["h", "m"], ["g"])]
    else:
        nodes += [helper.make_node("Mul", ["h", "half"], ["m"]), helper.make_node("Mul", ["m", "e1"], ["g"])]
    nodes.append(helper.make_node("MatMul", ["g", "w2"], ["y"]))
    ml = layers_from_onnx(_save(tmp_path / "gelu.onnx", nodes, ["N", 8], [_init("w1", (8, 12)), _init("w2", (12, 3))]))
    assert [l["kind"] for l in ml.layers] == ["linear", "gelu", "output"]
    assert ml.layers[1]["config"] == {"numel": 12} and ml.layers[1]["role"] == "hidden"


def test_gelu_op_clip_relu6_dropout_ratio_and_trailing_softmax(tmp_path):
    nodes = [
        _const("lo", 0.0), _const("hi", 6.0), _const("ratio", 0.25), _const("train", True, np.bool_),
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
        helper.make_node("Gelu", ["h"], ["g"]),
        helper.make_node("Clip", ["g", "lo", "hi"], ["c"]),
        helper.make_node("Dropout", ["c", "ratio", "train"], ["d", "mask"]),
        helper.make_node("Sigmoid", ["d"], ["s"]),
        helper.make_node("Gemm", ["s", "w2"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = [_init("w1", (20, 10)), _init("b1", (20,)), _init("w2", (3, 20))]
    ml = layers_from_onnx(_save(tmp_path / "act.onnx", nodes, ["N", 10], inits, opset=20))
    assert _summary(ml.layers) == [
        ("linear", "input", {"in_features": 10, "out_features": 20, "tokens": 1, "bias": 1}),
        ("gelu", "hidden", {"numel": 20}),
        ("relu6", "hidden", {"numel": 20}),
        ("dropout", "hidden", {"numel": 20, "p": 0.25}),
        ("sigmoid", "hidden", {"numel": 20}),
        ("output", "output", {"in_features": 20, "out_features": 3, "tokens": 1}),
    ]


def test_embedding_with_positional_add_layernorm(tmp_path):
    nodes = [
        helper.make_node("Gather", ["emb", "x"], ["e"]),
        helper.make_node("Add", ["e", "pos"], ["ep"]),
        helper.make_node("LayerNormalization", ["ep", "g", "b"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w"], ["y"]),
    ]
    inits = [_init("emb", (50, 8)), _init("pos", (12, 8)), _init("g", (8,)), _init("b", (8,)), _init("w", (8, 50))]
    ml = layers_from_onnx(_save(tmp_path / "emb.onnx", nodes, ["N", 12], inits, x_type=TensorProto.INT64))
    assert ml.input_dtype == "int64" and ml.input_shape == [12]
    assert _summary(ml.layers) == [
        ("embedding", "input", {"num_embeddings": 50, "embedding_dim": 8, "seq_len": 12, "positional": 1}),
        ("layernorm", "hidden", {"normalized": 8, "tokens": 12}),
        ("output", "output", {"in_features": 8, "out_features": 50, "tokens": 12}),
    ]


def test_batch_first_lstm_layout_1_and_its_squeeze_are_one_layer(tmp_path):
    nodes = [
        _const("ax", [2], np.int64),
        helper.make_node("LSTM", ["x", "W", "R"], ["Y"], hidden_size=6, layout=1),
        helper.make_node("Squeeze", ["Y", "ax"], ["s"]),  # [B, T, 1, H] -> [B, T, H]
        helper.make_node("MatMul", ["s", "w"], ["y"]),
    ]
    inits = [_init("W", (1, 24, 4)), _init("R", (1, 24, 6)), _init("w", (6, 3))]
    ml = layers_from_onnx(_save(tmp_path / "lstm.onnx", nodes, ["N", 7, 4], inits))
    assert _summary(ml.layers) == [
        ("lstm", "input", {"input_size": 4, "hidden_size": 6, "seq_len": 7, "num_layers": 1}),
        ("output", "output", {"in_features": 6, "out_features": 3, "tokens": 7}),
    ]


def test_layout_0_lstm_between_transposes_with_symbolic_batch_annotations(tmp_path):
    """What torch exporters write for a batch_first LSTM: transpose to [T, B, I], LSTM with layout 0,
    drop the num_directions axis, transpose back; intermediate tensors annotated with the symbolic batch."""
    nodes = [
        _const("shape", [0, 0, -1], np.int64),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
        helper.make_node("Shape", ["xt"], ["xs"]),  # exporters size the initial state from the input
        helper.make_node("LSTM", ["xt", "W", "R", "B"], ["Y", "Yh"], hidden_size=6),
        helper.make_node("Transpose", ["Y"], ["yt"], perm=[2, 0, 1, 3]),  # [B, T, 1, H]
        helper.make_node("Reshape", ["yt", "shape"], ["yr"]),  # [B, T, H]
        helper.make_node("MatMul", ["yr", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    inits = [_init("W", (1, 24, 4)), _init("R", (1, 24, 6)), _init("B", (1, 48)), _init("w", (6, 3)), _init("b", (3,))]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F, ["s0", 7, 4])],
        [helper.make_tensor_value_info("y", F, ["s0", 7, 3])], initializer=inits,
        value_info=[helper.make_tensor_value_info("yr", F, ["s0", 7, 6]),
                    helper.make_tensor_value_info("xt", F, [7, "s0", 4])])
    path = tmp_path / "lstm0.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    assert _summary(layers_from_onnx(str(path)).layers) == [
        ("lstm", "input", {"input_size": 4, "hidden_size": 6, "seq_len": 7, "num_layers": 1}),
        ("output", "output", {"in_features": 6, "out_features": 3, "tokens": 7}),
    ]


def test_shape_only_subgraph_is_free_and_reshape_is_flatten(tmp_path):
    nodes = [
        _const("zero", [0], np.int64), _const("minus1", [-1], np.int64),
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shape", ["r"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
        helper.make_node("Concat", ["n", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"]),
        helper.make_node("Identity", ["flat"], ["flat2"]),
        helper.make_node("Gemm", ["flat2", "w"], ["y"]),
    ]
    ml = layers_from_onnx(_save(tmp_path / "shape.onnx", nodes, ["N", 2, 3, 4], [_init("w", (24, 2))]))
    assert _summary(ml.layers) == [
        ("relu", "input", {"numel": 24}), ("flatten", "input", {"numel": 24}),
        ("output", "output", {"in_features": 24, "out_features": 2, "tokens": 1}),
    ]


def test_every_unsupported_operator_in_one_error(tmp_path):
    nodes = [
        helper.make_node("Einsum", ["x", "x"], ["e"], equation="bi,bi->bi"),
        helper.make_node("Softmax", ["e"], ["s"], axis=0),  # mid-graph, over the batch axis
        helper.make_node("Div", ["s", "s"], ["m"]),
        helper.make_node("Gemm", ["m", "wf"], ["y"]),
    ]
    path = _save(tmp_path / "bad.onnx", nodes, ["N", 4], [_init("wf", (4, 2))])
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert err.value.ops == ["Div", "Einsum", "Softmax(not over the last axis)"]
    assert str(err.value).startswith("bad.onnx uses operators with no thor-sdk layer kind: Div, Einsum, Softmax")


def test_a_mul_of_two_activations_a_gate_and_a_scale(tmp_path):
    """Mul as torch's x * y: two activations of one size (broadcast 0), a smaller gate (broadcast 1, a squeeze-and-
    excitation), an activation times a constant scalar (kind scale); by a constant tensor a broadcast mul."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Mul", ["c", "c"], ["m1"]),
        helper.make_node("GlobalAveragePool", ["m1"], ["g"]),
        helper.make_node("Mul", ["m1", "g"], ["m2"]),
        _const("half", 0.5),
        helper.make_node("Mul", ["half", "m2"], ["m3"]),
        helper.make_node("Flatten", ["m3"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"]),
    ]
    inits = [_init("w1", (4, 3, 1, 1)), _init("wf", (64, 2))]
    layers = layers_from_onnx(_save(tmp_path / "mul.onnx", nodes, ["N", 3, 4, 4], inits)).layers
    assert [(l["kind"], l["config"]) for l in layers if l["kind"] in ("mul", "scale")] == [
        ("mul", {"numel": 64, "broadcast": 0}), ("mul", {"numel": 64, "broadcast": 1}), ("scale", {"numel": 64})]
    # by a constant tensor (a layer scale, a parameter): as torch.fx reads x * param, broadcast over the batch at least
    for shape in ((4, 1, 1), (1, 4, 4, 4)):
        nodes[4] = helper.make_node("Constant", [], ["half"], value=numpy_helper.from_array(np.ones(shape, np.float32)))
        layers = layers_from_onnx(_save(tmp_path / "mul2.onnx", nodes, ["N", 3, 4, 4], inits)).layers
        assert [(l["kind"], l["config"]) for l in layers if l["kind"] in ("mul", "scale")][-1] == (
            "mul", {"numel": 64, "broadcast": 1})


@pytest.mark.parametrize("node, label", [
    (helper.make_node("Conv", ["x", "w"], ["c"], pads=[0, 0, 1, 1]), "Conv(asymmetric padding)"),
    (helper.make_node("Conv", ["x", "w"], ["c"], dilations=[2, 1]), "Conv(non-square dilation)"),
    (helper.make_node("Conv", ["x", "w"], ["c"], dilations=[2, 2, 2]), "Conv(kernel or dilations not 2-D)"),
    (helper.make_node("MaxPool", ["x"], ["c"], kernel_shape=[2, 2, 1]),
     "MaxPool(kernel or strides of another rank than its input)"),
    # 4 -> 2 with ceil_mode, 1 without: not the pooling the kind is probed as
    (helper.make_node("MaxPool", ["x"], ["c"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), "MaxPool(ceil_mode)"),
    (helper.make_node("AveragePool", ["x"], ["c"], kernel_shape=[2, 2], dilations=[2, 2]), "AveragePool(dilation)"),
    (helper.make_node("Clip", ["x", "lo", "x"], ["c"]), "Clip(bounds that are not ordered numbers)"),
])
def test_unsupported_variants_of_supported_ops(tmp_path, node, label):
    nodes = [_const("lo", -1.0), node, helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("MatMul", ["f", "wf"], ["y"])]
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(_save(tmp_path / "v.onnx", nodes, [1, 1, 4, 4],
                               [_init("w", (1, 1, 3, 3)), _init("wf", (4, 2))]))
    assert label in err.value.ops


def test_a_clip_of_other_number_bounds_is_clamp(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), _const("lo", -1.0), _const("hi", 2.0),
             helper.make_node("Clip", ["h", "lo", "hi"], ["a"]), helper.make_node("MatMul", ["a", "w1"], ["y"])]
    ml = layers_from_onnx(_save(tmp_path / "clip.onnx", nodes, ["N", 8], [_init("w0", (8, 6)), _init("w1", (6, 2))]))
    assert _summary(ml.layers)[1] == ("clamp", "hidden", {"numel": 6})


@pytest.mark.parametrize("op,kind", [("Selu", "elu"), ("Celu", "elu"), ("Softplus", "elementwise")])
def test_selu_celu_and_softplus_read_as_the_kinds_torch_reads_them_as(tmp_path, op, kind):
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node(op, ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "w1"], ["y"])]
    ml = layers_from_onnx(_save(tmp_path / "act.onnx", nodes, ["N", 8], [_init("w0", (8, 6)), _init("w1", (6, 2))]))
    assert _summary(ml.layers)[1] == (kind, "hidden", {"numel": 6}) and "approx" not in ml.layers[1]


def test_dynamic_per_sample_axis_needs_input_shape(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
    path = _save(tmp_path / "dyn.onnx", nodes, ["N", "seq", 8], [_init("w", (8, 3))])
    with pytest.raises(UsageError, match="seq"):
        layers_from_onnx(path)
    ml = layers_of(path, input_shape="10,8")
    assert ml.input_shape == [10, 8]
    assert ml.layers[-1]["config"] == {"in_features": 8, "out_features": 3, "tokens": 10}
    with pytest.raises(UsageError, match="contradicts"):
        layers_from_onnx(path, input_shape=[10, 9])


def test_initializers_listed_as_graph_inputs_are_not_model_inputs(tmp_path):
    # older exporters (keep_initializers_as_inputs=True) list every weight among the graph inputs
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)]
    path = _save(tmp_path / "old.onnx", nodes, ["N", 6], [_init("w", (2, 6))],
                 extra_inputs=[helper.make_tensor_value_info("w", F, [2, 6])])
    ml = layers_from_onnx(path)
    assert ml.input_shape == [6]
    assert _summary(ml.layers) == [("output", "output", {"in_features": 6, "out_features": 2, "tokens": 1})]


def test_file_errors(tmp_path):
    with pytest.raises(NotFoundError):
        layers_from_onnx(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"this is not a protobuf \x00\xff\x13 at all")
    with pytest.raises(FormatError, match="garbage.onnx"):
        layers_from_onnx(str(bad))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(FormatError):
        layers_from_onnx(str(empty))


def test_model_errors(tmp_path):
    two = _save(tmp_path / "two.onnx", [helper.make_node("Add", ["x", "z"], ["y"])], ["N", 4],
                extra_inputs=[helper.make_tensor_value_info("z", F, ["N", 4])])
    with pytest.raises(ModelError, match="2 graph inputs"):
        layers_from_onnx(two)
    conv_last = _save(tmp_path / "convlast.onnx", [helper.make_node("Conv", ["x", "w"], ["y"])], [1, 1, 4, 4],
                      [_init("w", (1, 1, 3, 3))])
    # a net ending in a conv (no Linear head) is kept as it is: its layers, no output head
    assert [l["kind"] for l in layers_from_onnx(conv_last).layers] == ["conv2d"]


def _write_bad(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["s"], axis=0),  # over the batch
             helper.make_node("Einsum", ["s", "s"], ["e"], equation="bi,bi->bi"),
             helper.make_node("MatMul", ["e", "w"], ["y"])]
    return _save(tmp_path / "bad.onnx", nodes, ["N", 4], [_init("w", (4, 2))])


def test_cli_unsupported_onnx_is_one_error_line_without_traceback(tmp_path):
    path = _write_bad(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "thor_sdk.cli.main", "layers", path],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.startswith("Error: bad.onnx uses operators with no thor-sdk layer kind: Einsum, "
                                  "Softmax(not over the last axis)")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert proc.stdout == ""


def test_cli_main_maps_onnx_errors(tmp_path, capsys):
    from thor_sdk.cli.main import main

    garbage = tmp_path / "x.onnx"
    garbage.write_bytes(b"\x08\x07garbage")
    with pytest.raises(SystemExit) as exit_info:
        main(["layers", str(garbage)])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit) as exit_info:
        main(["layers", str(tmp_path / "missing.onnx")])
    assert exit_info.value.code == NotFoundError.exit_code
    assert capsys.readouterr().err.startswith("Error: no such ONNX file")


# -- exported reference nets: ONNX layer list == torch.fx layer list ---------------------------------

EXPORTED = ["lenet5", "cnn5", "har", "resnet18", "mobilenetv2", "lstm",
            # 1-D CNNs, GRUs, a CNN feeding an LSTM through a permute, BatchNorm1d on vectors, SiLU beside SE gates
            "cnn1d_har", "tcn_har", "eegnet1d", "gru_kws", "crnn_kws", "deepconvlstm", "mlp_tabular", "se_cnn",
            # GroupNorm (a reshape, an InstanceNormalization, a reshape back, its affine): 2 groups, and 1 (PoolFormer)
            "resnet20_gn", "poolformer_tiny",
            # F.scaled_dot_product_attention: a ViT's (q, k, v out of one permuted projection), a causal GPT's
            "vit_tiny", "gpt_nano",
            # nn.MultiheadAttention (kind mha): need_weights 0 with dropout, the explicit path (PyTorch's default
            # call), cross-attention over a conv-reduced sequence, causal
            "kwt_tiny", "attention_har", "pvt_tiny", "word_lm_tiny",
            # channel shuffles and splits through sizes: 29 rounds of folding values into shapes
            "shufflenetv2_05"]


def _export(module, example, path, dynamic_batch=True):
    import torch

    module.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (example,), str(path), dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}} if dynamic_batch else None)
    return str(path)


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """name -> path of the reference net exported to ONNX (exported on first use, once per session)."""
    folder = tmp_path_factory.mktemp("onnx_ref")
    cache = {}

    def get(name):
        if name not in cache:
            import torch

            from thor_sdk import models

            spec = models.model_spec(name)
            if spec.input_dtype == "int64":
                x = torch.randint(0, spec.vocab, (2, *spec.input_shape))
            else:
                x = torch.randn(2, *spec.input_shape)
            cache[name] = _export(models.build_model(name), x, folder / f"{name}.onnx")
        return cache[name]

    return get


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_reference_net_matches_torch_fx(exported, name):
    from_onnx = layers_from_onnx(exported(name))
    from_fx = layers_of(name)
    assert _summary(from_onnx.layers) == _summary(from_fx.layers)
    assert from_onnx.input_shape == from_fx.input_shape
    assert from_onnx.input_dtype == from_fx.input_dtype


def test_exported_stacked_lstm_is_one_layer(tmp_path):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
            self.fc = nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])

    torch.manual_seed(0)
    net = Net()
    path = _export(net, torch.randn(2, 5, 8), tmp_path / "lstm2.onnx")
    from_onnx = layers_from_onnx(path)
    assert _summary(from_onnx.layers) == _summary(layers_of(net, input_shape=[5, 8]).layers)
    assert from_onnx.layers[0]["config"]["num_layers"] == 2


def test_exported_transformer_attention_reads_as_kind_sdpa_with_its_causal_mask_and_dropout(tmp_path):
    """The zoo transformer's blocks compute attention by hand (q @ k^T, a scale, masked_fill of a causal mask,
    softmax, dropout, @ v): torch.fx reads each block as kind transformer_block; its ONNX file reads as the parts,
    the attention as kind sdpa of the block's heads, its causal mask and dropout."""
    import torch

    from thor_sdk import models

    spec = models.model_spec("transformer")
    path = _export(models.build_model("transformer"), torch.randint(0, spec.vocab, (2, *spec.input_shape)),
                   tmp_path / "transformer.onnx")
    blocks = [l["config"] for l in layers_of("transformer").layers if l["kind"] == "transformer_block"]
    ml = layers_from_onnx(path)
    sdpa = [l["config"] for l in ml.layers if l["kind"] == "sdpa"]
    assert blocks and len(sdpa) == len(blocks)
    assert all(s == {"num_heads": b["n_heads"], "seq_len": b["seq_len"], "kv_len": b["seq_len"],
                     "head_dim": b["head_dim"], "causal": 1, "p": 0.1} for s, b in zip(sdpa, blocks))
    assert not any("approx" in l for l in ml.layers)
    assert not any(l["kind"] == "softmax" for l in ml.layers)


def _attention_graph(tmp_path, mask=None, scale="scores", where=False, opset=17, name="att.onnx"):
    """x [B, 2 heads, 6 tokens, 8] -> q, k, v (three weights) -> softmax(q k^T * s (+ mask)), dropout, @ v -> a
    linear: attention as exporters write it. ``mask``: a constant [6, 6] array added to the scores (``where``: the
    boolean one where ``Where`` fills -inf); ``scale``: on the scores, on q and k^T, or none."""
    nodes = [helper.make_node("MatMul", ["x", f"w{c}"], [c]) for c in "qkv"]
    nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]))
    q, kt, inits = "q", "kt", [_init(f"w{c}", (8, 8)) for c in "qkv"] + [_init("wo", (8, 3))]
    nodes.append(_const("s", 8 ** -0.5))
    if scale == "operands":
        nodes += [helper.make_node("Mul", ["q", "s"], ["qs"]), helper.make_node("Mul", ["kt", "s"], ["kts"])]
        q, kt = "qs", "kts"
    nodes.append(helper.make_node("MatMul", [q, kt], ["scores"]))
    t = "scores"
    if scale == "scores":
        nodes.append(helper.make_node("Div", [t, "s"], ["scaled"]))
        t = "scaled"
    if mask is not None:
        if where:
            inits.append(numpy_helper.from_array(np.asarray(mask, dtype=bool), "m"))
            nodes += [_const("fill", float("-inf")), helper.make_node("Where", ["m", "fill", t], ["masked"])]
        else:
            inits.append(numpy_helper.from_array(np.asarray(mask, dtype=np.float32), "m"))
            nodes.append(helper.make_node("Add", [t, "m"], ["masked"]))
        t = "masked"
    nodes += [helper.make_node("Softmax", [t], ["p"]), _const("ratio", 0.1), _const("on", True, np.bool_),
              helper.make_node("Dropout", ["p", "ratio", "on"], ["pd", "pmask"]),
              helper.make_node("MatMul", ["pd", "v"], ["o"]), helper.make_node("MatMul", ["o", "wo"], ["y"])]
    return _save(tmp_path / name, nodes, ["batch", 2, 6, 8], inits, opset=opset)


@pytest.mark.parametrize("scale", ["scores", "operands", "none"])
def test_hand_written_attention_reads_as_kind_sdpa(tmp_path, scale):
    layers = layers_from_onnx(_attention_graph(tmp_path, scale=scale)).layers
    projection = ("linear", "input", {"in_features": 8, "out_features": 8, "tokens": 12, "bias": 0})
    assert _summary(layers) == [  # k's transpose is a view the attention reads: free
        projection, projection, projection,
        ("sdpa", "hidden", {"num_heads": 2, "seq_len": 6, "kv_len": 6, "head_dim": 8, "causal": 0, "p": 0.1}),
        ("output", "output", {"in_features": 8, "out_features": 3, "tokens": 12})]


@pytest.mark.parametrize("where", [False, True])
def test_a_constant_causal_mask_is_kind_sdpas_causal_and_any_other_mask_is_refused(tmp_path, where):
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    causal = upper if where else np.where(upper, -np.inf, 0.0)
    layers = layers_from_onnx(_attention_graph(tmp_path, mask=causal, where=where)).layers
    assert [l["config"]["causal"] for l in layers if l["kind"] == "sdpa"] == [1]
    other = upper.T if where else np.where(upper.T, -1e9, 0.0)  # hides the past: not PyTorch's is_causal
    path = _attention_graph(tmp_path, mask=other, where=where, name="other.onnx")
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert err.value.ops == ["MatMul(of two activations)"] + (["Where"] if where else [])
    # under approx the parts stand in as before: two linear stand-ins of the same FLOPs around a softmax
    approx = layers_from_onnx(path, unknown_ops="approx").layers
    assert [l["kind"] for l in approx if "approx" in l and l["op"] == "MatMul"] == ["linear", "linear"]
    assert not any(l["kind"] == "sdpa" for l in approx)


def _split_attention(unbind=False, dropout_p=0.0):
    """A block as timm and nanoGPT write attention: q, k and v cut out of one projection of (B, 10, 16) into 2
    heads of 8 (``unbind``: by ``qkv.unbind(0)``, else by unpacking), F.scaled_dot_product_attention causal, the
    heads merged back, a mean over the tokens and a linear head."""
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.fc = nn.Linear(16, 48), nn.Linear(16, 3)

        def forward(self, x):
            b, t, _ = x.shape
            qkv = self.qkv(x).reshape(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0) if unbind else qkv
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
            return self.fc(o.transpose(1, 2).reshape(b, t, 16).mean(dim=1))

    return Block()


def test_an_exported_attention_on_an_unbound_projection_reads_as_torch_fx_reads_it(tmp_path):
    """``q, k, v = qkv.unbind(0)`` exports as a Split and a Squeeze per part: views into the attention, free."""
    import torch

    net = _split_attention(unbind=True)
    from_onnx = layers_from_onnx(_export(net, torch.randn(2, 10, 16), tmp_path / "unbind.onnx")).layers
    assert _summary(from_onnx) == _summary(layers_of(net, input_shape=[10, 16]).layers)
    assert [l["config"] for l in from_onnx if l["kind"] == "sdpa"] == [
        {"num_heads": 2, "seq_len": 10, "kv_len": 10, "head_dim": 8, "causal": 1, "p": 0.0}]


@pytest.mark.parametrize("variant", ["self", "masked", "cross", "no_bias", "sequence_first"])
def test_an_exported_multihead_attention_reads_as_kind_mha_as_torch_fx_reads_it(tmp_path, variant):
    """nn.MultiheadAttention as torch.onnx writes it (moved sequence-first, its heads merged with the batch): kind
    mha where torch.fx reads it so, its config equal; without biases (a stand-in from torch) or sequence-first (the
    input's axis 0 is not the batch) it is not matched and stays refused."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = nn.MultiheadAttention(32, 4, bias=variant != "no_bias", batch_first=variant != "sequence_first")
            self.register_buffer("mask", torch.ones(12, 12, dtype=torch.bool).triu(1))
            self.fc = nn.Linear(32, 3)

        def forward(self, x):
            if variant == "cross":
                kv = x[:, :5]  # one tensor as keys and values (two slices would be two projections)
                out = self.att(x, kv, kv)[0]
            else:
                out = self.att(x, x, x, attn_mask=self.mask if variant == "masked" else None)[0]
            return self.fc(out.mean(dim=1))

    torch.manual_seed(0)
    net = Net()
    path = _export(net, torch.randn(2, 12, 32), tmp_path / f"mha_{variant}.onnx")
    if variant in ("no_bias", "sequence_first"):
        with pytest.raises(UnsupportedOperatorError) as err:
            layers_from_onnx(path)
        assert "MatMul(of two activations)" in err.value.ops
        return
    from_onnx = layers_from_onnx(path).layers
    assert _summary(from_onnx) == _summary(layers_of(net, input_shape=[12, 32]).layers)
    [mha] = [l["config"] for l in from_onnx if l["kind"] == "mha"]
    assert (mha["cross"], mha["kv_len"], mha["mask"], mha["need_weights"]) == (
        int(variant == "cross"), 5 if variant == "cross" else 12, int(variant == "masked"), 1)


def test_keys_transposed_through_a_reshape_round_trip_are_still_batch_first(tmp_path):
    """torch.onnx's dynamo exporter writes k.transpose(-2, -1) of (B, H, T, d) as a Reshape to (B x H, T, d), a
    Transpose and a Reshape back: the batch stays outermost through the round trip, so it is attention."""
    nodes = [helper.make_node("MatMul", ["x", f"w{c}"], [c]) for c in "qkv"]
    nodes += [_const("merge", [-1, 6, 8], np.int64), _const("split", [-1, 2, 8, 6], np.int64),
              helper.make_node("Reshape", ["k", "merge"], ["km"]),
              helper.make_node("Transpose", ["km"], ["kmt"], perm=[0, 2, 1]),
              helper.make_node("Reshape", ["kmt", "split"], ["kt"]),
              helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"]),
              helper.make_node("MatMul", ["p", "v"], ["o"]), helper.make_node("MatMul", ["o", "wo"], ["y"])]
    inits = [_init(f"w{c}", (8, 8)) for c in "qkv"] + [_init("wo", (8, 3))]
    layers = layers_from_onnx(_save(tmp_path / "roundtrip.onnx", nodes, [2, 2, 6, 8], inits)).layers
    assert [l["config"] for l in layers if l["kind"] == "sdpa"] == [
        {"num_heads": 2, "seq_len": 6, "kv_len": 6, "head_dim": 8, "causal": 0, "p": 0.0}]
    assert [l["kind"] for l in layers].count("flatten") == 2  # the two Reshapes, as torch reads a view's reshape


@pytest.mark.parametrize("module", ["mha", "sdpa"])
def test_the_dynamo_exporters_attention_reads_as_its_kind(tmp_path, module):
    """torch 2.13's default exporter (dynamo=True): nn.MultiheadAttention (its output projection's zero bias
    dropped from the file) is kind mha, F.scaled_dot_product_attention kind sdpa (its dropout dropped: p 0)."""
    import torch
    from torch import nn

    class Mha(nn.Module):
        def __init__(self):
            super().__init__()
            self.att, self.fc = nn.MultiheadAttention(16, 2, batch_first=True), nn.Linear(16, 3)

        def forward(self, x):
            return self.fc(self.att(x, x, x)[0].mean(dim=1))

    torch.manual_seed(0)
    path = str(tmp_path / f"dynamo_{module}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export((Mha() if module == "mha" else _split_attention(dropout_p=0.1)).train(),
                          (torch.randn(2, 10, 16),), path, dynamo=True, training=torch.onnx.TrainingMode.TRAINING)
    [att] = [l for l in layers_from_onnx(path).layers if l["kind"] in ("mha", "sdpa")]
    if module == "mha":
        assert att["kind"] == "mha" and att["config"] == {
            "embed_dim": 16, "num_heads": 2, "seq_len": 10, "kv_len": 10, "cross": 0, "need_weights": 1, "p": 0.0,
            "mask": 0, "causal": 0}
    else:
        assert att["kind"] == "sdpa" and att["config"]["causal"] == 1 and att["config"]["num_heads"] == 2


@pytest.mark.parametrize("location", ["m.data", "../m.data", "/tmp/m.data", "missing.data"])
def test_a_mask_stored_beside_the_model_is_read_only_from_the_models_folder(tmp_path, location):
    """A causal mask saved as external data (as the dynamo exporter saves it) is read from a plain relative file
    in the model's folder; a location outside it (``..``, absolute) or missing is never opened: the mask stays
    unknown and the attention is refused, one clear error, no traceback."""
    upper = np.triu(np.ones((6, 6), dtype=bool), 1)
    src = _attention_graph(tmp_path, mask=np.where(upper, -np.inf, 0.0))
    model = onnx.load(src)
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save_model(model, str(folder / "att.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="m.data", size_threshold=0)
    (tmp_path / "m.data").write_bytes((folder / "m.data").read_bytes())  # a copy outside the folder, in reach
    if location != "m.data":
        model = onnx.load(str(folder / "att.onnx"), load_external_data=False)
        for t in model.graph.initializer:
            for e in t.external_data:
                if e.key == "location":
                    e.value = location
        onnx.save(model, str(folder / "att.onnx"))
    if location == "m.data":
        layers = layers_from_onnx(str(folder / "att.onnx")).layers
        assert [l["config"]["causal"] for l in layers if l["kind"] == "sdpa"] == [1]
    else:
        with pytest.raises(UnsupportedOperatorError) as err:
            layers_from_onnx(str(folder / "att.onnx"))
        assert err.value.ops == ["MatMul(of two activations)"]


def test_onnx_attention_operator_of_opset_23_reads_as_torch_fx_reads_the_call(tmp_path):
    """From opset 23 torch.onnx's dynamo exporter writes F.scaled_dot_product_attention as ONNX's Attention: kind
    sdpa, the views into its queries, keys and values free, the layer list equal to torch.fx's."""
    import torch

    net, path = _split_attention(), str(tmp_path / "attention23.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net.train(), (torch.randn(2, 10, 16),), path, dynamo=True, opset_version=23,
                          training=torch.onnx.TrainingMode.TRAINING)
    assert "Attention" in {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    assert _summary(layers_from_onnx(path).layers) == _summary(layers_of(net, input_shape=[10, 16]).layers)


@pytest.mark.parametrize("extra, attrs, label", [
    (["m"], {}, "Attention(a mask, a key/value cache or its scores as an output)"),
    ([], {"softcap": 30.0}, "Attention(a softcap, or a constant query, key or value)"),
    ([], {"q_num_heads": 2, "kv_num_heads": 1}, "Attention(3-D inputs whose heads are not one number of one width)"),
])
def test_onnx_attention_operator_the_kind_does_not_cover_is_refused_by_name(tmp_path, extra, attrs, label):
    nodes = [helper.make_node("MatMul", ["x", f"w{c}"], [c]) for c in "qkv"]
    nodes += [helper.make_node("Attention", ["q", "k", "v", *extra], ["o"], **attrs),
              helper.make_node("MatMul", ["o", "wo"], ["y"])]
    inits = [_init(f"w{c}", (8, 8)) for c in "qkv"] + [_init("wo", (8, 3)), _init("m", (6, 6))]
    path = _save(tmp_path / "att23.onnx", nodes, ["batch", 6, 8], inits, opset=23)
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert err.value.ops == [label]
    plain = _save(tmp_path / "plain23.onnx", nodes[:3] + [helper.make_node(
        "Attention", ["q", "k", "v"], ["o"], q_num_heads=2, kv_num_heads=2), nodes[-1]], ["batch", 6, 8], inits, opset=23)
    assert [l["config"] for l in layers_from_onnx(plain).layers if l["kind"] == "sdpa"] == [
        {"num_heads": 2, "seq_len": 6, "kv_len": 6, "head_dim": 4, "causal": 0, "p": 0.0}]


def test_attention_whose_heads_merge_the_batch_is_not_kind_sdpa(tmp_path):
    """nn.MultiheadAttention's export reshapes (B, T, E) into (B x heads, T, head_dim): its leading axis is not a
    sample's, so per-sample sizes would be wrong: not read as attention (a Reshape merging the batch)."""
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), _const("shape", [-1, 6, 4], np.int64),
             helper.make_node("Reshape", ["q", "shape"], ["qh"]),
             helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["qh", "qt"], ["s"]), helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("MatMul", ["p", "qh"], ["y"])]
    path = _save(tmp_path / "merged.onnx", nodes, [2, 6, 8], [_init("wq", (8, 8))])
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert "MatMul(of two activations)" in err.value.ops


def test_mid_graph_softmax_over_the_last_axis_and_a_matmul_of_two_activations(tmp_path):
    """scores = x @ x^T (two activations), softmax over the last axis, a ReLU, a product with x: not attention
    (an op between the softmax and the weighted sum), so each part is read alone."""
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "qt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("Relu", ["p"], ["pr"]),
             helper.make_node("MatMul", ["pr", "q"], ["y"])]
    path = _save(tmp_path / "att.onnx", nodes, [1, 6, 4], [_init("wq", (4, 8))])
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert err.value.ops == ["MatMul(of two activations)"]
    ml = layers_from_onnx(path, unknown_ops="approx")
    assert _summary(ml.layers) == [
        ("linear", "input", {"in_features": 4, "out_features": 8, "tokens": 6, "bias": 0}),
        ("permute", "hidden", {"numel": 48}),
        ("linear", "hidden", {"in_features": 8, "out_features": 6, "tokens": 6, "bias": 0}),
        ("softmax", "hidden", {"numel": 36, "last_dim": 6}),
        ("relu", "hidden", {"numel": 36}),
        ("linear", "hidden", {"in_features": 6, "out_features": 8, "tokens": 6, "bias": 0})]
    assert [("approx" in l) for l in ml.layers] == [False, False, True, False, False, True]
    assert ml.layers[-1]["kind"] == "linear"  # a stand-in never becomes the loss head
    # opset 11: Softmax's default axis is 1, not the last axis of [B, 6, 6]
    old = _save(tmp_path / "att11.onnx", nodes, [1, 6, 4], [_init("wq", (4, 8))], opset=11)
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(old)
    assert err.value.ops == ["MatMul(of two activations)", "Softmax(not over the last axis)"]
    assert layers_from_onnx(old, unknown_ops="approx").layers[3]["kind"] == "elementwise"


def test_an_einsum_of_two_activations_stands_in_as_from_torch(tmp_path):
    """Einsum (opset 12+): the torch.fx reader's stand-in, a linear of the same FLOPs, an ellipsis read as the
    letters it stands for; an Einsum with a weight (a constant operand) or no output subscripts stays refused."""
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("Einsum", ["q", "q"], ["s"], equation="bqd,bkd->bqk"),
             helper.make_node("Softmax", ["s"], ["p"]),
             helper.make_node("Einsum", ["p", "q"], ["y"], equation="bqk,bkd->bqd")]
    path = _save(tmp_path / "ein.onnx", nodes, [1, 6, 4], [_init("wq", (4, 8))])
    with pytest.raises(UnsupportedOperatorError):
        layers_from_onnx(path)
    ml = layers_from_onnx(path, unknown_ops="approx")
    assert _summary(ml.layers) == [
        ("linear", "input", {"in_features": 4, "out_features": 8, "tokens": 6, "bias": 0}),
        ("linear", "hidden", {"in_features": 8, "out_features": 6, "tokens": 6, "bias": 0}),
        ("softmax", "hidden", {"numel": 36, "last_dim": 6}),
        ("linear", "hidden", {"in_features": 6, "out_features": 8, "tokens": 6, "bias": 0})]
    assert [("approx" in l) for l in ml.layers] == [False, True, False, True]
    # an ellipsis: the letters it stands for (here the tokens), as spelled out
    for eq in ("...qd,...kd->...qk", "b...d,b...d->b..."):
        spelled = {"...qd,...kd->...qk": "bqd,bkd->bqk", "b...d,b...d->b...": "bkd,bkd->bk"}[eq]
        got = [layers_from_onnx(_save(tmp_path / f"{n}.onnx", [nodes[0], helper.make_node(
            "Einsum", ["q", "q"], ["y"], equation=e)], [1, 6, 4], [_init("wq", (4, 8))]), unknown_ops="approx").layers
            for n, e in (("ell", eq), ("spelled", spelled))]
        assert _summary(got[0]) == _summary(got[1]) and got[0][1]["kind"] == "linear"
    for eq, inputs, inits in (("bqd,kd->bqk", ["q", "w2"], [_init("w2", (5, 8))]),
                              ("...qd,...kd", ["q", "q"], [])):
        bad = [nodes[0], helper.make_node("Einsum", inputs, ["y"], equation=eq)]
        p = _save(tmp_path / "bad.onnx", bad, [1, 6, 4], [_init("wq", (4, 8)), *inits])
        with pytest.raises(UnsupportedOperatorError):
            layers_from_onnx(p, unknown_ops="approx")


def test_cli_layers_json_of_exported_onnx(exported):
    from click.testing import CliRunner

    from thor_sdk.cli.main import cli

    result = CliRunner().invoke(cli, ["layers", exported("lenet5"), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["format"] == "thor-sdk/layers" and doc["name"] == "lenet5"
    assert _summary(doc["layers"]) == _summary(layers_of("lenet5").layers)



def test_a_transposed_conv_stands_in_as_the_torch_path_does(tmp_path):
    """Exported from PyTorch: refused by default; under approx the same stand-in conv2d (config, role, approx mark)
    as the torch.fx reader gives for the module itself."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2),
                        nn.Flatten(), nn.Linear(6 * 20 ** 2, 5))
    path = _export(net, torch.randn(2, 3, 10, 10), tmp_path / "transposed.onnx")
    with pytest.raises(UnsupportedOperatorError):
        layers_from_onnx(path)
    from_onnx = layers_from_onnx(path, unknown_ops="approx").layers
    from_fx = layers_of(net, input_shape=[3, 10, 10], unknown_ops="approx").layers
    assert _summary(from_onnx) == _summary(from_fx)
    assert [("approx" in l) for l in from_onnx] == [("approx" in l) for l in from_fx] == [False, False, True, False,
                                                                                        False]


@pytest.mark.parametrize("conv", [
    "nn.Conv2d(4, 6, 3, padding=2, dilation=2)", "nn.Conv2d(4, 6, 3, padding='same', dilation=3)",
    "nn.Conv2d(4, 6, (3, 1), padding=(4, 0), dilation=(4, 1))",  # ERFNet's: the 1-tap side takes any
    "nn.Conv2d(4, 8, 5, stride=2, padding=4, dilation=2, groups=4)"])
def test_a_dilated_conv_reads_as_the_torch_path_reads_it(tmp_path, conv):
    """Exported from PyTorch, a dilated Conv is kind conv2d with its dilation, no stand-in: the same layers (config,
    role, no approx mark) as the torch.fx reader gives for the module itself."""
    import torch
    from torch import nn

    mod = eval(conv, {"nn": nn})
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), mod, nn.Flatten(),
                        nn.Linear(mod(torch.zeros(1, 4, 10, 10)).numel(), 5))
    path = _export(net, torch.randn(2, 3, 10, 10), tmp_path / "dilated.onnx")
    from_onnx = layers_from_onnx(path).layers
    from_fx = layers_of(net, input_shape=[3, 10, 10]).layers
    assert _summary(from_onnx) == _summary(from_fx)
    assert from_onnx[2]["kind"] == "conv2d" and from_onnx[2]["config"]["dilation"] == max(mod.dilation)
    assert not any("approx" in l for l in from_onnx)


@pytest.mark.parametrize("axis,config", [(-1, {"normalized": 8, "tokens": 48}), (2, {"normalized": 48, "tokens": 8}),
                                         (-3, {"normalized": 384, "tokens": 1}), (1, {"normalized": 384, "tokens": 1})])
def test_layernormalization_from_its_axis_on_is_a_layernorm_over_their_product(tmp_path, axis, config):
    """LayerNormalization normalises the axes from ``axis`` on: the layernorm kind over their product, as the torch
    reader reads nn.LayerNorm over several dimensions; over the batch axis it is refused by name."""
    shape, n = [8, 6, 8], config["normalized"]
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=axis),
             helper.make_node("Flatten", ["n"], ["f"], axis=1),
             helper.make_node("MatMul", ["f", "w"], ["y"])]
    gshape = {8: (8,), 48: (6, 8), 384: (8, 6, 8)}[n]
    inits = [_init("g", gshape), _init("b", gshape), _init("w", (384, 3))]
    ml = layers_from_onnx(_save(tmp_path / "ln.onnx", nodes, ["N", *shape], inits))
    assert _summary(ml.layers)[0] == ("layernorm", "input", config)  # the first layer with parameters
    with pytest.raises(UnsupportedOperatorError, match="over the batch axis"):
        bad = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=0), *nodes[1:]]
        layers_from_onnx(_save(tmp_path / "ln0.onnx", bad, ["N", *shape],
                               [_init("g", (8, 6, 8)), _init("b", (8, 6, 8)), _init("w", (384, 3))]))


def test_instancenormalization_stands_in_as_the_batch_norm_of_the_same_sizes_under_approx(tmp_path):
    """As the torch reader does for nn.InstanceNorm2d: refused without approx, the batchnorm2d of the same sizes
    (marked approx) with it."""
    nodes = [helper.make_node("Conv", ["x", "wc"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("InstanceNormalization", ["c", "s", "b"], ["n"]),
             helper.make_node("Flatten", ["n"], ["f"], axis=1),
             helper.make_node("MatMul", ["f", "w"], ["y"])]
    inits = [_init("wc", (4, 3, 3, 3)), _init("s", (4,)), _init("b", (4,)), _init("w", (4 * 6 * 6, 3))]
    path = _save(tmp_path / "in.onnx", nodes, ["N", 3, 6, 6], inits)
    with pytest.raises(UnsupportedOperatorError, match="InstanceNormalization"):
        layers_from_onnx(path)
    layers = layers_from_onnx(path, unknown_ops="approx").layers
    norm = layers[1]
    assert (norm["kind"], norm["config"]) == ("batchnorm2d", {"channels": 4, "height": 6, "width": 6})
    assert norm["approx"].startswith("InstanceNormalization has no kind")


def test_an_einsum_of_three_activations_stands_in_as_two_contractions_under_approx(tmp_path):
    """As the torch reader reads torch.einsum of three operands: its two pairwise contractions (left to right), each
    a linear of its multiply-adds, the second reading the first; refused without approx."""
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("Einsum", ["x", "xt", "x"], ["e"], equation="bij,bjk,bkl->bil"),
             helper.make_node("Flatten", ["e"], ["f"], axis=1),
             helper.make_node("MatMul", ["f", "w"], ["y"])]
    path = _save(tmp_path / "ein3.onnx", nodes, ["N", 4, 8], [_init("w", (32, 3))], opset=17)
    with pytest.raises(UnsupportedOperatorError, match="Einsum"):
        layers_from_onnx(path)
    layers = layers_from_onnx(path, unknown_ops="approx").layers
    ein = [l for l in layers if l["op"] == "Einsum"]
    assert [(l["name"][-10:], l["role"], l["config"]) for l in ein] == [
        (".contract0", "input", {"in_features": 8, "out_features": 4, "tokens": 4, "bias": 0}),  # (4x8)(8x4)
        (".contract1", "hidden", {"in_features": 4, "out_features": 8, "tokens": 4, "bias": 0})]  # (4x4)(4x8)
    assert all("pairwise contractions (left to right)" in l["approx"] for l in ein)
    assert layers[-1]["kind"] == "output"


@pytest.mark.parametrize("prelu", ["per-channel", "shared"])
def test_an_exported_prelu_reads_as_the_fx_path_reads_it(tmp_path, prelu):
    """torch.onnx writes nn.PReLU as PRelu with a [C, 1, 1] slope (per channel) or a [1] one (nn.PReLU()): kind
    prelu either way, as the torch.fx path gives it."""
    import torch
    from torch import nn

    from thor_sdk.layers import layers_of

    act = nn.PReLU(8) if prelu == "per-channel" else nn.PReLU()
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), act, nn.Flatten(), nn.Linear(8 * 6 * 6, 4))
    ml = layers_from_onnx(_export(net, torch.randn(2, 3, 6, 6), tmp_path / "p.onnx"))
    want = layers_of(net, input_shape=[3, 6, 6]).layers
    assert _summary(ml.layers) == _summary(want)
    assert ml.layers[1]["config"] == {"channels": 8, "spatial": 36, "shared": int(prelu == "shared")}


@pytest.mark.parametrize("count, folds", [(4, True), (400_000_000, False)])
def test_values_computed_from_shapes_fold_within_bounds(tmp_path, count, folds):
    """Pads computed from the input's shape (torch.onnx writes F.pad's so) are folded and the Pad read as kind pad;
    a value whose computation would make a tensor of more than _MAX_FOLD_ELEMENTS (a hostile ConstantOfShape) is not
    computed at all: its Pad's shape stays unknown, one clear error."""
    from thor_sdk.errors import ModelError
    from thor_sdk.layers import onnx_import

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i1"], ["c"], axis=0),  # 3 channels
        helper.make_node("Div", ["c", "c"], ["one"]),
        helper.make_node("Mul", ["one", "count"], ["n"]),
        helper.make_node("ConstantOfShape", ["n"], ["z"], value=numpy_helper.from_array(np.zeros(1, np.int64))),
        helper.make_node("Add", ["z", "z"], ["z2"]),
        helper.make_node("Slice", ["z2", "start", "end"], ["head"]),
        helper.make_node("Concat", ["head", "tail"], ["pads"], axis=0),
        helper.make_node("Pad", ["x", "pads"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "wf"], ["y"]),
    ]
    ints = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    inits = [ints("i1", [1]), ints("count", [count]), ints("start", [0]), ints("end", [4]),
             ints("tail", [0, 0, 1, 1]), _init("wf", (3 * 5 * 5, 2))]  # pads H and W after: 4x4 -> 5x5
    path = _save(tmp_path / "fold.onnx", nodes, [2, 3, 4, 4], inits)
    model = onnx.load(path)
    producer = {o: n for n in model.graph.node for o in n.output if o}
    got = onnx_import._fold_value(model, producer, {t.name: t for t in model.graph.initializer},
                                  {"x": [2, 3, 4, 4]}, "pads")
    if folds:
        assert got.tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
        layers = layers_from_onnx(path).layers
        assert [(l["kind"], l["config"]) for l in layers][:1] == [
            ("pad", {"channels": 3, "height": 4, "width": 4, "pad_c": 0, "pad_h": 1, "pad_w": 1})]
    else:
        assert got is None
        with pytest.raises(ModelError, match="shapes unknown"):
            layers_from_onnx(path)


@pytest.mark.parametrize("negs, folds", [(7, True), (8, False)])
def test_a_fold_makes_a_bounded_number_of_elements_in_all(tmp_path, negs, folds):
    """Each tensor of a fold is bounded, and so are all of them together (_FOLD_TOTAL times that): a chain of
    1,000-element tensors is computed up to 8,192 elements made, not beyond (a hostile file's many mid-sized
    tensors, each under the bound, would otherwise add up)."""
    from thor_sdk.layers import onnx_import

    assert onnx_import._MAX_FOLD_ELEMENTS == 1024 and onnx_import._FOLD_TOTAL == 8
    nodes = [_const("c0", np.arange(1000, dtype=np.int64), np.int64)]
    nodes += [helper.make_node("Neg", [f"c{i}"], [f"c{i + 1}"]) for i in range(negs)]
    nodes += [helper.make_node("Relu", ["x"], ["y"])]
    model = onnx.load(_save(tmp_path / "chain.onnx", nodes, [2, 3]))
    producer = {o: n for n in model.graph.node for o in n.output if o}
    got = onnx_import._fold_value(model, producer, {}, {"x": [2, 3]}, f"c{negs}")
    if folds:  # the Constant and its seven Negs: 8,000 elements made
        assert got.tolist() == [(-1) ** negs * i for i in range(1000)]
    else:
        assert got is None


def _gru_graph(tmp_path, **attrs):
    """x [N, 5, 8] -> (batch-first plumbing) -> GRU of 16 -> the last step -> MatMul to 3 classes."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("GRU", ["t", "W", "R", "B"], ["yg"], hidden_size=16, **attrs),
             helper.make_node("Squeeze", ["yg", "ax1"], ["ys"]),
             helper.make_node("Gather", ["ys", "last"], ["h"], axis=0),
             helper.make_node("MatMul", ["h", "wf"], ["y"])]
    inits = [_init("W", (1, 48, 8)), _init("R", (1, 48, 16)), _init("B", (1, 96)), _init("wf", (16, 3)),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
             numpy_helper.from_array(np.array(4, dtype=np.int64), "last")]
    return _save(tmp_path / "gru.onnx", nodes, ["N", 5, 8], inits)


def test_a_gru_as_pytorch_runs_it_is_kind_gru_and_its_plumbing_free(tmp_path):
    ml = layers_from_onnx(_gru_graph(tmp_path, linear_before_reset=1))
    assert _summary(ml.layers) == [
        ("gru", "input", {"input_size": 8, "hidden_size": 16, "seq_len": 5, "num_layers": 1}),
        ("output", "output", {"in_features": 16, "out_features": 3, "tokens": 1})]


@pytest.mark.parametrize("attrs, label", [({}, "GRU(linear_before_reset=0)"),
                                          ({"linear_before_reset": 1, "direction": "reverse"},
                                           "GRU(direction=reverse)")])
def test_a_gru_pytorch_does_not_run_is_refused_by_name(tmp_path, attrs, label):
    """ONNX's default GRU applies its reset gate before the recurrent matmul (Keras' reset_after=False); the
    probes are PyTorch's GRU, which applies it after."""
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(_gru_graph(tmp_path, **attrs))
    assert label in err.value.ops


@pytest.mark.parametrize("order", ["x_first", "sigmoid_first"])
def test_x_times_its_own_sigmoid_is_silu_and_a_gate_of_another_tensor_is_not(tmp_path, order):
    swish = ["h", "s"] if order == "x_first" else ["s", "h"]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"]), helper.make_node("Sigmoid", ["h"], ["s"]),
             helper.make_node("Mul", swish, ["a"]),
             helper.make_node("MatMul", ["a", "w1"], ["g"]), helper.make_node("Sigmoid", ["g"], ["gs"]),
             helper.make_node("Mul", ["a", "gs"], ["b"]), helper.make_node("MatMul", ["b", "w2"], ["y"])]
    inits = [_init("w0", (8, 6)), _init("w1", (6, 6)), _init("w2", (6, 2))]
    ml = layers_from_onnx(_save(tmp_path / "silu.onnx", nodes, ["N", 8], inits))
    assert [(l["kind"], l["config"].get("numel")) for l in ml.layers] == [
        ("linear", None), ("silu", 6), ("linear", None), ("sigmoid", 6), ("mul", 6), ("output", None)]


def test_one_dimensional_conv_pool_and_batch_norm_read_as_the_torch_path_reads_them(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3], dilations=[2], pads=[2, 2]),
             helper.make_node("BatchNormalization", ["c", "g", "bb", "m", "v"], ["n"]),
             helper.make_node("MaxPool", ["n"], ["p"], kernel_shape=[2], strides=[2]),
             helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[3], strides=[1], pads=[1, 1],
                              ceil_mode=1),  # 8 -> 8 either way: the same pooling
             helper.make_node("MaxPool", ["q"], ["r"], kernel_shape=[8]),  # the whole sequence: global max
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("MatMul", ["f", "wf"], ["y"])]
    inits = [_init("w", (4, 2, 3)), _init("b", (4,)), _init("g", (4,)), _init("bb", (4,)), _init("m", (4,)),
             _init("v", (4,)), _init("wf", (4, 2))]
    ml = layers_from_onnx(_save(tmp_path / "c1.onnx", nodes, ["N", 2, 16], inits))
    assert _summary(ml.layers) == [
        ("conv1d", "input", {"in_channels": 2, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 2,
                             "groups": 1, "length": 16, "bias": 1, "dilation": 2}),
        ("batchnorm1d", "hidden", {"channels": 4, "length": 16}),
        ("maxpool1d", "hidden", {"channels": 4, "length": 16, "kernel": 2, "stride": 2, "padding": 0}),
        ("avgpool2d", "hidden", {"channels": 4, "height": 1, "width": 8, "kernel": 1, "stride": 1, "padding": 0,
                                 "kernel_w": 3, "stride_w": 1, "padding_w": 1}),
        ("adaptive_maxpool2d", "hidden", {"channels": 4, "height": 1, "width": 8, "out_size": 1}),
        ("flatten", "hidden", {"numel": 4}),
        ("output", "output", {"in_features": 4, "out_features": 2, "tokens": 1})]


def test_an_exported_group_norm_without_affine_is_groupnorm_and_an_instance_norm_is_not(tmp_path):
    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.GroupNorm(2, 8, affine=False), nn.ReLU(),
                        nn.Conv1d(8, 8, 1), nn.InstanceNorm1d(8, affine=True), nn.Flatten(), nn.Linear(8 * 12, 3))
    path = _export(net, torch.randn(2, 4, 12), tmp_path / "gn.onnx")
    ml = layers_from_onnx(path, unknown_ops="approx")
    assert [(l["kind"], l["config"]) for l in ml.layers if "norm" in l["kind"]] == [
        ("groupnorm", {"channels": 8, "num_groups": 2, "spatial": 12}),
        ("batchnorm1d", {"channels": 8, "length": 12})]  # the instance norm's stand-in, marked approx
    norms = [l for l in ml.layers if "norm" in l["kind"]]
    assert "approx" in norms[1] and "approx" not in norms[0]
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(path)
    assert err.value.ops == ["InstanceNormalization"]


@pytest.mark.parametrize("layers", [1, 2])
def test_an_exported_bidirectional_gru_reads_as_torch_fx_reads_it_and_a_bidirectional_lstm_is_refused(tmp_path,
                                                                                                      layers):
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.conv, self.rnn, self.fc = nn.Conv1d(6, 8, 3, padding=1), rnn, nn.Linear(2 * rnn.hidden_size, 3)

        def forward(self, x):
            return self.fc(self.rnn(torch.relu(self.conv(x)).transpose(1, 2))[0].mean(dim=1))

    gru = Net(nn.GRU(8, 12, layers, batch_first=True, bidirectional=True))
    from_onnx = layers_from_onnx(_export(gru, torch.randn(2, 6, 20), tmp_path / "bigru.onnx"))
    assert _summary(from_onnx.layers) == _summary(layers_of(gru, input_shape=[6, 20]).layers)
    assert [l["kind"] for l in from_onnx.layers].count("gru") == 2 * layers and not any("approx" in l for l in
                                                                                           from_onnx.layers)
    lstm = Net(nn.LSTM(8, 12, layers, batch_first=True, bidirectional=True))
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_from_onnx(_export(lstm, torch.randn(2, 6, 20), tmp_path / "bilstm.onnx"))
    assert "LSTM(direction=bidirectional)" in err.value.ops


def _squeeze_excite(expand):
    import torch
    from torch import nn

    class SE(nn.Module):
        """SENet's block as its PyTorch port writes it (the gate ``y.expand_as(x)`` before the product), then a ViT's
        class token expanded over the batch before the tokens."""

        def __init__(self):
            super().__init__()
            self.conv, self.fc1, self.fc2 = nn.Conv2d(3, 16, 3), nn.Linear(16, 4), nn.Linear(4, 16)
            self.cls = nn.Parameter(torch.zeros(1, 1, 16))
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            x = self.conv(x)
            b, c, _, _ = x.size()
            y = torch.sigmoid(self.fc2(torch.relu(self.fc1(x.mean((2, 3)))))).view(b, c, 1, 1)
            x = x * (y.expand_as(x) if expand else y)
            t = x.flatten(2).transpose(1, 2)
            return self.head(torch.cat((self.cls.expand(b, -1, -1), t), dim=1)[:, 0])

    return SE()


def test_an_expanding_view_is_free_and_its_product_a_broadcast_one(tmp_path):
    """``y.expand_as(x)`` (ONNX ``Expand``) is a view: the product reading it is the broadcast product ``x * y`` is,
    in both readers; a class token expanded over the batch (a parameter) is concatenated as it is. Both readers
    refused them ("Tensor.expand", "Expand") before."""
    import torch

    def kinds(layers, skip=()):
        return [(l["kind"], l["config"]) for l in layers if l["kind"] not in skip]

    plain = layers_of(_squeeze_excite(False), input_shape=[3, 10, 10]).layers
    fx = layers_of(_squeeze_excite(True), input_shape=[3, 10, 10]).layers
    assert kinds(fx) == kinds(plain)
    assert ("mul", {"numel": 16 * 8 * 8, "broadcast": 1}) in kinds(fx)
    assert ("cat", {"numel": 16 * 65, "parts": 2}) in kinds(fx)
    onnx_layers = layers_of(_export(_squeeze_excite(True), torch.randn(2, 3, 10, 10), tmp_path / "se.onnx")).layers
    views = ("permute", "flatten")  # torch.fx keeps .view and .flatten as layers; an export folds some of them
    assert [k for k, _ in kinds(onnx_layers, views)] == [k for k, _ in kinds(fx, views)]
    assert [k for k in kinds(onnx_layers) if k[0] in ("mul", "cat")] == [
        ("mul", {"numel": 16 * 8 * 8, "broadcast": 1}), ("cat", {"numel": 16 * 65, "parts": 2})]


def test_torch_stack_is_the_cat_of_its_parts_in_both_readers(tmp_path):
    """``torch.stack`` is PyTorch's cat of the parts' views with the new axis (refused before); an export writes
    ``Unsqueeze`` and ``Concat``, read as the same cat. At any axis: the new one is never the batch's."""
    import torch
    from torch import nn

    class Stacked(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim, self.fc1, self.fc = dim, nn.Linear(8, 32), nn.Linear(32, 4)

        def forward(self, x):
            h = self.fc1(x)
            return self.fc(torch.stack([h, h * 2, torch.relu(h)], self.dim).mean(self.dim))

    for dim in (0, 1, -1):
        fx = [(l["kind"], l["config"]) for l in layers_of(Stacked(dim), input_shape=[8]).layers]
        assert ("cat", {"numel": 96, "parts": 3}) in fx, dim
    exported = layers_of(_export(Stacked(1), torch.randn(2, 8), tmp_path / "stack.onnx")).layers
    assert [(l["kind"], l["config"]) for l in exported if l["kind"] == "cat"] == [("cat", {"numel": 96, "parts": 3})]


@pytest.mark.parametrize("num_layers", [1, 2])
def test_a_bidirectional_lstm_takes_the_stand_in_torch_fx_gives_it(tmp_path, num_layers):
    """A bidirectional LSTM exported (one or a stack of two): refused by name by default, as torch.fx refuses the
    module; under approx the very stand-in torch.fx reads (an lstm per direction and layer, their cats, the same
    reason). It was refused under approx too."""
    import torch
    from torch import nn

    class BiLSTM(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = nn.LSTM(12, 16, num_layers, batch_first=True, bidirectional=True), nn.Linear(32, 3)

        def forward(self, x):
            return self.fc(self.lstm(x)[0].mean(1))

    path = _export(BiLSTM(), torch.randn(2, 10, 12), tmp_path / "bilstm.onnx")
    with pytest.raises(UnsupportedOperatorError) as err:
        layers_of(path)
    assert err.value.ops == ["LSTM(direction=bidirectional)"]

    def read(model, **kw):
        return [(l["kind"], l["role"], l["config"], l.get("approx")) for l in
                layers_of(model, unknown_ops="approx", **kw).layers]

    onnx_layers = read(path)
    assert onnx_layers == read(BiLSTM(), input_shape=[10, 12])
    assert [k for k, _, _, a in onnx_layers if a] == ["lstm", "lstm", "cat"] * num_layers
