"""bench/bench_family_bias.py: refuses missing files and a run without measurements before any work; its report tallies
where the family bias read lower; one campaign fitted both ways. (Its best-scale MAPE, thor_sdk.evaluate.unseen's, is
tested in test_bench_user_nets.py.)"""

import pytest
from bench_module import load_bench

from thor_sdk.layers.kinds import base_kind


def _bench():
    return load_bench("bench_family_bias")


@pytest.mark.parametrize("bad", [["--campaign", "nope.db", "--results", "nope.json"], ["--results", "x.json"]])
def test_missing_files_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        _bench().main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code not in (0, None)
    assert not (tmp_path / "r.md").exists()


def test_a_run_without_measurements_is_refused(tmp_path):
    db = tmp_path / "c.db"
    db.write_bytes(b"")
    with pytest.raises(SystemExit, match="give measurements"):
        _bench().main(["--campaign", str(db), "--report", str(tmp_path / "r.md")])


def test_pooling_one_results_file_is_refused_before_any_work(tmp_path):
    for name in ("c.db", "r.json"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(SystemExit, match="--pool needs at least two"):
        _bench().main(["--campaign", str(tmp_path / "c.db"), "--results", str(tmp_path / "r.json"), "--pool",
                       "--report", str(tmp_path / "r.md")])
    assert not (tmp_path / "r.md").exists()


def test_the_report_tallies_where_the_family_bias_read_lower():
    bench = _bench()

    def row(what, a, b):
        return {"what": what, "measurements": "m.json",
                "common": {"n": 9, "mape": a, "at_level": None, "best_scale": a, "coverage95": 1.0},
                "family": {"n": 9, "mape": b, "at_level": None, "best_scale": b - 1, "coverage95": 0.9}}

    result = {"campaigns": [{"campaign": "c.db", "common_log_bias": -0.05, "family_log_bias": 0.0,
                             "kind_log_bias": {"conv2d": -0.15, "conv1d": -0.15, "linear": 0.1, "output": 0.1},
                             "rows": [row("held out", 8.0, 7.0), row("user nets", 10.0, 11.0)]}]}
    text = bench.report(result, "python bench/bench_family_bias.py ...", "20261129-0000")
    assert ("| `c.db` | -0.050; conv1d -0.150, linear +0.100 | held out | `m.json` | 9 | 8.0 / - / 8.0 | 7.0 / - / 6.0 "
            "| 100% -> 90% |") in text
    assert "Family lower: as estimated in 1 of 2; at the best single scale in 1 of 2." in text  # equal is not lower
    assert text.startswith("# Calibration bias: one common, or one per kind family")


def test_one_campaign_is_fitted_with_a_common_bias_and_with_family_biases(tmp_path):
    import json

    from fake_device import FakeDevice

    from thor_sdk.api import profile
    from thor_sdk.campaign.prior import build_prior

    prior = tmp_path / "prior.json"
    prior.write_text(json.dumps(build_prior(["lenet5", "har"])))
    db = str(tmp_path / "p.db")
    profile(device=FakeDevice(noise=0.01), out=db, max_probes=30, prior_path=str(prior), calibration_models=["lenet5", "har"])
    docs = _bench().fit_both(db)
    assert set(docs) == {"common", "family"} and "kind_log_bias" not in docs["common"]["whole_model"]
    # lenet5 (convolutions and dense layers) and har (dense layers) at two batch sizes each: both families read, each
    # its own bias; every other kind at the common one, the same in both fits
    fam = docs["family"]["whole_model"]
    assert {base_kind(k) for k in fam["kind_log_bias"]} <= {"conv2d", "linear", "output"}  # variants: their kind's
    assert "conv2d" in fam["kind_log_bias"]
    assert fam["log_bias"] == docs["common"]["whole_model"]["log_bias"]
