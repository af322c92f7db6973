"""Power-aware training on the shared spine: one device grammar, the devices' power capabilities, the library
API the thin ``table``/``train`` commands call."""

import json
import os

import pytest

from helpers import cli
import thor_sdk
from thor_sdk.devices import get_device
from thor_sdk.devices.host import HostDevice
from thor_sdk.devices.jetson import LocalJetsonDevice
from thor_sdk.devices.simjetson import SimJetsonDevice, SimulatedJetson
from thor_sdk.errors import NotFoundError, UsageError

CLI = os.path.dirname(os.path.abspath(thor_sdk.__file__)) + "/cli"


def test_one_device_grammar_and_one_error_for_an_unknown_name(tmp_path, capsys):
    errors = set()
    for argv in (["probe", "--device", "nosuch", "--model", "har", "--out", str(tmp_path / "c.db")],
                 ["table", "profile", "--device", "nosuch", "--out", str(tmp_path / "p.db")],
                 ["train", "--device", "nosuch", "--power-cap", "5"]):
        code, _, err = cli(argv, capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        errors.add(err.strip())
    assert len(errors) == 1 and errors.pop().startswith("Error: unknown device 'nosuch'; known: host, host:cuda[:N], jetson,")
    assert os.listdir(tmp_path) == []
    with pytest.raises(NotFoundError):
        thor_sdk.get_device("nosuch")


def test_frequency_control_and_power_are_device_capabilities(tmp_path):
    host = get_device("host", root=str(tmp_path))
    assert isinstance(host, HostDevice) and host.frequency_controller() is None
    assert host.power_status() == (False, "no energy meter readable; time only", None)
    assert host.power_info()["frequency_control"] is False and not host.simulated
    root = str(tmp_path / "sim")
    sim = get_device("sim", root=root, sim_flavor="orin")  # written when new
    assert isinstance(sim, SimJetsonDevice) and sim.simulated and "SIMULATED" in sim.name
    assert isinstance(get_device("jetson", root=root), SimJetsonDevice)  # a simulated tree is never taken as real
    info = sim.power_info()
    assert info["simulated"] is True and info["frequency_control"] is True and info["meter"] == "ina3221:VDD_IN"
    ctl = sim.frequency_controller()
    assert ctl.available_frequencies() == SimulatedJetson.open(root).params["freqs_hz"]
    assert sim.power_meter().name == "ina3221"
    with pytest.raises(UsageError, match="needs --sysfs-root"):
        get_device("sim")
    real = get_device("jetson", root=str(tmp_path / "empty"))  # this machine as a Jetson: none here
    assert isinstance(real, LocalJetsonDevice) and not real.simulated
    assert "no GPU devfreq node" in real.frequency_controller().why_unavailable()
    assert real.power_meter() is None and real.power_status()[0] is False


def test_power_commands_refuse_a_device_they_cannot_drive(tmp_path):
    with pytest.raises(UsageError, match="no GPU frequency control"):
        thor_sdk.reset_frequency("host")
    with pytest.raises(UsageError, match="run on this machine"):
        thor_sdk.train("android:SERIAL1", 5)
    with pytest.raises(UsageError, match="give --out"):
        thor_sdk.table_profile("sim", sysfs_root=str(tmp_path / "sim"))


def test_select_and_build_through_the_library(tmp_path, capsys):
    rows = [{"batch_size": b, "freq_hz": f, "time_per_sample_s": 1e-3 / f * 1e9 / b ** 0.5,
             "peak_power_w": 1.0 + b * f / 1e10} for b in (16, 64) for f in (3e8, 6e8)]
    from thor_sdk.power.select import make_table

    doc = make_table(rows, {16: 0.5, 64: 1.0}, reference_samples_to_target=1000.0, simulated=True)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    got = thor_sdk.table_select(str(path), 5.0)
    assert got == thor_sdk.table_select(doc, 5.0) and got["simulated"] is True
    code, out, err = cli(["table", "select", str(path), "--power-cap", "5", "--json"], capsys)
    assert code == 0 and json.loads(out) == got
    with pytest.raises(UsageError, match="samples to target"):
        thor_sdk.table_build(str(tmp_path / "p.db"), str(tmp_path / "r.json"), samples_to_target=-1)
    with pytest.raises(UsageError, match="DATASET=VALUE"):
        thor_sdk.replay(str(tmp_path / "p.csv"), str(tmp_path / "t.csv"), targets=["cifar100"])


def test_table_and_train_commands_are_thin():
    for name in ("table.py", "train.py", "power_common.py"):
        with open(os.path.join(CLI, name), encoding="utf-8") as f:
            text = f.read()
        assert len(text.splitlines()) < 120, name
        if name != "power_common.py":  # they call the library and print; nothing else of thor_sdk
            imports = [ln.strip() for ln in text.splitlines() if "import" in ln and "thor_sdk" in ln]
            assert all(ln in ("import thor_sdk", "from thor_sdk.power.table import read_json") for ln in imports), imports
