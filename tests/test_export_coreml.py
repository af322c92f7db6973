"""Updatable Core ML exports: validated structurally (Core ML itself only runs on macOS/iOS)."""

import pytest

pytest.importorskip("coremltools")
pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from thor_sdk.errors import ExportError  # noqa: E402
from thor_sdk.exporters.coreml_train import export_coreml, validate_updatable  # noqa: E402
from thor_sdk.models import build_model, model_spec  # noqa: E402


def export(name, path, **kw):
    spec = model_spec(name)
    return export_coreml(build_model(name), spec.input_shape, spec.num_classes, str(path), **kw)


@pytest.mark.parametrize("name,convs,linears", [("lenet5", 2, 3), ("cnn5", 4, 1)])
@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_feed_forward_nets_are_fully_updatable(name, convs, linears, opt, tmp_path):
    from coremltools.models.utils import load_spec

    path = tmp_path / f"{name}.mlmodel"
    r = export(name, path, optimizer=opt, lr=0.05, batch_size=16, epochs=3)
    assert len(r["updatable"]) == convs + linears and r["frozen"] == []
    v = validate_updatable(path)
    assert v["updatable"] == r["updatable"]
    assert v["optimizer"] == ("sgdOptimizer" if opt == "sgd" else "adamOptimizer")
    assert v["loss"] == "categoricalCrossEntropyLossLayer" and v["epochs"] == 3
    spec = load_spec(str(path))
    assert spec.isUpdatable and spec.specificationVersion >= 4
    layers = {layer.name: layer for layer in spec.neuralNetwork.layers}
    kinds = [layers[n].WhichOneof("layer") for n in r["updatable"]]
    assert kinds.count("convolution") == convs and kinds.count("innerProduct") == linears
    opt_spec = getattr(spec.neuralNetwork.updateParams.optimizer, v["optimizer"])
    assert opt_spec.learningRate.defaultValue == pytest.approx(0.05)
    assert opt_spec.miniBatchSize.defaultValue == 16
    # the loss reads a softmax; the label is a training input
    assert layers["softmax"].WhichOneof("layer") == "softmax"
    assert "probs_true" in v["training_inputs"]


def test_weights_are_copied_in_core_ml_layout(tmp_path):
    from coremltools.models.utils import load_spec
    import numpy as np

    model = build_model("lenet5")
    export_coreml(model, (1, 28, 28), 10, str(tmp_path / "l.mlmodel"))
    layers = {layer.name: layer for layer in load_spec(str(tmp_path / "l.mlmodel")).neuralNetwork.layers}
    w = np.array(layers["0"].convolution.weights.floatValue).reshape(6, 1, 5, 5)  # Core ML: (out, in, kh, kw)
    np.testing.assert_allclose(w, model[0].weight.detach().numpy(), rtol=0, atol=0)
    fc = np.array(layers["11"].innerProduct.weights.floatValue).reshape(10, 84)
    np.testing.assert_allclose(fc, model[11].weight.detach().numpy(), rtol=0, atol=0)


def test_mobilenet_drops_dropout_and_freezes_behind_relu6(tmp_path):
    r = export("mobilenetv2", tmp_path / "m.mlmodel")
    assert r["updatable"] == ["fc"]
    assert [d["layer"] for d in r["removed"]] == ["drop"]
    assert any("clip" in f["reason"] for f in r["frozen"])


@pytest.mark.parametrize("name,layer", [("lstm", "LSTMSequence"), ("transformer", "TransformerBlock")])
def test_recurrent_and_attention_models_are_refused_clearly(name, layer, tmp_path):
    with pytest.raises(ExportError, match=layer) as e:
        export(name, tmp_path / "x.mlmodel")
    assert "ONNX or TorchScript" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("kind, config, layer", [
    ("mha", dict(embed_dim=16, num_heads=2, seq_len=4, kv_len=4, cross=0, need_weights=1, p=0.0, mask=1, causal=0),
     "MultiheadAttention"),
    ("sdpa", dict(num_heads=2, seq_len=4, kv_len=4, head_dim=8, causal=0, p=0.0), "F.scaled_dot_product_attention")])
def test_attention_probes_are_refused_clearly(kind, config, layer, tmp_path):
    from thor_sdk.probes import Probe

    pm = Probe(kind, config, 2, "hidden").build("hidden")
    with pytest.raises(ExportError, match=layer) as e:
        export_coreml(pm.module, tuple(pm.x.shape[1:]), 10, str(tmp_path / "x.mlmodel"))
    assert "ONNX or TorchScript" in str(e.value) and "\n" not in str(e.value)


def test_validate_refuses_a_model_that_is_not_updatable(tmp_path):
    from coremltools.models.utils import load_spec, save_spec

    path = tmp_path / "l.mlmodel"
    export("lenet5", path)
    spec = load_spec(str(path))
    spec.isUpdatable = False
    save_spec(spec, str(tmp_path / "frozen.mlmodel"))
    with pytest.raises(ExportError, match="not marked updatable"):
        validate_updatable(tmp_path / "frozen.mlmodel")


def test_residual_net_export_says_which_layers_stay_frozen(tmp_path):
    from thor_sdk.cli.main import cli

    out = tmp_path / "r.mlmodel"
    res = CliRunner().invoke(cli, ["export", "--model", "resnet18", "--format", "coreml", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "updatable (1): fc" in res.output
    assert "stem.0 (convolution): behind add_7 (add), which Core ML cannot back-propagate" in res.output
    assert "stem.1 (batchnorm): Core ML updates only convolution and inner-product" in res.output
    assert "only on macOS/iOS" in res.output
    assert validate_updatable(out)["updatable"] == ["fc"]
    assert res.output.count("(convolution): behind") == 20 and res.output.count("(batchnorm):") == 20


def test_global_max_pooling_converts_as_a_global_max_pooling_layer(tmp_path):
    from coremltools.models.utils import load_spec
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(1),
                        nn.Linear(8, 4))
    r = export_coreml(net, (3, 12, 12), 4, str(tmp_path / "g.mlmodel"))
    assert r["updatable"] == ["0", "4"]
    pool = {layer.name: layer for layer in load_spec(str(tmp_path / "g.mlmodel")).neuralNetwork.layers}["2"].pooling
    assert pool.globalPooling and pool.type == pool.MAX
    with pytest.raises(ExportError, match="only global adaptive pooling"):
        export_coreml(nn.Sequential(nn.Conv2d(3, 8, 3), nn.AdaptiveMaxPool2d(2), nn.Flatten(1), nn.Linear(32, 4)),
                      (3, 12, 12), 4, str(tmp_path / "h.mlmodel"))
