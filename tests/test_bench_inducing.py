"""bench/bench_inducing.py: one campaign fitted at several inducing floors; its per-layer CV. A synthetic campaign
of 60 relu probes (two of them negative, as a subtraction within noise gives) stands in for a profile."""

import pytest
from bench_module import load_bench
from synthetic_campaign import relu_campaign


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    return relu_campaign(tmp_path_factory.mktemp("inducing") / "c.db")


def test_each_floor_keeps_its_inducing_points_and_the_default_is_restored(campaign):
    import thor_sdk.fitting.gp as gp

    bench = load_bench("bench_inducing")
    before = gp.MIN_INDUCING
    wide, narrow = bench.fit_at(campaign, 128), bench.fit_at(campaign, 8)
    assert gp.MIN_INDUCING == before
    assert len(wide["kinds"]["relu"]["inducing"]) == 60  # every distinct sample, below the floor
    assert len(narrow["kinds"]["relu"]["inducing"]) == 20  # one per 3 samples above a floor of 8
    with pytest.raises(Exception):
        bench.fit_at(campaign + ".missing", 8)
    assert gp.MIN_INDUCING == before  # restored on an error too


def test_cv_scores_positive_samples_and_counts_the_others_apart(campaign):
    import thor_sdk.fitting.gp as gp

    bench = load_bench("bench_inducing")
    before = gp.MIN_INDUCING
    out = bench.cv(campaign, ["relu", "conv2d"], [128, 8])
    assert gp.MIN_INDUCING == before
    assert set(out) == {"relu"}  # a kind without samples is left out
    for floor in (128, 8):
        n, nonpositive, mape, median_ape, coverage = out["relu"][floor]
        assert (n, nonpositive) == (60, 2)
        assert 0.0 <= median_ape <= mape < 100.0 and 0.0 <= coverage <= 1.0
