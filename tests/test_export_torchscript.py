"""TorchScript training steps: parity with eager torch.optim for every kind and whole net, and a
fresh process that loads the file with torch.jit.load and trains with it."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from test_export_onnx import KIND_PROBES, LR, TOL, eager_steps, max_diff, no_dropout  # noqa: E402

from thor_sdk.errors import ExportError  # noqa: E402
from thor_sdk.exporters import onnx_train  # noqa: E402
from thor_sdk.exporters.torchscript_train import TorchScriptTrainer, export_torchscript, load_torchscript  # noqa: E402

NETS = ["lenet5", "cnn5", "har", "lstm", "transformer", "resnet18", "mobilenetv2"]


def script_steps(path, steps=3):
    tr = TorchScriptTrainer(path)
    for _ in range(steps):
        tr.step()
    params = {n: p.detach().double().numpy() for n, p in tr.module.model.named_parameters()}
    buffers = {n: b.detach().double().numpy() for n, b in tr.module.model.named_buffers()}
    return params, buffers, float(tr.last_loss)


def check_parity(module, x, y, opt, x_requires_grad, path):
    export_torchscript(module, x, y, path, optimizer=opt, lr=LR[opt], x_requires_grad=x_requires_grad)
    got, got_buffers, loss = script_steps(path)
    want, want_buffers, grads, want_loss = eager_steps(module, x, y, opt, x_requires_grad=x_requires_grad)
    moved = max(float(abs(want[n] - p.detach().double().numpy()).max()) for n, p in module.named_parameters())
    assert moved > 1e-4
    assert max_diff(got, want, grads if opt == "adam" else None) <= TOL
    if want_buffers:
        assert max_diff(got_buffers, want_buffers) <= TOL
    assert abs(loss - want_loss) <= 1e-5


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(KIND_PROBES))
def test_kind_parity(name, opt, tmp_path):
    probe = KIND_PROBES[name]
    pm = probe.build(probe.parts()[-1])
    no_dropout(pm.module)
    check_parity(pm.module, pm.x, pm.y, opt, pm.x_requires_grad, str(tmp_path / "step.pt"))


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("name", NETS)
def test_whole_net_parity(name, opt, tmp_path):
    from thor_sdk.models import build_model

    module = no_dropout(build_model(name))
    x, y = onnx_train.example_batch(name, 2)
    check_parity(module, x, y, opt, False, str(tmp_path / "net.pt"))


def test_loads_and_trains_in_a_fresh_process(tmp_path):
    from thor_sdk.models import build_model

    path = tmp_path / "cnn5-adam.pt"
    desc = export_torchscript(build_model("cnn5"), *onnx_train.example_batch("cnn5", 4), str(path), optimizer="adam")
    code = (
        "import json, sys, torch\n"
        "extra = {'thor_sdk.json': ''}\n"
        "m = torch.jit.load(sys.argv[1], _extra_files=extra)\n"
        "w0 = [p.clone() for p in m.model.parameters()]\n"
        "losses = [float(m.train_step(m.example_x, m.example_y)) for _ in range(4)]\n"
        "moved = max(float((a - b).abs().max()) for a, b in zip(w0, m.model.parameters()))\n"
        "print(json.dumps({'losses': losses, 'moved': moved, 'desc': json.loads(extra['thor_sdk.json'])}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["desc"] == desc and r["desc"]["optimizer"] == "adam"
    assert r["moved"] > 1e-4 and r["losses"][-1] < r["losses"][0]


def test_probe_input_gradient_is_computed(tmp_path):
    pm = KIND_PROBES["linear-hidden"].build("hidden")
    path = str(tmp_path / "h.pt")
    desc = export_torchscript(pm.module, pm.x, pm.y, path, x_requires_grad=True)
    assert desc["x_requires_grad"] is True
    m, loaded = load_torchscript(path)
    assert loaded == desc and m.x_requires_grad


def test_not_a_step_file_is_refused(tmp_path):
    plain = torch.jit.script(torch.nn.Linear(2, 2))
    torch.jit.save(plain, str(tmp_path / "plain.pt"))
    with pytest.raises(ExportError, match="not a thor-sdk TorchScript"):
        load_torchscript(str(tmp_path / "plain.pt"))
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ExportError, match="cannot load"):
        load_torchscript(str(tmp_path / "junk.pt"))
