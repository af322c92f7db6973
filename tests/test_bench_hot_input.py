"""bench/bench_hot_input.py: it times each forward-only layer hot and cold, interleaved, and reports the ratio."""

import json

import pytest
from bench_module import load_bench

pytest.importorskip("torch")


def test_the_report_has_each_layer_hot_and_cold(tmp_path):
    bench = load_bench("bench_hot_input")
    report = tmp_path / "hot.md"
    bench.main(["--repeats", "3", "--batch-size", "2", "--report", str(report)])
    text = report.read_text()
    doc = json.loads((tmp_path / "hot.json").read_text())
    assert [r["case"] for r in doc["rows"]] == list(bench.cases())
    for r in doc["rows"]:
        assert r["hot_s"] > 0 and r["cold_s"] > 0 and len(r["ratios"]) == 3
        assert f"| {r['case']} |" in text
    assert "Command: `python bench/bench_hot_input.py --repeats 3" in text
