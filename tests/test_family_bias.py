"""The calibration's bias per kind family (fitting.pipeline.family_biases): each family's departure from the nets'
median read by a ridge regression on their shares of it, only for families that make up enough of enough nets;
folded into each entry's offset (whole_model.kind_log_bias, Estimator.log_bias_of), read back by every reader, and
refused when hostile."""

import json
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thor_sdk.errors import FormatError
from thor_sdk.fitting.pipeline import (FAMILY_MIN_SHARE, FAMILY_RIDGE, MIN_FAMILY_PAIRS, calibrate, family_biases,
                                       family_shares)


def _points(conv_ln=-0.2, dense_ln=0.1, noise=(0.0,)):
    """(ln ratio, family shares, model): MLPs, conv nets with a dense head, and conv nets."""
    shares = [{"dense": 1.0}, {"dense": 0.9}, {"conv": 0.5, "dense": 0.5}, {"conv": 0.6, "dense": 0.3},
              {"conv": 0.9}, {"conv": 1.0}]
    return [(conv_ln * sh.get("conv", 0.0) + dense_ln * sh.get("dense", 0.0) + noise[i % len(noise)], sh, f"m{i % 3}")
            for i, sh in enumerate(shares)]


def test_each_family_departs_from_the_median_by_the_ridge_regression_of_its_shares():
    import numpy as np

    pts = _points()
    center = statistics.median(p[0] for p in pts)
    got = family_biases(pts, center, 0.5 * center)
    A = np.array([[p[1].get("conv", 0.0), p[1].get("dense", 0.0)] for p in pts])
    d = np.linalg.solve(A.T @ A + FAMILY_RIDGE * np.eye(2), A.T @ (np.array([p[0] for p in pts]) - center))
    assert got["biases"] == pytest.approx({"conv": 0.5 * center + d[0], "dense": 0.5 * center + d[1]})
    assert got["pairs"] == 6 and got["read"] == {"conv": 4, "dense": 4}
    # the ridge keeps the order and pulls toward the common bias, never past the nets' own reading
    assert -0.2 < got["biases"]["conv"] < 0.5 * center < got["biases"]["dense"] < 0.1


def test_a_stronger_family_reading_gives_a_stronger_bias_and_noise_is_damped():
    weak, strong = family_biases(_points(-0.1), -0.0, 0.0), family_biases(_points(-0.4), -0.0, 0.0)
    assert strong["biases"]["conv"] < weak["biases"]["conv"] < 0
    noisy = family_biases(_points(0.0, 0.0, noise=(0.05, -0.05, 0.03)), 0.0, 0.0)
    assert all(abs(b) < 0.05 for b in noisy["biases"].values())


@pytest.mark.parametrize("points", [
    [(0.1, {"dense": 1.0}, "a"), (0.1, {"dense": 1.0}, "b"), (-0.2, {"conv": 0.9}, "c")],  # conv in one pair
    [(0.1, {"dense": 1.0}, "a"), (0.1, {"dense": 1.0}, "b"), (-0.2, {"conv": 0.2, "dense": 0.8}, "c"),
     (-0.2, {"conv": 0.2, "dense": 0.8}, "d")],  # conv under FAMILY_MIN_SHARE everywhere
    [(0.1, {}, "a"), (0.0, {}, "b"), (-0.1, {}, "c")]])  # no family at all
def test_without_two_families_each_in_enough_of_enough_nets_there_is_no_family_bias(points):
    assert MIN_FAMILY_PAIRS == 2 and FAMILY_MIN_SHARE == 0.25
    assert family_biases(points, 0.0, 0.0) is None


def test_a_family_read_where_one_is_not_leaves_the_unread_one_at_the_common_bias():
    pts = _points() + [(0.3, {"gru": 1.0}, "r")]  # one recurrent pair: unread
    got = family_biases(pts, 0.0, -0.01)
    assert set(got["biases"]) == {"conv", "dense"} and "gru" not in got["read"]


def test_lstms_and_grus_are_read_apart():
    """An LSTM runs fused and a GRU step by step here: a GRU net reading low must not move the LSTMs up."""
    pts = _points() + [(-0.2, {"lstm": 0.45, "conv": 0.5}, "l"), (-0.1, {"lstm": 0.5, "conv": 0.45}, "l"),
                       (0.3, {"gru": 0.99}, "g"), (0.3, {"gru": 0.99}, "g")]
    center = statistics.median(p[0] for p in pts)
    got = family_biases(pts, center, center)
    assert got["read"]["lstm"] == 2 and got["read"]["gru"] == 2
    assert got["biases"]["lstm"] < center < got["biases"]["gru"]
    assert family_shares([{"kind": "lstm", "mean": 1.0}, {"kind": "lstm_cell", "mean": 1.0},
                          {"kind": "gru", "mean": 1.0}, {"kind": "gru_cell", "mean": 1.0}], 4.0) == \
        {"gru": 0.5, "lstm": 0.5}


def test_family_shares_sum_each_familys_layers_over_the_total_by_base_kind():
    rows = [{"kind": "conv2d", "mean": 2.0}, {"kind": "conv2d:grouped", "mean": 1.0}, {"kind": "linear", "mean": 1.0},
            {"kind": "relu", "mean": 1.0}, {"kind": "gru", "mean": 5.0}]
    assert family_shares(rows, 10.0) == {"conv": 0.3, "dense": 0.1, "gru": 0.5}
    assert family_shares(rows, 0.0) == {}


class _Est:
    """Estimates every net at 1.0, a share of it in convolutions as its layers say, the rest in linear layers."""

    def estimate(self, layers, batch_size):
        conv = layers[0]["conv"]
        return {"layers_total": {"mean": 1.0},
                "layers": [{"kind": "conv2d", "mean": conv}, {"kind": "linear", "mean": 1.0 - conv}]}


def _runs(share_and_ratio):
    return [{"model": f"calibration:m{i % 4}", "metric": "time", "mean": ratio, "batch_size": 8 + i,
             "detail": {"layers": [{"kind": "conv2d", "conv": share}]}} for i, (share, ratio) in enumerate(share_and_ratio)]


def test_calibrate_reads_each_nets_family_shares_off_its_estimate_and_can_be_told_not_to():
    data = [(0.0, 1.02), (0.0, 1.01), (0.1, 1.0), (0.05, 1.03), (0.6, 0.85), (0.65, 0.84), (0.7, 0.82), (0.55, 0.86)]
    cal = calibrate(_Est(), _runs(data), "time", 0.0)
    assert [r["family_shares"].get("conv", 0.0) for r in cal["runs"]] == [s for s, _ in data]
    fam = cal["family"]["biases"]
    assert fam["conv"] < cal["log_bias"] < fam["dense"] and "by kind family" in cal["source"]
    common = calibrate(_Est(), _runs(data), "time", 0.0, family=False)
    assert common["family"] is None and "by kind family" not in common["source"]
    assert common["log_bias"] == cal["log_bias"]  # the common bias is still read, for the record
    # nets without convolutions: one family only, no family biases
    assert calibrate(_Est(), _runs([(0.0, r) for _, r in data]), "time", 0.0)["family"] is None


def test_the_estimators_calibration_record_holds_one_entry_per_pair_with_its_runs():
    from thor_sdk.fitting.pipeline import calibration_record

    runs = [{"model": "a", "batch_size": 8, "measured": m, "estimated": 1.0, "family_shares": {"conv": 0.5},
             "device_level": lvl, "log_ratio": math.log(m / lvl)} for m, lvl in ((1.1, 1.0), (1.3, 1.1), (0.9, 0.95))]
    runs.insert(1, {"model": "b", "batch_size": 8, "skipped": "NotFoundError: no gru"})
    runs.append({"model": "b", "batch_size": 8, "skipped": "NotFoundError: no gru"})
    got = calibration_record(runs)
    assert [(e["model"], e["batch_size"]) for e in got] == [("a", 8), ("b", 8)]
    a, b = got
    assert a["measured"] == [1.1, 1.3, 0.9] and a["device_level"] == [1.0, 1.1, 0.95] and a["estimated"] == 1.0
    assert a["log_ratio"] == pytest.approx(statistics.median(r["log_ratio"] for r in runs if "log_ratio" in r))
    assert a["family_shares"] == {"conv": 0.5} and b == {"model": "b", "batch_size": 8, "skipped": "NotFoundError: no gru"}
    assert json.loads(json.dumps(got)) == got


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
    # conv2d and the dense kinds (linear, output) read apart; relu and flatten stay at the common bias
    assert set(wm["kind_log_bias"]) == {"conv2d", "linear", "output"}
    assert wm["kind_log_bias"]["conv2d"] < -0.05 < wm["kind_log_bias"]["linear"] == wm["kind_log_bias"]["output"]
    est = load_estimator(json.loads(json.dumps(doc)))
    assert est.log_bias_of("conv2d") == wm["kind_log_bias"]["conv2d"] and est.log_bias_of("relu") == wm["log_bias"]
    conv_layer = next(l for l in nets["c8"].layers if l["kind"] == "conv2d")
    lin_layer = next(l for l in nets["m64"].layers if l["kind"] == "linear")
    ratio_conv = est.estimate([conv_layer], 16)["total"]["mean"] / plain.estimate([conv_layer], 16)["total"]["mean"]
    ratio_lin = est.estimate([lin_layer], 16)["total"]["mean"] / plain.estimate([lin_layer], 16)["total"]["mean"]
    assert ratio_conv == pytest.approx(math.exp(wm["kind_log_bias"]["conv2d"]), rel=1e-3)
    assert ratio_lin == pytest.approx(math.exp(wm["kind_log_bias"]["linear"]), rel=1e-3)
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
