"""prune-plan: the greedy width cuts, the files it writes, its report and its refusals (no profiling)."""

import importlib.util
import json
import math
import os
import shutil
import sys

import pytest

import thor_sdk
from thor_sdk.errors import UsageError
from thor_sdk.harness.protocol import PartResult, ProtocolSettings
from thor_sdk.layers import layers_of
from thor_sdk.prune import plan_cuts
from thor_sdk.prune.groups import cut, find_groups

sys.path.insert(0, os.path.dirname(__file__))
from fake_device import FakeDevice, planted_cost  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EST = os.path.join(ROOT, "examples", "check", "synthetic-phone-time.json")  # SYNTHETIC costs: tests only
CNN = os.path.join(ROOT, "examples", "check", "example_cnn.layers.json")


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "cnn-pruned.json"
    return thor_sdk.prune_plan(EST, CNN, target_saving=0.5, batch_size=16, out=str(out)), out


def test_target_met_by_estimate_and_the_written_list_estimates_to_it(planned):
    r, out = planned
    assert r["target_met"] and r["estimated_after"] <= 0.5 * r["estimated_before"]
    assert r["unit"] == "s" and r["estimated_saving"] == pytest.approx(1 - r["estimated_after"] / r["estimated_before"])
    again = thor_sdk.estimate(EST, str(out), batch_size=16)  # what `estimate` reads back
    assert again["total"]["mean"] == pytest.approx(r["estimated_after"], rel=1e-9)
    before = thor_sdk.estimate(EST, CNN, batch_size=16)
    assert before["total"]["mean"] == pytest.approx(r["estimated_before"], rel=1e-9)
    doc = json.loads(out.read_text())
    assert doc["format"] == "thor-sdk/layers" and all("cost" in l for l in doc["layers"])


def test_savings_are_monotone_and_add_up(planned):
    r, _ = planned
    assert r["steps"]
    after = [r["estimated_before"]] + [s["estimated_after"] for s in r["steps"]]
    assert all(b < a for a, b in zip(after, after[1:]))
    assert all(s["estimated_saving"] > 0 and s["params_removed"] > 0 for s in r["steps"])
    assert sum(c["estimated_saving"] for c in r["changes"]) == pytest.approx(
        r["estimated_before"] - r["estimated_after"], rel=1e-9)
    assert r["params_after"] < r["params_before"]


def test_head_input_and_minimum_widths_are_kept(planned):
    r, out = planned
    orig, pruned = layers_of(CNN), layers_of(str(out))
    assert pruned.input_shape == orig.input_shape and len(pruned.layers) == len(orig.layers)
    assert pruned.layers[0]["config"]["in_channels"] == orig.layers[0]["config"]["in_channels"]
    assert pruned.layers[-1]["kind"] == "output"
    assert pruned.layers[-1]["config"]["out_features"] == orig.layers[-1]["config"]["out_features"]
    for c in r["changes"]:
        assert c["to"] < c["from"] and c["to"] >= math.ceil(0.25 * c["from"])
        assert c["kind"] in ("conv2d", "linear") and c["feature"] in ("out_channels", "out_features")
    changed = {(i, f) for i, (a, b) in enumerate(zip(orig.layers, pruned.layers))
               for f in a["config"] if a["config"][f] != b["config"][f]}
    allowed = {"out_channels", "in_channels", "out_features", "in_features", "numel", "channels"}
    assert changed and {f for _, f in changed} <= allowed
    assert not any(i == 0 and f == "in_channels" for i, f in changed)


def test_written_module_builds_runs_and_lists_the_same_layers(planned):
    torch = pytest.importorskip("torch")
    r, out = planned
    py = out.with_suffix(".py")
    assert r["module"] == str(py) and r["class"] == "PrunedModel"
    text = py.read_text()
    assert "out of scope" in text
    spec = importlib.util.spec_from_file_location("pruned_under_test", py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    net = mod.PrunedModel()
    x = torch.randn(2, *net.input_shape)
    y = net(x)
    assert tuple(y.shape) == (2, 10)
    torch.nn.functional.cross_entropy(y, torch.tensor([1, 3])).backward()
    assert all(p.grad is not None for p in net.parameters())
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    listed = [l for l in layers_of(str(out)).layers if l["kind"] == "conv2d"]
    assert [c.out_channels for c in convs] == [l["config"]["out_channels"] for l in listed]
    via_class = layers_of(f"{py}:PrunedModel", input_shape=[3, 32, 32]).layers
    assert [(l["kind"], l["config"]) for l in via_class] == [(l["kind"], l["config"]) for l in layers_of(str(out)).layers]


def test_units_capacity_and_an_unreachable_target():
    est = thor_sdk.load_estimator(EST)
    layers = layers_of(CNN).layers
    p = plan_cuts(est, layers, 16, target_saving=0.3, capacity="units")
    assert p["target_met"] and p["estimated_after"] <= 0.7 * p["estimated_before"]
    far = plan_cuts(est, layers, 16, target_saving=0.99)
    assert not far["target_met"]
    for g in far["groups"]:  # every cuttable layer went down to its floor, never below
        assert far["layers"][g["index"]]["config"][{"conv2d": "out_channels", "linear": "out_features"}[g["kind"]]] \
            == g["min_units"]


def test_groups_stop_at_residuals_and_depthwise_convolutions():
    conv = {"kernel": 3, "stride": 1, "padding": 1, "height": 8, "width": 8, "bias": 0}
    layers = [
        {"name": "a", "kind": "conv2d", "role": "input", "config": dict(conv, in_channels=3, out_channels=16, groups=1)},
        {"name": "b", "kind": "batchnorm2d", "role": "hidden", "config": {"channels": 16, "height": 8, "width": 8}},
        {"name": "c", "kind": "conv2d", "role": "hidden", "config": dict(conv, in_channels=16, out_channels=16,
                                                                         groups=16)},
        {"name": "d", "kind": "conv2d", "role": "hidden", "config": dict(conv, in_channels=16, out_channels=32, groups=1)},
        {"name": "e", "kind": "add", "role": "hidden", "config": {"numel": 32 * 64}},
        {"name": "f", "kind": "conv2d", "role": "hidden", "config": dict(conv, in_channels=32, out_channels=8, groups=1)},
        {"name": "g", "kind": "flatten", "role": "hidden", "config": {"numel": 8 * 64}},
        {"name": "h", "kind": "output", "role": "output", "config": {"in_features": 512, "out_features": 10,
                                                                      "tokens": 1}},
    ]
    groups = find_groups(layers)
    assert sorted(groups) == [5]  # a feeds a depthwise conv, d a residual add; f feeds the head through a flatten
    cut_layers, edits = cut(layers, 5, 4, groups)
    assert cut_layers[7]["config"]["in_features"] == 256 and cut_layers[6]["config"]["numel"] == 256
    assert layers[5]["config"]["out_channels"] == 8  # the caller's list is untouched
    assert [e["layer"] for e in edits] == ["f", "g", "h"]
    with pytest.raises(UsageError):
        cut(layers, 0, 8, groups)


class PlantedModelDevice(FakeDevice):
    """FakeDevice whose whole-model runs take the layer list a prune plan hands ``measure``."""

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="torch", on_round=None):
        settings = settings or ProtocolSettings()
        self.calls.append(model.label)
        r = PartResult("model", 1)
        total = sum(planted_cost(l["kind"], l["config"], batch_size, l["role"]) for l in model.ref.layers)
        r.time_s = [total] * settings.min_rounds
        r.states = [{}] * settings.min_rounds
        return r


def test_measure_runs_interleaved_and_reports_medians():
    dev = PlantedModelDevice()
    r = thor_sdk.prune_plan(EST, CNN, target_saving=0.5, batch_size=8, measure=True, device=dev, repeats=3)
    m = r["measured"]
    labels = dev.calls
    assert len(labels) == 6 and labels[0::2] == [labels[0]] * 3 and labels[1::2] == [labels[1]] * 3
    assert labels[0] != labels[1]
    assert m["after_median_s"] < m["before_median_s"] and m["saving"] == pytest.approx(
        1 - m["after_median_s"] / m["before_median_s"])
    assert len(m["runs"]["before"]) == 3 and "load_before" in m and m["unit"] == "s"


# -- the CLI -----------------------------------------------------------------------------------------------
def run_cli(argv, capsys):
    from thor_sdk.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code, capsys.readouterr()


def test_cli_json_prints_the_plan(tmp_path, capsys):
    out = tmp_path / "p.json"
    code, res = run_cli(["prune-plan", "--estimator", EST, "--model", CNN, "--target-saving", "0.4", "--batch-size",
                         "4", "--out", str(out), "--json"], capsys)
    assert code == 0
    doc = json.loads(res.out)
    assert {"estimated_before", "estimated_after", "unit", "changes", "note"} <= set(doc)
    assert doc["estimated_after"] <= 0.6 * doc["estimated_before"] and doc["changes"]
    assert {"layer", "feature", "from", "to", "estimated_saving"} <= set(doc["changes"][0])
    assert out.exists() and out.with_suffix(".py").exists()


def test_cli_text_says_accuracy_is_out_of_scope(capsys):
    code, res = run_cli(["prune-plan", "--estimator", EST, "--model", CNN, "--batch-size", "4"], capsys)
    assert code == 0 and "out of scope" in res.out and "estimated" in res.out


@pytest.mark.parametrize("given", [
    {"--target-saving": "0"}, {"--target-saving": "1"}, {"--target-saving": "-0.2"}, {"--target-saving": "1.5"},
    {"--target-saving": "nan"}, {"--target-saving": "inf"}, {"--step-fraction": "0"}, {"--min-fraction": "nan"},
    {"--batch-size": "0"}, {"--repeats": "0"}, {"--model": "no_such_net"}, {"--model": "missing.json"},
    {"--out": "NOFOLDER/p.json"}, {"--out": "p.txt"}, {"--out": "adir.json"}, {"--measure": None, "--device": "android"},
    {"--estimator": "missing-estimator.json"}, {"--class-name": "not a name"},
    {"--model": "har"},  # dropout: a kind the synthetic estimator lacks
])
def test_hostile_options_give_one_error_line_and_write_nothing(given, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir.json").mkdir()
    opts = {"--estimator": EST, "--model": CNN, "--out": "p.json", **given}
    argv = ["prune-plan"] + [x for k, v in opts.items() for x in ([k] if v is None else [k, v])]
    before = sorted(os.listdir(tmp_path))
    code, res = run_cli(argv, capsys)
    assert code == 2, res
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.err
    assert sorted(os.listdir(tmp_path)) == before


def test_output_in_an_unwritable_folder_is_refused_before_work(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    ro = tmp_path / "ro"
    ro.mkdir()
    os.chmod(ro, 0o500)
    try:
        code, res = run_cli(["prune-plan", "--estimator", EST, "--model", CNN, "--out", str(ro / "p.json")], capsys)
    finally:
        os.chmod(ro, 0o700)
    assert code == 2 and res.err.startswith("Error: ") and not os.listdir(ro)
    shutil.rmtree(ro)


def test_a_list_that_is_not_one_network_is_planned_but_not_written(tmp_path):
    conv = {"kernel": 3, "stride": 1, "padding": 1, "groups": 1, "bias": 1}
    layers = [
        {"name": "c1", "kind": "conv2d", "role": "input",
         "config": dict(conv, in_channels=3, out_channels=16, height=16, width=16)},
        {"name": "r1", "kind": "relu", "role": "hidden", "config": {"numel": 16 * 256}},
        {"name": "c2", "kind": "conv2d", "role": "hidden",
         "config": dict(conv, in_channels=16, out_channels=32, height=16, width=16)},
        # a shortcut's layer: its input is the block's input, not c2's output (the list does not chain here)
        {"name": "s", "kind": "conv2d", "role": "hidden",
         "config": dict(conv, in_channels=3, out_channels=32, height=16, width=16)},
        {"name": "r2", "kind": "relu", "role": "hidden", "config": {"numel": 32 * 256}},
        {"name": "f", "kind": "flatten", "role": "hidden", "config": {"numel": 32 * 256}},
        {"name": "head", "kind": "output", "role": "output", "config": {"in_features": 32 * 256, "out_features": 10,
                                                                         "tokens": 1}},
    ]
    src = tmp_path / "branchy.json"
    src.write_text(json.dumps({"format": "thor-sdk/layers", "version": 1, "name": "branchy", "input_shape": [3, 16, 16],
                               "input_dtype": "float32", "layers": layers}))
    r = thor_sdk.prune_plan(EST, str(src), target_saving=0.2, batch_size=4)
    assert r["changes"] and {c["layer"] for c in r["changes"]} <= {"c1", "s"}
    assert any("branches" in w for w in r["warnings"])
    with pytest.raises(UsageError, match="one network"):
        thor_sdk.prune_plan(EST, str(src), target_saving=0.2, batch_size=4, out=str(tmp_path / "p.json"))
    assert sorted(os.listdir(tmp_path)) == ["branchy.json"]


CORE_ONLY = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "numpy", "scipy", "sklearn", "onnx", "onnxruntime", "matplotlib"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: core install)", name=name)
sys.meta_path.insert(0, Block())
from thor_sdk.cli.main import main
main(sys.argv[1:])
"""


def test_a_plan_on_a_layer_list_needs_no_torch_or_numpy(tmp_path):
    import subprocess

    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-c", CORE_ONLY, "prune-plan", "--estimator", EST, "--model", CNN,
                        "--batch-size", "4", "--out", str(out), "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["target_met"] and out.exists() and out.with_suffix(".py").exists()
