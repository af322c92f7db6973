"""thor_sdk.fitting.crossval and ``thor-sdk fit --cv``: each kind read on configs of its own that its fold never
saw. A synthetic campaign of 60 relu probes (two a subtraction within noise, at or below zero) and 6 linear ones
(too few to cross-validate) stands in for a profile."""

import json

import pytest
from click.testing import CliRunner
from synthetic_campaign import relu_campaign

from thor_sdk.errors import UsageError
from thor_sdk.store import Campaign


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    return relu_campaign(tmp_path_factory.mktemp("crossval") / "c.db", linear=6)


def _samples(path):
    with Campaign.open(path) as c:
        return [s for s in c.samples() if s["metric"] == "time"]


def test_each_kind_with_enough_samples_is_read_on_its_held_out_folds(campaign):
    from thor_sdk.fitting.crossval import cross_validate

    cv = cross_validate(_samples(campaign), folds=5)
    assert set(cv["kinds"]) == {"relu"}  # 6 linear samples: fewer than 2 x 5
    relu = cv["kinds"]["relu"]
    assert (relu["n"], relu["nonpositive"], relu["heldout"]) == (60, 2, 58)
    assert relu["mape"] < 10.0 and 0.0 <= relu["median_ape"] <= relu["mape"]  # a smooth law, 5% wiggle
    assert 0.5 <= relu["covered95"] <= 1.0 and abs(relu["median_ln"]) < 0.1
    assert cv["pooled"]["heldout"] == 58 and cv["pooled"]["mape"] == pytest.approx(relu["mape"])
    again = cross_validate(_samples(campaign), folds=5)
    assert again == cv  # seeded folds
    assert cross_validate(_samples(campaign), folds=3)["kinds"]["linear"]["n"] == 6  # 6 >= 2 x 3


def test_a_kind_without_enough_samples_or_bad_folds_give_nothing_or_an_error(campaign):
    from thor_sdk.fitting.crossval import check_folds, cross_validate, cv_kind

    assert cv_kind("relu", [], folds=5) is None
    assert cross_validate([], folds=5) == {"folds": 5, "seed": 0, "kinds": {}, "pooled": None}
    for bad in (1, 21, 2.5, True, "5", None):
        with pytest.raises(UsageError):
            check_folds(bad)
    with pytest.raises(UsageError):
        cv_kind("relu", _samples(campaign), folds=1)


def test_fit_cv_keeps_the_figures_in_the_estimator_and_prints_them(campaign, tmp_path):
    from thor_sdk.api import fit
    from thor_sdk.cli.main import cli
    from thor_sdk.runtime import load_estimator

    plain = fit(campaign)
    assert "cross_validation" not in plain["provenance"]
    doc = fit(campaign, out=str(tmp_path / "e.json"), cv_folds=5)
    cv = doc["provenance"]["cross_validation"]
    assert cv["folds"] == 5 and set(cv["kinds"]) == {"relu"} and cv["kinds"]["relu"]["heldout"] == 58
    assert doc["kinds"] == plain["kinds"]  # the fit itself is the same
    load_estimator(json.loads((tmp_path / "e.json").read_text()))  # still a valid estimator
    with pytest.raises(UsageError):
        fit(campaign, cv_folds=1)
    res = CliRunner().invoke(cli, ["fit", campaign, "--out", str(tmp_path / "f.json"), "--cv", "5"])
    assert res.exit_code == 0, res.output
    assert "5-fold CV MAPE (median)" in res.output and "held-out samples" in res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("relu "))
    assert f"{cv['kinds']['relu']['covered95']:.0%}" in line
    res = CliRunner().invoke(cli, ["fit", campaign, "--out", str(tmp_path / "g.json"), "--cv", "5", "--json"])
    assert json.loads(res.stdout)["cross_validation"]["pooled"]["heldout"] == 58
    res = CliRunner().invoke(cli, ["fit", campaign, "--out", str(tmp_path / "h.json"), "--cv", "1"])
    assert res.exit_code != 0 and not (tmp_path / "h.json").exists()


def test_the_record_stays_outside_the_size_budget_so_a_tight_budget_fits_the_same(campaign):
    from thor_sdk.fitting.estimator import dumps_estimator
    from thor_sdk.fitting.pipeline import build

    samples = _samples(campaign)
    full = build(samples, device={"name": "t"}, runtime="torch", metric="time")
    tight = len(dumps_estimator(full).encode()) - 2000
    plain = build(samples, device={"name": "t"}, runtime="torch", metric="time", max_bytes=tight)
    cv = build(samples, device={"name": "t"}, runtime="torch", metric="time", max_bytes=tight, cv_folds=5)
    assert plain["provenance"]["size_budget"]["inducing_caps"]  # the budget lowered some kind's inducing points
    assert cv["kinds"] == plain["kinds"] and cv["provenance"]["size_budget"] == plain["provenance"]["size_budget"]
    assert cv["provenance"]["cross_validation"]["kinds"]["relu"]["heldout"] == 58
