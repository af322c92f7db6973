"""bench/bench_probe_input.py: a hidden layer's cost by our probe, by THOR's 3-layer probe and in a chain of
itself. The subtraction on made-up times, the five probe models of a case, and a short run end to end."""

import json

import pytest
from bench_module import load_bench


def test_costs_subtract_the_right_models():
    bench = load_bench("bench_probe_input")
    ms = {"probe head": 1.0, "probe layer": 3.5, "input + head": 2.0, "input + layer + head": 4.0,
          "input + layer + layer + head": 5.5}
    assert bench.costs(ms) == {"probe": 2.5, "three_layer": 2.0, "chain": 1.5}


def test_a_case_builds_five_models_and_a_shape_changing_layer_none():
    bench = load_bench("bench_probe_input")
    relu = bench.trainers("relu", {"numel": 64}, 4)
    assert sorted(relu) == sorted(["probe head", "probe layer", "input + head", "input + layer + head",
                                   "input + layer + layer + head"])
    # the probe's input needs its gradient; the real input layer's does not
    assert relu["probe layer"].x.requires_grad and not relu["input + layer + head"].x.requires_grad
    assert len(relu["input + layer + layer + head"].module) == 4  # input, layer, layer, head
    for t in relu.values():
        t.step()
        assert t.last_loss is not None
    conv = {"in_channels": 3, "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
            "height": 8, "width": 8, "bias": 1}
    assert bench.trainers("conv2d", conv, 4) is None


def test_short_run_end_to_end(tmp_path):
    bench = load_bench("bench_probe_input")
    out = tmp_path / "r.md"
    rows = bench.main(["--only", "relu", "--rounds", "2", "--window-s", "0.01", "--report", str(out)])
    (row,) = rows
    assert row["case"].startswith("relu ") and set(row["ms"]) == {"probe head", "probe layer", "input + head",
                                                                  "input + layer + head",
                                                                  "input + layer + layer + head"}
    assert row["probe"] == pytest.approx(row["ms"]["probe layer"] - row["ms"]["probe head"])
    assert json.loads((tmp_path / "r.json").read_text())["rows"][0]["case"] == row["case"]
    assert "| relu " in out.read_text()


def test_bad_arguments_are_refused():
    bench = load_bench("bench_probe_input")
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "1"])
