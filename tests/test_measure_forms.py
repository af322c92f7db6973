"""`measure` takes every model form `estimate` takes: file.py:Class, layer lists, ONNX files, nn.Module instances."""

import json
import math
import os

import pytest
from click.testing import CliRunner

from thor_sdk.cli.main import cli
from thor_sdk.errors import ModelError, NotFoundError, UsageError

QUICK = ["--min-rounds", "2", "--max-rounds", "2", "--window-s", "0.01"]

TINY_CNN = """
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(self.features(x).flatten(1))
"""


def _layer_list(path, layers, name="hand"):
    path.write_text(json.dumps({"format": "thor-sdk/layers", "version": 1, "name": name, "layers": layers}))
    return str(path)


CONV = {"kind": "conv2d", "config": {"in_channels": 3, "out_channels": 4, "kernel": 3, "stride": 1, "padding": 1,
                                     "groups": 1, "height": 8, "width": 8, "bias": 1}}


def measure_cli(*args):
    result = CliRunner().invoke(cli, ["measure", *args, "--batch-size", "4", "--json", *QUICK])
    return result


def assert_measured(result, model, n=2):
    assert result.exit_code == 0, (result.output, result.exception)
    r = json.loads(result.stdout)
    assert r["model"] == model and r["device"] == "host" and r["batch_size"] == 4 and r["unit"] == "s"
    assert math.isfinite(r["mean"]) and r["mean"] > 0 and r["median"] > 0
    assert r["n"] == n and r["steps_per_window"] >= 1
    return r


def test_measure_a_file_class_with_input_shape(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY_CNN)
    ref = f"{tmp_path / 'tiny.py'}:Net"
    assert_measured(measure_cli("--model", ref, "--input-shape", "3,16,16"), ref)


def test_file_class_without_input_shape_is_refused_before_any_work(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY_CNN)
    result = measure_cli("--model", f"{tmp_path / 'tiny.py'}:Net")
    assert isinstance(result.exception, UsageError)
    assert "--input-shape" in str(result.exception)


def test_layer_list_json_is_rebuilt_from_its_kinds_and_recorded(tmp_path):
    from thor_sdk.store import Campaign

    lst = tmp_path / "lenet5.json"
    wrote = CliRunner().invoke(cli, ["layers", "lenet5", "--out", str(lst)])
    assert wrote.exit_code == 0, wrote.output
    db = tmp_path / "runs.db"
    Campaign.create(str(db), {"device": {"name": "host"}, "metric": "time", "targets": []}).close()
    assert_measured(measure_cli("--model", str(lst), "--out", str(db)), str(lst))
    with Campaign.open(str(db)) as c:
        runs = c.model_runs()
    assert [(r["model"], r["batch_size"], r["n"]) for r in runs] == [(str(lst), 4, 2)]


def test_layer_list_without_output_head_trains_with_mse(tmp_path):
    lst = _layer_list(tmp_path / "conv.json", [CONV], "conv-only")
    assert_measured(measure_cli("--model", lst), lst)


def test_layer_list_through_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    head = {"kind": "output", "config": {"in_features": 256, "out_features": 3, "tokens": 1}}
    lst = _layer_list(tmp_path / "conv-head.json", [CONV, head], "conv-head")  # 4x8x8 reshaped into the head
    r = assert_measured(measure_cli("--model", lst, "--runtime", "onnxruntime"), lst)
    assert r["runtime"] == "onnxruntime"


def test_layer_list_that_does_not_chain_names_both_layers(tmp_path):
    relu = {"name": "act", "kind": "relu", "config": {"numel": 100}}  # conv outputs 4x8x8 = 256
    lst = _layer_list(tmp_path / "broken.json", [dict(CONV, name="conv"), relu])
    result = measure_cli("--model", lst)
    assert isinstance(result.exception, ModelError)
    msg = str(result.exception)
    assert "conv" in msg and "act" in msg and "do not chain" in msg


def test_module_instance_through_the_python_api():
    import torch

    import thor_sdk
    from thor_sdk.harness.protocol import ProtocolSettings

    settings = ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.01)
    net = torch.nn.Sequential(torch.nn.Embedding(20, 8), torch.nn.Linear(8, 20))  # (B, T, C): per-token labels
    before = [p.detach().clone() for p in net.parameters()]
    r = thor_sdk.measure(net, input_shape=(6,), input_dtype="int64", batch_size=4, settings=settings)
    assert r["model"] == "Sequential" and r["n"] == 2 and r["mean"] > 0
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters()))  # the caller's module is untouched
    with pytest.raises(UsageError, match="input_shape"):
        thor_sdk.measure(net, batch_size=4, settings=settings)


@pytest.mark.parametrize("kwargs, error", [
    ({"model": "lenet5", "batch_size": 0}, UsageError),
    ({"model": "lenet5", "input_shape": "3,32,32"}, UsageError),
    ({"model": "nope.py:Net", "input_shape": "3,32,32"}, NotFoundError),
    ({"model": "missing.json"}, NotFoundError),
    ({"model": "lenet5.json", "device": "android:SERIAL"}, UsageError),
])
def test_bad_arguments_fail_at_the_edge(tmp_path, monkeypatch, kwargs, error):
    import thor_sdk

    monkeypatch.chdir(tmp_path)
    _layer_list(tmp_path / "lenet5.json", [CONV])
    with pytest.raises(error):
        thor_sdk.measure(**kwargs)


def test_input_shape_must_be_positive_integers(tmp_path):
    (tmp_path / "tiny.py").write_text(TINY_CNN)
    result = measure_cli("--model", f"{tmp_path / 'tiny.py'}:Net", "--input-shape", "3,0,16")
    assert isinstance(result.exception, UsageError)



USER_NETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "user_nets.py")


def test_a_text_model_file_is_measured_on_token_ids_without_being_told(tmp_path):
    """A file.py:Class whose input only feeds nn.Embedding is measured on token ids, as `estimate` reads it
    (a float batch fails in the embedding lookup); an explicit dtype still wins."""
    ref = f"{USER_NETS}:TextGRU"  # nn.Embedding(500, 32), a GRU, a Linear
    assert_measured(measure_cli("--model", ref, "--input-shape", "7"), ref)
    from thor_sdk.harness.whole_model import build_training, resolve_model

    t = build_training(resolve_model(ref, "7"), 4)
    assert t.x.dtype.is_floating_point is False and t.x.shape == (4, 7) and int(t.x.max()) < 500
    tiny = tmp_path / "tiny.py"
    tiny.write_text(TINY_CNN)
    assert build_training(resolve_model(f"{tiny}:Net", "3,8,8"), 2).x.is_floating_point()
    with pytest.raises(ModelError, match="indices"):
        build_training(resolve_model(ref, "7", input_dtype="float32"), 4)


def test_a_model_returning_a_tuple_or_dict_is_trained_on_its_first_floating_point_tensor():
    """(logits, features), nanoGPT's (logits, None) and {"logits": ...} were refused ("returns tuple"); now the
    training step's loss reads the first floating-point tensor, as the layer list's head is read; an output without
    one is still refused."""
    import torch
    from torch import nn

    from thor_sdk.harness.whole_model import build_training, resolve_model

    class Net(nn.Module):
        def __init__(self, form):
            super().__init__()
            self.form, self.conv, self.fc = form, nn.Conv2d(3, 8, 3), nn.Linear(8, 5)

        def forward(self, x):
            f = self.conv(x).mean((2, 3))
            if self.form == "tuple":
                return torch.argmax(f, 1), self.fc(f), f  # an integer tensor first: skipped
            if self.form == "none":
                return self.fc(f), None
            if self.form == "dict":
                return {"ids": torch.argmax(f, 1), "logits": self.fc(f)}
            return {"ids": torch.argmax(f, 1)}

    for form in ("tuple", "none", "dict"):
        t = build_training(resolve_model(Net(form), [3, 8, 8]), 4)
        out = t.module(t.x)
        assert isinstance(out, torch.Tensor) and out.shape == (4, 5) and t.loss == "ce", form
        t.loss_fn(out, t.y).backward()  # the gradient reaches the layers behind the head
        assert t.module.inner.conv.weight.grad is not None
    with pytest.raises(ModelError, match="floating-point output tensor"):
        build_training(resolve_model(Net("ints"), [3, 8, 8]), 4)
