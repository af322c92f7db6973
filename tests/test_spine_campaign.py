"""The THOR spine through the real campaign loop, store, fit and runtime, on a fake device."""

import json
import sqlite3

import pytest

import thor_sdk
from thor_sdk.api import estimate, fit, probe
from thor_sdk.errors import StoreError, UsageError
from thor_sdk.harness.protocol import ProtocolSettings
from thor_sdk.layers.kinds import get_kind

from fake_device import FakeDevice, planted_cost


def planted_total(model, batch):
    return sum(planted_cost(l["kind"], l["config"], batch, l["role"]) for l in thor_sdk.layers_of(model).layers)


def test_thor_recovers_planted_costs_beside_a_strong_flops_baseline(tmp_path):
    db, est = tmp_path / "c.db", tmp_path / "e.json"
    summary = probe(["lenet5"], device=FakeDevice(), batch_sizes=[32], out=str(db))
    n_layers = len(thor_sdk.layers_of("lenet5").layers)
    assert summary["stop_reason"].startswith("every layer config")
    assert summary["probes_done"] == summary["target_configs"] <= n_layers
    fit(str(db), out=str(est))
    r = estimate(str(est), "lenet5", batch_size=32)
    truth = planted_total("lenet5", 32)
    assert r["total"]["mean"] == pytest.approx(truth, rel=0.03)
    assert r["total"]["std"] > 0
    # per layer, too: within 10%, or within 3 of the estimator's own std where the probe was that noisy
    for row in r["layers"]:
        want = planted_cost(row["kind"], row["config"], 32, row["role"])
        assert abs(row["mean"] - want) <= max(0.1 * want, 3 * row["std"]) + 3e-6, row
    # the planted law (a cost per FLOP plus a fixed per-layer overhead) is the FLOPs baseline's own model
    # (per kind: rate x FLOPs + overhead), so the baseline is close too: no claim of beating it here
    flops_err = abs(r["flops_baseline"]["total"] - truth) / truth
    assert flops_err < 0.03 and all(row["flops_baseline"] >= 0 for row in r["layers"])


def test_output_contract(tmp_path):
    db, est = tmp_path / "c.db", tmp_path / "e.json"
    probe(["har"], device=FakeDevice(), batch_sizes=[16], out=str(db))
    fit(str(db), out=str(est))
    r = estimate(str(est), "har", batch_size=16)
    for key in ("metric", "unit", "batch_size", "total", "layers", "flops_baseline"):
        assert key in r
    assert set(r["total"]) >= {"mean", "std"} and "total" in r["flops_baseline"]
    assert all({"kind", "config", "mean", "std"} <= set(l) for l in r["layers"])
    assert r["metric"] == "time" and r["unit"] == "s" and r["batch_size"] == 16


def test_probe_budget_and_costliest_first(tmp_path):
    dev = FakeDevice()
    summary = probe(["lenet5"], device=dev, batch_sizes=[32], out=str(tmp_path / "c.db"), max_probes=3)
    assert summary["probes_done"] == 3 and "budget" in summary["stop_reason"]
    # with no GP yet for any kind, the first probe is the costliest layer config
    layers = thor_sdk.layers_of("lenet5").layers
    costliest = max(layers, key=lambda l: get_kind(l["kind"]).train_flops(l["config"], 32, l["role"]))
    assert dev.calls[0].startswith(f"{costliest['kind']}-{costliest['role']}-")


def test_implausible_negative_difference_is_remeasured_flagged_and_excluded(tmp_path):
    db, est = tmp_path / "c.db", tmp_path / "e.json"
    dev = FakeDevice(negative_kinds={"maxpool2d"})
    probe(["lenet5"], device=dev, batch_sizes=[32], out=str(db))
    pool_calls = [c for c in dev.calls if c.startswith("maxpool2d")]
    assert len(pool_calls) == 2 * len(set(pool_calls))  # each re-measured once
    doc = fit(str(db), out=str(est))
    flagged = doc["provenance"]["flagged_excluded"]
    assert flagged and all(f["kind"] == "maxpool2d" and "negative" in f["reason"] for f in flagged)
    assert "maxpool2d" not in doc["kinds"]
    with sqlite3.connect(db) as c:  # stored as measured, not clipped
        values = [v for (v,) in c.execute("SELECT value FROM samples s JOIN probes p ON p.id = s.probe_id "
                                           "WHERE p.kind = 'maxpool2d'")]
    assert values and all(v < 0 for v in values)


def test_windows_keep_their_wall_clock_span_and_device_state(tmp_path):
    from thor_sdk.store import Campaign

    db = str(tmp_path / "c.db")
    dev = FakeDevice(negative_kinds={"maxpool2d"})  # maxpool2d probes are measured twice: merged rounds
    probe(["lenet5"], device=dev, batch_sizes=[32], out=db)
    with Campaign.open(db) as c:
        done = c.probes("done")
        pool = next(p for p in done if p.kind == "maxpool2d")
        wins = c.windows(pool.id, detail=True)
        rounds = sorted({w["round"] for w in wins})
        st = ProtocolSettings()  # the re-measurement runs at least max_rounds rounds
        assert rounds == list(range(st.min_rounds + st.max_rounds))
        for w in wins:
            assert w["end_s"] > w["start_s"] and w["state"]["part"] == w["part"]
            assert w["net_energy_j"] is None  # no meter: nothing made up
        # the second measurement's rounds follow the first's, each with its own state
        calls = [w["state"]["call"] for w in sorted(wins, key=lambda w: w["round"]) if w["part"] == "head"]
        assert calls == sorted(calls) and len(set(calls)) == 2
        # the plain view is unchanged
        assert [tuple(r) for r in c.windows(pool.id)] == [(w["part"], w["round"], w["time_s"], w["energy_j"])
                                                            for w in wins]


def test_old_campaign_files_gain_the_window_detail_columns(tmp_path):
    from thor_sdk.store import Campaign

    db = str(tmp_path / "old.db")
    probe(["lenet5"], device=FakeDevice(), batch_sizes=[32], out=db, max_probes=1)
    with sqlite3.connect(db) as c:  # a file written before the columns existed
        c.execute("CREATE TABLE w2 AS SELECT probe_id, part, round, time_s, energy_j FROM windows")
        c.execute("DROP TABLE windows")
        c.execute("ALTER TABLE w2 RENAME TO windows")
    with Campaign.open(db) as c:
        first = c.probes("done")[0].id
        assert all(w["start_s"] is None and w["state"] is None for w in c.windows(first, detail=True))
    dev = FakeDevice()
    probe(["lenet5"], device=dev, batch_sizes=[32], out=db, resume=True, max_probes=2)
    with Campaign.open(db) as c:
        second = next(p.id for p in c.probes("done") if p.id != first)
        assert all(w["start_s"] is not None and w["state"] for w in c.windows(second, detail=True))
        assert all(w["start_s"] is None for w in c.windows(first, detail=True))


def test_crash_then_resume_measures_each_probe_exactly_once(tmp_path):
    db = str(tmp_path / "c.db")
    with pytest.raises(KeyboardInterrupt):
        probe(["lenet5"], device=FakeDevice(fail_after=4), batch_sizes=[32], out=db)
    with sqlite3.connect(db) as c:
        status = dict(c.execute("SELECT status, COUNT(*) FROM probes GROUP BY status").fetchall())
    assert status == {"done": 4, "planned": 1}
    dev = FakeDevice()
    probe([], device=dev, out=db, resume=True)
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT id, status FROM probes").fetchall()
        n_samples = c.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
        dup_windows = c.execute("SELECT COUNT(*) FROM (SELECT probe_id, part, round, COUNT(*) n FROM windows "
                                "GROUP BY 1, 2, 3 HAVING n > 1)").fetchone()[0]
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)) == n_samples
    assert all(s == "done" for _, s in rows)
    assert dup_windows == 0
    # the resumed run measured the interrupted probe first and nothing already done
    assert len(dev.calls) == len(ids) - 4


def test_create_refuses_existing(tmp_path):
    db = str(tmp_path / "c.db")
    probe(["har"], device=FakeDevice(), out=db, max_probes=1)
    with pytest.raises(UsageError):
        probe(["har"], device=FakeDevice(), out=db)


def test_resume_with_a_new_model_grows_the_campaign_and_measures_only_its_missing_configs(tmp_path):
    from thor_sdk.campaign.targets import target_points
    from thor_sdk.store import Campaign

    db = str(tmp_path / "c.db")
    probe(["lenet5"], device=FakeDevice(), out=db, batch_sizes=[16])
    with Campaign.open(db) as c:
        before = {p.id for p in c.probes("done")}
    # a variant of lenet5 with a 5-class head: it shares every layer but the head
    doc = thor_sdk.layers_of("lenet5").to_dict()
    doc["name"] = "lenet5_5class"
    doc["layers"][-1]["config"]["out_features"] = 5
    variant = tmp_path / "lenet5_5class.json"
    variant.write_text(json.dumps(doc))
    new = target_points([thor_sdk.layers_of(str(variant))], [16])
    missing = set(new) - before
    assert 0 < len(missing) < len(new)
    dev = FakeDevice()
    summary = probe([str(variant)], device=dev, out=db, resume=True)
    assert sorted(dev.calls) == sorted(missing)  # each new config once, nothing already measured
    assert summary["models"] == ["lenet5", "lenet5_5class"]
    with Campaign.open(db) as c:
        assert [t["name"] for t in c.meta["targets"]] == ["lenet5", "lenet5_5class"]
        assert {p.id for p in c.probes("done")} == before | missing
    # resuming again with the same models measures nothing
    dev2 = FakeDevice()
    probe(["lenet5", str(variant)], device=dev2, out=db, resume=True)
    assert dev2.calls == []
    with Campaign.open(db) as c:
        assert len(c.meta["targets"]) == 2
    doc["layers"][-1]["config"]["out_features"] = 7  # same name, other layers: refused
    variant.write_text(json.dumps(doc))
    with pytest.raises(UsageError):
        probe([str(variant)], device=FakeDevice(), out=db, resume=True)
    # the grown campaign fits like one probed for both from the start
    est = fit(db)
    assert {"conv2d", "output"} <= set(est["kinds"])


def test_resume_refuses_a_profile_and_checks_new_models_before_changing_anything(tmp_path):
    db = str(tmp_path / "c.db")
    probe(["har"], device=FakeDevice(), out=db, max_probes=1)
    with pytest.raises(thor_sdk.errors.NotFoundError):
        probe(["no_such_net"], device=FakeDevice(), out=db, resume=True)
    from thor_sdk.store import Campaign

    with Campaign.open(db) as c:
        assert [t["name"] for t in c.meta["targets"]] == ["har"]


def test_not_a_campaign(tmp_path):
    bad = tmp_path / "x.db"
    bad.write_text("not sqlite at all" * 100)
    with pytest.raises(StoreError):
        fit(str(bad), out=str(tmp_path / "e.json"))


def test_samples_csv_fit(tmp_path):
    rows = ["kind,role,batch_size,in_features,out_features,tokens,bias,numel,time_s"]
    for i, (a, b) in enumerate([(100, 50), (200, 50), (400, 100), (800, 200)]):
        t = planted_cost("linear", {"in_features": a, "out_features": b, "tokens": 1, "bias": 1}, 32, "hidden")
        rows.append(f"linear,hidden,32,{a},{b},1,1,,{t}")
        rows.append(f"relu,hidden,32,,,,,{a},{planted_cost('relu', {'numel': a}, 32, 'hidden')}")
    rows.append("output,,32,84,10,1,,,1e-4")
    csv = tmp_path / "s.csv"
    csv.write_text("\n".join(rows) + "\n")
    doc = fit(samples_csv=str(csv), out=str(tmp_path / "e.json"))
    assert set(doc["kinds"]) == {"linear", "relu", "output"}
    assert doc["provenance"]["n_samples"] == {"linear": 4, "relu": 4, "output": 1}
    est = json.loads((tmp_path / "e.json").read_text())
    assert est["format"] == "thor-sdk/estimator"


def test_host_campaign_stores_each_windows_clock_span_and_sysfs_state(tmp_path):
    # the real host device and protocol, its state read from a fake sysfs tree
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.store import Campaign

    root = tmp_path / "sys-root"
    (root / "sys/devices/system/cpu/cpu0/cpufreq").mkdir(parents=True)
    (root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").write_text("1800000\n")
    (root / "sys/class/thermal/thermal_zone0").mkdir(parents=True)
    (root / "sys/class/thermal/thermal_zone0/temp").write_text("47500\n")
    (root / "sys/class/thermal/thermal_zone0/type").write_text("x86_pkg_temp\n")
    db = str(tmp_path / "host.db")
    settings = ProtocolSettings(warmup_steps=1, min_window_s=0.005, min_rounds=2, max_rounds=2,
                                measure_idle=False)
    probe(["har"], device=HostDevice(root=str(root)), batch_sizes=[4], out=db, max_probes=1, settings=settings)
    with Campaign.open(db) as c:
        (done,) = c.probes("done")
        wins = c.windows(done.id, detail=True)
    assert {w["part"] for w in wins} == set(done.parts()) and len(wins) == 2 * len(done.parts())
    for w in wins:
        assert w["state"] == {"cpu_khz": {"cpu0": 1800000}, "temps_c": {"x86_pkg_temp": 47.5}}
        assert w["end_s"] - w["start_s"] >= w["time_s"] * 0.5
    spans = sorted((w["start_s"], w["end_s"]) for w in wins)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # windows never overlap


def test_fit_of_several_campaigns_equals_the_fit_of_their_union_and_fit_can_be_called_again(tmp_path):
    import thor_sdk.fitting  # noqa: F401  importing the subpackage must not shadow thor_sdk.fit
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.store import Campaign

    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    probe(["har"], device=FakeDevice(), batch_sizes=[16], out=a)
    probe(["lenet5"], device=FakeDevice(), batch_sizes=[16], out=b)
    merged = thor_sdk.fit([a, b])
    samples, runs = [], []
    for path in (a, b):
        with Campaign.open(path) as c:
            samples += c.samples()
            runs += c.model_runs()
            device = c.meta["device"]
    union = build(samples, device=device, runtime="torch", metric="time", model_runs=runs, sources=["a.db", "b.db"])
    assert merged["kinds"] == union["kinds"] and merged["flops_baseline"] == union["flops_baseline"]
    assert callable(thor_sdk.fit) and thor_sdk.fit(a)["kinds"]  # a second call in the same process works


def test_a_second_writer_on_a_campaign_gets_one_clear_error_and_creation_never_clobbers(tmp_path):
    from thor_sdk.store import Campaign

    db = str(tmp_path / "c.db")
    probe(["har"], device=FakeDevice(), out=db, max_probes=1)
    with Campaign.open(db, writer=True):  # another probe --resume holding the campaign
        dev = FakeDevice()
        with pytest.raises(StoreError, match="being written by another"):
            probe([], device=dev, out=db, resume=True)
        assert dev.calls == []  # refused before measuring anything
    probe([], device=FakeDevice(), out=db, resume=True, max_probes=2)  # the lock went with its holder
    with pytest.raises(UsageError, match="exists"):
        Campaign.create(db, {"metric": "time"})
    assert [f for f in __import__("os").listdir(tmp_path) if ".tmp" in f] == []  # no temp file left


def test_a_probe_that_fails_on_the_device_is_stored_failed_and_never_poisons_the_campaign(tmp_path):
    class Flaky(FakeDevice):
        def measure_probe(self, probe, **kw):
            if probe.kind == "maxpool2d":
                raise RuntimeError("the device could not run this probe")
            return super().measure_probe(probe, **kw)

    db = str(tmp_path / "c.db")
    s = probe(["lenet5"], device=Flaky(), out=db, batch_sizes=[8])
    assert s["probes_failed"] >= 1 and s["stop_reason"].startswith("every layer config")
    from thor_sdk.store import Campaign

    with Campaign.open(db) as c:
        failed = c.conn.execute("SELECT kind, reason FROM probes WHERE status = 'failed'").fetchall()
    assert failed and all(k == "maxpool2d" and "could not run" in why for k, why in failed)
    dev = FakeDevice()
    probe([], device=dev, out=db, resume=True)  # resume does not retry or trip over the failed probe
    assert dev.calls == []
    assert "conv2d" in fit(db)["kinds"]


def test_layer_configs_out_of_bounds_are_refused_before_anything_is_built(tmp_path):
    from thor_sdk.layers.kinds import get_kind

    conv = get_kind("conv2d")
    ok = {"in_channels": 3, "out_channels": 8, "kernel": 3, "stride": 1, "padding": 1, "groups": 1, "height": 8,
          "width": 8, "bias": 1}
    conv.check_config(ok)
    for bad in ({"kernel": 11, "padding": 0}, {"out_channels": 0}, {"height": 1e12}, {"groups": 3},
                {"bias": 2}, {"in_channels": 2.5}):
        with pytest.raises(UsageError):
            conv.check_config(dict(ok, **bad))
    with pytest.raises(UsageError):
        get_kind("dropout").check_config({"numel": 10, "p": 1.0})
    with pytest.raises(UsageError):
        get_kind("linear").check_config({"in_features": 4, "out_features": 0, "tokens": 1, "bias": 1})


def test_probe_trainable_measures_the_fine_tunes_layers_and_keeps_it_apart_from_the_net(tmp_path):
    """``probe --trainable``: the target is the fine-tune (its frozen layers' probes are the forward-only ones it
    runs, none of the net trained whole), named ``net [trainable ...]``; the net whole added on resume is another
    target beside it, and the fine-tune given again adds nothing."""
    from thor_sdk.campaign.targets import target_points
    from thor_sdk.store import Campaign

    db = str(tmp_path / "ft.db")
    dev = FakeDevice()
    summary = probe(["har"], device=dev, out=db, batch_sizes=[16], trainable=["6"])
    tuned = thor_sdk.layers_of("har", trainable=["6"])
    assert summary["models"] == ["har [trainable 6]"]
    assert sorted(dev.calls) == sorted(target_points([tuned], [16]))
    with Campaign.open(db) as c:
        (target,) = c.meta["targets"]
        assert target["name"] == "har [trainable 6]" and target["layers"][0]["config"]["frozen"] == 1
    whole = set(target_points([thor_sdk.layers_of("har")], [16]))
    assert whole - set(dev.calls)  # the net trained whole needs probes its fine-tune does not
    dev2 = FakeDevice()
    probe(["har"], device=dev2, out=db, resume=True)
    assert sorted(dev2.calls) == sorted(whole - set(dev.calls))
    dev3 = FakeDevice()
    summary = probe(["har"], device=dev3, out=db, resume=True, trainable=["6"])
    assert dev3.calls == [] and summary["models"] == ["har [trainable 6]", "har"]


def test_probe_trainable_refuses_a_pattern_that_matches_nothing_before_any_campaign_is_written(tmp_path, capsys):
    from helpers import cli

    db = tmp_path / "c.db"
    code, out, err = cli(["probe", "--model", "har", "--trainable", "no_such_layer", "--out", str(db)], capsys)
    assert code == 2 and err.startswith("Error: ") and "no_such_layer" in err and "0.weight" in err
    assert not db.exists()
