"""bench/bench_rescore.py: an evaluation's measured nets estimated again by other estimators, nothing measured.
Two estimators fitted on synthetic samples of har's layers, one at twice the other's costs, against
'measurements' equal to the first one's estimates: the first scores 0%, the second 100%."""

import json
import os

import pytest
from bench_module import load_bench
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thor_sdk.baselines.flops import layer_train_flops


def _estimator(scale):
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.layers import layers_of

    samples = []
    for layer in layers_of("har").layers:
        for b in (4, 16, 32):
            value = scale * (2e-10 * layer_train_flops(layer, b) + 3e-5)
            samples.append({"kind": layer["kind"], "config": layer["config"], "batch_size": b, "role": layer["role"],
                            "value": value, "std": 0.01 * value, "metric": "time", "n": 5, "flagged": False,
                            "flag_reason": None})
    return build(samples, device={"name": "synthetic"}, runtime="torch", metric="time")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from thor_sdk.api import estimate_layers
    from thor_sdk.fitting.estimator import write_estimator
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator

    d = tmp_path_factory.mktemp("rescore")
    paths = {}
    for name, scale in (("one", 1.0), ("two", 2.0)):
        paths[name] = str(d / f"{name}.json")
        write_estimator(_estimator(scale), paths[name])
    truth = estimate_layers(load_estimator(paths["one"]), layers_of("har"), 16)["total"]["mean"]
    results = {"format": "thor-sdk/evaluation", "version": 1, "metric": "time", "runtime": "torch",
               "rows": [{"model": "har", "group": "reference", "batch_size": 16, "measured": truth,
                         "device_level": 0.5}]}
    paths["results"] = str(d / "results.json")
    with open(paths["results"], "w") as f:
        json.dump(results, f)
    return paths, results


def test_each_estimator_scores_on_the_same_measurements(setup):
    from thor_sdk.runtime import load_estimator

    paths, results = setup
    bench = load_bench("bench_rescore")
    one = bench.rescore(results, load_estimator(paths["one"]))
    two = bench.rescore(results, load_estimator(paths["two"]))
    assert set(one["groups"]) == {"reference", "all"} and one["skipped"] == []
    assert one["groups"]["all"]["thor_mape"] == pytest.approx(0.0, abs=1e-6)
    assert one["groups"]["all"]["coverage95"] == 1.0
    assert one["groups"]["all"]["thor_level_adjusted_mape"] == pytest.approx(50.0, abs=1e-4)  # x 0.5
    assert 85.0 < two["groups"]["all"]["thor_mape"] < 115.0  # twice the costs: about 100% off
    assert one["rows"][0]["flops"] > 0 and one["groups"]["all"]["flops_mape"] == pytest.approx(
        abs(one["rows"][0]["flops"] / results["rows"][0]["measured"] - 1) * 100)


def test_main_writes_a_report_with_a_row_per_results_estimator_and_group(setup, tmp_path):
    paths, _ = setup
    out = tmp_path / "r.md"
    load_bench("bench_rescore").main(["--results", paths["results"], "--estimator", paths["one"],
                                      "--estimator", paths["two"], "--report", str(out)])
    text = out.read_text()
    assert text.count("| reference |") == 2 and text.count("| all |") == 2
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [t["estimator"] for t in doc["table"]] == [paths["one"], paths["two"]]


@pytest.mark.parametrize("bad_rows", [[], [{"model": "har", "batch_size": 16, "measured": -1.0}],
                                      [{"model": "har", "batch_size": 0, "measured": 1.0}],
                                      [{"model": "har", "batch_size": 16, "measured": float("nan")}],
                                      [{"model": "har", "batch_size": True, "measured": 1.0}]])
def test_a_bad_results_file_stops_before_any_estimate_or_write(setup, tmp_path, bad_rows):
    paths, results = setup
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(results, rows=bad_rows)))
    with pytest.raises(SystemExit) as e:
        load_bench("bench_rescore").main(["--results", str(bad), "--estimator", paths["one"],
                                          "--report", str(tmp_path / "r.md")])
    assert str(e.value).startswith("Error:")
    assert sorted(os.listdir(tmp_path)) == ["bad.json"]


def test_a_results_file_of_another_metric_is_refused(setup):
    from thor_sdk.errors import UsageError
    from thor_sdk.runtime import load_estimator

    paths, results = setup
    with pytest.raises(UsageError):
        load_bench("bench_rescore").rescore(dict(results, metric="energy"), load_estimator(paths["one"]))


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=12)
_row = st.fixed_dictionaries({"model": st.one_of(st.text(max_size=6), _json),
                              "batch_size": st.one_of(st.integers(-2, 2000), _json),
                              "measured": st.one_of(st.floats(), _json)},
                             optional={"device_level": st.one_of(st.floats(), _json)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(_json, st.fixed_dictionaries({"format": st.just("thor-sdk/evaluation"), "version": st.just(1),
                                                   "rows": st.one_of(_json, st.lists(_row, max_size=3))}),
                    # a bench_finetune / bench_user_nets report: rows naming a net, its patterns, the path it came from
                    st.fixed_dictionaries({"estimator_key": st.one_of(st.text(max_size=12), _json),
                                           "rows": st.lists(st.one_of(_json, st.fixed_dictionaries(
                                               {"model": st.one_of(st.text(max_size=12), _json),
                                                "net": st.one_of(st.text(max_size=6), _json),
                                                "batch_size": st.one_of(st.integers(-2, 2000), _json),
                                                "measured": st.one_of(st.floats(), _json)},
                                               optional={"patterns": _json})), max_size=3)})))
def test_fuzz_results_reader_returns_checked_rows_or_a_format_error(tmp_path, doc):
    import math

    from thor_sdk.errors import FormatError

    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    try:
        got = load_bench("bench_rescore").load_results(str(path))
    except FormatError:
        return
    for r in got["rows"]:
        assert isinstance(r["model"], str) and 1 <= r["batch_size"] <= 1024
        assert math.isfinite(r["measured"]) and r["measured"] > 0


def test_a_model_that_is_not_a_known_net_name_is_skipped_never_imported(setup, tmp_path):
    from thor_sdk.runtime import load_estimator

    paths, results = setup
    planted = tmp_path / "evil.py"
    planted.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    doc = dict(results, rows=results["rows"] + [{"model": f"{planted}:Net", "group": 3, "batch_size": 16,
                                                 "measured": 1.0}])
    got = load_bench("bench_rescore").rescore(doc, load_estimator(paths["one"]))
    assert [s["model"] for s in got["skipped"]] == [f"{planted}:Net"] and not (tmp_path / "ran").exists()
    assert got["groups"]["all"]["n"] == 1


def test_pool_scores_against_each_nets_median_over_runs(setup, tmp_path):
    """Two runs that read har at 0.6x and 1.4x of the truth pool to the truth (the median of two is their mean):
    the estimator that equals the truth scores 0% pooled, 67% and 29% on the runs alone. A net measured in one run
    only is left out, with the reason; runs of different runtimes are refused, as is a single run."""
    from thor_sdk.errors import UsageError
    from thor_sdk.runtime import load_estimator

    paths, results = setup
    bench = load_bench("bench_rescore")
    truth = results["rows"][0]["measured"]
    files = []
    for i, f in enumerate((0.6, 1.4)):
        doc = dict(results, rows=[dict(results["rows"][0], measured=f * truth)]
                   + ([{"model": "lenet5", "group": "reference", "batch_size": 16, "measured": 1e-3}] if i else []))
        files.append((f"run{i}", doc))
    pooled = bench.pool_results(files)
    assert [(r["model"], r["runs"]) for r in pooled["rows"]] == [("har", 2)]
    assert pooled["rows"][0]["measured"] == pytest.approx(truth)
    assert [s["model"] for s in pooled["pool_skipped"]] == ["lenet5"]
    est = load_estimator(paths["one"])
    assert bench.rescore(pooled, est)["groups"]["all"]["thor_mape"] == pytest.approx(0.0, abs=1e-6)
    assert bench.rescore(files[0][1], est)["groups"]["all"]["thor_mape"] == pytest.approx(100 / 0.6 - 100, rel=1e-6)
    with pytest.raises(UsageError, match="runtime"):
        bench.pool_results([files[0], ("x", dict(files[1][1], runtime="onnxruntime"))])
    with pytest.raises(UsageError, match="at least two"):
        bench.pool_results(files[:1])

    out = tmp_path / "p.md"
    for i, (_, doc) in enumerate(files):
        (tmp_path / f"r{i}.json").write_text(json.dumps(doc))
    bench.main(["--pool", "--results", str(tmp_path / "r0.json"), "--results", str(tmp_path / "r1.json"),
                "--estimator", paths["one"], "--report", str(out)])
    text = out.read_text()
    assert "median of 2 runs" in text and "lenet5 b16: measured in 1 of the 2 runs" in text


def test_truth_canary_scores_against_each_rows_canary_level_and_skips_rows_without_one(setup):
    from thor_sdk.runtime import load_estimator

    paths, results = setup
    bench = load_bench("bench_rescore")
    row = results["rows"][0]
    doc = dict(results, rows=[dict(row, measured=2 * row["measured"], canary={"measured": row["measured"]}),
                              dict(row, batch_size=32)])
    est = load_estimator(paths["one"])
    got = bench.rescore(doc, est, truth="canary")
    assert got["groups"]["all"]["n"] == 1 and got["groups"]["all"]["thor_mape"] == pytest.approx(0.0, abs=1e-6)
    assert got["rows"][0]["thor_level_adjusted_ape"] is None  # a canary truth is at the profile's level already
    assert [s["batch_size"] for s in got["skipped"]] == [32]
    assert bench.rescore(doc, est)["rows"][0]["thor_ape"] == pytest.approx(50.0, abs=1e-6)  # as measured: 2x
    pooled = bench.pool_results([("a", doc), ("b", doc)])
    assert pooled["rows"][0]["canary"]["measured"] == pytest.approx(row["measured"])
    assert "canary" not in pooled["rows"][1]


def test_a_rows_canary_must_hold_a_positive_value(setup, tmp_path):
    from thor_sdk.errors import FormatError

    paths, results = setup
    bad = dict(results, rows=[dict(results["rows"][0], canary={"measured": -1.0})])
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(FormatError):
        load_bench("bench_rescore").load_results(str(p))


def test_a_bench_finetune_report_is_rescored_as_its_fine_tunes(setup, tmp_path):
    """A ``bench_finetune.py`` JSON: each row's net rebuilt by name with its ``--trainable`` patterns (the frozen
    layers as the fine-tune has them), whole-trained rows apart; its ONNX row, a file, is skipped."""
    from thor_sdk.api import estimate_layers
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator

    paths, _ = setup
    est = load_estimator(paths["one"])
    tuned = estimate_layers(est, layers_of("har", trainable=["6"]), 16)["total"]["mean"]
    whole = estimate_layers(est, layers_of("har"), 16)["total"]["mean"]
    assert tuned < whole  # its frozen layers' backward and updates are not paid
    report = {"estimator_key": "host / torch, time", "rows": [
        {"model": "har [trainable 6]", "net": "har", "patterns": ["6"], "batch_size": 16, "measured": tuned},
        {"model": "har", "net": "har", "patterns": None, "batch_size": 16, "measured": 2 * whole},
        {"model": "/tmp/x/har.onnx [trainable fc]", "net": "/tmp/x/har.onnx", "patterns": ["fc"], "batch_size": 16,
         "measured": 1.0}]}
    path = tmp_path / "finetune.json"
    path.write_text(json.dumps(report))
    bench = load_bench("bench_rescore")
    doc = bench.load_results(str(path))
    assert doc["runtime"] == "torch" and doc["metric"] == "time"
    got = bench.rescore(doc, est)
    tuned_row = got["groups"]["fine-tune"]
    assert tuned_row["n"] == 1 and tuned_row["thor_mape"] == pytest.approx(0, abs=1e-6)
    assert got["groups"]["trained whole"]["thor_mape"] == pytest.approx(50.0)
    assert [s["model"] for s in got["skipped"]] == ["/tmp/x/har.onnx [trainable fc]"]
    with pytest.raises(Exception, match="energy"):
        bench.rescore(dict(doc, metric="energy"), est)


def test_a_bench_user_nets_report_is_rebuilt_from_this_repos_file_never_from_the_path_it_names(setup, tmp_path):
    """A ``bench_user_nets.py`` JSON names its nets by the path it imported them from: only the name is read, and
    the net is rebuilt from this repository's ``bench/user_nets.py`` (a planted file at that path never runs); a
    name that file does not list is skipped."""
    from thor_sdk.runtime import load_estimator

    paths, _ = setup
    planted = tmp_path / "user_nets.py"
    planted.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    report = {"estimator_key": "host / torch, time", "rows": [
        {"model": f"{planted}:PReLUMLP", "net": "PReLUMLP", "batch_size": 8, "measured": 1e-3},
        {"model": f"{planted}:Evil", "net": "Evil", "batch_size": 8, "measured": 1e-3}]}
    path = tmp_path / "user-nets.json"
    path.write_text(json.dumps(report))
    bench = load_bench("bench_rescore")
    got = bench.rescore(bench.load_results(str(path)), load_estimator(paths["one"]))
    assert got["groups"]["all"]["n"] == 1 and got["rows"][0]["model"] == "user_nets.py:PReLUMLP"
    assert [s["model"] for s in got["skipped"]] == ["user_nets.py:Evil"] and not (tmp_path / "ran").exists()
