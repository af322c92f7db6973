"""Results round trip: a campaign measured live and the same windows through a results file + ingest are the same campaign; failed probes, energy basis, offline bundles."""

import json
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from thor_sdk.campaign.ingest import ingest_results  # noqa: E402
from thor_sdk.campaign.measure import measure_and_store  # noqa: E402
from thor_sdk.devices.host import HostDevice  # noqa: E402
from thor_sdk.errors import FormatError  # noqa: E402
from thor_sdk.exporters.bundle import write_bundle  # noqa: E402
from thor_sdk.harness.protocol import ProtocolSettings  # noqa: E402
from thor_sdk.harness.results import results_doc, write_results  # noqa: E402
from thor_sdk.probes import Probe  # noqa: E402
from thor_sdk.store import Campaign  # noqa: E402
from thor_sdk.store.files import read_json  # noqa: E402
from fake_device import ConstantPowerMeter  # noqa: E402

SETTINGS = ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.01)
LIN = {"in_features": 16, "tokens": 1, "bias": 1}
PROBES = [Probe("linear", dict(LIN, out_features=8), 4, "hidden"),
          Probe("linear", dict(LIN, out_features=16), 4, "hidden")]


class _RecordingHost(HostDevice):
    """The host device, keeping what each measurement returned (what a device's harness would report)."""

    def __init__(self, slow_head_first=False, **kw):
        super().__init__(**kw)
        self.runs = {}
        self.slow_head_first = slow_head_first

    def measure_probe(self, probe, **kw):
        import copy

        # Whether the live path measures a probe again must not depend on this host's noise (a tiny linear
        # probe's difference is within it), so the head's values are set. With slow_head_first, the first
        # measurement's head reads a constant 1 s (10 J, 5 J net of idle) per step, far above the parts'
        # milliseconds: an implausible negative difference, which the live path measures again with more rounds
        # and commits merged (what the results file must then carry). Otherwise each round's head reads 1/100 of
        # that round's cheapest part: no difference is negative.
        slow = self.slow_head_first and probe.id not in self.runs

        def head(values, const):
            return None if any(v is None for v in values) else const if slow else 0.01 * min(values)

        on_round = kw["on_round"]
        kw["on_round"] = lambda rnd, row: on_round(rnd, dict(row, head=(
            head([t for p, (t, _) in row.items() if p != "head"], 1.0),
            head([e for p, (_, e) in row.items() if p != "head"], 10.0))))
        r = super().measure_probe(probe, **kw)
        others = [m for p, m in r.items() if p != "head"]
        for f, const in (("time_s", 1.0), ("energy_j", 10.0), ("net_energy_j", 5.0)):
            setattr(r["head"], f, [head(list(vs), const) for vs in zip(*(getattr(m, f) for m in others))])
        self.runs.setdefault(probe.id, []).append(copy.deepcopy(r))  # as returned (the campaign merges in place)
        return r


def _fake_root(tmp_path):
    """A sysfs with a battery and a thermal zone: every window records a non-empty device state."""
    for rel, text in (("sys/class/power_supply/battery/capacity", "81\n"),
                      ("sys/class/power_supply/battery/temp", "312\n"),
                      ("sys/class/thermal/thermal_zone0/temp", "45000\n"),
                      ("sys/class/thermal/thermal_zone0/type", "cpu-thermal\n")):
        p = tmp_path / "root" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path / "root")


def _merged(runs):
    """One probe's measurements as the live path commits them: a re-measurement's rounds follow the first's."""
    import copy

    out = copy.deepcopy(runs[0])
    for more in runs[1:]:
        for part, r in more.items():
            m = out[part]
            for f in ("time_s", "energy_j", "net_energy_j", "states", "window_times_s", "window_idle_power_w",
                      "canary_s"):
                getattr(m, f).extend(getattr(r, f))
    return out


def _campaign(path, metric, device_info):
    c = Campaign.create(str(path), {"metric": metric, "protocol": SETTINGS.to_dict(), "device": device_info,
                                    "runtime": "torch"})
    for p in PROBES:
        c.plan(p)
    return c


def _snapshot(c):
    """Everything a campaign stores per probe: status, every window's columns, every sample (less when it was
    stored: the two paths store at different moments)."""
    out = {}
    for p in c.probes():
        status, reason = c.conn.execute("SELECT status, reason FROM probes WHERE id = ?", (p.id,)).fetchone()
        out[p.id] = {"status": status, "reason": reason, "windows": c.windows(p.id, detail=True),
                     "samples": [{k: v for k, v in s.items() if k != "measured_utc"}
                                for s in c.samples() if s["probe_id"] == p.id]}
    return out


@pytest.mark.parametrize("metric,remeasured", [("time", False), ("energy", False), ("time", True), ("energy", True)])
def test_ingest_stores_what_the_live_path_stores(tmp_path, metric, remeasured):
    meter = ConstantPowerMeter(source="counter") if metric == "energy" else None
    dev = _RecordingHost(meter=meter, threads=1, root=_fake_root(tmp_path), slow_head_first=remeasured)
    info = dev.info()
    with _campaign(tmp_path / "live.db", metric, info) as live:
        for p in PROBES:
            measure_and_store(live, dev, p, metric, SETTINGS, "torch")
        want = _snapshot(live)
    # the same windows as a device's results file, ingested into a campaign planned with the same probes
    manifest = write_bundle(PROBES, str(tmp_path / "bundle"), settings=SETTINGS, metric=metric)
    doc = results_doc(manifest, {p.id: _merged(dev.runs[p.id]) for p in PROBES}, settings=SETTINGS.to_dict(),
                      device=info)
    write_results(doc, str(tmp_path / "results.json"))
    with _campaign(tmp_path / "ingested.db", metric, info) as c:
        r = ingest_results(c, read_json(str(tmp_path / "results.json")), manifest)
        got = _snapshot(c)
    assert r["probes"] == [p.id for p in PROBES]
    assert all(len(dev.runs[p.id]) == (2 if remeasured else 1) for p in PROBES)
    for pid in want:
        w, g = want[pid], got[pid]
        assert g["status"] == w["status"] == "done"
        assert len(g["windows"]) == len(w["windows"]) >= 4
        for ww, gw in zip(w["windows"], g["windows"]):
            for field in ("part", "round", "time_s", "energy_j", "net_energy_j", "idle_power_w", "start_s", "end_s",
                          "state", "canary_s"):
                assert gw[field] == ww[field], (pid, field)
            assert ww["canary_s"] > 0  # the host read its canary beside every window, and the results file kept it
            assert ww["start_s"] is not None and ww["end_s"] >= ww["start_s"]
            assert ww["state"] and ww["state"]["battery_pct"] == 81
            if metric == "energy":
                assert ww["state"]["meter_source"] == "counter"  # which reading of the meter, kept per window
                assert ww["energy_j"] > 0 and ww["net_energy_j"] is not None and ww["net_energy_j"] < ww["energy_j"]
                assert ww["idle_power_w"] == pytest.approx(5.0, rel=0.2)  # the constant meter's 5 W, idle
            else:
                assert ww["energy_j"] is None and ww["net_energy_j"] is None and ww["idle_power_w"] is None
        assert g["samples"] == w["samples"]
        assert {s["metric"] for s in w["samples"]} == ({"time", "energy"} if metric == "energy" else {"time"})


def _time_part(rounds=2, **extra):
    return dict({"steps_per_window": 3, "time_s": [0.01 * (i + 1) for i in range(rounds)]}, **extra)


def test_a_probe_failed_on_the_device_is_stored_failed_and_bundled_again(tmp_path):
    from thor_sdk.exporters.bundle import bundle_campaign

    manifest = write_bundle(PROBES, str(tmp_path / "bundle"), settings=SETTINGS)
    parts = {p["name"]: _time_part() for p in manifest["probes"][0]["parts"]}
    doc = {"format": "thor-sdk/results", "version": 1, "bundle": manifest["id"], "metric": "time",
           "probes": {PROBES[0].id: {"parts": parts}, PROBES[1].id: {"error": "OrtException: out of memory"}}}
    with _campaign(tmp_path / "c.db", "time", {"name": "phone"}) as c:
        r = ingest_results(c, doc, manifest)
        assert r["probes"] == [PROBES[0].id] and r["failed"] == [PROBES[1].id]
        row = c.conn.execute("SELECT status, reason FROM probes WHERE id = ?", (PROBES[1].id,)).fetchone()
        assert row[0] == "failed" and "out of memory" in row[1]
        again = ingest_results(c, doc, manifest)  # the same file again: nothing to do, said so
        assert again["probes"] == [] and "nothing ingested" in again["message"]
    # the next bundle carries the failed probe again, and its results fill it
    m2 = bundle_campaign(str(tmp_path / "c.db"), str(tmp_path / "bundle2"))
    assert [p["id"] for p in m2["probes"]] == [PROBES[1].id]
    doc2 = {"format": "thor-sdk/results", "version": 1, "bundle": m2["id"], "metric": "time",
            "parts": {p["name"]: _time_part() for p in m2["parts"]}}
    with Campaign.open(str(tmp_path / "c.db"), writer=True) as c:
        assert ingest_results(c, doc2, m2)["probes"] == [PROBES[1].id]
        assert c.status_counts() == {"done": 2}


def test_energy_basis_says_gross_or_net_and_a_campaign_keeps_one(tmp_path):
    manifest = write_bundle(PROBES[:1], str(tmp_path / "bundle"), settings=SETTINGS, metric="energy")
    other = write_bundle(PROBES[1:], str(tmp_path / "bundle2"), settings=SETTINGS, metric="energy")
    names = [p["name"] for p in manifest["parts"]]

    def doc(basis, manifest=manifest, **extra):
        return {"format": "thor-sdk/results", "version": 1, "bundle": manifest["id"], "metric": "energy",
                "parts": {n: _time_part(energy_j=[0.5 + i, 0.6 + i], energy_basis=basis, **extra)
                          for i, n in enumerate(names)}}

    with _campaign(tmp_path / "c.db", "energy", {"name": "bench"}) as c:
        with pytest.raises(FormatError, match="net_energy_j"):  # net twice is ambiguous
            ingest_results(c, doc("net", net_energy_j=[0.1, 0.2]), manifest)
        ingest_results(c, doc("net"), manifest)
        ws = c.windows(PROBES[0].id, detail=True)
        assert all(w["energy_j"] is None for w in ws)  # no gross value was measured
        assert sorted(w["net_energy_j"] for w in ws) == [0.5, 0.6, 1.5, 1.6]
        assert sorted(s["metric"] for s in c.samples()) == ["energy", "time"]
    with _campaign(tmp_path / "g.db", "energy", {"name": "bench"}) as c:
        ingest_results(c, doc("gross"), manifest)
        ws = c.windows(PROBES[0].id, detail=True)
        assert sorted(w["energy_j"] for w in ws) == [0.5, 0.6, 1.5, 1.6]
        assert all(w["net_energy_j"] is None for w in ws)
        with pytest.raises(FormatError, match="one campaign keeps one"):  # never a mix of gross and net
            ingest_results(c, doc("net", other), other)
        assert c.status_counts() == {"done": 1, "planned": 1}


TINY = {"format": "thor-sdk/layers", "version": 1, "name": "tiny", "input_shape": [16], "layers": [
    {"kind": "linear", "role": "input", "config": {"in_features": 16, "out_features": 8, "tokens": 1, "bias": 1}},
    {"kind": "output", "role": "output", "config": {"in_features": 8, "out_features": 4, "tokens": 1}}]}


def _run(*args):
    import subprocess

    return subprocess.run(["thor-sdk", *args], capture_output=True, text=True, timeout=300)


def _one_line_error(p, *words):
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), p.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_offline_chain_plans_bundles_runs_ingests_and_fits(tmp_path, monkeypatch):
    """bundle --model plans a campaign (nothing measured); harness run + ingest fill it; fit works; the chain on
    a measured campaign says what to do in one line, and ingesting the same file again does nothing."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    p = _run("bundle", "--model", "tiny.json", "--batch-size", "4", "--out", "b", "--device-name", "my-board",
             "--min-rounds", "2", "--max-rounds", "2", "--window-s", "0.01")
    assert p.returncode == 0, p.stderr
    assert "planned b.db: 2 probes, nothing measured" in p.stdout
    with Campaign.open("b.db") as c:
        assert c.status_counts() == {"planned": 2} and c.meta["device"]["name"] == "my-board"
        assert c.meta["targets"][0]["name"] == "tiny" and c.meta["batch_sizes"] == [4]
    p = _run("harness", "run", "b", "--out", "results.json", "--quiet")
    assert p.returncode == 0, p.stderr
    p = _run("harness", "ingest", "results.json", "--bundle", "b", "--campaign", "b.db")
    assert p.returncode == 0 and "stored 2 probe(s)" in p.stdout, p.stderr
    with Campaign.open("b.db") as c:
        assert c.status_counts() == {"done": 2}
        ws = [w for p_ in c.probes() for w in c.windows(p_.id, detail=True)]
        assert ws and all(w["start_s"] is not None and w["end_s"] >= w["start_s"] for w in ws)
    p = _run("harness", "ingest", "results.json", "--bundle", "b", "--campaign", "b.db")
    assert p.returncode == 0 and "nothing ingested" in p.stdout, p.stderr
    p = _run("fit", "b.db", "--out", "est.json")
    assert p.returncode == 0, p.stderr
    kinds = set(json.loads((tmp_path / "est.json").read_text())["kinds"])
    with Campaign.open("b.db") as c:  # a 16->8 linear is within a busy host's noise: a flagged sample is left out
        flagged = {s["kind"] for s in c.samples() if s["flagged"]}
    assert "output" in kinds and {"linear"} - flagged <= kinds, (kinds, flagged)
    _one_line_error(_run("bundle", "--campaign", "b.db", "--out", "again"), "every probe is measured",
                    "--campaign NEW.db")
    _one_line_error(_run("bundle", "--model", "tiny.json", "--out", "b"), "exists", "--campaign b.db")
    _one_line_error(_run("bundle", "--out", "x"), "--campaign", "--model")
    assert not os.path.exists("again") and not os.path.exists("x.db")


def test_probe_resume_refuses_a_campaign_planned_for_a_device_it_cannot_drive(tmp_path):
    from thor_sdk.api import probe
    from thor_sdk.campaign.targets import plan_campaign
    from thor_sdk.errors import UsageError

    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    db = str(tmp_path / "c.db")
    assert plan_campaign(db, [str(tmp_path / "tiny.json")], [4])["probes"] == 2
    with pytest.raises(UsageError, match="thor-sdk bundle --campaign"):
        probe([], device="host", out=db, resume=True)
    with Campaign.open(db) as c:
        assert c.status_counts() == {"planned": 2}


def test_the_phone_apps_window_dialect_is_stored_the_same(tmp_path):
    """windows[].t_start_s/t_end_s/state (what the phone apps write) land in the same columns as window_times_s."""
    manifest = write_bundle(PROBES[:1], str(tmp_path / "bundle"), settings=SETTINGS)
    wins = [{"t_start_s": 100.0 + i, "t_end_s": 100.5 + i, "state": {"battery_pct": 90 - i, "charging": False}}
            for i in range(2)]
    doc = {"format": "thor-sdk/results", "version": 1, "bundle": manifest["id"], "metric": "time", "harness": "android",
           "parts": {p["name"]: _time_part(windows=wins) for p in manifest["parts"]}}
    with _campaign(tmp_path / "c.db", "time", {"name": "phone"}) as c:
        ingest_results(c, doc, manifest)
        ws = c.windows(PROBES[0].id, detail=True)
    assert [(w["round"], w["start_s"], w["end_s"], w["state"]["battery_pct"]) for w in ws if w["part"] == "head"] == \
        [(0, 100.0, 100.5, 90), (1, 101.0, 101.5, 89)]


def test_a_probe_that_cannot_run_in_the_harness_is_reported_failed_and_the_rest_go_on(tmp_path):
    """A part file that is no model (its sha256 re-signed in the manifest): that probe is {"error": ...}, the
    other is measured, and ingest stores the first failed with the reason."""
    from thor_sdk.exporters.bundle import sha256_file
    from thor_sdk.harness.bundle_runner import run_bundle
    from thor_sdk.harness.results import parse_failures

    fast = ProtocolSettings(warmup_steps=1, min_rounds=2, max_rounds=2, min_window_s=0.002, measure_idle=False)
    probes = [PROBES[0], Probe("relu", {"numel": 64}, 4, "hidden")]
    d = tmp_path / "bundle"
    manifest = write_bundle(probes, str(d), settings=fast)
    shared = {part["file"] for p in manifest["probes"][1:] for part in p["parts"]}  # identical parts: one file
    bad = next(part["file"] for part in manifest["probes"][0]["parts"] if part["file"] not in shared)
    (d / bad).write_bytes(b"not an onnx model")
    digest, size = sha256_file(str(d / bad)), os.path.getsize(d / bad)
    for part in manifest["probes"][0]["parts"]:
        if part["file"] == bad:
            part["sha256"] = digest
    for f in manifest["files"]:
        if f["path"] == bad:
            f["sha256"], f["bytes"] = digest, size
    (d / "manifest.json").write_text(json.dumps(manifest))
    doc = run_bundle(str(d))
    assert list(parse_failures(doc)) == [probes[0].id] and "parts" in doc["probes"][probes[1].id]
    with Campaign.create(str(tmp_path / "c.db"), {"metric": "time", "protocol": fast.to_dict(),
                                                  "device": {"name": "board"}}) as c:
        for p in probes:
            c.plan(p)
        r = ingest_results(c, doc, manifest)
        assert r["failed"] == [probes[0].id] and r["probes"] == [probes[1].id]
        assert c.status_counts() == {"failed": 1, "done": 1}


def test_the_idle_baseline_travels_from_one_energy_bundle_to_the_next(tmp_path):
    """A phone runs one bundle per launch: its results carry the idle power it measured, ingest keeps it in
    the campaign, and the campaign's next bundle hands it back, so the device does not measure idle again in
    an unchanged state (docs/protocol.md)."""
    from thor_sdk.exporters.bundle import bundle_campaign, read_manifest
    from thor_sdk.harness.bundle_runner import run_bundle

    state = {"charging": False, "screen_on": False}
    with _campaign(tmp_path / "c.db", "energy", {"name": "phone"}):
        pass
    with Campaign.open(str(tmp_path / "c.db")) as c:  # first bundle: one probe (the other stays planned)
        c.conn.execute("UPDATE probes SET status = 'done' WHERE id = ?", (PROBES[1].id,))
        c.conn.commit()
    first = bundle_campaign(str(tmp_path / "c.db"), str(tmp_path / "b1"))
    assert "idle_baseline" not in first  # nothing measured yet
    meter = ConstantPowerMeter(power_w=3.0)
    r1 = run_bundle(str(tmp_path / "b1"), meter=meter, state_fn=lambda: dict(state))
    assert r1["idle_baseline"]["power_w"] == pytest.approx(3.0, rel=1e-6)
    assert len(r1["idle_baseline"]["measured"]) == 1 and r1["idle_baseline"]["state"] == state
    with Campaign.open(str(tmp_path / "c.db"), writer=True) as c:
        ingest_results(c, r1, first)
        assert c.meta["idle_baseline"] == {"power_w": r1["idle_baseline"]["power_w"], "state": state,
                                           "bundle": first["id"]}
        c.conn.execute("UPDATE probes SET status = 'planned' WHERE id = ?", (PROBES[1].id,))
        c.conn.commit()
    second = bundle_campaign(str(tmp_path / "c.db"), str(tmp_path / "b2"))
    assert second["idle_baseline"] == {"power_w": r1["idle_baseline"]["power_w"], "state": state}
    assert read_manifest(str(tmp_path / "b2"))["idle_baseline"] == second["idle_baseline"]
    windows = meter.windows
    r2 = run_bundle(str(tmp_path / "b2"), meter=meter, state_fn=lambda: dict(state))
    assert r2["idle_baseline"]["measured"] == []  # same state: the carried power is used, idle not measured
    idle_w = {w for part in r2["parts"].values() for w in part["window_idle_power_w"]}
    assert idle_w == {r1["idle_baseline"]["power_w"]}
    state["charging"] = True  # a changed state measures idle again
    r3 = run_bundle(str(tmp_path / "b2"), meter=meter, state_fn=lambda: dict(state))
    assert len(r3["idle_baseline"]["measured"]) == 1 and r3["idle_baseline"]["state"]["charging"] is True
    assert meter.windows > windows
    # a time bundle carries none
    assert "idle_baseline" not in write_bundle(PROBES[:1], str(tmp_path / "t"), settings=SETTINGS, metric="time",
                                               idle_baseline={"power_w": 1.0})


def test_bundle_model_trainable_plans_the_fine_tunes_probes(tmp_path):
    """``bundle --model X --trainable P`` (a phone that fine-tunes X): the planned campaign's target is the fine-tune,
    named ``X [trainable P]``, its probes those of the fine-tune (a frozen input layer's forward-only probe, none of
    X trained whole); ``--trainable`` without ``--model`` is refused in one line, before anything is written."""
    from thor_sdk.campaign.targets import plan_campaign, target_points
    from thor_sdk.layers import layers_of

    db = str(tmp_path / "ft.db")
    planned = plan_campaign(db, ["har"], [8], trainable=["6"])
    tuned = target_points([layers_of("har", trainable=["6"])], [8])
    assert planned["probes"] == len(tuned)
    with Campaign.open(db) as c:
        assert [t["name"] for t in c.meta["targets"]] == ["har [trainable 6]"]
        assert {p.id for p in c.probes("planned")} == set(tuned)
    assert set(tuned) != set(target_points([layers_of("har")], [8]))
    _one_line_error(_run("bundle", "--campaign", db, "--trainable", "6", "--out", str(tmp_path / "x")),
                    "--trainable", "--model")
    assert not (tmp_path / "x").exists()
