"""bench/bench_forward_only.py: refuses bad arguments before any work; its nets freeze what each case says; a
short run end to end reports each cycle's probe over the layer's marginal cost in the net (the timings are the
benchmark's, not asserted here)."""

import json
import math

import pytest
from bench_module import load_bench

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("bad", [["--deep", "1"], ["--cycles", "0"], ["--batch-size", "0"], ["--window-s", "nan"],
                                 ["--case", "no such case"]])
def test_bad_arguments_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        load_bench("bench_forward_only").main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code != 0
    assert not (tmp_path / "r.md").exists()


def test_each_case_is_a_frozen_stem_its_copies_and_a_trained_head():
    from thor_sdk.layers import layers_of
    from thor_sdk.layers.kinds import complete_config

    bench = load_bench("bench_forward_only")
    for case, (kind, config, role, trains) in bench.CASES.items():
        net = bench.Stack(case, 3)
        layers = layers_of(net, input_shape=[bench.C, bench.SIDE, bench.SIDE]).layers
        body = [l for l in layers if l["name"].startswith("body.")]
        assert len(body) == 3 and all(l["kind"] == kind for l in body), case
        # the first copy reads the frozen stem's output; the marginal ones (the probe's role) read a trained copy's
        assert body[0]["role"] == "input" and body[-1]["role"] == role == ("hidden" if trains else "input"), case
        # the copies are the probe's config
        assert all(complete_config(kind, l["config"]) == complete_config(kind, config) for l in body[1:]), case
        assert [l["kind"] for l in layers][-1] == "output"
    assert bench.Stack("relu in place", 1).body[0].inplace and not bench.Stack("relu", 1).body[0].inplace


def test_short_run_end_to_end(tmp_path):
    bench = load_bench("bench_forward_only")
    path = tmp_path / "r.md"
    bench.main(["--batch-size", "2", "--deep", "2", "--cycles", "1", "--window-s", "0.005", "--case", "relu",
                "--report", str(path)])
    doc = json.loads((tmp_path / "r.json").read_text())
    (case,) = doc["cases"]
    row = case["cycles"][0]
    # the probe's cost is a difference of two measured parts: at batch 2 a ReLU's can come out below zero, so only
    # that it is a number is asserted (a sign is the benchmark's finding, not this test's)
    assert case["case"] == "relu" and math.isfinite(row["probe_s"]) and row["whole_1_s"] > 0
    assert math.isclose(row["marginal_s"], row["whole_2_s"] - row["whole_1_s"])
    assert math.isnan(row["ratio"]) or math.isclose(row["ratio"], row["probe_s"] / row["marginal_s"])
    assert "| relu | input |" in path.read_text()
