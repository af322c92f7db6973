"""bench/bench_kind_bias.py: per-kind log factors from a campaign's calibration runs, added to each kind's
residual offset. Synthetic: a relu-and-linear campaign whose calibration runs read relu's share 1.5x."""

import math

import pytest
from bench_module import load_bench

from thor_sdk.probes import Probe
from thor_sdk.store import Campaign


def _campaign(path, calibrate):
    from thor_sdk.fitting.pipeline import CALIBRATION_PREFIX, build
    from thor_sdk.runtime import load_estimator

    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    samples = []
    for i in range(24):
        for kind, config, value in (("relu", {"numel": 512 * (i + 1)}, 1e-5 * (1 + i)),
                                    ("linear", {"in_features": 8 * (i + 1), "out_features": 16, "tokens": 1,
                                                "bias": 1}, 2e-5 * (1 + i))):
            p = Probe(kind, config, 4, "hidden")
            c.plan(p)
            s = {"metric": "time", "value": value, "std": 0.01 * value, "n": 5, "flagged": False,
                 "flag_reason": None, "parts": {}}
            c.complete(p.id, [s])
            samples.append(dict(s, kind=kind, config=config, batch_size=4, role="hidden"))
    doc = build(samples, device={"name": "synthetic"}, runtime="torch", metric="time")
    est = load_estimator(doc)
    if calibrate:  # nets of both kinds in various mixes: relu's part measured 1.5x its estimate
        for j in range(6):
            layers = [{"name": "a", "kind": "relu", "role": "hidden", "config": {"numel": 512 * (4 * j + 2)}},
                      {"name": "b", "kind": "linear", "role": "hidden",
                       "config": {"in_features": 8 * (23 - 3 * j), "out_features": 16, "tokens": 1, "bias": 1}}]
            e = est.estimate(layers, 4)["layers"]
            c.add_model_run(f"{CALIBRATION_PREFIX}net{j}", 4, "time", 1.5 * e[0]["mean"] + e[1]["mean"], 0.0, 5,
                            "torch", detail={"layers": layers})
    c.close()
    return doc


@pytest.mark.parametrize("calibrate", [True, False])
def test_factors_follow_the_calibration_runs_and_land_in_the_offsets(tmp_path, calibrate):
    bench = load_bench("bench_kind_bias")
    path = str(tmp_path / "c.db")
    doc = _campaign(path, calibrate)
    factors, pairs = bench.kind_factors(doc, path, ridge=0.01)
    if not calibrate:
        assert (factors, pairs) == ({}, 0)
        return
    assert pairs == 6
    assert factors["relu"] - factors["linear"] > math.log(1.5) * 0.5  # relu read high relative to linear
    out = bench.with_factors(doc, factors)
    for k, v in factors.items():
        assert out["kinds"][k]["residual_offset"] == pytest.approx(doc["kinds"][k]["residual_offset"] + v)
    assert out is not doc and doc["kinds"]["relu"]["residual_offset"] != out["kinds"]["relu"]["residual_offset"]
