"""bench/bench_level_panel.py: a level from one reference probe or from a panel, against whole nets. The panel's
choice on a vector estimator, a layer's cost through a fake device's real measurement path, and the scoring."""

import math
import os

import pytest
from bench_module import load_bench
from fake_device import FakeDevice, planted_cost

from thor_sdk.runtime import load_estimator

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vectors")


def test_the_panel_takes_known_kinds_spread_over_their_costs_and_is_deterministic():
    bench = load_bench("bench_level_panel")
    est = load_estimator(os.path.join(VECTORS, "estimator_level.json"))  # conv2d, maxpool2d, relu, output
    panel = bench.level_panel(est, log_bias=-0.1)
    assert panel and panel == bench.level_panel(est, log_bias=-0.1)
    kinds = [m["probe"].kind for m in panel]
    assert set(kinds) <= {"conv2d", "maxpool2d", "relu"}  # an output head is never a member
    assert all(kinds.count(k) <= bench.PANEL_PER_KIND for k in kinds)
    floor = bench.PANEL_FLOOR * est.reference["median_value"]
    for m in panel:
        assert m["expected"] > floor and m["probe"].batch_size == bench.PANEL_BATCH
        assert m["expected_alone"] == pytest.approx(m["expected"] * math.exp(0.1))
    # the costliest kinds first: the kinds' order follows their summed expected costs
    assert len(bench.level_panel(est, max_probes=1)) == 1


def test_a_layer_cost_is_its_probes_subtraction_on_the_device():
    bench = load_bench("bench_level_panel")
    est = load_estimator(os.path.join(VECTORS, "estimator_level.json"))
    m = bench.level_panel(est)[0]
    p = m["probe"]
    got = bench.layer_cost_now(FakeDevice(noise=0.0), p, "time")
    assert got == pytest.approx(planted_cost(p.kind, p.config, p.batch_size, p.role))


def test_scores_and_the_panel_median():
    bench = load_bench("bench_level_panel")
    assert bench.score([1.0, 0.5], 1.0) == pytest.approx(50.0)  # |1/1 - 1| and |1/0.5 - 1|, averaged
    assert bench.score([0.8, 0.8], 0.8) == pytest.approx(0.0)
    assert bench.panel_level([0.9, -0.2, 1.1, 1.0]) == pytest.approx(1.0)  # a negative subtraction is left out


def test_bad_arguments_are_refused():
    bench = load_bench("bench_level_panel")
    with pytest.raises(SystemExit):
        bench.main(["--estimator", "x.json", "--rounds", "0"])
