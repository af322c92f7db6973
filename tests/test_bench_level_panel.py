"""thor_sdk.api.level_panel and layer_cost_now (a level's cross-check) and bench/bench_level_panel.py (a level
from one reference probe or from a panel, against whole nets): the panel's choice on a vector estimator, a layer's
cost through a fake device's real measurement path, and the bench's scoring."""

import json
import math
import os

import pytest
from bench_module import load_bench
from fake_device import FakeDevice, planted_cost

from thor_sdk.api import LEVEL_PANEL_BATCH, LEVEL_PANEL_FLOOR, LEVEL_PANEL_PER_KIND, layer_cost_now, level_panel
from thor_sdk.runtime import load_estimator

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors")


def _estimator(log_bias=None, kind_log_bias=None):
    with open(os.path.join(VECTORS, "estimator_level.json"), encoding="utf-8") as f:
        doc = json.load(f)  # kinds conv2d, maxpool2d, relu, output
    if log_bias is not None:
        doc["whole_model"]["log_bias"] = log_bias
    if kind_log_bias is not None:
        doc["whole_model"]["kind_log_bias"] = kind_log_bias
    return load_estimator(doc)


def test_the_panel_takes_known_kinds_spread_over_their_costs_and_is_deterministic():
    est = _estimator(log_bias=-0.1)
    panel = level_panel(est)
    assert panel and [m["probe"].id for m in panel] == [m["probe"].id for m in level_panel(est)]
    kinds = [m["probe"].kind for m in panel]
    assert set(kinds) <= {"conv2d", "maxpool2d", "relu"}  # an output head is never a member
    assert all(kinds.count(k) <= LEVEL_PANEL_PER_KIND for k in kinds)
    floor = LEVEL_PANEL_FLOOR * est.reference["median_value"]
    for m in panel:
        assert m["expected"] > floor and m["probe"].batch_size == LEVEL_PANEL_BATCH
        # a probe measures a layer alone: its expected cost is the estimate without the calibration's bias
        assert m["expected"] == pytest.approx(m["estimate"] * math.exp(0.1))
    unbiased = level_panel(_estimator())
    assert [m["expected"] for m in unbiased] == pytest.approx([m["estimate"] for m in unbiased])
    assert len(level_panel(est, max_probes=1)) == 1
    # a convolution's own bias (the calibration's per kind family) is taken off its layers alone
    by_family = level_panel(_estimator(log_bias=-0.1, kind_log_bias={"conv2d": -0.25}))
    assert any(m["probe"].kind == "conv2d" for m in by_family)
    for m in by_family:
        assert m["expected"] == pytest.approx(m["estimate"] * math.exp(0.25 if m["probe"].kind == "conv2d" else 0.1))


def test_a_layer_cost_is_its_probes_subtraction_on_the_device():
    p = level_panel(_estimator())[0]["probe"]
    got = layer_cost_now(FakeDevice(noise=0.0), p, "time")
    assert got == pytest.approx(planted_cost(p.kind, p.config, p.batch_size, p.role))
    from thor_sdk.errors import MeasurementError

    with pytest.raises(MeasurementError, match="no energy"):  # this fake device has no meter
        layer_cost_now(FakeDevice(noise=0.0), p, "energy")


def test_scores_and_the_panel_median():
    bench = load_bench("bench_level_panel")
    assert bench.score([1.0, 0.5], 1.0) == pytest.approx(50.0)  # |1/1 - 1| and |1/0.5 - 1|, averaged
    assert bench.score([0.8, 0.8], 0.8) == pytest.approx(0.0)
    assert bench.panel_level([0.9, -0.2, 1.1, 1.0]) == pytest.approx(1.0)  # a negative subtraction is left out


def test_bad_arguments_are_refused():
    bench = load_bench("bench_level_panel")
    with pytest.raises(SystemExit):
        bench.main(["--estimator", "x.json", "--rounds", "0"])
