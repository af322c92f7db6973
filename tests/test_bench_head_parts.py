"""bench/bench_head_parts.py: refuses missing files before any work; reads a campaign's head parts (not its output
probes, not its swept ones) and scores an estimator's output kind on them, with and without its whole-model bias."""

import json
import math

import pytest
from bench_module import load_bench

from thor_sdk.probes import Probe
from thor_sdk.store import Campaign

META = {"metric": "time", "protocol": {}, "device": {"name": "synthetic", "kind": "host"}, "runtime": "torch"}


def _campaign(path):
    c = Campaign.create(str(path), META)
    for ch in (2, 4, 8, 16):
        for b in (4, 16):
            p = Probe("conv2d", dict(in_channels=2, out_channels=ch, kernel=3, stride=1, padding=1, groups=1, height=5,
                                     width=5, bias=1), b, "hidden")
            head = 1e-4 + 2e-9 * ch * 25 * b
            c.plan(p)
            c.complete(p.id, [{"metric": "time", "value": 3e-4, "std": 1e-6, "n": 5, "flagged": False,
                               "flag_reason": None,
                               "parts": {"head": {"median": head, "std": 1e-6, "n": 5},
                                         "hidden": {"median": head + 3e-4, "std": 1e-6, "n": 5}}}])
    swept = Probe("relu", {"numel": 50}, 4, "input")  # swept: its head part is not an output probe
    out = Probe("output", {"in_features": 50, "out_features": 10, "tokens": 1}, 4, "output")  # its own sample
    for p in (swept, out):
        c.plan(p)
        c.complete(p.id, [{"metric": "time", "value": 1e-4, "std": 1e-6, "n": 5, "flagged": False, "flag_reason": None,
                           "parts": {"head": {"median": 9.0, "std": 0.0, "n": 5}}}])
    c.close()
    return str(path)


@pytest.mark.parametrize("bad", [["--campaign", "nope.db", "--estimator", "nope.json"], ["--estimator", "x.json"]])
def test_missing_files_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        load_bench("bench_head_parts").main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code not in (0, None)
    assert not (tmp_path / "r.md").exists()


def test_the_heads_are_the_layer_probes_and_an_estimator_is_scored_on_them(tmp_path):
    from thor_sdk.api import fit

    bench = load_bench("bench_head_parts")
    db = _campaign(tmp_path / "c.db")
    rows = bench.heads(db)
    assert len(rows) == 8 and all(r["value"] < 1.0 for r in rows)  # neither the swept head nor the output probe
    assert sorted({r["in_features"] for r in rows}) == [50, 100, 200, 400]
    est = tmp_path / "e.json"
    fit(db, out=str(est))
    assert json.loads(est.read_text())["provenance"]["head_part_samples"] == 8
    report = tmp_path / "r.md"
    bench.main(["--campaign", db, "--estimator", str(est), "--unbiased", "--report", str(report)])
    doc = json.loads((tmp_path / "r.json").read_text())
    (s,) = doc["estimators"]
    assert s["all"]["n"] == 8 and s["head_part_samples"] == 8 and s["output_samples"] == 9  # 8 heads + its own probe
    assert math.isclose(s["all"]["median_ratio"], 1.0, rel_tol=0.2) and list(s["bands"]) == ["1-512"]
    assert f"| {s['all']['median_ratio']:.2f} |" in report.read_text()
