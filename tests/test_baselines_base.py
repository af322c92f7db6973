"""The shared baseline interface: every baseline fits, estimates in one result shape, says what it assumed;
the FLOPs adapter answers exactly what flops_estimate does."""

import pytest

from thor_sdk.baselines import Baseline, FlopsBaseline, NotFittedError, PreBaseline, StepBaseline, TdpBaseline
from thor_sdk.baselines.flops import fit_unit_per_flop, flops_estimate, layer_train_flops
from thor_sdk.errors import UsageError

KEYS = {"baseline", "metric", "value", "unit", "per", "measured", "assumptions"}


def _layers(w):
    return [{"kind": "linear", "role": "input", "config": {"in_features": 32, "out_features": w, "tokens": 1, "bias": 1}},
            {"kind": "relu", "role": "hidden", "config": {"numel": w}},
            {"kind": "output", "role": "output", "config": {"in_features": w, "out_features": 10, "tokens": 1}}]


def _samples():
    out = []
    for w in (16, 64, 256):
        for b in (1, 8, 32):
            for layer in _layers(w):
                s = dict(layer, batch_size=b, metric="time", std=0.0)
                s["value"] = 1e-9 * layer_train_flops(s, b) + 1e-5
                out.append(s)
    return out


def test_flops_adapter_matches_flops_estimate():
    samples = _samples()
    fb = fit_unit_per_flop(samples)
    b = FlopsBaseline().fit(samples)
    r = b.estimate(_layers(128), 16)
    assert r["value"] == flops_estimate(_layers(128), 16, fb)["total"]
    assert set(r) >= KEYS and r["per"] == "step" and r["measured"] is False
    est_doc = {"metric": "time", "flops_baseline": fb}
    assert FlopsBaseline.from_estimator(est_doc).estimate(_layers(128), 16)["value"] == r["value"]
    assert FlopsBaseline.from_estimator({"metric": "time"}).is_fitted() is False


def test_every_baseline_shares_the_interface():
    runs = [{"model": f"m{w}", "batch_size": b, "input_size": 32, "train_flops": 3.0 * w * b * 1000, "params": 40 * w,
             "n_layers": 3, "kinds": {"linear": 1, "relu": 1, "output": 1}, "time_s": 1e-6 * w * b}
            for w in (16, 32, 64, 128) for b in (4, 8)]
    fitted = [FlopsBaseline().fit(_samples()), TdpBaseline(tdp_w=10.0).fit([(_layers(64), 8, 1e-3)]),
              StepBaseline().fit([{"epoch": e, "time_s": 1.0} for e in range(1, 6)]), PreBaseline("ridge").fit(runs)]
    for b in fitted:
        assert isinstance(b, Baseline) and b.is_fitted()
        assert isinstance(b.assumptions, str) and len(b.assumptions) > 20
        r = b.estimate(_layers(64), 8)
        assert set(r) >= KEYS and r["baseline"] == b.name and r["value"] > 0 and r["measured"] is False
    for cls, kw in ((FlopsBaseline, {}), (TdpBaseline, {"tdp_w": 5.0}), (StepBaseline, {}), (PreBaseline, {})):
        with pytest.raises(NotFittedError):
            cls(**kw).estimate(_layers(64), 8)
    with pytest.raises(UsageError):
        FlopsBaseline(metric="power")
    with pytest.raises(UsageError):
        FlopsBaseline().fit(_samples()).estimate([{"kind": "linear"}], 8)


def test_flops_adapter_from_an_estimator_matches_thor_estimate():
    import pathlib

    import thor_sdk
    from thor_sdk.runtime import load_estimator

    vec = pathlib.Path(__file__).parent / "vectors"
    est_path, layers_path = str(vec / "estimator_energy_floored.json"), str(vec / "layers_energy_floored_0.json")
    b = FlopsBaseline.from_estimator(load_estimator(est_path))
    r = b.estimate(layers_path, 16)
    assert b.metric == "energy" and r["unit"] == "J"
    assert r["value"] == thor_sdk.estimate(est_path, layers_path, batch_size=16)["flops_baseline"]["total"] > 0
