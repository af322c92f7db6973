"""The SIMULATED Jetson: real sysfs layouts read by the project's INA3221 meter, its power model, the
economical profiling order, and the table pipeline end to end on the CLI."""

import json

import pytest

from helpers import cli
from thor_sdk.devices import get_device
from thor_sdk.devices.devfreq import GpuFrequencyController
from thor_sdk.devices.simjetson import MARKER, SimJetsonDevice, SimulatedJetson
from thor_sdk.meters.ina3221 import Ina3221Meter
from thor_sdk.power.profile import economical_order, load_profile, profile


def test_nano_tree_uses_the_ina3221x_iio_layout(tmp_path):
    root = tmp_path / "nano"
    SimulatedJetson.create(root, "nano")
    iio = root / "sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0"
    assert (iio / "rail_name_0").read_text().strip() == "POM_5V_IN"
    assert (iio / "rail_name_1").read_text().strip() == "POM_5V_GPU"
    for k in range(3):
        assert int((iio / f"in_power{k}_input").read_text()) > 0  # mW
        assert int((iio / f"in_voltage{k}_input").read_text()) == 5000  # mV
    assert (root / "sys/class/devfreq/57000000.gpu/available_frequencies").is_file()
    assert json.loads((root / MARKER).read_text())["label"] == "SIMULATED"


def test_orin_tree_uses_the_ina3221_hwmon_layout(tmp_path):
    root = tmp_path / "orin"
    SimulatedJetson.create(root, "orin")
    hw = root / "sys/class/hwmon/hwmon1"
    assert (hw / "name").read_text().strip() == "ina3221"
    assert [(hw / f"in{i}_label").read_text().strip() for i in (1, 2, 3)] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert (root / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input").is_file()
    assert (root / "sys/class/devfreq/17000000.ga10b/cur_freq").is_file()


@pytest.mark.parametrize("flavor,rail", [("nano", "POM_5V_IN"), ("orin", "VDD_IN")])
def test_meter_reads_the_modelled_power(tmp_path, flavor, rail):
    root = str(tmp_path / flavor)
    sim = SimulatedJetson.create(root, flavor)
    meter = Ina3221Meter(root=root)
    assert meter.is_available(), meter.why_unavailable()
    assert [r.name for r in meter.selected_rails()] == [rail]
    g = GpuFrequencyController(root)
    freqs = g.available_frequencies()
    with g:
        g.set_frequency(freqs[-2])
        freq, rails = sim.apply_load(32)
        assert freq == freqs[-2] == g.state()["cur_freq"]
        assert meter.power_w() == pytest.approx(sim.power_w(freqs[-2], 32)[rail], abs=2e-3)
    idle_freq, _ = sim.apply_load(None)
    assert idle_freq == freqs[0]
    assert meter.power_w() == pytest.approx(sim.power_w(freqs[0], None)[rail], abs=2e-3)


@pytest.mark.parametrize("flavor", ["nano", "orin"])
def test_power_model_rises_with_frequency_and_batch_and_time_falls(tmp_path, flavor):
    sim = SimulatedJetson(str(tmp_path), flavor)
    freqs = sim.params["freqs_hz"]
    rail = sim.layout["rails"][0]
    for b in (1, 8, 64):
        p = [sim.power_w(f, b)[rail] for f in freqs]
        t = [sim.time_per_sample_s(b, f, 1e9) for f in freqs]
        assert p == sorted(p) and p[0] < p[-1]
        assert t == sorted(t, reverse=True)
    for f in freqs:
        assert sim.power_w(f, 8)[rail] < sim.power_w(f, 64)[rail]
        assert sim.power_w(f, None)[rail] < sim.power_w(f, 1)[rail]


def test_economical_order_follows_the_paper():
    calls = []
    power = {(b, f): f * (1 + b / 64) for b in (16, 32, 64) for f in (1, 2, 3, 4, 5)}

    def measure(b, f):
        calls.append((b, f))
        return {"batch_size": b, "freq_hz": f, "time_per_sample_s": 1.0, "peak_power_w": power[(b, f)]}

    economical_order([16, 32, 64], [1, 2, 3, 4, 5], 5.0, measure)
    # 64: 1 (2.0), 2 (4.0), 3 (6.0 > cap) stop; 32 starts at 2: 2 (3.0), 3 (4.5), 4 (6.0) stop;
    # 16 starts at 3: 3 (3.75), 4 (5.0), 5 (6.25) stop
    assert calls == [(64, 1), (64, 2), (64, 3), (32, 2), (32, 3), (32, 4), (16, 3), (16, 4), (16, 5)]
    calls.clear()
    economical_order([16, 64], [1, 2], None, measure)
    assert calls == [(64, 1), (64, 2), (16, 1), (16, 2)]


def test_economical_order_steps_down_when_the_start_is_over_the_cap():
    calls = []
    power = {(64, 1): 1.0, (64, 2): 2.0, (64, 3): 9.0, (16, 1): 1.5, (16, 2): 3.0}

    def measure(b, f):
        calls.append((b, f))
        return {"batch_size": b, "freq_hz": f, "time_per_sample_s": 1.0, "peak_power_w": power[(b, f)]}

    economical_order([16, 64], [1, 2, 3], 2.5, measure)
    assert calls == [(64, 1), (64, 2), (64, 3), (16, 2), (16, 1)]


def test_profile_on_the_simulated_jetson(tmp_path):
    root = str(tmp_path / "sim")
    board = get_device("sim", root=root)
    assert isinstance(board, SimJetsonDevice) and board.simulated
    out = str(tmp_path / "p.db")
    sim = board.sim
    cap = 4.0
    rows = profile(board, "mlp", [32, 128], out, power_cap_w=cap)
    meta, stored = load_profile(out)
    assert meta["simulated"] is True and "SIMULATED" in meta["device"]["name"]
    assert [(r["batch_size"], r["freq_hz"]) for r in stored] == [(r["batch_size"], r["freq_hz"]) for r in rows]
    assert [r["batch_size"] for r in rows][0] == 128
    rail = sim.layout["rails"][0]
    for r in stored:
        assert r["peak_power_w"] == pytest.approx(sim.power_w(r["freq_hz"], r["batch_size"])[rail], abs=2e-3)
    # each batch's last measured frequency is the first over the cap (or the top one)
    freqs = sim.params["freqs_hz"]
    for b in (32, 128):
        mine = [r for r in stored if r["batch_size"] == b]
        assert all(r["peak_power_w"] <= cap for r in mine[:-1])
        assert mine[-1]["peak_power_w"] > cap or mine[-1]["freq_hz"] == freqs[-1]
    # frequencies restored, and a resumed profile measures nothing twice
    g = GpuFrequencyController(root)
    assert g.state()["min_freq"] == freqs[0] and g.state()["max_freq"] == freqs[-1]
    again = profile(board, "mlp", [32, 128], out, power_cap_w=cap, resume=True)
    assert len(load_profile(out)[1]) == len(stored) and len(again) == len(rows)


def test_table_pipeline_on_the_cli(tmp_path, capsys):
    root, db, ratios, tab = (str(tmp_path / n) for n in ("sim", "p.db", "r.json", "t.json"))
    code, out, err = cli(["table", "profile", "--device", "sim", "--sysfs-root", root, "--model", "mlp",
                          "--batch-sizes", "32,128", "--out", db, "-q"], capsys)
    assert code == 0, err
    assert "SIMULATED" in out
    code, out, err = cli(["table", "ratios", "--model", "mlp", "--proxy", "digits", "--batch-sizes", "32,128",
                          "--seeds", "0", "--target-accuracy", "0.85", "--out", ratios, "-q"], capsys)
    assert code == 0, err
    code, out, err = cli(["table", "build", db, ratios, "--out", tab], capsys)
    assert code == 0, err
    doc = json.loads(open(tab).read())
    assert doc["simulated"] is True and doc["format"] == "thor-sdk/power-table"
    assert {r["batch_size"] for r in doc["rows"]} == {32, 128}
    code, out, err = cli(["table", "select", tab, "--power-cap", "4", "--json"], capsys)
    assert code == 0, err
    sel = json.loads(out)
    assert sel["simulated"] is True and sel["selected"]["peak_power_w"] <= 4
    assert sel["selected"]["est_time_to_accuracy_s"] > 0 and sel["why"]
    code, out, err = cli(["table", "select", tab, "--power-cap", "4"], capsys)
    assert code == 0 and "SIMULATED" in out and "why:" in out
    lowest = min(r["peak_power_w"] for r in doc["rows"])
    code, out, err = cli(["table", "select", tab, "--power-cap", "1"], capsys)
    assert code == 2
    assert err.startswith("Error: power cap 1 W is infeasible") and f"{lowest:.3f} W" in err
    assert "Traceback" not in err
