"""Replay of the power-cap selection on GPU traces: honest split, failures, real Zeus A40/V100 data."""

import csv
import json
import math
from pathlib import Path

import pytest

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.power.replay import read_train_trace, replay

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "zeus-nsdi23"
REQUIRED = ("cases", "within_5pct_share", "median_slowdown", "max_slowdown", "speedup_vs_baseline1",
            "speedup_vs_baseline2")


def write_traces(tmp_path, epochs, power=None, target=0.5):
    """epochs: {batch: {run: epochs-to-target or None}}; power: {(batch, limit): (time/epoch, avg W)}."""
    power = power or {(8, 100): (3.0, 90.0), (8, 150): (2.0, 120.0), (8, 200): (1.5, 140.0),
                      (32, 100): (2.0, 100.0), (32, 150): (1.2, 145.0), (32, 200): (1.0, 190.0)}
    p, t = tmp_path / "power.csv", tmp_path / "train.csv"
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"])
        for (b, pl), (tt, ap) in sorted(power.items()):
            w.writerow(["toy", "net", b, "sgd", pl, tt, ap])
    with open(t, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dataset", "network", "batch_size", "optimizer", "learning_rate", "run", "target_metric",
                    "target_epoch"])
        for b, runs in epochs.items():
            for run, e in runs.items():
                w.writerow(["toy", "net", b, "sgd", "0.1", run, target, "nan" if e is None else e])
    return str(p), str(t)


def test_selection_sees_only_its_half_and_the_oracle_only_the_other(tmp_path):
    # odd runs say batch 8 is sample-efficient, even runs say it is not
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 30, 3: 10, 4: 30}, 32: {1: 20, 2: 20, 3: 20, 4: 20}})
    res = replay(p, t, caps=[250.0], with_cases=True)
    assert res["cases"] == 2
    by_fold = {c["fold"]: c for c in res["case_list"]}
    odd = by_fold["select on odd runs, score on even runs"]
    even = by_fold["select on even runs, score on odd runs"]
    # odd half: batch 8 scores 1.5*10 = 15 < 32's 1.0*20 -> selected; even half (30 epochs): oracle is 32
    assert odd["selected"] == [8, 200.0] and odd["oracle"] == [32, 200.0]
    assert odd["slowdown"] == pytest.approx(1.5 * 30 / (1.0 * 20))
    # even half: 32 is selected; scored on odd runs, where 8 was best
    assert even["selected"] == [32, 200.0] and even["oracle"] == [8, 200.0]
    assert even["slowdown"] == pytest.approx(1.0 * 20 / (1.5 * 10))
    assert res["within_5pct_share"] == 0.0


def test_power_limit_bounds_peak_power_and_caps_are_respected(tmp_path):
    p, t = write_traces(tmp_path, {8: {1: 5, 2: 5}, 32: {1: 10, 2: 10}})
    res = replay(p, t, caps=[160.0], with_cases=True)
    for c in res["case_list"]:
        # "bound": max(limit, average) <= 160 W leaves limits 100 and 150 only
        assert c["selected"][1] <= 150 and c["oracle"][1] <= 150
    avg = replay(p, t, power_column="average", caps=[160.0], with_cases=True)
    # "average": batch 8 at limit 200 draws 140 W on average, so it becomes feasible
    assert all(c["selected"] == [8, 200.0] for c in avg["case_list"])


def test_failed_runs_are_counted_not_hidden(tmp_path):
    # batch 32 fails in run 2 (scoring half of fold A): baseline 1 (largest batch) fails there
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10, 3: 10, 4: 10}, 32: {1: 40, 2: None, 3: 40, 4: 40}})
    res = replay(p, t, caps=[250.0], with_cases=True)
    assert res["baseline1_failed_cases"] == 1
    assert res["selected_failed_cases"] == 0
    assert all(c["selected"][0] == 8 for c in res["case_list"])
    json.dumps(res)  # no inf/nan leaks into the JSON


def test_cap_grid_counts_infeasible_caps(tmp_path):
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10}, 32: {1: 10, 2: 10}})
    res = replay(p, t, caps=[50.0, 250.0])
    assert res["infeasible_caps"] == 2 and res["cases"] == 2


def test_targets_default_given_and_data_driven(tmp_path):
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10}, 32: {1: 12, 2: 12}}, target=0.7)
    res = replay(p, t, caps=[250.0])
    w = res["workloads"][0]
    assert w["target_metric"] == 0.7 and "most demanding" in w["target_source"]
    res = replay(p, t, caps=[250.0], targets={"toy": 0.7})
    assert res["workloads"][0]["target_source"] == "given"
    with pytest.raises(UsageError):
        replay(p, t, caps=[250.0], targets={"toy": 0.99})


def test_bad_trace_files(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("dataset,network\ntoy,net\n")
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10}})
    with pytest.raises(FormatError):
        replay(str(bad), t)
    with pytest.raises(FormatError):
        read_train_trace(str(bad))
    with pytest.raises(UsageError):
        replay(p, t, power_column="peak")


needs_data = pytest.mark.skipif(not (DATA / "summary_train.csv").is_file(), reason="../shared/data absent")


@needs_data
@pytest.mark.parametrize("gpu", ["a40", "v100"])
def test_real_zeus_traces(gpu):
    res = replay(str(DATA / f"summary_power_{gpu}.csv"), str(DATA / "summary_train.csv"), with_cases=True)
    for k in REQUIRED:
        assert res[k] is not None
    assert res["cases"] == len(res["case_list"]) > 100
    assert {w["workload"].split("/")[0] for w in res["workloads"]} == {
        "cifar100", "imagenet", "librispeech", "movielens-1m", "squad", "sentiment140"}
    # the oracle is optimal among the feasible pairs: nothing beats it
    assert min(c["slowdown"] for c in res["case_list"]) >= 1.0 - 1e-12
    assert 0.0 <= res["within_5pct_share"] <= 1.0
    assert res["median_slowdown"] >= 1.0
    lo, hi = res["caps_w"]
    assert lo <= 100.0 and hi >= 250.0
    assert math.isfinite(res["speedup_vs_baseline1"]) and math.isfinite(res["speedup_vs_baseline2"])


@needs_data
def test_cli_replay_json(capsys):
    from thor_sdk.cli.main import main

    with pytest.raises(SystemExit) as ei:
        main(["table", "replay", "--power-trace", str(DATA / "summary_power_v100.csv"),
              "--train-trace", str(DATA / "summary_train.csv"), "--json", "-q"])
    assert ei.value.code == 0
    out = json.loads(capsys.readouterr().out)
    for k in REQUIRED:
        assert k in out
    assert out["power_column"] == "bound"
