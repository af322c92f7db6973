"""bench/bench_finetune.py: each case's patterns choose a real fine-tune of its net (every pattern matches, some
layers frozen, the head trained; the whole-net cases none frozen), and its report says what it measured."""

import pytest
from bench_module import load_bench

from thor_sdk.layers import layers_of

pytest.importorskip("torch")


def test_every_case_is_a_fine_tune_of_its_net_or_the_net_whole():
    bench = load_bench("bench_finetune")
    for net, case, patterns in bench.CASES + (bench.ONNX_CASE,):
        ml = layers_of(net, trainable=patterns)
        frozen = [l for l in ml.layers if l["config"].get("frozen")]
        assert bool(frozen) == bool(patterns), (net, case)
        assert ml.layers[-1]["kind"] == "output" and "approx" not in ml.layers[-1], (net, case)
        assert not any("approx" in l for l in ml.layers), (net, case)  # no module trained in part


def test_the_report_gives_each_case_and_the_fine_tunes_apart():
    bench = load_bench("bench_finetune")
    rows = [dict(net="mobilenetv2", case="whole", patterns=None, measured=0.3, thor=0.27, thor_std=0.04, z=0.7,
                 flops=0.2, thor_ape=10.0, flops_ape=33.3, covered95=True),
            dict(net="mobilenetv2", case="classifier", patterns=["fc"], measured=0.12, thor=0.114, thor_std=0.02,
                 z=0.3, flops=0.09, thor_ape=5.0, flops_ape=25.0, covered95=True, measured_passes=[0.12, 0.12, 0.12])]
    doc = {"stamp": "20261128-2200", "command": "python bench/bench_finetune.py --estimator e.json",
           "estimator": "e.json", "estimator_key": "host / torch, time", "machine": "Machine: test.",
           "batch_size": 16, "passes": 3, "relevel": True, "rows": rows, "skipped": [],
           "groups": {"fine-tunes": bench._summary(rows[1:]), "trained whole": bench._summary(rows[:1])}}
    text = "\n".join(bench.render(doc))
    assert "| mobilenetv2 | classifier | fc | 120.00 ms | 114.00 ± 20.00 ms | 0.95 | +0.30 | 0.75 |" in text
    assert "- fine-tunes: 1 case(s), THOR MAPE 5.0% vs FLOPs 25.0%, 95% coverage 100%" in text
    assert "measurement floor 0.0%" in text  # passes that agree leave a perfect estimate nothing to miss
    assert text.count("measurement floor") == 1  # the whole-net case recorded no passes: no floor said
    assert "| mobilenetv2 | whole | (all) |" in text and "Command: `python bench/bench_finetune.py" in text
