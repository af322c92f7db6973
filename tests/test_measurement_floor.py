"""evaluate's measurement floor: the MAPE an estimator that knew every model's long-run cost would score against
medians of lognormal passes, checked against a seeded simulation of exactly that, and its refusals of what is not
a spread (single passes, non-positive values)."""

import math
import random
import statistics

import pytest

from thor_sdk.evaluate.report import _facts
from thor_sdk.evaluate.unseen import MEDIAN_VAR, measurement_floor


@pytest.mark.parametrize("passes", [1, 2, 3, 4, 5, 7])
def test_median_variances_are_those_of_the_median_of_normal_draws(passes):
    rng = random.Random(passes)
    meds = [statistics.median([rng.gauss(0.0, 1.0) for _ in range(passes)]) for _ in range(40000)]
    assert statistics.pvariance(meds) == pytest.approx(MEDIAN_VAR[passes - 1], rel=0.04)


@pytest.mark.parametrize("spread,passes", [(0.05, 3), (0.2, 3), (0.2, 5), (0.4, 2)])
def test_the_floor_is_a_perfect_estimates_mape_against_medians_of_lognormal_passes(spread, passes):
    rng = random.Random(7)
    rows = [{"measured_passes": [math.exp(rng.gauss(0.0, spread)) for _ in range(passes)]} for _ in range(3000)]
    got = measurement_floor(rows)
    assert got["dof"] == 3000 * (passes - 1) and got["log_std"] == pytest.approx(spread, rel=0.03)
    # the long-run median is 1 for every row: a perfect estimate's APE against each row's median of its passes
    direct = 100 * statistics.fmean(abs(1.0 / statistics.median(r["measured_passes"]) - 1.0) for r in rows)
    assert got["mape"] == pytest.approx(direct, rel=0.06)


def test_no_spread_no_floor():
    assert measurement_floor([]) is None
    assert measurement_floor([{"measured_passes": [1.0]}, {"measured_passes": []}, {}]) is None
    same = measurement_floor([{"measured_passes": [2.0, 2.0, 2.0]}])
    assert same == {"log_std": 0.0, "dof": 2, "mape": 0.0}
    # a pass of zero or less is no measurement: left out, not a log of zero
    assert measurement_floor([{"measured_passes": [0.0, 1.0, -1.0]}]) is None


def test_the_report_says_the_floor_beside_the_figures():
    r = {"device": "host", "runtime": "torch", "metric": "time", "unit": "s", "batch_sizes": [16], "rows": [],
         "measurement_floor": {"log_std": 0.2, "dof": 18, "mape": 10.9}}
    assert any(line.startswith("Measurement floor: the models' passes spread ln-std 0.200") and "10.9% MAPE" in line
               for line in _facts(r))
