"""bench/bench_kind_cv.py: per-kind k-fold cross-validation on the samples ``fit`` fits. Synthetic campaigns of 60
relu probes stand in for a profile: one in five measured with the machine twice as slow, read by the canary or not."""

import json

import pytest
from bench_module import load_bench
from synthetic_campaign import relu_campaign


CANARY_S = 3e-4


def _slow_one_in_five(i):  # across sizes and batch sizes
    return 2.0 if i % 5 == 2 else 1.0


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    d = tmp_path_factory.mktemp("kind_cv")
    return (relu_campaign(d / "canary.db", speed=_slow_one_in_five, canary_s=CANARY_S),
            relu_campaign(d / "raw.db", negative=(), speed=_slow_one_in_five))


def test_samples_put_at_the_canary_level_cross_validate_closer_and_a_non_positive_sample_is_counted_apart(campaigns):
    bench = load_bench("bench_kind_cv")
    levelled, raw = (bench.campaign_cv(p) for p in campaigns)
    assert set(levelled["kinds"]) == set(raw["kinds"]) == {"relu"}
    a, b = levelled["kinds"]["relu"], raw["kinds"]["relu"]
    assert (a["n"], a["nonpositive"], a["heldout"]) == (60, 2, 58) and (b["nonpositive"], b["heldout"]) == (0, 60)
    assert levelled["canary_s"] == pytest.approx(CANARY_S) and raw["canary_s"] is None
    assert a["mape"] < 10.0 < b["mape"]  # one raw sample in five reads twice its cost
    assert 0.0 <= a["median_ape"] <= a["mape"] and 0.0 <= a["covered95"] <= 1.0
    assert levelled["summary"]["pooled_mape"] == pytest.approx(a["mape"]) and levelled["summary"]["heldout"] == 58


def test_a_kind_with_too_few_samples_is_left_out_and_the_report_shows_every_campaign(campaigns, tmp_path, capsys):
    bench = load_bench("bench_kind_cv")
    assert bench.campaign_cv(campaigns[0], kinds=["relu", "conv2d"], folds=5)["kinds"].keys() == {"relu"}
    bench.main(["--campaign", campaigns[0], "--campaign", campaigns[1], "--report", str(tmp_path / "cv.md")])
    out = capsys.readouterr().out
    assert "| relu | 60, " in out and "%), " in out and "| canary.db | 0.300 ms |" in out and "| raw.db | - |" in out
    doc = json.loads((tmp_path / "cv.json").read_text())
    assert [c["campaign"] for c in doc["campaigns"]] == ["canary.db", "raw.db"]
    for bad in (["--campaign", campaigns[0], "--folds", "1"], ["--campaign", str(tmp_path / "none.db")]):
        with pytest.raises(SystemExit):
            bench.main(bad)


def test_the_zoo_weighted_median_ape_weighs_each_kind_by_its_share_of_the_zoos_cost(campaigns):
    from thor_sdk.campaign.prior import kind_share, load_prior

    bench = load_bench("bench_kind_cv")
    r = bench.campaign_cv(campaigns[0])
    assert kind_share(load_prior()["kinds"]["relu"]) > 0
    assert r["summary"]["zoo_weighted_median_ape"] == pytest.approx(r["kinds"]["relu"]["median_ape"])  # one kind: its own
    assert r["summary"]["pooled_median_ape"] == pytest.approx(r["kinds"]["relu"]["median_ape"])
