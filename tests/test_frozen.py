"""Frozen layers (a fine-tuned net's backbone, ``requires_grad`` False): found by the reader, costed without their
weight gradient and update, probed frozen, exported untrained, planned by the profile, read by every runtime."""

import json

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

from thor_sdk.errors import UnsupportedOperatorError, UsageError  # noqa: E402
from thor_sdk.layers import layers_of  # noqa: E402
from thor_sdk.layers.kinds import DEFAULT_FEATURES, FREEZABLE, KINDS, get_kind  # noqa: E402
from thor_sdk.probes.build import Probe  # noqa: E402

CONV = {"in_channels": 8, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "groups": 1, "height": 16,
        "width": 16, "bias": 1}


def test_every_kind_with_weights_but_the_head_may_be_frozen_and_reads_trained_by_default():
    assert set(FREEZABLE) == {k for k, kind in KINDS.items() if kind.has_params and k != "output"}
    for k in FREEZABLE:
        assert "frozen" in KINDS[k].features and DEFAULT_FEATURES[k]["frozen"] == 0
    assert "frozen" not in KINDS["output"].features and "frozen" not in KINDS["relu"].features
    with pytest.raises(UsageError, match="frozen must be 0 or 1"):
        get_kind("conv2d").check_config(dict(CONV, frozen=2))


@pytest.mark.parametrize("role", ["input", "hidden"])
def test_a_frozen_layer_costs_its_forward_and_input_gradient_only(role):
    kind = get_kind("conv2d")
    fwd = kind.forward_flops(CONV)
    trained = kind.train_terms(CONV, role)
    frozen = kind.train_terms(dict(CONV, frozen=1), role)
    assert trained[0] == fwd * (2.0 if role == "input" else 3.0) and trained[1] > 0
    assert frozen[0] == fwd * (1.0 if role == "input" else 2.0) and frozen[1] == 0.0  # no weight gradient, no update
    p = kind.num_params(CONV)
    # bytes: no weight gradient written (4P) and no update (12P); as the input layer no backward at all
    assert trained[3] - frozen[3] == pytest.approx(16.0 * p)
    assert frozen[2] < trained[2] if role == "input" else frozen[2] == trained[2]
    assert not kind.backward_runs("input", dict(CONV, frozen=1)) and kind.backward_runs("hidden", dict(CONV, frozen=1))
    assert kind.trains(CONV) and not kind.trains(dict(CONV, frozen=1)) and not get_kind("relu").trains({"numel": 4})


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.mid = nn.Linear(16, 16)
        self.tail = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(F.relu(self.tail(F.relu(self.mid(self.features(x))))))


def _by_name(model, **kw):
    return {l["name"]: l for l in layers_of(model, input_shape=[3, 8, 8], **kw).layers}


def test_the_reader_marks_frozen_modules_and_their_roles_follow_the_gradient():
    m = Backbone()
    m.features.requires_grad_(False)
    m.tail.requires_grad_(False)  # frozen behind a trained layer: its input's gradient is still computed
    got = _by_name(m)
    for name in ("features.0", "features.1", "features.3"):
        assert got[name]["config"]["frozen"] == 1 and got[name]["role"] == "input"
    assert got["features.4"]["role"] == "input"  # a relu behind frozen layers only: no backward
    assert got["mid"]["config"].get("frozen", 0) == 0 and got["mid"]["role"] == "input"
    assert got["tail"]["config"]["frozen"] == 1 and got["tail"]["role"] == "hidden"
    assert got["head"]["kind"] == "output" and "approx" not in got["head"]
    trained = _by_name(Backbone())
    assert all(l["config"].get("frozen", 0) == 0 for l in trained.values())


def test_a_module_trained_in_part_is_refused_or_approximated_as_trained():
    m = Backbone()
    m.mid.weight.requires_grad_(False)  # BitFit: the bias alone trained
    with pytest.raises(UnsupportedOperatorError, match="mid .*1 of its 2 parameter tensors trained"):
        layers_of(m, input_shape=[3, 8, 8])
    got = _by_name(m, unknown_ops="approx")
    assert got["mid"]["config"].get("frozen", 0) == 0 and "frozen" in got["mid"]["approx"]


def test_a_frozen_last_linear_is_the_head_marked_approx():
    m = Backbone()
    m.head.requires_grad_(False)
    head = _by_name(m)["head"]
    assert head["kind"] == "output" and "frozen last Linear" in head["approx"]


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 32)
        self.enc = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.enc(self.inp(x)).mean(1))


def test_parts_of_a_module_are_frozen_by_their_own_submodules():
    m = Encoder()
    m.enc.self_attn.requires_grad_(False)  # the attention frozen, the feed-forward and norms trained
    ls = layers_of(m, input_shape=[6, 8]).layers
    frozen = {l["name"]: l["config"].get("frozen") for l in ls if l["kind"] in FREEZABLE}
    assert frozen["enc.self_attn"] == 1 and not frozen["enc.linear1"] and not frozen["enc.norm1"]


class LayerNorm2d(nn.LayerNorm):
    """timm's: F.layer_norm with the module's own weight, over channels-last."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps).permute(0, 3, 1, 2)


def test_a_function_reading_frozen_parameters_is_frozen():
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), LayerNorm2d(8), nn.Flatten(), nn.Linear(8 * 8 * 8, 4))
    m[1].requires_grad_(False)
    norm = [l for l in layers_of(m, input_shape=[3, 8, 8]).layers if l["kind"] == "layernorm"]
    assert len(norm) == 1 and norm[0]["config"]["frozen"] == 1 and norm[0]["role"] == "hidden"


def test_tied_frozen_embeddings_stay_frozen_and_need_no_gradient():
    from bench_module import load_bench

    nets = load_bench("user_nets")
    ls = layers_of(nets.LoRAGPT(), input_shape=[64], unknown_ops="approx").layers
    wte = ls[0]
    assert wte["kind"] == "embedding" and wte["config"]["positional"] == 1 and wte["config"]["frozen"] == 1
    by = {l["name"]: l for l in ls}
    assert by["h.0.ln_1"]["role"] == "input" and by["h.0.attn.c_attn.base"]["role"] == "input"
    assert by["h.0.attn.c_attn.lora_A"]["config"].get("frozen", 0) == 0
    assert by["h.1.attn.c_attn.base"]["role"] == "hidden" and by["h.1.attn.c_attn.base"]["config"]["frozen"] == 1


@pytest.mark.parametrize("role", ["input", "hidden"])
def test_a_frozen_probe_builds_frozen_and_reads_back_as_itself(role):
    probe = Probe("conv2d", dict(CONV, frozen=1), 4, role)
    trained = Probe("conv2d", dict(CONV), 4, role)
    assert probe.id != trained.id and trained.id == Probe("conv2d", dict(CONV, frozen=0), 4, role).id
    part = probe.build(role)
    layer, head = part.module[0], part.module[1]
    assert not any(p.requires_grad for p in layer.parameters()) and all(p.requires_grad for p in head.parameters())
    # the 2-layer probe of a frozen input layer runs no backward into it: the 1-layer probe's head computes none
    assert probe.head_input_requires_grad() == (role == "hidden") and trained.head_input_requires_grad()
    assert probe.build("head").x_requires_grad == (role == "hidden")
    got = layers_of(nn.Sequential(layer), input_shape=list(get_kind("conv2d").in_shape(CONV))).layers
    assert got[0]["config"]["frozen"] == 1


def test_the_trainer_leaves_frozen_weights_alone():
    from thor_sdk.harness.torch_trainer import TorchTrainer
    from thor_sdk.probes.torch_build import cross_entropy

    part = Probe("linear", {"in_features": 8, "out_features": 8, "tokens": 1, "bias": 1, "frozen": 1}, 4,
                 "hidden").build("hidden")
    before = [p.detach().clone() for p in part.module.parameters()]
    TorchTrainer(part.module, part.x, part.y, cross_entropy, part.x_requires_grad).step()
    after = list(part.module.parameters())
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])  # the frozen layer
    assert not torch.equal(before[2], after[2])  # the head trained


def test_the_profile_plans_frozen_layers_of_kinds_with_weights_only():
    from thor_sdk.campaign.prior import FROZEN_NEIGHBOUR_SHARE, candidates, load_prior

    prior = load_prior()
    assert prior["frozen_share"] == FROZEN_NEIGHBOUR_SHARE
    for kind in ("linear", "conv2d", "batchnorm2d", "embedding"):
        got = candidates(prior, kind, 200)
        share = sum(c.get("frozen", 0) for c, _, _ in got) / len(got)
        assert 0.1 < share < 0.3, (kind, share)
    assert not any("frozen" in c for c, _, _ in candidates(prior, "relu", 100))
    # a prior written before (no frozen share, no fine-tuned twins, whose frozen backbones bring frozen configs of
    # their own): none frozen
    lin = prior["kinds"]["linear"]
    old = {k: v for k, v in prior.items() if k not in ("frozen_share", "finetune_weight")}
    old["kinds"] = {"linear": dict(lin, configs=[c for c in lin["configs"] if not c["config"].get("frozen")])}
    assert not any(c.get("frozen") for c, _, _ in candidates(old, "linear", 100))
    with_twins = dict(old, kinds={"linear": lin})
    assert any(c.get("frozen") for c, _, _ in candidates(with_twins, "linear", 100))


def _tiny():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    m[0].requires_grad_(False)
    return m, torch.randn(4, 6), torch.tensor([0, 1, 2, 1])


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_the_onnx_step_reads_frozen_weights_and_updates_the_others_as_torch_does(optimizer):
    from thor_sdk.exporters.onnx_train import make_step_fn, initial_values, step_layout

    m, x, y = _tiny()
    layout = step_layout(m, x, y, optimizer)
    roles = {s["name"]: s["role"] for s in layout["inputs"]}
    assert roles["0.weight"] == roles["0.bias"] == "frozen" and roles["2.weight"] == "param"
    assert not any(s["name"].startswith(("0.", "adam.m.0.", "adam.v.0.")) and s["role"] != "frozen"
                   for s in layout["inputs"])
    assert ["0.weight.new", "0.weight"] not in layout["state_pairs"]
    outs = make_step_fn(m, "ce", optimizer)(*initial_values(m, x, y, optimizer, lr=0.1))
    ref = [p.detach().clone() for p in m.parameters() if p.requires_grad]
    opt = (torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam)([p for p in m.parameters() if p.requires_grad],
                                                                        lr=0.1)
    loss = F.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
    new = outs[1:1 + len(ref)]
    trained = [p for p in m.parameters() if p.requires_grad]
    assert len(new) == len(trained) == 4
    for got, want, was in zip(new, trained, ref):
        assert torch.allclose(got, want.detach(), atol=1e-6) and not torch.equal(got, was)
    assert torch.allclose(outs[0], loss.detach())


def test_the_onnx_export_of_a_frozen_net_runs_and_keeps_its_frozen_weights(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    from thor_sdk.exporters.onnx_train import export_training_step

    m, x, y = _tiny()
    path = tmp_path / "step.onnx"
    export_training_step(m, x, y, str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    assert "0.weight.new" not in names and "2.weight.new" in names
    out = dict(zip(names, sess.run(None, {})))
    assert out["2.weight.new"].shape == (8, 8)


def test_torchscript_trains_only_what_requires_grad(tmp_path):
    from thor_sdk.exporters.torchscript_train import export_torchscript

    m, x, y = _tiny()
    path = tmp_path / "step.pt"
    export_torchscript(m, x, y, str(path))
    step = torch.jit.load(str(path))
    w0 = [p.detach().clone() for p in step.model.parameters()]
    step.train_step(step.example_x, step.example_y)
    w1 = [p.detach() for p in step.model.parameters()]
    assert torch.equal(w0[0], w1[0]) and torch.equal(w0[1], w1[1]) and not torch.equal(w0[2], w1[2])


VECTORS = __import__("pathlib").Path(__file__).resolve().parent / "vectors"


def test_an_estimator_fitted_before_frozen_reads_a_frozen_layer_as_its_trained_twin_approximated():
    from thor_sdk.runtime.estimator import load_estimator

    est = load_estimator(str(VECTORS / "estimator_time_frozen.json"))
    conv = {"in_channels": 8, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
            "length": 64, "bias": 1}
    layer = {"name": "c", "kind": "conv1d", "role": "hidden", "config": conv}
    plain = est.estimate([layer], 8)["layers"][0]
    frozen = est.estimate([dict(layer, config=dict(conv, frozen=1))], 8)["layers"][0]
    assert "approx" not in plain and "predates its feature(s) frozen 1" in frozen["approx"]
    assert frozen["std"] > plain["std"]
    # the linear entry has frozen as an input: a frozen layer is its own, cheaper, and not approximated
    lin = {"in_features": 256, "out_features": 256, "tokens": 1, "bias": 1}
    a = est.estimate([{"name": "l", "kind": "linear", "role": "hidden", "config": lin}], 8)["layers"][0]
    b = est.estimate([{"name": "l", "kind": "linear", "role": "hidden", "config": dict(lin, frozen=1)}], 8)["layers"][0]
    assert "approx" not in b and b["mean"] < a["mean"]


def test_every_runtime_reads_the_frozen_case_of_the_shared_vectors():
    vectors = VECTORS
    exp = json.loads((vectors / "expected_time_frozen.json").read_text())
    est = json.loads((vectors / exp["estimator"]).read_text())
    assert est["kinds"]["linear"]["defaults"] == {"frozen": 0} and "frozen" not in est["kinds"]["conv1d"]["features"]
    layers = [l for e in exp["estimate"] for l in e["layers"]]
    assert any(l["config"].get("frozen") == 1 for l in layers if l["kind"] == "linear")
    assert any(l["config"].get("frozen") == 1 for l in layers if l["kind"] == "conv1d")


def test_core_ml_leaves_a_frozen_layer_out_of_the_updatable_ones(tmp_path):
    pytest.importorskip("coremltools")
    from thor_sdk.exporters.coreml_train import export_coreml, validate_updatable
    from thor_sdk.models import build_model

    model = build_model("lenet5")
    first = next(n for n, m in model.named_modules() if isinstance(m, nn.Conv2d))
    model.get_submodule(first).requires_grad_(False)
    path = tmp_path / "l.mlmodel"
    r = export_coreml(model, (1, 28, 28), 10, str(path))
    assert first not in r["updatable"] and r["updatable"]
    assert [f["reason"] for f in r["frozen"] if f["layer"] == first] == [
        "frozen in the model (its parameters' requires_grad is False)"]
    assert validate_updatable(str(path))["updatable"] == r["updatable"]


class InPlace(nn.Module):
    """A frozen stem and the ways an activation runs in place, then a trained conv and an in-place ReLU behind it."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1).requires_grad_(False)
        self.act = nn.ReLU(inplace=True)
        self.trained = nn.Conv2d(8, 8, 3, padding=1)
        self.act2 = nn.ReLU(inplace=True)
        self.fc = nn.Linear(8 * 8 * 8, 4)

    def forward(self, x):
        x = self.act(self.stem(x))
        x = F.relu(x, inplace=True)
        x = F.hardtanh(x, 0.0, 6.0, True)
        x = x.relu_()
        x = F.leaky_relu(x, 0.1)  # out of place
        x = F.silu(x)
        return self.fc(self.act2(self.trained(x)).flatten(1))


def test_an_activation_run_in_place_forward_only_is_marked_and_one_behind_a_trained_layer_is_not():
    got = [(l["kind"], l["role"], l["config"].get("inplace", 0)) for l in layers_of(InPlace(), input_shape=[3, 8, 8])
           .layers if l["kind"] in ("relu", "relu6", "leaky_relu", "silu")]
    assert got == [("relu", "input", 1), ("relu", "input", 1), ("relu6", "input", 1), ("relu", "input", 1),
                   ("leaky_relu", "input", 0), ("silu", "input", 0), ("relu", "hidden", 0)]


def test_an_in_place_probe_runs_forward_only_and_in_place():
    probe = Probe("relu", {"numel": 64, "inplace": 1}, 4, "input")
    assert probe.build("input").module[0].inplace and not Probe("relu", {"numel": 64}, 4, "input").build(
        "input").module[0].inplace
    with pytest.raises(UsageError, match="in-place relu is probed forward only"):
        Probe("relu", {"numel": 64, "inplace": 1}, 4, "hidden")
    with pytest.raises(UsageError, match="inplace must be 0 or 1"):
        get_kind("relu").check_config({"numel": 64, "inplace": 3})


def test_the_profile_plans_forward_only_layers_of_kinds_without_weights():
    from thor_sdk.campaign.prior import candidates, load_prior
    from thor_sdk.layers.kinds import IN_PLACE

    prior = load_prior()
    for kind in ("relu", "maxpool2d", "add"):
        got = candidates(prior, kind, 200)
        share = sum(r == "input" for _, _, r in got) / len(got)
        assert 0.1 < share < 0.35, (kind, share)
        in_place = [c for c, _, r in got if c.get("inplace")]
        assert (len(in_place) > 0) == (kind in IN_PLACE)
        assert all(r == "input" for c, _, r in got if c.get("inplace"))
    # half the frozen candidates of a kind with weights run forward only
    conv = candidates(prior, "conv2d", 200)
    assert any(c.get("frozen") and r == "input" for c, _, r in conv)
    assert any(c.get("frozen") and r == "hidden" for c, _, r in conv)
    # a prior written before (no shares, no fine-tuned twins, whose forward-only activations run in place): none
    relu = prior["kinds"]["relu"]
    old = {k: v for k, v in prior.items() if k not in ("frozen_share", "forward_only_share", "finetune_weight")}
    old["kinds"] = {"relu": dict(relu, configs=[c for c in relu["configs"] if c["role"] == "hidden"])}
    assert not any(c.get("inplace") for c, _, _ in candidates(old, "relu", 100))


def test_a_samples_csv_may_leave_the_defaulted_features_out_or_empty(tmp_path):
    from thor_sdk.fitting.samples_csv import read_samples_csv

    path = tmp_path / "s.csv"
    path.write_text("kind,role,batch_size,time_s,in_features,out_features,tokens,bias,frozen,numel\n"
                    "linear,hidden,8,0.001,64,32,1,1,,\n"
                    "linear,hidden,8,0.0007,64,32,1,1,1,\n"
                    "relu,input,8,0.0001,,,,,,2048\n")
    rows = read_samples_csv(str(path))
    configs = [r["config"] for r in rows]
    assert [c.get("frozen") for c in configs[:2]] == [0, 1] and configs[2]["inplace"] == 0


def test_a_fine_tunes_layer_list_reads_back_with_its_forward_only_share(tmp_path):
    """``thor-sdk layers --trainable ... --out`` writes a frozen input linear's cost at a quarter of a launch (what the
    Java and Swift runtimes read); reading that file back takes it (launches above 0), and refuses 0."""
    import json

    from thor_sdk.errors import FormatError
    from thor_sdk.layers import layers_of

    ml = layers_of("har", trainable=["6"])
    doc = ml.to_dict()
    assert doc["layers"][0]["config"]["frozen"] == 1 and doc["layers"][0]["cost"]["launches"] == 0.25
    path = tmp_path / "ft.json"
    path.write_text(json.dumps(doc))
    back = layers_of(str(path))
    assert [(l["kind"], l["role"], l["config"]) for l in back.layers] == \
        [(l["kind"], l["role"], l["config"]) for l in ml.layers]
    doc["layers"][0]["cost"]["launches"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="launches"):
        layers_of(str(path))
