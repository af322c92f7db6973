"""The CLI as a user runs it: real console script, real host device, real files."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

QUICK = ["--min-rounds", "2", "--max-rounds", "3", "--window-s", "0.005"]


def run(*args, check=False, timeout=300):
    p = subprocess.run(["thor-sdk", *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"thor-sdk {' '.join(args)} failed ({p.returncode}):\n{p.stderr}")
    return p


def assert_one_line_error(p):
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in p.stderr


def test_help_is_fast_and_imports_no_torch():
    code = "import sys, thor_sdk.cli.main as m; print(any(k in sys.modules for k in ('torch', 'sklearn', 'onnx', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert "probe" in run("--help", check=True).stdout


def test_models_and_kinds_json():
    models = json.loads(run("models", "--json", check=True).stdout)["models"]
    assert [m["name"] for m in models] == ["lenet5", "cnn5", "har", "lstm", "transformer", "resnet18", "mobilenetv2"]
    kinds = json.loads(run("kinds", "--json", check=True).stdout)["kinds"]
    conv = next(k for k in kinds if k["name"] == "conv2d")
    assert "in_channels" in conv["features"] and conv["gp_features"][-2:] == ["batch_size", "role"]


@pytest.fixture(scope="module")
def har_estimator(tmp_path_factory):
    d = tmp_path_factory.mktemp("har")
    db, est = d / "har.db", d / "har.json"
    run("probe", "--device", "host", "--model", "har", "--batch-size", "8", "--out", str(db), "--quiet", *QUICK,
        check=True)
    run("fit", str(db), "--out", str(est), check=True)
    return db, est


def test_probe_fit_estimate_measure_on_host(har_estimator):
    db, est = har_estimator
    r = json.loads(run("estimate", "--estimator", str(est), "--model", "har", "--batch-size", "8", "--json",
                       check=True).stdout)
    assert r["metric"] == "time" and r["unit"] == "s" and r["batch_size"] == 8
    assert r["total"]["mean"] > 0 and r["total"]["std"] >= 0 and r["flops_baseline"]["total"] > 0
    assert [l["kind"] for l in r["layers"]] == ["linear", "relu", "dropout", "linear", "relu", "dropout", "output"]
    m = json.loads(run("measure", "--device", "host", "--model", "har", "--batch-size", "8", "--json", *QUICK,
                       check=True).stdout)
    assert {"metric", "unit", "batch_size", "mean", "std", "n"} <= set(m) and m["n"] >= 2 and m["mean"] > 0
    table = run("estimate", "--estimator", str(est), "--model", "har", "--batch-size", "8", check=True).stdout
    assert "FLOPs baseline" in table and "THOR" in table


def test_fit_reads_the_layer_probes_heads_as_output_samples_and_says_so(har_estimator, tmp_path):
    from thor_sdk.fitting.pipeline import head_part_samples
    from thor_sdk.store import Campaign

    db, _ = har_estimator
    with Campaign.open(str(db)) as c:
        samples = c.samples("time")
    layer_probes = [s for s in samples if s["kind"] != "output"]
    assert layer_probes and len(head_part_samples(samples)) == len(layer_probes)  # har: no forward-only layer
    r = json.loads(run("fit", str(db), "--out", str(tmp_path / "e.json"), "--json", check=True).stdout)
    n_output = sum(1 for s in samples if s["kind"] == "output")
    assert r["head_part_samples"] == len(layer_probes) and r["kinds"]["output"] == n_output + len(layer_probes)
    text = run("fit", str(db), "--out", str(tmp_path / "e2.json"), check=True).stdout
    assert f"output: {len(layer_probes)} of its samples are the layer probes' 1-layer parts" in text


def test_estimate_user_model_file(har_estimator, tmp_path):
    _, est = har_estimator
    f = tmp_path / "my_net.py"
    f.write_text("from torch import nn\n"
                 "class Net(nn.Sequential):\n"
                 "    def __init__(self):\n"
                 "        super().__init__(nn.Linear(561, 512), nn.ReLU(), nn.Linear(512, 6))\n")
    r = json.loads(run("estimate", "--estimator", str(est), "--model", f"{f}:Net", "--input-shape", "561",
                       "--batch-size", "8", "--json", check=True).stdout)
    assert [l["kind"] for l in r["layers"]] == ["linear", "relu", "output"]


def test_energy_without_meter_is_refused_plainly(tmp_path):
    p = run("probe", "--model", "har", "--metric", "energy", "--out", str(tmp_path / "e.db"))
    assert_one_line_error(p)
    assert "no energy meter" in p.stderr
    assert not (tmp_path / "e.db").exists()


@pytest.mark.parametrize("args", [
    ["estimate", "--estimator", "{corrupt}", "--model", "har"],
    ["estimate", "--estimator", "{schema}", "--model", "har"],
    ["estimate", "--estimator", "{missing}", "--model", "har"],
    ["estimate", "--estimator", "{good}", "--model", "nosuchnet"],
    ["estimate", "--estimator", "{good}", "--model", "har", "--batch-size", "0"],
    ["measure", "--model", "har", "--batch-size", "0"],
    ["measure", "--model", "nosuchnet"],
    ["probe", "--model", "har", "--batch-size", "0", "--out", "{tmp}/x.db"],
    ["fit", "{missing}", "--out", "{tmp}/e.json"],
    ["estimate", "--estimator", "{good}", "--model", "lstm"],
])
def test_bad_input_gives_one_line_error(args, har_estimator, tmp_path):
    _, good = har_estimator
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "thor-sdk/estimator", "version": 1, "kinds": {')
    doc = json.loads(good.read_text())
    doc["kinds"]["linear"]["alpha"] = "not a list"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(doc))
    subst = {"{corrupt}": str(corrupt), "{schema}": str(schema), "{missing}": str(tmp_path / "nope.json"),
             "{good}": str(good), "{tmp}": str(tmp_path)}
    argv = []
    for a in args:
        for k, v in subst.items():
            a = a.replace(k, v)
        argv.append(a)
    assert_one_line_error(run(*argv))


def test_kill_9_during_probe_then_resume(tmp_path):
    db = tmp_path / "k.db"
    proc = subprocess.Popen(["thor-sdk", "probe", "--model", "lenet5", "--batch-size", "4", "--out", str(db),
                             "--quiet", *QUICK], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    done = 0
    while time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=1) as c:
                    done = c.execute("SELECT COUNT(*) FROM probes WHERE status = 'done'").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if done >= 3:
                break
    assert proc.poll() is None, f"probe ended before it could be killed: {proc.stderr.read().decode()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    run("probe", "--out", str(db), "--resume", "--quiet", check=True)
    with sqlite3.connect(db) as c:
        probes = c.execute("SELECT id, status FROM probes").fetchall()
        samples = c.execute("SELECT probe_id FROM samples WHERE metric = 'time'").fetchall()
        targets = json.loads(c.execute("SELECT value FROM meta WHERE key = 'targets'").fetchone()[0])
    from thor_sdk.campaign.targets import target_points
    from thor_sdk.layers import ModelLayers

    planned = target_points([ModelLayers(**{k: t[k] for k in ("name", "input_shape", "input_dtype", "layers")})
                             for t in targets], [4])
    ids = [p for p, _ in probes]
    assert sorted(ids) == sorted(planned)  # each planned probe exactly once
    assert all(s == "done" for _, s in probes)
    assert sorted(p for (p,) in samples) == sorted(ids)


def test_every_command_s_options_reach_its_function():
    """Each click command's callback accepts every option it declares (a missing parameter is a TypeError at run time)."""
    import inspect

    from thor_sdk.cli.main import COMMANDS, cli

    def walk(cmd):
        if hasattr(cmd, "commands"):
            for sub in cmd.commands.values():
                yield from walk(sub)
        else:
            yield cmd

    for name in COMMANDS:
        for cmd in walk(cli.get_command(None, name)):
            params = set(inspect.signature(cmd.callback).parameters)
            declared = {p.name for p in cmd.params}
            assert declared <= params, (name, cmd.name, declared - params)
