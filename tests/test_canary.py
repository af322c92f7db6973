"""The canary (thor_sdk.harness.canary): read beside every window, its median over a probe or a whole-model run puts
that run at one machine speed. A scripted machine whose speed switches between windows (as this project's VMs do
every few seconds) drives the real protocol, subtraction, store and fit code."""

import math
import sqlite3

import pytest

from thor_sdk.campaign.measure import canary_detail, derive_samples, probe_canary
from thor_sdk.harness.protocol import PartResult, ProtocolSettings, measure_parts
from thor_sdk.probes import Probe
from thor_sdk.store import Campaign

META = {"metric": "time", "protocol": {}, "device": {"name": "synthetic", "kind": "host"}, "runtime": "torch"}
CANARY_S = 2.5e-4  # the canary's seconds at speed 1


class Machine:
    """A clock and a speed (1 fast, 1.5 slow) that a schedule sets per window: ``speeds[i]`` for the i-th window."""

    def __init__(self, speeds):
        self.t, self.speeds, self.window = 100.0, list(speeds), -1
        self.canary_reads = 0

    @property
    def speed(self):
        return self.speeds[self.window % len(self.speeds)] if self.window >= 0 else 1.0

    def clock(self):
        return self.t

    def canary(self):
        self.canary_reads += 1
        if self.canary_reads % 2 == 1:  # the read before a window: the next window's speed starts here
            self.window += 1
        dt = CANARY_S * self.speed
        self.t += dt
        return dt


class Trainer:
    def __init__(self, machine, step_s):
        self.m, self.step_s = machine, step_s

    def step(self):
        self.m.t += self.step_s * (self.m.speed if self.m.window >= 0 else 1.0)

    def close(self):
        pass


class Stub:
    """What derive_samples reads of a probe: its role and parts."""
    role = "hidden"

    def parts(self):
        return ["head", "hidden"]


SETTINGS = ProtocolSettings(warmup_steps=1, min_window_s=0.01, min_rounds=8, max_rounds=8)


def _measure(speeds, head_s=1e-3, layer_s=4e-4):
    m = Machine(speeds)
    trainers = {"head": Trainer(m, head_s), "hidden": Trainer(m, head_s + layer_s)}
    return measure_parts(trainers, SETTINGS, clock=m.clock, canary=m.canary, wall=m.clock), m


def test_every_window_gets_the_geometric_mean_of_a_reading_before_and_after_it_outside_its_time():
    res, m = _measure([1.0, 1.5])
    for r in res.values():
        assert len(r.canary_s) == len(r.time_s) == 8
    # ABBA over windows fast, slow, fast, slow...: each window's own speed, read before and after it
    head, hidden = res["head"], res["hidden"]
    assert head.canary_s[0] == pytest.approx(CANARY_S) and hidden.canary_s[0] == pytest.approx(1.5 * CANARY_S)
    assert head.time_s[0] == pytest.approx(1e-3) and hidden.time_s[0] == pytest.approx(1.5 * 1.4e-3)  # no canary in it
    assert m.canary_reads == 2 * 16
    assert res["head"].to_dict()["canary_s"] == head.canary_s
    assert "canary_s" not in PartResult("x", 1, [1.0]).to_dict()  # the vectors' documents are unchanged without it


def test_a_probe_measured_in_the_slow_state_is_put_at_the_campaigns_speed():
    """A probe measured wholly while the machine ran 1.5x slower reads its 0.4 ms layer as 0.6 ms, with its canary
    1.5x the campaign's median reading: fit puts it back at 0.4 ms. Windows are not levelled one by one (a single
    reading varies more than a window): a probe that switched states halfway keeps its measured difference."""
    from thor_sdk.fitting.pipeline import MIN_CANARY_SAMPLES, at_campaign_level, campaign_canary

    slow, _ = _measure([1.5])
    s = derive_samples(Stub(), slow)[0]
    assert s["value"] == pytest.approx(1.5 * 4e-4) and s["canary_s"] == pytest.approx(1.5 * CANARY_S)
    fast = [derive_samples(Stub(), _measure([1.0])[0])[0] for _ in range(MIN_CANARY_SAMPLES)]
    c = campaign_canary(fast + [s])
    assert c == pytest.approx(CANARY_S)
    got, _ = at_campaign_level(fast + [s], [], "time", c)
    assert got[-1]["value"] == pytest.approx(4e-4) and got[0]["value"] == pytest.approx(4e-4)
    mixed, _ = _measure([1.0, 1.5, 1.5, 1.0])  # ABBA: the hidden part always slow, the head always fast
    m = derive_samples(Stub(), mixed)[0]
    assert m["value"] == pytest.approx(1.1e-3) and m["canary_s"] == pytest.approx(1.25 * CANARY_S)
    assert mixed["hidden"].time_s[0] == pytest.approx(1.5 * 1.4e-3)  # the measured parts are left as they were


def test_windows_without_a_reading_each_give_no_canary():
    res, _ = _measure([1.0, 1.5])
    assert probe_canary(res) == pytest.approx(1.25 * CANARY_S)
    res["head"].canary_s.pop()
    assert probe_canary(res) is None
    res, _ = _measure([1.0, 1.5])
    res["head"].canary_s[0] = float("nan")
    assert probe_canary(res) is None and derive_samples(Stub(), res)[0]["canary_s"] is None
    assert canary_detail(PartResult("model", 1, [1e-3, 2e-3])) == {}


def test_a_whole_model_runs_detail_and_energy_runs_have_none():
    r = PartResult("model", 1, [1e-3, 1.5e-3, 1e-3], canary_s=[CANARY_S, 1.5 * CANARY_S, CANARY_S])
    assert canary_detail(r) == {"canary_s": pytest.approx(CANARY_S)}
    assert canary_detail(r, metric="energy") == {}


def _store(c, probe, res, samples=None):
    """Commit a measured probe as measure_and_store does: every window as its round ends, then the samples."""
    from thor_sdk.campaign.measure import window_detail

    for part, r in res.items():
        for i, t in enumerate(r.time_s):
            c.add_window(probe.id, part, i, t)
    c.complete(probe.id, samples if samples is not None else derive_samples(Stub(), res),
               window_detail=window_detail(res))


def _probe(i):
    return Probe("linear", {"in_features": 8 + i, "out_features": 8, "bias": 1, "tokens": 1}, 4, "hidden")


def test_the_store_keeps_each_windows_reading_and_each_samples_and_an_older_file_gains_the_columns(tmp_path):
    path = str(tmp_path / "c.db")
    c = Campaign.create(path, META)
    p = _probe(0)
    c.plan(p)
    res, _ = _measure([1.0, 1.5])
    _store(c, p, res)
    got = c.samples()[0]
    assert got["canary_s"] == pytest.approx(derive_samples(Stub(), res)[0]["canary_s"])
    ws = c.windows(p.id, detail=True)
    assert sorted(w["canary_s"] for w in ws) == pytest.approx(sorted(res["head"].canary_s + res["hidden"].canary_s))
    c.close()
    # a file from before the column: read as None, and its first completed probe adds it
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE samples DROP COLUMN canary_s")
    con.commit()
    con.close()
    c = Campaign.open(path, writer=True)
    assert c.samples()[0]["canary_s"] is None
    q = _probe(1)
    c.plan(q)
    c.complete(q.id, [{"metric": "time", "value": 1e-4, "std": 1e-6, "n": 5, "flagged": False, "flag_reason": None,
                       "parts": {}, "canary_s": 3e-4}])
    assert [s["canary_s"] for s in c.samples()] == [None, 3e-4]
    c.close()


def test_fit_puts_each_sample_at_the_campaigns_canary_and_the_others_at_the_reference():
    from thor_sdk.fitting.pipeline import MIN_CANARY_SAMPLES, at_campaign_level, campaign_canary

    fast = [{"value": 1.0, "std": 0.1, "canary_s": CANARY_S} for _ in range(MIN_CANARY_SAMPLES)]
    slow = [{"value": 1.5, "std": 0.15, "canary_s": 1.5 * CANARY_S}]
    plain = [{"value": 2.0, "std": 0.2}]
    c = campaign_canary(fast + slow + plain)
    assert c == pytest.approx(CANARY_S)
    got, summary = at_campaign_level(fast + slow + plain, [], "time", c)
    assert got[-2]["value"] == pytest.approx(1.0) and got[-2]["std"] == pytest.approx(0.1)
    assert got[-1] == plain[0]  # no reading and no references: as measured
    assert summary["samples_by_canary"] == MIN_CANARY_SAMPLES + 1 and summary["canary_s"] == pytest.approx(CANARY_S)
    assert campaign_canary(fast[:MIN_CANARY_SAMPLES - 1]) is None  # too few readings: no canary level


def _ref(mean, canary_s, minute):
    return {"model": "reference:conv2d-x", "metric": "time", "mean": mean, "batch_size": 16,
            "created_utc": f"2026-11-30T07:{minute:02d}:00+00:00",
            "detail": {"canary_s": canary_s}}


def test_the_drift_is_what_the_canary_leaves_and_calibration_runs_are_put_at_its_level():
    from thor_sdk.fitting.pipeline import calibrate, drift_log_var

    refs = [_ref(1e-3 * f, CANARY_S * f, 2 * i) for i, f in enumerate([1.0, 1.5, 1.0, 1.5, 1.5, 1.0])]
    raw, n = drift_log_var(refs, "time")
    assert n == 6 and math.sqrt(raw) > 0.2
    assert drift_log_var(refs, "time", CANARY_S)[0] == pytest.approx(0.0, abs=1e-12)

    class Est:
        def estimate(self, layers, batch_size):
            return {"layers_total": {"mean": 1.0}}

    runs = [{"model": f"calibration:{m}", "metric": "time", "mean": f, "batch_size": b, "created_utc": None,
             "detail": {"layers": [{"kind": "relu"}], "canary_s": CANARY_S * f}}
            for m, f in (("a", 1.0), ("b", 1.5)) for b in (8, 32)]
    cal = calibrate(Est(), runs, "time", 0.0, canary_c=CANARY_S)
    assert [r["device_level"] for r in cal["runs"]] == pytest.approx([1.0, 1.0, 1.5, 1.5])
    assert all(r["log_ratio"] == pytest.approx(0.0) for r in cal["runs"])
    assert cal["log_bias"] == 0.0 and cal["rel_std"] == pytest.approx(0.0, abs=1e-9)
    as_measured = calibrate(Est(), runs, "time", 0.0)  # without the campaign's canary: the runs' own means
    assert as_measured["rel_std"] > 0.1


def test_the_host_reads_the_canary_beside_every_window_of_a_whole_model():
    from thor_sdk.devices.host import HostDevice

    r = HostDevice(threads=1).measure_model("lenet5", 4, settings=ProtocolSettings(min_rounds=3, max_rounds=3,
                                                                                  min_window_s=0.01))
    assert len(r.canary_s) == len(r.time_s) == 3
    assert all(0 < c < 0.1 for c in r.canary_s)


@pytest.mark.parametrize("bad", [[], {"version": 1}, {"canary_s": -1.0, "version": 1}, {"canary_s": float("nan"),
                                  "version": 1}, {"canary_s": 2e-4, "version": "1"}, {"canary_s": 2e-4, "version": 0},
                                 {"canary_s": 2e-4, "version": True}])
def test_an_estimators_canary_is_read_only_when_sound(bad):
    import json
    import os

    from thor_sdk.errors import FormatError
    from thor_sdk.runtime import load_estimator

    path = os.path.join(os.path.dirname(__file__), "..", "examples", "check", "synthetic-phone-time.json")
    with open(path) as f:
        doc = json.load(f)
    good = dict(doc, whole_model=dict(doc.get("whole_model") or {}, canary={"canary_s": 2e-4, "version": 1}))
    assert load_estimator(good).canary == {"canary_s": 2e-4, "version": 1}
    assert load_estimator(doc).canary is None
    with pytest.raises(FormatError):
        load_estimator(dict(doc, whole_model=dict(doc.get("whole_model") or {}, canary=bad)))


def test_an_evaluation_scores_at_the_canary_level_only_where_every_row_has_it():
    from thor_sdk.evaluate.unseen import thor_summary

    def row(ape, can):
        r = {"thor_ape": ape, "flops_ape": 2 * ape, "covered95": True, "thor_level_adjusted_ape": None,
             "measured_passes": [1.0]}
        if can is not None:
            r["canary"] = {"thor_ape": can, "flops_ape": 3 * can, "covered95": can < 10}
        return r

    s = thor_summary([row(20.0, 5.0), row(30.0, 15.0)])
    assert s["thor_mape"] == 25.0 and s["canary"] == {"n": 2, "thor_mape": 10.0, "flops_mape": 30.0,
                                                       "coverage95": 0.5}
    assert thor_summary([row(20.0, 5.0), row(30.0, None)])["canary"] is None  # not over a subset of the nets


@pytest.fixture(scope="module")
def slow_thirds(tmp_path_factory):
    """A profile of lenet5's and har's layers on a planted device that runs every third measurement 2x slower, with
    the canary read beside it: fitted as it is."""
    import json

    from fake_device import FakeDevice
    from thor_sdk.api import fit, profile
    from thor_sdk.campaign.prior import build_prior

    d = tmp_path_factory.mktemp("canary")
    (d / "prior.json").write_text(json.dumps(build_prior(["lenet5", "har"])))
    dev = FakeDevice(noise=0.005, speeds=(1.0, 1.0, 2.0))
    profile(device=dev, out=str(d / "p.db"), max_probes=40, prior_path=str(d / "prior.json"), reference_every_s=None,
            calibration_models=[])
    fit(str(d / "p.db"), out=str(d / "e.json"))
    return d


def _planted(model, b):
    from fake_device import planted_cost
    from thor_sdk.layers import layers_of

    return sum(planted_cost(x["kind"], x["config"], b, x["role"]) for x in layers_of(model).layers)


def test_a_profile_on_a_machine_that_is_slow_a_third_of_the_time_describes_its_usual_speed(slow_thirds):
    """The estimate reads the planted cost at speed 1 (the campaign's median canary), not the mixture of states the
    probes ran in (about 1.26x, the geometric mean of 1, 1 and 2)."""
    import json

    from thor_sdk.api import estimate

    doc = json.loads((slow_thirds / "e.json").read_text())
    assert doc["whole_model"]["canary"]["canary_s"] == pytest.approx(CANARY_S)
    assert doc["provenance"]["sample_levels"]["samples_by_canary"] > 0
    for model in ("lenet5", "har"):
        got = estimate(str(slow_thirds / "e.json"), model, batch_size=16)["total"]["mean"]
        assert got == pytest.approx(_planted(model, 16), rel=0.08), model


def test_evaluate_scores_against_each_pass_at_the_profiles_canary_level(slow_thirds):
    from fake_device import FakeDevice
    from thor_sdk.evaluate import evaluate_unseen

    r = evaluate_unseen(str(slow_thirds / "e.json"), ["lenet5", "har"], device=FakeDevice(speeds=(2.0, 1.0)),
                        batch_sizes=[16], reference=None, passes=3)
    for row in r["rows"]:
        truth = _planted(row["model"], 16)
        assert max(row["measured_passes"]) == pytest.approx(2 * truth, rel=0.05)  # a pass in the slow state
        assert all(v == pytest.approx(truth, rel=0.05) for v in row["canary"]["measured_passes"])
        assert row["canary"]["covered95"]
    assert r["canary"]["n"] == 2 and r["canary"]["thor_mape"] < 8.0


def test_the_target_driven_benchmark_reads_each_run_at_its_campaigns_canary_level(tmp_path):
    from fake_device import FakeDevice
    from thor_sdk.evaluate import evaluate

    r = evaluate(["har"], device=FakeDevice(noise=0.005, speeds=(1.0, 1.0, 2.0)), batch_size=16,
                 out_dir=str(tmp_path / "acc"))
    (row,) = r["rows"]
    truth = _planted("har", 16)
    assert max(row["measured_runs"]) == pytest.approx(2 * truth, rel=0.03)  # the last run, in the slow state
    assert row["canary"]["measured"] == pytest.approx(truth, rel=0.03)
    assert all(v == pytest.approx(truth, rel=0.03) for v in row["canary"]["measured_runs"])
    assert r["canary"]["n"] == 1 and r["canary"]["thor_mape"] == pytest.approx(row["canary"]["thor_ape"])


def test_a_pass_is_put_at_the_profiles_canary_level_only_by_the_same_canary():
    from thor_sdk.campaign.measure import at_canary_level
    from thor_sdk.harness.protocol import CANARY_VERSION

    slow = PartResult("model", 1, [3e-3, 3e-3, 3e-3], canary_s=[1.5 * CANARY_S] * 3)
    assert at_canary_level(slow, {"canary_s": CANARY_S, "version": CANARY_VERSION}) == pytest.approx(2e-3)
    assert at_canary_level(slow, {"canary_s": CANARY_S, "version": CANARY_VERSION + 1}) is None  # another workload
    assert at_canary_level(slow, None) is None
    assert at_canary_level(PartResult("model", 1, [3e-3]), {"canary_s": CANARY_S, "version": CANARY_VERSION}) is None


def test_layers_exact_probes_are_compared_with_a_profile_at_its_canary_level(slow_thirds, tmp_path):
    """``bench_gp_vs_probes``: probes of a net taken all in the slow state read twice the planted costs; put at the
    estimator's canary level they read the costs, and with a second campaign taken at speed 1 each layer is the
    median of the two. ``--as-measured`` leaves them raw."""
    import json

    from bench_module import load_bench
    from fake_device import FakeDevice
    from thor_sdk.api import probe
    from thor_sdk.runtime import load_estimator

    probe(["lenet5"], device=FakeDevice(noise=0.005, speeds=(2.0,)), batch_sizes=[16], out=str(tmp_path / "slow.db"))
    probe(["lenet5"], device=FakeDevice(noise=0.005, speeds=(1.0,)), batch_sizes=[16], out=str(tmp_path / "fast.db"))
    bench = load_bench("bench_gp_vs_probes")
    est = load_estimator(json.loads((slow_thirds / "e.json").read_text()))
    truth = _planted("lenet5", 16)
    with Campaign.open(str(tmp_path / "slow.db")) as slow, Campaign.open(str(tmp_path / "fast.db")) as fast:
        levelled = bench.compare(est, slow, ["lenet5"], 16)
        raw = bench.compare(est, slow, ["lenet5"], 16, level=False)
        both = bench.compare(est, [slow, fast], ["lenet5"], 16, level=False)
    assert levelled["levelled"] == levelled["probes"] > 0 and raw["levelled"] == 0
    assert levelled["nets"][0]["probes_s"] == pytest.approx(truth, rel=0.05)
    assert raw["nets"][0]["probes_s"] == pytest.approx(2 * truth, rel=0.05)
    assert both["probes"] == 2 * raw["probes"]
    assert both["nets"][0]["probes_s"] == pytest.approx(1.5 * truth, rel=0.05)  # each layer: the median of 2x and 1x
    bench.main(["--estimator", str(slow_thirds / "e.json"), "--campaign", str(tmp_path / "slow.db"), "--campaign",
                str(tmp_path / "fast.db"), "--model", "lenet5", "--report", str(tmp_path / "r.md")])
    text = (tmp_path / "r.md").read_text()
    assert f"{2 * raw['probes']} of {2 * raw['probes']} probe(s) put at the estimator's canary level" in text


def test_the_whole_model_std_takes_the_canarys_spread_where_the_reference_saw_less(slow_thirds, tmp_path):
    """A machine slow a third of the time, profiled without reference re-measurements: the reference gives no drift,
    the canary read beside every probe gives the spread of its two states (ln 2 x sqrt(2/9), about 0.33 for a third
    of the readings at twice the time), and the whole-model std carries it."""
    import json

    from thor_sdk.fitting.pipeline import canary_log_var, drift_log_var

    with Campaign.open(str(slow_thirds / "p.db")) as c:
        samples = [s for s in c.samples() if s["metric"] == "time"]
        runs = c.model_runs()
    assert drift_log_var(runs, "time")[0] == 0.0
    var = canary_log_var(samples)
    share = sum(s["canary_s"] > 1.5 * CANARY_S for s in samples) / len(samples)
    assert 0.2 < share < 0.5 and var == pytest.approx(math.log(2) ** 2 * share * (1 - share))
    doc = json.loads((slow_thirds / "e.json").read_text())
    assert doc["whole_model"]["drift_log_std"] == pytest.approx(math.sqrt(var), rel=1e-6)
    assert doc["whole_model"]["rel_std"] >= math.sqrt(var)
    assert canary_log_var(samples[:2]) == 0.0 and canary_log_var([dict(s, canary_s=None) for s in samples]) == 0.0


def test_a_reading_times_the_second_of_two_runs_of_the_workload():
    """The first run right after a window pays for what the window left behind (1.8x after a GRU's on this host):
    a reading times only the run after it, and the workload is the same fixed one every time."""
    from thor_sdk.harness.canary import Canary
    from thor_sdk.harness.protocol import CANARY_VERSION

    log = []

    class Logged(Canary):
        def _work(self):
            log.append("work")
            return super()._work()

    def clock():
        log.append("clock")
        return float(len(log))

    c = Logged(clock=clock)
    log.clear()
    assert c() == 2.0  # clock, work, clock: one run between the two readings of the clock
    assert log == ["work", "clock", "work", "clock"]
    assert CANARY_VERSION == 2  # readings of version 1 timed the first run: another series
    assert Canary()._work() == Canary()._work()  # no randomness: the same workload


def test_fit_names_the_campaigns_canary_version_and_one_series_of_readings_only(tmp_path):
    """A campaign from before the version was recorded read version 1; fitted with a newer one, its readings are left
    out (two workloads are not one series), and the estimator names the version its level is of."""
    from synthetic_campaign import relu_campaign

    from thor_sdk import api
    from thor_sdk.harness.protocol import CANARY_VERSION

    old, new = tmp_path / "old.db", tmp_path / "new.db"
    relu_campaign(old, canary_s=CANARY_S, speed=lambda i: 1.0 + 0.5 * (i % 2))
    relu_campaign(new, canary_s=2 * CANARY_S, speed=lambda i: 1.0 + 0.5 * (i % 2))
    with Campaign.open(str(new), writer=True) as c:
        c.set_meta("canary_version", CANARY_VERSION)
    alone = api.fit(campaign=str(old))
    assert alone["whole_model"]["canary"] == {"canary_s": pytest.approx(1.25 * CANARY_S, rel=0.25), "version": 1}
    both = api.fit(campaign=[str(old), str(new)])
    assert both["whole_model"]["canary"]["version"] == CANARY_VERSION
    levels = both["provenance"]["sample_levels"]
    assert levels["samples_by_canary"] == 60 and levels["canary_version"] == CANARY_VERSION  # the newer one's only


def test_a_campaign_of_another_canary_version_is_not_resumed(tmp_path):
    from synthetic_campaign import relu_campaign

    from thor_sdk import api
    from thor_sdk.errors import UsageError

    path = tmp_path / "old.db"
    relu_campaign(path, canary_s=CANARY_S)
    with pytest.raises(UsageError, match="canary of version 1"):
        api.probe(["lenet5"], out=str(path), resume=True)
    with Campaign.open(str(path)) as c:  # left as it was, and closed: it opens again
        assert len(c.samples()) == 60
