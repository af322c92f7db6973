"""Make the `thor-sdk check` example: SYNTHETIC time and energy estimators and the layer list they check.

    python examples/check/make_example.py [OUT_DIR]   # rewrites the three JSON files (default: beside this script)

The estimators are fitted (``thor_sdk.fitting.gp.KindGP``, as ``thor-sdk fit`` does) on made-up costs,
NOT measurements: time = 2e-11 s per training FLOP + 1e-10 s per byte + 20 us per layer, energy = 7e-11 J
per FLOP + 4e-10 J per byte + 100 uJ per layer, each times 5% lognormal noise. Both name the device
``synthetic-phone (SYNTHETIC example, not a measurement)`` and the runtime ``onnxruntime``, and say so in
their provenance. They exist to show and test the build scripts (``android_harness/gradle/thor-check.gradle``,
``ios_harness/scripts/thor-check.sh``) and the budgets files; never budget a real app with them.
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from thor_sdk.fitting.estimator import build_estimator, dumps_estimator  # noqa: E402
from thor_sdk.fitting.gp import KindGP  # noqa: E402
from thor_sdk.layers import ModelLayers  # noqa: E402
from thor_sdk.layers.kinds import complete_config, feature_vector, get_kind, gp_features  # noqa: E402
from thor_sdk.runtime.terms import at_batch, cost_terms  # noqa: E402

DEVICE = {"name": "synthetic-phone", "note": "SYNTHETIC example, not a measurement: made-up costs"}
RUNTIME = "onnxruntime"
LAWS = {  # made-up cost laws: (per training FLOP, per byte moved, per layer), in the metric's unit
    "time": (2e-11, 1e-10, 2e-5),
    "energy": (7e-11, 4e-10, 1e-4),
}
KINDS = ("conv2d", "relu", "maxpool2d", "flatten", "linear", "output")


def example_layers():
    """A small CNN on 3x32x32 images, 10 classes (what `thor-sdk layers` would list for it)."""
    layers = [
        ("conv1", "conv2d", "input", {"in_channels": 3, "out_channels": 16, "kernel": 3, "stride": 1, "padding": 1,
                                      "groups": 1, "height": 32, "width": 32, "bias": 1}),
        ("relu1", "relu", "hidden", {"numel": 16 * 32 * 32}),
        ("pool1", "maxpool2d", "hidden", {"channels": 16, "height": 32, "width": 32, "kernel": 2, "stride": 2,
                                          "padding": 0}),
        ("conv2", "conv2d", "hidden", {"in_channels": 16, "out_channels": 32, "kernel": 3, "stride": 1,
                                       "padding": 1, "groups": 1, "height": 16, "width": 16, "bias": 1}),
        ("relu2", "relu", "hidden", {"numel": 32 * 16 * 16}),
        ("pool2", "maxpool2d", "hidden", {"channels": 32, "height": 16, "width": 16, "kernel": 2, "stride": 2,
                                          "padding": 0}),
        ("flatten", "flatten", "hidden", {"numel": 32 * 8 * 8}),
        ("fc1", "linear", "hidden", {"in_features": 2048, "out_features": 128, "tokens": 1, "bias": 1}),
        ("relu3", "relu", "hidden", {"numel": 128}),
        ("head", "output", "output", {"in_features": 128, "out_features": 10, "tokens": 1}),
    ]
    return ModelLayers("example_cnn", [3, 32, 32], "float32",
                       [{"name": n, "kind": k, "role": r, "config": complete_config(k, c)} for n, k, r, c in layers])


def _config(kind, rng):
    """A random config of ``kind`` around the example's sizes."""
    pick = lambda xs: int(rng.choice(xs))  # noqa: E731
    if kind == "conv2d":
        h = pick([8, 16, 32])
        return {"in_channels": pick([3, 8, 16, 32]), "out_channels": pick([8, 16, 32, 64]), "kernel": pick([1, 3, 5]),
                "stride": pick([1, 2]), "padding": pick([0, 1, 2]), "groups": 1, "height": h, "width": h,
                "bias": pick([0, 1])}
    if kind == "maxpool2d":
        h = pick([8, 16, 32])
        return {"channels": pick([8, 16, 32, 64]), "height": h, "width": h, "kernel": 2, "stride": 2, "padding": 0}
    if kind in ("relu", "flatten"):
        return {"numel": pick([128, 512, 2048, 4096, 8192, 16384])}
    c = {"in_features": pick([128, 256, 512, 1024, 2048]), "out_features": pick([10, 64, 128, 256]), "tokens": 1}
    if kind == "linear":
        c["bias"] = 1
    return c


def fit_estimator(metric, rng, n=24):
    per_flop, per_byte, per_layer = LAWS[metric]
    gps = {}
    for kind in KINDS:
        X, y, T = [], [], []
        for _ in range(n):
            c = _config(kind, rng)
            bs = int(rng.choice([1, 4, 8, 16, 32, 64]))
            role = "output" if kind == "output" else str(rng.choice(get_kind(kind).roles))
            terms = at_batch(cost_terms(kind, c, role), bs)
            y.append((per_flop * terms[0] + per_byte * terms[1] + per_layer) * float(np.exp(rng.normal(0.0, 0.05))))
            X.append(feature_vector(kind, c, bs, role))
            T.append(terms)
        gps[kind] = KindGP(features=gp_features(kind), random_state=0).fit(X, y, noise_std=[0.05 * v for v in y],
                                                                           terms=T)
    doc = build_estimator(
        gps, device=DEVICE, runtime=RUNTIME, metric=metric, unit={"time": "s", "energy": "J"}[metric],
        flops_baseline={"unit_per_flop": per_flop}, whole_model={"rel_std": 0.1, "source": "synthetic"},
        provenance={"note": "SYNTHETIC example estimator (made-up costs, not a measurement): for the thor-sdk check "
                            "example and tests only", "generator": "examples/check/make_example.py"})
    doc["created_utc"] = "2026-01-01T00:00:00Z"
    return doc


def main(out_dir=HERE):
    rng = np.random.default_rng(11)
    for metric in ("time", "energy"):
        with open(os.path.join(out_dir, f"synthetic-phone-{metric}.json"), "w", encoding="utf-8") as f:
            f.write(dumps_estimator(fit_estimator(metric, rng)))
    with open(os.path.join(out_dir, "example_cnn.layers.json"), "w", encoding="utf-8") as f:
        json.dump(example_layers().to_dict(), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:2])
