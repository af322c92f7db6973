"""The calibration's bias per kind family (fitting.pipeline.family_bias): convolutions and the other layers read apart
from whole nets whose share of convolutions differs, the line read where the nets are, each bias shrunk by its own
noise; folded into each entry's offset (whole_model.kind_log_bias, Estimator.log_bias_of), read back by every
reader, and refused when hostile."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thor_sdk.errors import FormatError
from thor_sdk.fitting.pipeline import MIN_FAMILY_PAIRS, calibrate, family_bias


def _points(conv_ln=-0.2, other_ln=0.02, noise=(0.0,)):
    """(ln ratio, conv share, model): nets without convolutions and nets with 55-70% of their estimate in them."""
    shares = [0.0, 0.0, 0.05, 0.1, 0.55, 0.6, 0.65, 0.7]
    return [(other_ln + (conv_ln - other_ln) * s + noise[i % len(noise)], s, f"m{i % 4}")
            for i, s in enumerate(shares)]


def test_a_line_without_noise_gives_each_family_its_own_bias_where_the_nets_are():
    got = family_bias(_points())
    assert got["other"] == pytest.approx(0.02) and got["other_se"] == pytest.approx(0.0, abs=1e-9)
    # read at the highest share the nets have (0.7), not extrapolated to 1
    assert got["conv"] == pytest.approx(0.02 + (-0.2 - 0.02) * 0.7) and got["shares"] == [0.0, 0.7]
    assert got["pairs"] == 8


def test_each_bias_is_shrunk_by_its_own_noise():
    noisy = family_bias(_points(conv_ln=-0.2, other_ln=0.0, noise=(0.08, -0.08, 0.05, -0.05)))
    assert noisy["conv_se"] > 0 and noisy["other_se"] > 0
    assert -0.2 * 0.7 < noisy["conv"] < 0  # toward 0, not past it
    assert abs(noisy["other"]) < 0.08


@pytest.mark.parametrize("points", [
    [(0.0, 0.0, "a"), (0.0, 0.1, "b"), (-0.2, 0.6, "c"), (-0.2, 0.7, "d")],  # too few on each side
    [(0.0, 0.0, "a"), (0.0, 0.1, "a"), (0.0, 0.2, "a"), (-0.2, 0.6, "c"), (-0.2, 0.7, "d"), (-0.2, 0.8, "c")],
    [(0.0, 0.6, "a"), (0.0, 0.7, "b"), (0.0, 0.8, "a"), (-0.2, 0.6, "c"), (-0.2, 0.7, "d"), (-0.2, 0.8, "c")]])
def test_without_nets_on_both_sides_of_half_from_two_models_each_there_is_no_family_bias(points):
    assert MIN_FAMILY_PAIRS == 3 and family_bias(points) is None


class _Est:
    """Estimates every net at 1.0, a share of it in convolutions as its layers say."""

    def estimate(self, layers, batch_size):
        conv = layers[0]["conv"]
        return {"layers_total": {"mean": 1.0},
                "layers": [{"kind": "conv2d", "mean": conv}, {"kind": "linear", "mean": 1.0 - conv}]}


def _runs(share_and_ratio):
    return [{"model": f"calibration:m{i % 4}", "metric": "time", "mean": ratio, "batch_size": 8 + i,
             "detail": {"layers": [{"kind": "conv2d", "conv": share}]}} for i, (share, ratio) in enumerate(share_and_ratio)]


def test_calibrate_reads_each_nets_conv_share_off_its_estimate_and_can_be_told_not_to():
    data = [(0.0, 1.02), (0.0, 1.01), (0.1, 1.0), (0.05, 1.03), (0.6, 0.85), (0.65, 0.84), (0.7, 0.82), (0.55, 0.86)]
    cal = calibrate(_Est(), _runs(data), "time", 0.0)
    assert [r["conv_share"] for r in cal["runs"]] == [s for s, _ in data]
    fam = cal["family"]
    assert fam["conv"] < -0.1 < 0 < fam["other"] + 0.01 and "by kind family" in cal["source"]
    common = calibrate(_Est(), _runs(data), "time", 0.0, family=False)
    assert common["family"] is None and "by kind family" not in common["source"]
    assert common["log_bias"] == cal["log_bias"]  # the common bias is still read, for the record
    # an estimator whose estimates carry no layers (or whose nets have no convolutions): no family
    assert calibrate(_Est(), _runs([(0.0, r) for _, r in data]), "time", 0.0)["family"] is None


def test_fit_folds_each_familys_bias_into_its_entries_and_the_runtime_reads_it_back():
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.layers import layers_of
    from thor_sdk.probes import Probe
    from thor_sdk.runtime import load_estimator

    torch = pytest.importorskip("torch")
    nn = torch.nn

    def conv_net(ch):
        return nn.Sequential(nn.Conv2d(3, ch, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(ch * 64, 10))

    def mlp(h):
        return nn.Sequential(nn.Flatten(), nn.Linear(192, h), nn.ReLU(), nn.Linear(h, 10))

    nets = {f"c{ch}": layers_of(conv_net(ch), input_shape=[3, 8, 8]) for ch in (4, 8, 16)}
    nets.update({f"m{h}": layers_of(mlp(h), input_shape=[3, 8, 8]) for h in (32, 64, 128)})
    law = {"conv2d": 4e-4, "relu": 5e-5, "linear": 1e-4, "output": 8e-5, "flatten": 1e-6}
    samples, seen = [], set()
    for ml in nets.values():
        for layer in ml.layers:
            for b in (4, 8, 16, 32):
                p = Probe(layer["kind"], layer["config"], b, layer["role"])
                if p.id in seen:
                    continue
                seen.add(p.id)
                samples.append({"probe_id": p.id, "kind": p.kind, "role": p.role, "batch_size": b, "config": p.config,
                                "metric": "time", "value": law[p.kind] * (1 + b / 16), "std": 1e-7, "n": 5,
                                "flagged": False, "flag_reason": None, "parts": {}})
    kw = dict(device={"name": "synthetic", "kind": "host"}, runtime="torch", metric="time")
    plain = load_estimator(build(samples, **kw))
    runs = []
    for name, ml in nets.items():  # whole nets: the convolutional ones run 20% under their layers' sum
        for b in (8, 16, 32):
            est = plain.estimate(ml.layers, b)["total"]["mean"]
            for rep in range(2):
                runs.append({"model": f"calibration:{name}", "metric": "time", "batch_size": b, "created_utc": None,
                             "mean": est * (0.8 if name.startswith("c") else 1.0) * (1 + 0.002 * rep),
                             "detail": {"layers": ml.layers}})
    doc = build(samples, model_runs=runs, **kw)
    wm = doc["whole_model"]
    assert set(wm["kind_log_bias"]) == {"conv2d"} and wm["kind_log_bias"]["conv2d"] < -0.05
    est = load_estimator(json.loads(json.dumps(doc)))
    assert est.log_bias_of("conv2d") == wm["kind_log_bias"]["conv2d"] and est.log_bias_of("linear") == wm["log_bias"]
    conv_layer = next(l for l in nets["c8"].layers if l["kind"] == "conv2d")
    lin_layer = next(l for l in nets["m64"].layers if l["kind"] == "linear")
    ratio_conv = est.estimate([conv_layer], 16)["total"]["mean"] / plain.estimate([conv_layer], 16)["total"]["mean"]
    ratio_lin = est.estimate([lin_layer], 16)["total"]["mean"] / plain.estimate([lin_layer], 16)["total"]["mean"]
    assert ratio_conv == pytest.approx(math.exp(wm["kind_log_bias"]["conv2d"]), rel=1e-3)
    assert ratio_lin == pytest.approx(math.exp(wm["log_bias"]), rel=1e-3)
    common = build(samples, model_runs=runs, family=False, **kw)["whole_model"]
    assert "kind_log_bias" not in common


@settings(max_examples=60, deadline=None)
@given(value=st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.integers(-10, 10),
                       st.floats(allow_nan=True, allow_infinity=True), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=6), st.one_of(st.floats(allow_nan=True), st.text(max_size=3),
                                                                      st.booleans()), max_size=3)))
def test_a_hostile_kind_log_bias_is_refused_or_read_as_numbers_within_5(value):
    import os

    from thor_sdk.runtime import load_estimator

    with open(os.path.join(os.path.dirname(__file__), "vectors", "estimator_level.json"), encoding="utf-8") as f:
        doc = json.load(f)  # a small valid estimator (the shared vectors')
    doc["whole_model"]["kind_log_bias"] = value
    try:
        est = load_estimator(doc)
    except FormatError:
        return
    assert all(isinstance(v, float) and math.isfinite(v) and abs(v) <= 5 for v in est.whole_model_kind_log_bias.values())
