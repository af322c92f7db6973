"""``thor-sdk train`` under a power cap: host (no frequency control, time only) and SIMULATED Jetson."""

import json

import pytest

from helpers import cli
from thor_sdk.devices import get_device
from thor_sdk.devices.devfreq import GpuFrequencyController
from thor_sdk.devices.simjetson import SimJetsonDevice, SimulatedJetson
from thor_sdk.power.select import make_table, select
from thor_sdk.power.table import validate


def test_host_train_reaches_the_target_on_digits(tmp_path, capsys):
    out = str(tmp_path / "run.json")
    code, text, err = cli(["train", "--device", "host", "--power-cap", "5", "--model", "mlp", "--data", "digits",
                           "--target-accuracy", "0.9", "--out", out], capsys)
    assert code == 0, err
    rep = validate(json.loads(open(out).read()), "run_report", "run report")
    assert rep["reached_target"] is True and rep["final_val_accuracy"] >= 0.9
    assert rep["epochs"][-1]["val_accuracy"] >= 0.9 > max([0.0] + [e["val_accuracy"] for e in rep["epochs"][:-1]])
    assert rep["frequency_control"] is False and rep["freq_hz"] is None
    assert "no GPU frequency control" in text
    ok, _, _ = get_device("host").power_status()
    if ok:  # a host meter (RAPL/NVML) is readable here: energy is measured, never assumed
        assert all(e["energy_j"] is not None for e in rep["epochs"])
    else:
        assert "no energy meter readable; time only" in text
        assert rep["energy_measured"] is False and rep["total_energy_j"] is None
        assert all(e["energy_j"] is None for e in rep["epochs"])


def sim_table(sim, batch_sizes=(32, 128)):
    """A table written straight from the simulator's model (no profiling run needed)."""
    rail = sim.layout["rails"][0]
    rows = [{"batch_size": b, "freq_hz": f, "time_per_sample_s": sim.time_per_sample_s(b, f, 5e4),
             "peak_power_w": sim.power_w(f, b)[rail]} for b in batch_sizes for f in sim.params["freqs_hz"]]
    return make_table(rows, {32: 0.5, 128: 1.0}, reference_samples_to_target=4000.0, simulated=True)


def test_train_on_the_simulated_jetson_pins_then_restores(tmp_path, capsys):
    root = str(tmp_path / "sim")
    sim = SimulatedJetson.create(root, "nano")
    tab = str(tmp_path / "t.json")
    doc = sim_table(sim)
    with open(tab, "w") as f:
        json.dump(doc, f)
    cap = 4.0
    chosen = select(doc, cap)
    out = str(tmp_path / "run.json")
    code, text, err = cli(["train", "--device", "sim", "--sysfs-root", root, "--table", tab, "--power-cap", str(cap),
                           "--target-accuracy", "0.85", "--out", out], capsys)
    assert code == 0, err
    assert "SIMULATED" in text
    rep = json.loads(open(out).read())
    assert rep["simulated"] is True and rep["reached_target"] is True
    assert (rep["batch_size"], rep["freq_hz"]) == (chosen["batch_size"], chosen["freq_hz"])
    # the rails showed the pinned frequency while training: peak = model power at the chosen pair
    rail = sim.layout["rails"][0]
    for e in rep["epochs"]:
        assert e["peak_power_w"] == pytest.approx(sim.power_w(chosen["freq_hz"], chosen["batch_size"])[rail], abs=2e-3)
        assert e["peak_power_w"] <= cap and e["energy_j"] > 0
    assert rep["epochs_over_cap"] == 0
    freqs = sim.params["freqs_hz"]
    assert rep["frequency_after_run"]["min_freq"] == freqs[0] and rep["frequency_after_run"]["max_freq"] == freqs[-1]
    assert GpuFrequencyController(root).state()["max_freq"] == freqs[-1]
    assert any("SIMULATED" in n for n in rep["notes"])


def test_jetson_without_a_table_profiles_for_the_cap_first(tmp_path, capsys):
    # the command: `thor-sdk train --device jetson --power-cap 5 ...` with no table
    root = str(tmp_path / "sim")
    sim = SimulatedJetson.create(root, "nano")
    db, out = str(tmp_path / "p.db"), str(tmp_path / "run.json")
    cap = 4.0
    code, text, err = cli(["train", "--device", "sim", "--sysfs-root", root, "--power-cap", str(cap),
                           "--batch-sizes", "16,64", "--profile-steps", "2", "--profile-out", db,
                           "--target-accuracy", "0.85", "--out", out], capsys)
    assert code == 0, err
    rep = validate(json.loads(open(out).read()), "run_report", "run report")
    # the pair is what the table made from that very profile selects, with flat ratios (said so)
    from thor_sdk.power.profile import load_profile
    from thor_sdk.runtime.table import select as runtime_select

    meta, rows = load_profile(db)
    assert meta["power_cap_w"] == cap and {r["batch_size"] for r in rows} == {16, 64}
    flat = make_table([{k: r[k] for k in ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w")}
                       for r in rows], {16: 1.0, 64: 1.0})
    chosen = runtime_select(flat, cap)
    assert (rep["batch_size"], rep["freq_hz"]) == (chosen["batch_size"], chosen["freq_hz"])
    assert any("profiled on the spot" in n for n in rep["notes"])
    assert any("equally sample-efficient" in n for n in rep["notes"])
    assert rep["reached_target"] is True and rep["epochs_over_cap"] == 0
    assert GpuFrequencyController(root).state()["max_freq"] == sim.params["freqs_hz"][-1]
    # with ratios from `table ratios`, they are used (and no flat-ratio note)
    ratios = {"format": "thor-sdk/batch-ratios", "version": 1, "model": "mlp", "proxy": "digits",
              "target_accuracy": 0.85, "reference_batch_size": 64, "ratio_model": "unimodal",
              "ratios": [{"batch_size": 16, "ratio": 0.25, "samples_to_target": [1000.0]},
                         {"batch_size": 64, "ratio": 1.0, "samples_to_target": [4000.0]}]}
    rpath = str(tmp_path / "ratios.json")
    with open(rpath, "w") as f:
        json.dump(ratios, f)
    code, text, err = cli(["train", "--device", "sim", "--sysfs-root", root, "--power-cap", str(cap),
                           "--batch-sizes", "16,64", "--profile-steps", "2", "--ratios", rpath,
                           "--target-accuracy", "0.85", "--max-epochs", "1", "--json"], capsys)
    assert code == 0, err
    rep = json.loads(text)
    weighted = make_table([{k: r[k] for k in ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w")}
                           for r in rows], {16: 0.25, 64: 1.0})
    assert rep["batch_size"] == runtime_select(weighted, cap)["batch_size"]
    assert not any("equally sample-efficient" in n for n in rep["notes"])


def test_jetson_without_a_cap_or_with_an_infeasible_cap(tmp_path, capsys):
    root = str(tmp_path / "sim")
    sim = SimulatedJetson.create(root, "nano")
    assert isinstance(get_device("jetson", root=root), SimJetsonDevice)  # a simulated tree is never taken as real
    code, _, err = cli(["train", "--device", "jetson", "--sysfs-root", root], capsys)
    assert code == 2 and "give --power-cap" in err
    tab = str(tmp_path / "t.json")
    with open(tab, "w") as f:
        json.dump(sim_table(sim), f)
    code, _, err = cli(["train", "--device", "sim", "--sysfs-root", root, "--table", tab, "--power-cap", "0.5"], capsys)
    assert code == 2 and "infeasible" in err and "lowest peak power" in err
