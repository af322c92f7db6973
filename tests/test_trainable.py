"""``--trainable`` (a fine-tune chosen by parameter names): the patterns checked, applied to torch modules and to
an ONNX file's initializers alike, carried through estimate, measure, check and export, never changing a
caller's module, and every misspelt pattern one clear error."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thor_sdk.errors import ThorError, UsageError
from thor_sdk.layers.trainable import MAX_PATTERNS, check_patterns, matches, trained_names

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.layers import layers_of  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.mid = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.relu(self.mid(self.features(x))))


def _summary(ml):
    return [(l["kind"], l["role"], l["config"].get("frozen", 0), bool(l.get("approx"))) for l in ml.layers]


def test_patterns_are_checked_before_any_work():
    assert check_patterns(None) is None and check_patterns([]) is None and check_patterns(()) is None
    assert check_patterns("fc") == ("fc",) and check_patterns(["fc", "fc", "a.*"]) == ("fc", "a.*")
    for bad in ([""], ["  "], [3], ["a\x00b"], ["x" * 201], ["p"] * 0 + [f"p{i}" for i in range(MAX_PATTERNS + 1)], 7):
        with pytest.raises(UsageError, match="trainable"):
            check_patterns(bad)


def test_a_pattern_is_a_glob_over_the_whole_name_or_a_modules_name():
    assert matches("fc.weight", "fc") and matches("fc.weight", "fc.*") and matches("fc.weight", "*.weight")
    assert matches("blocks.3.attn.lora_a", "*.lora_*") and matches("features.18.conv.0.weight", "features.1[5-9]*")
    assert not matches("features.10.weight", "features.1")  # a module's name, not a prefix of another's
    assert not matches("fc2.weight", "fc") and not matches("xfc.weight", "fc")
    with pytest.raises(UsageError, match=r"'clasifier' matches no parameter of m \(its 6 parameters are named like "
                                         r"a.weight, a.bias, b.weight, b.bias, \.\.\., fc.bias"):
        trained_names(["a.weight", "a.bias", "b.weight", "b.bias", "fc.weight", "fc.bias"], ("fc", "clasifier"), "m")
    with pytest.raises(UsageError, match="no parameters"):
        trained_names([], ("fc",))


@given(st.one_of(st.none(), st.text(max_size=30), st.lists(st.text(max_size=30), max_size=70), st.integers(),
                 st.lists(st.integers(), max_size=3)))
@settings(max_examples=200, deadline=None)
def test_any_patterns_given_are_a_tuple_of_strings_or_one_usage_error(value):
    try:
        got = check_patterns(value)
    except UsageError:
        return
    assert got is None or (isinstance(got, tuple) and got and all(isinstance(p, str) and p.strip() for p in got))


def test_trainable_patterns_freeze_the_rest_as_requires_grad_would_and_leave_the_callers_module_alone():
    coded = Net()
    coded.features.requires_grad_(False)
    coded.mid.requires_grad_(False)
    m = Net()
    by_names = layers_of(m, input_shape=[3, 8, 8], trainable=["head"])
    assert _summary(by_names) == _summary(layers_of(coded, input_shape=[3, 8, 8]))
    assert all(p.requires_grad for p in m.parameters())  # copied, never changed
    s = _summary(by_names)
    assert s[0] == ("conv2d", "input", 1, False) and s[-1] == ("output", "output", 0, False)
    # the patterns override the model's own choice both ways
    assert _summary(layers_of(coded, input_shape=[3, 8, 8], trainable=["*"])) == _summary(
        layers_of(Net(), input_shape=[3, 8, 8]))
    # a module trained in part (its weight matched, its bias not): refused, or estimated as trained under approx
    with pytest.raises(ThorError, match="trained, the others frozen"):
        layers_of(Net(), input_shape=[3, 8, 8], trainable=["mid.weight", "head"])
    approx = layers_of(Net(), input_shape=[3, 8, 8], trainable=["mid.weight", "head"], unknown_ops="approx")
    assert [l for l in approx.layers if l["name"] == "mid"][0]["approx"]


def test_a_zoo_net_fine_tuned_by_name_and_a_layer_list_refused(tmp_path):
    ml = layers_of("mobilenetv2", trainable=["fc"])
    frozen = [l for l in ml.layers if l["config"].get("frozen")]
    assert len(frozen) > 50 and all(l["role"] == "input" for l in ml.layers[:-1])
    assert ml.layers[-1]["kind"] == "output" and "approx" not in ml.layers[-1]
    with pytest.raises(UsageError, match="'classifier' matches no parameter of mobilenetv2"):
        layers_of("mobilenetv2", trainable=["classifier"])
    path = tmp_path / "l.json"
    path.write_text(json.dumps(layers_of("lenet5").to_dict()))
    with pytest.raises(UsageError, match="marks its frozen layers itself"):
        layers_of(str(path), trainable=["fc"])


@pytest.fixture(scope="module")
def net_onnx(tmp_path_factory):
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    m = Net()
    path = tmp_path_factory.mktemp("onnx") / "net.onnx"
    torch.onnx.export(m, (torch.randn(2, 3, 8, 8),), str(path), dynamo=False, input_names=["x"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return str(path)


@pytest.mark.parametrize("patterns", [None, ["head"], ["mid", "head"], ["features.3", "head"], ["*.bias", "*.weight"]])
def test_an_onnx_files_initializers_are_chosen_as_the_modules_parameters(net_onnx, patterns):
    want = _summary(layers_of(Net(), input_shape=[3, 8, 8], trainable=patterns))
    assert _summary(layers_of(net_onnx, trainable=patterns)) == want


class AttnNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 32)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.norm = nn.LayerNorm(32)
        self.act = nn.PReLU()  # one shared slope: a one-number weight, read through an Unsqueeze in ONNX
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.proj(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.head(self.act(self.norm(h + a)).mean(1))


@pytest.mark.parametrize("patterns", [["attn", "head"], ["act", "head"], ["norm", "head"], ["head"]])
def test_attention_projections_and_a_one_number_slope_are_one_layers_weights_in_onnx(tmp_path, patterns):
    # the MHA's projections (folded into one layer) are its weights; the constants between them (shapes, the
    # attention's scale) are not; PReLU's one slope is
    pytest.importorskip("onnx")
    torch.manual_seed(0)
    m = AttnNet()
    path = tmp_path / "attn.onnx"
    torch.onnx.export(m, (torch.randn(2, 10, 16),), str(path), dynamo=False, input_names=["x"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    want = _summary(layers_of(m, input_shape=[10, 16], trainable=patterns))
    assert _summary(layers_of(str(path), trainable=patterns)) == want
    assert [k for k, _, f, _ in want if f] and not any(a for *_, a in want)


def test_onnx_batch_norm_statistics_are_buffers_and_misspelt_or_partial_patterns_are_errors(net_onnx):
    # features.1 (the batch norm) trains through its weight and bias alone: running statistics are not parameters
    got = _summary(layers_of(net_onnx, trainable=["features.1", "head"]))
    assert got[1] == ("batchnorm2d", "input", 0, False) and got[0] == ("conv2d", "input", 1, False)
    with pytest.raises(UsageError, match="'nope' matches no parameter of net.onnx"):
        layers_of(net_onnx, trainable=["nope"])
    with pytest.raises(ThorError, match="1 of its 2 parameter initializers trained"):
        layers_of(net_onnx, trainable=["features.1.weight", "head"])
    approx = _summary(layers_of(net_onnx, trainable=["features.1.weight", "head"], unknown_ops="approx"))
    assert approx[1] == ("batchnorm2d", "input", 0, True)


def test_measure_builds_the_fine_tune_and_labels_it(tmp_path):
    from thor_sdk.harness.whole_model import build_training, resolve_model

    src = resolve_model("lenet5", trainable=["9", "11"])
    assert src.name is None and src.label == "lenet5 [trainable 9,11]"  # built here, not by name on a device
    assert resolve_model("lenet5").name == "lenet5"
    t = build_training(src, 4)
    assert {n for n, p in t.module.named_parameters() if p.requires_grad} == {"9.weight", "9.bias", "11.weight",
                                                                               "11.bias"}
    with pytest.raises(UsageError, match="matches no parameter of lenet5"):
        build_training(resolve_model("lenet5", trainable=["nope"]), 4)
    with pytest.raises(UsageError, match="name only"):
        from thor_sdk.api import measure

        measure("lenet5", device="adb:emulator-5554", batch_size=4, trainable=["9"])


def test_the_exported_fine_tune_step_updates_only_what_trains(tmp_path):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    from thor_sdk.exporters.export import export_model

    r = export_model("lenet5", 4, "onnx", str(tmp_path / "ft.onnx"), trainable=["11"])
    assert r["trainable"] == ["11"] and r["trained_parameters"] == ["11.weight", "11.bias"] and r["parameters"] == 10
    outs = {o.name for o in onnx.load(str(tmp_path / "ft.onnx")).graph.output}
    assert "11.weight.new" in outs and "0.weight.new" not in outs and "9.bias.new" not in outs
    with pytest.raises(UsageError, match="matches no parameter"):
        export_model("lenet5", 4, "onnx", str(tmp_path / "bad.onnx"), trainable=["fc"])
    assert not (tmp_path / "bad.onnx").exists()


def test_a_budgets_file_checks_a_fine_tune_and_refuses_empty_patterns(tmp_path):
    from thor_sdk.check.budgets import read_budgets
    from thor_sdk.errors import FormatError

    est = tmp_path / "e.json"
    est.write_text("{}")
    good = tmp_path / "b.toml"
    good.write_text('estimators = "e.json"\n[[models]]\nmodel = "mobilenetv2"\ntrainable = ["fc"]\n'
                    'batch_size = 16\nbudget_s = 1.0\n[[models]]\nmodel = "lenet5"\ntrainable = "11"\n'
                    'batch_size = 8\nbudget_s = 1.0\n')
    bf = read_budgets(good)
    assert [m.trainable for m in bf.models] == [("fc",), ("11",)]
    for bad in ("trainable = []", 'trainable = [""]', "trainable = 3", 'trainable = ["a\\u0000"]'):
        path = tmp_path / "bad.toml"
        path.write_text(f'[[models]]\nmodel = "lenet5"\n{bad}\nbatch_size = 8\nbudget_s = 1.0\n')
        with pytest.raises(FormatError, match="trainable"):
            read_budgets(path)


def _cli(*args):
    import contextlib
    import io

    from thor_sdk.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def test_the_cli_shows_a_fine_tunes_layers_and_a_misspelt_pattern_is_one_error_line():
    code, out, err = _cli("layers", "lenet5", "--trainable", "11", "--trainable", "9", "--json")
    assert code == 0, err
    layers = json.loads(out)["layers"]
    assert [l["config"].get("frozen", 0) for l in layers if l["kind"] in ("conv2d", "linear")] == [1, 1, 1, 0]
    code, out, err = _cli("layers", "lenet5", "--trainable", "fc")
    assert code == 2 and out == "" and err.strip().count("\n") == 0 and err.startswith("Error: --trainable 'fc'")


def test_evaluate_takes_a_fine_tune_with_an_estimator_only_and_checks_it_before_measuring():
    from pathlib import Path

    est = Path(__file__).resolve().parents[1] / "examples" / "check" / "synthetic-phone-time.json"
    code, out, err = _cli("evaluate", "--estimator", str(est), "--models", "lenet5", "--trainable", "nope", "--quiet")
    assert code == 2 and out == "" and err.startswith("Error: --trainable 'nope' matches no parameter of lenet5")
    code, out, err = _cli("evaluate", "--model", "lenet5", "--trainable", "11")
    assert code == 2 and "--trainable goes with --estimator" in err
