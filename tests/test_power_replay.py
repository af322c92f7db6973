"""Replay of the power-cap selection on GPU traces: honest split, failures, real Zeus A40/V100 data."""

import csv
import json
import math
import statistics
from pathlib import Path

import pytest

from thor_sdk.errors import FormatError, MeasurementError, UsageError
from thor_sdk.power.ratios import EfficiencyModel, unimodal_fit
from thor_sdk.power.replay import read_power_trace, read_train_trace, replay

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
    json.dumps(res, allow_nan=False)  # no inf/nan leaks into the JSON


def test_selection_failing_in_the_scoring_half_is_counted(tmp_path):
    # batch 32 reaches the target in 5 epochs in runs 1, 3, 4 but never in run 2 (even half)
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10, 3: 10, 4: 10}, 32: {1: 5, 2: None, 3: 5, 4: 5}})
    res = replay(p, t, caps=[250.0], with_cases=True)
    json.dumps(res, allow_nan=False)
    a = next(c for c in res["case_list"] if c["fold"].startswith("select on odd"))
    # odd runs say 32 is best; the even runs never reached the target with it: failed, not hidden
    assert a["selected"][0] == 32 and a["oracle"][0] == 8 and a["slowdown"] is None
    assert res["selected_failed_cases"] == 1 and res["within_5pct_share"] == 0.0
    # fold B: 32 failed in its selection half (run 2), so it is not selectable: 8 is picked, and the odd
    # runs (its scoring half) show 32 would have been 3x faster
    b = next(c for c in res["case_list"] if c["fold"].startswith("select on even"))
    assert b["selected"][0] == 8 and b["oracle"][0] == 32 and b["slowdown"] == pytest.approx(1.5 * 10 / (1.0 * 5))
    # the plug-in reference fails the same way (null); the all-runs oracle has seen run 2 and avoids 32
    assert a["reference"]["plug_in_noise"] is None and a["reference"]["all_runs_oracle"] == 1.0


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


def _is_valley(xs):
    k = xs.index(min(xs))
    return all(a >= b for a, b in zip(xs[:k], xs[1:k + 1])) and all(a <= b for a, b in zip(xs[k:], xs[k + 1:]))


def test_unimodal_fit_pools_violators_and_keeps_a_valley():
    assert unimodal_fit([5.0, 3.0, 2.0, 4.0, 7.0], [1] * 5) == [5.0, 3.0, 2.0, 4.0, 7.0]  # already a valley
    fit = unimodal_fit([10.0, 13.0, 11.0], [1, 1, 3])  # a peak in the middle: 13 and 11 pooled (weighted)
    assert fit == pytest.approx([10.0, 11.5, 11.5])
    noisy = [40.0, 19.0, 16.0, 18.0, 17.0, 21.0, 30.0, 29.0, 43.0]
    fit = unimodal_fit(noisy, [2] * len(noisy))
    assert _is_valley(fit) and fit != noisy
    assert sum(fit) == pytest.approx(sum(noisy))  # PAVA keeps each pooled block's (weighted) mean


def test_efficiency_models_fit_failures_and_prediction():
    law = {b: [10.0 * (1 + b / 256.0)] * 2 for b in (8, 32, 128, 512, 2048)}
    m = EfficiencyModel("mccandlish").fit(law)
    assert m.params_["e_min"] == pytest.approx(10.0, rel=1e-6) and m.params_["b_crit"] == pytest.approx(256.0, rel=1e-6)
    assert m.predict([1024]) == pytest.approx([10.0 * (1 + 1024 / 256.0)], rel=1e-6)  # unseen batch: the law
    assert math.isinf(EfficiencyModel("mccandlish").fit({8: [5, 5], 64: [5, 5]}).params_["b_crit"])
    runs = {8: [40, 38], 16: [18, 20], 32: [17, 15], 64: [20, 16], 4096: [400, None]}
    mean = EfficiencyModel("mean").fit(runs)
    assert mean.expected_ == {8: 39.0, 16: 19.0, 32: 16.0, 64: 18.0}
    assert mean.failed_batch_sizes_ == [4096] and math.isinf(mean.predict([4096])[0])
    uni = EfficiencyModel().fit(runs)
    assert uni.kind == "unimodal" and _is_valley([uni.expected_[b] for b in sorted(uni.expected_)])
    assert uni.ratios()[64] == 1.0 and uni.ratios()[8] == pytest.approx(uni.expected_[8] / uni.expected_[64])
    with pytest.raises(UsageError):
        uni.predict([128])  # only the law extrapolates
    with pytest.raises(MeasurementError):
        EfficiencyModel().fit({8: [None], 16: [3, None]})
    with pytest.raises(UsageError):
        EfficiencyModel("linear")


def test_ratio_model_changes_the_selection(tmp_path):
    # selection half (odd runs): 8 -> 10, 16 -> 13, 32 -> 11 epochs: a peak, which a valley cannot have
    power = {(8, 200): (1.0, 150.0), (16, 200): (0.95, 150.0), (32, 200): (0.9, 150.0)}
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10}, 16: {1: 13, 2: 12}, 32: {1: 11, 2: 12}}, power)
    by_model = {}
    for model in ("mean", "unimodal"):
        res = replay(p, t, caps=[250.0], with_cases=True, ratio_model=model)
        odd = next(c for c in res["case_list"] if c["fold"].startswith("select on odd"))
        fit = next(f for f in res["fits"] if f["fold"].startswith("select on odd"))
        by_model[model] = (odd["selected"][0], fit["expected_epochs"])
    # mean: 0.9 * 11 < 1.0 * 10 -> 32; unimodal pools 16 and 32 to sqrt(13 * 11): 0.9 * 11.96 > 10 -> 8
    assert by_model["mean"] == (32, {"8": 10.0, "16": 13.0, "32": 11.0})
    assert by_model["unimodal"][0] == 8
    assert by_model["unimodal"][1]["16"] == by_model["unimodal"][1]["32"] == pytest.approx(math.sqrt(13 * 11))


def test_random_splits_partition_the_runs(tmp_path):
    epochs = {8: {r: 10 + r % 3 for r in range(1, 8)}, 32: {r: 20 - r % 2 for r in range(1, 6)}}
    p, t = write_traces(tmp_path, epochs)
    res = replay(p, t, caps=[250.0], with_cases=True, splits=4, seed=3)
    assert res["cases"] == 4 * 2 and len(res["fits"]) == 8 and res["splits"] == 4
    parts = set()
    for f in res["fits"]:
        for b, runs in epochs.items():
            a, s = f["selection_runs"][str(b)], f["scoring_runs"][str(b)]
            assert not set(a) & set(s) and sorted(a + s) == sorted(runs) and abs(len(a) - len(s)) <= 1
        parts.add(tuple(f["selection_runs"]["8"]))
    assert len(parts) > 1  # the splits differ
    again = replay(p, t, caps=[250.0], with_cases=True, splits=4, seed=3)
    assert again["fits"] == res["fits"]  # seeded
    with pytest.raises(UsageError):
        replay(p, t, splits=0)
    with pytest.raises(UsageError):
        replay(p, t, ratio_model="linear")


def test_references_with_identical_halves(tmp_path):
    p, t = write_traces(tmp_path, {8: {1: 10, 2: 10, 3: 10, 4: 10}, 32: {1: 12, 2: 12, 3: 12, 4: 12}})
    ref = replay(p, t, caps=[250.0])["reference"]
    for name in ("in_sample", "plug_in_noise", "all_runs_oracle"):
        assert ref[name]["within_5pct_share"] == 1.0 and ref[name]["median_slowdown"] == 1.0


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
    assert res["ratio_model"] == "unimodal" and res["within_10pct_share"] >= res["within_5pct_share"]
    # the selection and the oracle are scored by one function on the same scoring runs: recompute every
    # case's slowdown here from the raw traces (time per epoch x mean epochs of the fold's scoring runs)
    power = next(iter(v for k, v in read_power_trace(str(DATA / f"summary_power_{gpu}.csv")).items()
                      if k[0] == "imagenet"))
    train = next(iter(v for k, v in read_train_trace(str(DATA / "summary_train.csv")).items() if k[0] == "imagenet"))
    runs = train[0.65]
    fits = {f["fold"]: f for f in res["fits"] if f["workload"].startswith("imagenet")}
    checked = 0
    for c in res["case_list"]:
        if not c["workload"].startswith("imagenet"):
            continue
        sco = fits[c["fold"]]["scoring_runs"]

        def tta(pair):
            b, pl = pair
            return power[(b, pl)][0] * statistics.fmean(runs[b][r] for r in sco[str(b)])

        assert c["slowdown"] == pytest.approx(tta(c["selected"]) / tta(c["oracle"]), rel=1e-12)
        checked += 1
    assert checked > 50


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
