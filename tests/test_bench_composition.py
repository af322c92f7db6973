"""bench/bench_composition.py: refuses bad arguments before any work; measures a small net for real (transformer_tiny
at batch 2, short windows) and reports each cycle's ratio as the probes' sum over the whole runs around it
(timings themselves are the benchmark's, not asserted here)."""

import math
import os

import pytest
from bench_module import load_bench


def _bench():
    return load_bench("bench_composition")


@pytest.mark.parametrize("bad", [["--cycles", "0"], ["--batch-size", "0"], ["--window-s", "nan"],
                                 ["--model", "no_such_net"], ["--model", "net.py:Net"],
                                 ["--model", "net.py:Net", "--input-shape", "3,x"],
                                 ["--model", "net.py:Net", "--input-shape", "0,8"]])
def test_bad_arguments_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        _bench().main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code not in (0, None)
    assert not os.listdir(tmp_path)


def test_each_cycle_is_the_probes_sum_over_the_whole_runs_around_it(tmp_path):
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import layers_of

    bench = _bench()
    fast = ProtocolSettings(warmup_steps=1, min_window_s=0.002, min_rounds=2, max_rounds=2)
    seen = []
    result = bench.run(["transformer_tiny"], batch_size=2, cycles=2, settings=fast, progress=lambda *a: seen.append(a))
    (net,) = result["nets"]
    probes = bench._layer_probes("transformer_tiny", 2)
    assert net["layers"] == len(layers_of("transformer_tiny").layers) == sum(n for _, n in probes)
    assert net["distinct_probes"] == len(probes) < net["layers"]  # its two identical blocks are one probe, counted twice
    assert [s[:2] for s in seen] == [("transformer_tiny", 1), ("transformer_tiny", 2)]
    for c in net["cycles"]:
        assert set(c["costs_s"]) == {p.id for p, _ in probes}
        assert c["probes_sum_s"] == pytest.approx(sum(c["costs_s"][p.id] * n for p, n in probes))
        assert c["ratio"] == pytest.approx(c["probes_sum_s"] / (0.5 * (c["whole_before_s"] + c["whole_after_s"])))
        assert c["whole_before_s"] > 0 and c["whole_after_s"] > 0 and math.isfinite(c["ratio"])
    assert set(net["by_kind_s"]) == {p.kind for p, _ in probes}
    text = bench.report(result, "python bench/bench_composition.py --model transformer_tiny", 0.5, 0.6, "20261126-0000")
    assert "| transformer_tiny | 2 | 5 (4) | " in text and f"**{net['median_ratio']:.3f}**" in text


def test_a_fine_tune_composes_its_frozen_layers_and_measures_the_fine_tune_whole(tmp_path):
    """--trainable: the probes are the fine-tune's (the frozen blocks' layers forward-only, marked frozen), and the
    whole runs train only the matching parameters (measured with fewer trained tensors than the whole net)."""
    from thor_sdk.harness.protocol import ProtocolSettings

    bench = _bench()
    fast = ProtocolSettings(warmup_steps=1, min_window_s=0.002, min_rounds=2, max_rounds=2)
    result = bench.run(["transformer_tiny"], batch_size=2, cycles=1, settings=fast, trainable=["4"])
    (net,) = result["nets"]
    probes = bench._layer_probes("transformer_tiny", 2, trainable=["4"])
    whole = bench._layer_probes("transformer_tiny", 2)
    assert net["trainable"] == ["4"]
    assert {p.id for p, _ in probes} != {p.id for p, _ in whole}
    frozen = [p for p, _ in probes if p.config.get("frozen")]
    assert frozen and all(p.role == "input" for p in frozen)  # nothing trains before them: no backward at all
    (c,) = net["cycles"]
    assert set(c["costs_s"]) == {p.id for p, _ in probes}
    # what the frozen layers' probes add up to (a measured difference: its sign is the machine's on a 2 ms window)
    assert c["frozen_probes_sum_s"] == pytest.approx(sum(c["costs_s"][p.id] * n for p, n in probes
                                                         if p.config.get("frozen")))
    assert math.isfinite(c["frozen_probes_sum_s"]) and c["frozen_probes_sum_s"] != c["probes_sum_s"]
    text = bench.report(result, "python bench/bench_composition.py --model transformer_tiny --trainable 4", 0.5, 0.6,
                        "20261129-0000")
    assert "| transformer_tiny [trainable 4] | 2 |" in text and "frozen layers' probes" in text
