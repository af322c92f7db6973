"""Generate the shared estimator test vectors (committed as data; re-run only to change them).

    python tests/vectors/make_vectors.py

Writes ``estimator_<case>.json`` (fitted with ``thor_sdk.fit.gp.KindGP`` on SYNTHETIC costs -- a
made-up cost-per-FLOP law with noise, not measurements) and ``expected_<case>.json``: per-layer and
whole-model predictions computed by scikit-learn (``KindGP.from_dict`` + ``predict(return_std=True)``
and ``predict(return_cov=True)`` on the stacked rows of each kind, with the documented back-transform).
The Python, Java and Swift runtimes must reproduce the expected numbers to 1e-9 relative.

Cases:
- ``time_log``: all costs > 0 -> "log" targets; kinds conv2d, relu, maxpool2d, output; a model with
  repeated identical layers.
- ``energy_linear``: costs from a noisy subtraction, some <= 0 -> "linear" targets; kind linear, a
  kind fitted on ONE sample (dropout), a kind fitted on duplicated training rows (relu).
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from thor_sdk.fit.estimator import build_estimator, dumps_estimator  # noqa: E402
from thor_sdk.fit.gp import KindGP  # noqa: E402
from thor_sdk.layers.kinds import feature_vector, get_kind, gp_features  # noqa: E402

ROLE_NAME = {1.0: "input", 0.0: "hidden"}


def _random_config(kind, rng):
    if kind == "conv2d":
        c = int(rng.choice([1, 3, 8, 16, 32]))
        return {"in_channels": c, "out_channels": int(rng.choice([4, 8, 16, 32, 64])), "kernel": int(rng.choice([1, 3, 5])),
                "stride": int(rng.choice([1, 2])), "padding": int(rng.choice([0, 1, 2])), "groups": 1,
                "height": int(rng.choice([8, 14, 28, 32])), "width": 0, "bias": int(rng.choice([0, 1]))}
    if kind in ("maxpool2d",):
        return {"channels": int(rng.choice([6, 16, 32, 64])), "height": int(rng.choice([8, 10, 14, 28])), "width": 0,
                "kernel": 2, "stride": 2, "padding": 0}
    if kind in ("relu", "dropout"):
        c = {"numel": int(rng.choice([84, 120, 400, 1600, 4704, 8192, 16384]))}
        if kind == "dropout":
            c["p"] = 0.5
        return c
    if kind in ("linear", "output"):
        c = {"in_features": int(rng.choice([64, 84, 120, 256, 400, 512])),
             "out_features": int(rng.choice([10, 84, 120, 256])), "tokens": 1}
        if kind == "linear":
            c["bias"] = 1
        return c
    raise ValueError(kind)


def _fix(kind, c):
    if "width" in c:
        c["width"] = c["height"]
    return c


def synthetic_cost(kind, config, batch_size, role, rng, noise=0.05):
    """SYNTHETIC per-layer cost: 2e-11 s per training FLOP + 2e-5 s, times lognormal noise."""
    flops = get_kind(kind).train_flops(config, batch_size, role)
    return (2e-11 * flops + 2e-5) * float(np.exp(rng.normal(0.0, noise)))


def sample(kind, n, rng, linear=False):
    feats = gp_features(kind)
    X, y, layers = [], [], []
    for _ in range(n):
        c = _fix(kind, _random_config(kind, rng))
        bs = int(rng.choice([1, 8, 16, 32, 64]))
        role = "output" if kind == "output" else str(rng.choice(get_kind(kind).roles))
        cost = synthetic_cost(kind, c, bs, role, rng)
        if linear:  # a noisy difference of two measurements: can be <= 0 for cheap layers
            cost = cost + float(rng.normal(0.0, 4e-5))
        X.append(feature_vector(kind, c, bs, role))
        y.append(cost)
        layers.append((c, bs, role))
    return feats, X, y


def fit_kinds(spec, rng, linear=False):
    gps = {}
    for kind, n, dup in spec:
        feats, X, y = sample(kind, n, rng, linear=linear)
        if dup:  # repeat every training row with a fresh noisy cost
            X = X + X
            y = y + [v + float(rng.normal(0.0, 4e-5 if linear else 1e-6)) for v in y]
        gps[kind] = KindGP(features=feats, random_state=0).fit(X, y)
    return gps


def model_layers(kinds, rng, n_layers, n_distinct, batch_size):
    """A layer list drawing ``n_layers`` layers from ``n_distinct`` distinct configs (so repeats)."""
    pool = []
    for i in range(n_distinct):
        kind = kinds[i % len(kinds)]
        c = _fix(kind, _random_config(kind, rng))
        role = "output" if kind == "output" else ("input" if i == 0 else "hidden")
        if kind == "output":
            continue
        pool.append({"kind": kind, "role": role, "config": c})
    layers = []
    for i in range(n_layers):
        layer = dict(pool[int(rng.integers(len(pool)))])
        layers.append(dict(layer, name=f"l{i}", config=dict(layer["config"])))
    if "output" in kinds:
        layers.append({"name": "head", "kind": "output", "role": "output",
                       "config": _fix("output", _random_config("output", rng))})
    return layers


def expected_for(doc, layer_queries, models):
    gps = {k: KindGP.from_dict(d) for k, d in doc["kinds"].items()}
    out = {"predict_layer": [], "estimate": []}
    for kind, feats in layer_queries:
        gp = gps[kind]
        row = [float(feats[f] if f != "role" else {"input": 1, "hidden": 0}.get(feats[f], feats[f]))
               for f in gp.features]
        m, s = gp.predict([row], return_std=True)
        out["predict_layer"].append({"kind": kind, "features": feats, "mean": float(m[0]), "std": float(s[0])})
    for layers, bs in models:
        means, stds, total_mean, total_var = [None] * len(layers), [None] * len(layers), 0.0, 0.0
        for kind, gp in gps.items():
            idx = [i for i, layer in enumerate(layers) if layer["kind"] == kind]
            if not idx:
                continue
            rows = [feature_vector(kind, layers[i]["config"], bs, layers[i]["role"]) for i in idx]
            m, s = gp.predict(rows, return_std=True)
            mc, cov = gp.predict(rows, return_cov=True)
            for j, i in enumerate(idx):
                means[i], stds[i] = float(m[j]), float(s[j])
            total_mean += float(np.sum(mc))
            total_var += float(np.sum(cov))
        out["estimate"].append({"batch_size": bs, "layers": layers, "layer_means": means, "layer_stds": stds,
                                "total": {"mean": total_mean, "std": float(np.sqrt(max(total_var, 0.0)))}})
    return out


def write(case, doc, expected):
    with open(os.path.join(HERE, f"estimator_{case}.json"), "w", encoding="utf-8") as f:
        f.write(dumps_estimator(doc))
    expected = dict(expected, estimator=f"estimator_{case}.json", generated_by="tests/vectors/make_vectors.py",
                    note="synthetic costs; expected values computed by scikit-learn")
    with open(os.path.join(HERE, f"expected_{case}.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


def main():
    rng = np.random.default_rng(20250101)
    prov = {"note": "SYNTHETIC test vector, not a measurement", "generator": "tests/vectors/make_vectors.py"}

    # --- time, log targets
    gps = fit_kinds([("conv2d", 14, False), ("relu", 8, False), ("maxpool2d", 6, False), ("output", 5, False)], rng)
    doc = build_estimator(gps, device={"name": "synthetic"}, metric="time", unit="s",
                          flops_baseline={"unit_per_flop": 2e-11}, provenance=prov)
    doc["created_utc"] = "2025-01-01T00:00:00Z"
    queries = [("conv2d", {**_fix("conv2d", _random_config("conv2d", rng)), "batch_size": 32, "role": "input"}),
               ("conv2d", {**_fix("conv2d", _random_config("conv2d", rng)), "batch_size": 8, "role": 0}),
               ("relu", {"numel": 4704, "batch_size": 16, "role": "hidden"}),
               ("maxpool2d", {**_fix("maxpool2d", _random_config("maxpool2d", rng)), "batch_size": 64, "role": 1}),
               ("output", {"in_features": 84, "out_features": 10, "tokens": 1, "batch_size": 32})]
    kinds = ["conv2d", "relu", "maxpool2d", "output"]
    models = [(model_layers(kinds, rng, 20, 9, 32), 32), (model_layers(kinds, rng, 7, 7, 4), 4)]
    write("time_log", doc, expected_for(doc, queries, models))

    # --- energy, linear targets (noisy subtraction), n=1 kind, duplicated training rows
    gps = fit_kinds([("linear", 10, False), ("dropout", 1, False), ("relu", 6, True)], rng, linear=True)
    for k in ("linear", "relu"):
        assert gps[k].target_transform_ == "linear", (k, "regenerate with more noise")
    doc = build_estimator(gps, device={"name": "synthetic"}, metric="energy", unit="J",
                          flops_baseline={"unit_per_flop": 5e-11}, provenance=prov)
    doc["created_utc"] = "2025-01-01T00:00:00Z"
    queries = [("linear", {"in_features": 400, "out_features": 120, "tokens": 1, "bias": 1, "batch_size": 32,
                           "role": "hidden"}),
               ("dropout", {"numel": 120, "p": 0.5, "batch_size": 32, "role": "hidden"}),
               ("relu", {"numel": 84, "batch_size": 1, "role": "input"})]
    kinds = ["linear", "relu", "dropout"]
    models = [(model_layers(kinds, rng, 15, 5, 16), 16), (model_layers(kinds, rng, 3, 3, 1), 1)]
    write("energy_linear", doc, expected_for(doc, queries, models))


if __name__ == "__main__":
    main()
