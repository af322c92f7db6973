"""TDP baseline: TDP x utilisation x FLOPs-throughput time, the throughput given or fitted, never a measurement."""

import json

import pytest

from thor_sdk.baselines.base import NotFittedError, train_flops
from thor_sdk.baselines.tdp import CODECARBON_UTILISATION, TdpBaseline, load_tdp_table, lookup_tdp
from thor_sdk.errors import FormatError, NotFoundError, UsageError


def _mlp(width, n=2):
    layers = [{"kind": "linear", "role": "input", "config": {"in_features": 64, "out_features": width, "tokens": 1,
                                                              "bias": 1}}]
    for _ in range(n - 1):
        layers.append({"kind": "linear", "role": "hidden",
                       "config": {"in_features": width, "out_features": width, "tokens": 1, "bias": 1}})
    layers.append({"kind": "output", "role": "output", "config": {"in_features": width, "out_features": 10, "tokens": 1}})
    return layers


def test_table_entries_have_sources_and_lookup():
    doc = load_tdp_table()
    assert len(doc["devices"]) >= 10
    for d in doc["devices"]:
        assert d["tdp_w"] > 0 and d["source"] and d["kind"] in ("cpu", "gpu", "soc")
    assert lookup_tdp("t4")["tdp_w"] == 70
    assert lookup_tdp("NVIDIA-Jetson_AGX  xavier")["tdp_w"] == 30
    with pytest.raises(NotFoundError, match="give tdp_w"):
        lookup_tdp("no such board")


def test_table_must_name_sources(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"format": "thor-sdk/tdp-table", "devices": [{"name": "x", "tdp_w": 5}]}))
    with pytest.raises(FormatError, match="source"):
        load_tdp_table(str(p))
    p.write_text(json.dumps({"format": "thor-sdk/tdp-table", "devices": [{"name": "x", "tdp_w": -5, "source": "s"}]}))
    with pytest.raises(UsageError):
        load_tdp_table(str(p))


def test_energy_is_tdp_times_utilisation_times_time():
    layers = _mlp(128)
    b = TdpBaseline(tdp_w=15.0, flops_per_s=2e9)
    r = b.estimate(layers, 8)
    t = train_flops(layers, 8) / 2e9
    assert r["time_s"] == pytest.approx(t)
    assert r["value"] == pytest.approx(15.0 * CODECARBON_UTILISATION * t)
    assert r["unit"] == "J" and r["measured"] is False and r["assumed_power_w"] == pytest.approx(7.5)
    assert "not a measurement" in r["note"] and "assumption" in r["assumptions"]
    r1 = TdpBaseline(device="jetson nano", utilisation=1.0, flops_per_s=2e9).estimate(layers, 8)
    assert r1["value"] == pytest.approx(10.0 * t) and "Jetson Nano" in r1["tdp_source"]


def test_time_metric_says_energy_needs_a_meter():
    r = TdpBaseline(metric="time", flops_per_s=1e9).estimate(_mlp(64), 4)
    assert r["unit"] == "s" and r["value"] == pytest.approx(train_flops(_mlp(64), 4) / 1e9)
    assert "meter" in r["note"] and "assumed_power_w" not in r
    assert "needs a meter" in TdpBaseline(metric="time", flops_per_s=1e9).assumptions


def test_fit_recovers_throughput_from_runs():
    runs = [(_mlp(w, n), b, train_flops(_mlp(w, n), b) / 3e9) for w in (32, 64, 256) for n in (1, 3) for b in (4, 16)]
    b = TdpBaseline(metric="time").fit(runs)
    assert b.flops_per_s_ == pytest.approx(3e9, rel=1e-9) and b.n_runs_ == len(runs)
    noisy = [(m, bs, t * (1.2 if i % 2 else 0.8)) for i, (m, bs, t) in enumerate(runs)]
    f = TdpBaseline(metric="time").fit([{"model": m, "batch_size": bs, "time_s": t} for m, bs, t in noisy]).flops_per_s_
    assert 2.4e9 < f < 3.8e9
    assert "fitted on 12" in TdpBaseline(metric="time").fit(runs).assumptions
    rows = [{"model": "x", "train_flops": train_flops(m, bs), "time_s": t} for m, bs, t in runs]
    assert TdpBaseline(metric="time").fit(rows).flops_per_s_ == pytest.approx(3e9, rel=1e-9)
    with pytest.raises(UsageError):
        TdpBaseline(metric="time").fit([{"train_flops": float("nan"), "time_s": 1.0}])


def test_table_ships_with_the_package():
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert "baselines/tdp_table.json" in text  # package-data: a wheel without it could not look up a TDP


def test_refusals():
    with pytest.raises(UsageError, match="tdp_w"):
        TdpBaseline(metric="energy", flops_per_s=1e9)
    with pytest.raises(UsageError):
        TdpBaseline(tdp_w=10, utilisation=1.5)
    with pytest.raises(UsageError):
        TdpBaseline(tdp_w=float("nan"))
    with pytest.raises(NotFittedError):
        TdpBaseline(tdp_w=10).estimate(_mlp(32), 4)
    with pytest.raises(UsageError):
        TdpBaseline(tdp_w=10, flops_per_s=1e9).estimate(_mlp(32), 0)
    with pytest.raises(UsageError):
        TdpBaseline(metric="time").fit([(_mlp(32), 4, -1.0)])
    with pytest.raises(UsageError):
        TdpBaseline(metric="time").fit([])
