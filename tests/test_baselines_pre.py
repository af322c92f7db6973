"""PRE baseline: grouped CV never trains on the model it scores; plain-JSON models reload to identical
predictions and match scikit-learn's; runs CSVs and campaigns are read and hostile ones refused."""

import json
import math
import random

import numpy as np
import pytest

from thor_sdk.baselines.pre import (VARIANTS, PreBaseline, _design, cross_validate, features_of, parse_pre_csv,
                                    pre_csv_text, read_pre_csv, rows_from_campaign)
from thor_sdk.errors import FormatError, NotFoundError, UsageError


def _net(width, depth, conv):
    """A layer list: optional conv front, ``depth`` linear layers of ``width``, the head."""
    layers = []
    if conv:
        layers += [{"kind": "conv2d", "role": "input", "config": {"in_channels": 3, "out_channels": conv, "kernel": 3,
                                                                   "stride": 1, "padding": 1, "groups": 1, "height": 16,
                                                                   "width": 16, "bias": 1}},
                   {"kind": "relu", "role": "hidden", "config": {"numel": conv * 256}},
                   {"kind": "flatten", "role": "hidden", "config": {"numel": conv * 256}}]
        prev = conv * 256
    else:
        prev = 64
    for i in range(depth):
        layers.append({"kind": "linear", "role": "hidden" if layers else "input",
                       "config": {"in_features": prev, "out_features": width, "tokens": 1, "bias": 1}})
        layers.append({"kind": "relu", "role": "hidden", "config": {"numel": width}})
        prev = width
    layers.append({"kind": "output", "role": "output", "config": {"in_features": prev, "out_features": 10, "tokens": 1}})
    return layers


def _runs(n_models=12, noise=0.03, seed=0, overhead_s=4e-5):
    """Runs whose step time follows a power law of FLOPs plus a per-layer overhead, with relative noise."""
    rng = random.Random(seed)
    out = []
    for m in range(n_models):
        layers = _net(rng.choice([32, 64, 128, 256, 512]), rng.randint(1, 4), rng.choice([0, 4, 8]))
        for b in (4, 8, 16):
            row = features_of(layers, b, {"cpu_count": 2, "threads": 1})
            row["model"] = f"net{m}"
            row["time_s"] = (2e-10 * row["train_flops"] ** 0.95 + overhead_s * row["n_layers"]) * (1 + noise * rng.gauss(0, 1))
            out.append(row)
    return out


def test_features_of_a_layer_list():
    f = features_of(_net(64, 2, 4), 8, {"cpu_count": 4, "torch_threads": 2})
    assert f["input_size"] == 3 * 16 * 16 and f["n_layers"] == 8 and f["kinds"] == {"conv2d": 1, "relu": 3,
                                                                                    "flatten": 1, "linear": 2, "output": 1}
    assert f["cpu_count"] == 4 and f["threads"] == 2 and f["params"] > 0
    assert features_of(_net(64, 2, 4), 16)["train_flops"] > f["train_flops"]


def test_grouped_cv_never_trains_on_the_scored_model():
    runs = _runs()
    base = cross_validate(runs, variants=("linear", "svr"))
    assert base["n_models"] == 12 and base["scheme"] == "leave one model out"
    tampered = [dict(r, time_s=r["time_s"] * 50) if r["model"] == "net3" else r for r in runs]
    after = cross_validate(tampered, variants=("linear", "svr"))
    for p0, p1 in zip(base["predictions"], after["predictions"]):
        if p0["model"] == "net3":  # its own costs changed 50x: its out-of-fold predictions must not move
            assert p1["linear"] == p0["linear"] and p1["svr"] == p0["svr"]
            assert p1["measured"] == pytest.approx(50 * p0["measured"])
    assert after["variants"]["linear"]["per_model"]["net3"] > 90  # and so they miss by ~98%


def test_cv_mape_on_a_learnable_law():
    r = cross_validate(_runs(overhead_s=0.0), variants=VARIANTS)  # log cost linear in log FLOPs, 3% noise
    assert set(r["variants"]) == set(VARIANTS)
    assert r["variants"]["linear"]["mape"] < 6  # the true law is in its span
    assert all(r["variants"][v]["mape"] < 30 for v in VARIANTS)
    for v in VARIANTS:
        d = r["variants"][v]
        assert math.isfinite(d["mape"]) and d["max_ape"] >= d["mape"] >= 0
    with pytest.raises(UsageError, match="at least 3 models"):
        cross_validate([x for x in _runs() if x["model"] in ("net0", "net1")])


@pytest.mark.parametrize("variant", VARIANTS)
def test_json_round_trip_and_sklearn_parity(tmp_path, variant):
    runs = _runs()
    m = PreBaseline(variant).fit(runs)
    X = (_design(runs, m.features_) - np.array(m.x_mean_)) / np.array(m.x_scale_)
    y_mean = float(np.mean(np.log([r["time_s"] for r in runs])))
    sk = np.exp(m.sklearn_.predict(X) + y_mean)
    ours = np.array(m.predict_rows(runs))
    assert np.allclose(ours, sk, rtol=1e-9)  # the exported numbers are the fitted model
    path = tmp_path / f"pre-{variant}.json"
    m.save(str(path))
    text = path.read_text()
    assert "NaN" not in text and json.loads(text)["format"] == "thor-sdk/pre-model"
    back = PreBaseline.load(str(path))
    assert not hasattr(back, "sklearn_")
    assert back.predict_rows(runs) == m.predict_rows(runs)  # bit for bit
    q = _net(100, 3, 8)
    assert back.estimate(q, 12)["value"] == m.estimate(q, 12)["value"] > 0
    e = back.estimate(q, 12, samples_per_epoch=100)
    assert e["per"] == "epoch" and e["steps_per_epoch"] == 9 and e["value"] == pytest.approx(9 * e["per_step"])


def test_hostile_model_files(tmp_path):
    doc = PreBaseline("svr").fit(_runs()).to_dict()
    bad = [dict(doc, version=2), dict(doc, x_scale=[0.0] * len(doc["features"])), dict(doc, x_mean=doc["x_mean"][:-1]),
           dict(doc, model=dict(doc["model"], support=[r[:-1] for r in doc["model"]["support"]])),
           dict(doc, model=dict(doc["model"], type="poly")), dict(doc, features=["../etc"] + doc["features"][1:])]
    for i, d in enumerate(bad):
        p = tmp_path / f"bad{i}.json"
        p.write_text(json.dumps(d))
        with pytest.raises(FormatError):
            PreBaseline.load(str(p))
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(doc).replace(str(doc["model"]["intercept"]), "NaN", 1))
    with pytest.raises(FormatError):
        PreBaseline.load(str(p))
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError):
        PreBaseline.load(str(p))
    with pytest.raises(NotFoundError):
        PreBaseline.load(str(tmp_path / "absent.json"))


def test_csv_round_trip_and_hostile_csv(tmp_path):
    runs = _runs(n_models=4)
    p = tmp_path / "runs.csv"
    p.write_text(pre_csv_text(runs))
    back = read_pre_csv(str(p))
    assert len(back) == len(runs)
    for a, b in zip(runs, back):
        assert b["time_s"] == a["time_s"] and b["train_flops"] == a["train_flops"] and b["model"] == a["model"]
        assert {k: v for k, v in b["kinds"].items() if v} == a["kinds"]
    assert PreBaseline("ridge").fit(str(p)).predict_rows(runs) == PreBaseline("ridge").fit(runs).predict_rows(runs)
    head = "model,batch_size,input_size,train_flops,params,n_layers,kind_linear,time_s\n"
    for body in ("a,4,64,1e6,100,3,2,nan\n", "a,4,64,1e6,100,3,2,-1\n", "a,4.5,64,1e6,100,3,2,0.1\n",
                 "a,0,64,1e6,100,3,2,0.1\n", "a,4,64,inf,100,3,2,0.1\n", "a,4,64,1e6,100,3,2,\n",
                 "a,4,64,1e6,100,3,x,0.1\n", ",4,64,1e6,100,3,2,0.1\n", "a,4,64,1e6,100,3,2,0.1,extra\n",
                 "a,4,64,1e6,-100,3,2,0.1\n", ""):
        with pytest.raises(FormatError):
            parse_pre_csv(head + body)
    for header in ("model,batch_size,time_s\n", "model,batch_size,input_size,train_flops,params,n_layers\n",
                   "model,batch_size,input_size,train_flops,params,n_layers,kind_../x,time_s\n", ""):
        with pytest.raises(FormatError):
            parse_pre_csv(header + "a,4,64,1e6,100,3,0.1\n" if header else header)
    wide = ",".join(f"kind_k{i}" for i in range(600))
    with pytest.raises(FormatError, match="columns"):
        parse_pre_csv(head.strip() + "," + wide + "\n")


def test_campaign_runs(tmp_path):
    from thor_sdk.layers import ModelLayers
    from thor_sdk.store import Campaign

    paths = []
    for i, (w, d) in enumerate([(32, 1), (64, 2), (128, 3)]):
        p = tmp_path / f"net{i}.json"
        p.write_text(json.dumps(ModelLayers(f"net{i}", [64], "float32", _net(w, d, 0)).to_dict()))
        paths.append(str(p))
    db = str(tmp_path / "runs.db")
    with Campaign.create(db, {"device": {"name": "host", "cpu_count": 2, "torch_threads": 1}}) as c:
        for i, p in enumerate(paths):
            for b in (4, 8):
                c.add_model_run(p, b, "time", 1e-3 * (i + 1) * b, 1e-5, 5, "torch")
        c.add_model_run(paths[0], 4, "energy", 0.5, 0.01, 5, "torch")
        c.add_model_run("reference:p0001", 8, "time", 1e-4, 1e-6, 5, "torch")  # a profile's drift probe: not a model
        c.add_model_run("calibration:" + paths[2], 16, "time", 0.05, 1e-4, 5, "torch")
    rows = rows_from_campaign(db)
    assert rows[-1]["model"] == paths[2] and rows[-1]["batch_size"] == 16 and rows[-1]["n_layers"] == 7
    rows = rows[:-1]
    assert len(rows) == 6 and {r["cpu_count"] for r in rows} == {2} and {r["threads"] for r in rows} == {1}
    assert rows[0]["time_s"] == pytest.approx(4e-3) and rows[0]["n_layers"] == 3
    m = PreBaseline("linear").fit(db)
    assert m.device_defaults_ == {"cpu_count": 2, "threads": 1} and m.n_runs_ == 7
    assert [r["energy_j"] for r in rows_from_campaign(db, "energy")] == [0.5]
    with pytest.raises(UsageError, match="at least 2"):
        PreBaseline("linear", metric="energy").fit(db)
