"""Batch-size ratios on offline proxies: sqrt learning-rate scaling, ratios vs the largest batch, folders."""

import math

import numpy as np
import pytest

from thor_sdk.errors import FormatError, MeasurementError, NotFoundError, UsageError
from thor_sdk.power.data import adapt, load_proxy
from thor_sdk.power.ratios import EfficiencyModel, estimate_ratios, parse_batch_sizes
from thor_sdk.power.table import validate


@pytest.fixture(scope="module")
def digits_ratios():
    return estimate_ratios("mlp", "digits", [16, 32, 128], target_accuracy=0.85, seeds=(0, 1), max_epochs=20)


def test_ratios_document(digits_ratios):
    doc = validate(digits_ratios, "ratios", "ratios")
    by = {e["batch_size"]: e for e in doc["ratios"]}
    assert doc["ratio_model"] == "unimodal"
    assert doc["reference_batch_size"] == 128 and by[128]["ratio"] == 1.0
    assert by[128]["lr"] == pytest.approx(0.1) and by[16]["lr"] == pytest.approx(0.1 * math.sqrt(16 / 128))
    fitted = EfficiencyModel("unimodal").fit({b: e["samples_to_target"] for b, e in by.items()})
    for e in doc["ratios"]:
        assert e["reached"] == 2 and all(s >= doc["eval_every_samples"] for s in e["samples_to_target"])
        assert e["mean_samples"] == pytest.approx(np.mean(e["samples_to_target"]))
        # the ratio is the unimodal fit's, not the raw means' (they differ where the means are not a valley)
        assert e["expected_samples"] == pytest.approx(fitted.expected_[e["batch_size"]])
        assert e["ratio"] == pytest.approx(e["expected_samples"] / by[128]["expected_samples"])
    assert doc["reference_samples_to_target"] == by[128]["expected_samples"]
    # on digits a small batch needs fewer samples than the largest one (more updates per sample)
    assert by[16]["ratio"] < 1.0


def test_mean_ratio_model_is_the_per_batch_mean():
    doc = estimate_ratios("mlp", "digits", [16, 128], target_accuracy=0.85, seeds=(0,), max_epochs=20,
                          ratio_model="mean")
    by = {e["batch_size"]: e for e in validate(doc, "ratios", "ratios")["ratios"]}
    assert doc["ratio_model"] == "mean"
    assert by[16]["ratio"] == pytest.approx(by[16]["mean_samples"] / by[128]["mean_samples"])
    with pytest.raises(UsageError, match="ratio model"):
        estimate_ratios("mlp", "digits", [16], ratio_model="median")


def test_folder_proxy_npy_and_csv(tmp_path):
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 4, size=(3, 10))
    y = rng.integers(0, 3, size=300)
    X = (centers[y] + rng.normal(0, 1, size=(300, 10))).astype(np.float32)
    npy = tmp_path / "npy"
    npy.mkdir()
    np.save(npy / "X.npy", X)
    np.save(npy / "y.npy", y)
    doc = estimate_ratios("mlp", str(npy), [8, 32], target_accuracy=0.9, seeds=(0,), max_epochs=20)
    assert doc["proxy"] == "npy" and {e["batch_size"] for e in doc["ratios"]} == {8, 32}
    csvd = tmp_path / "csv"
    csvd.mkdir()
    np.savetxt(csvd / "data.csv", np.column_stack([X, y]), delimiter=",")
    Xc, yc, info = load_proxy(str(csvd))
    assert Xc.shape == (300, 10) and (yc == y).all() and info["image_side"] is None


def test_bad_proxies(tmp_path):
    with pytest.raises(NotFoundError):
        load_proxy(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFoundError):
        load_proxy(str(tmp_path / "empty"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "data.csv").write_text("1,2,x\n")
    with pytest.raises(FormatError):
        load_proxy(str(bad))
    with pytest.raises(UsageError):
        parse_batch_sizes("8,0")
    with pytest.raises(MeasurementError, match="did not reach"):
        estimate_ratios("mlp", "digits", [64], target_accuracy=1.0, seeds=(0,), max_epochs=1)


def test_reference_nets_take_upsampled_digits():
    X, y, info = load_proxy("digits")
    assert tuple(adapt(X[:4], "lenet5", info).shape) == (4, 1, 28, 28)
    x = adapt(X[:4], "cnn5", info)
    assert tuple(x.shape) == (4, 3, 32, 32) and (x[:, 0] == x[:, 2]).all()
    assert tuple(adapt(X[:4], "har", info).shape) == (4, 561)
    with pytest.raises(UsageError):
        adapt(X[:4], "lstm", info)
    import torch

    from thor_sdk.power.data import build_net

    for name in ("lenet5", "cnn5"):
        net = build_net(name, 64, 10)
        with torch.no_grad():
            assert tuple(net(adapt(X[:4], name, info)).shape) == (4, 10)
