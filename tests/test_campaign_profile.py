"""thor-sdk profile through the real campaign code on a fake device: coverage of the prior, active
selection, drift references, calibration runs, kill and resume, and estimates of models never probed."""

import json
import math

import pytest
from fake_device import FakeDevice, planted_cost

from thor_sdk.api import estimate, fit, probe, profile, profile_summary
from thor_sdk.campaign.prior import build_prior, candidates, load_prior
from thor_sdk.campaign.profile import ProfilePlan
from thor_sdk.errors import FormatError, NotFoundError, UsageError
from thor_sdk.layers import layers_of
from thor_sdk.layers.kinds import base_kind
from thor_sdk.store import Campaign


@pytest.fixture(scope="module")
def small_prior(tmp_path_factory):
    """A prior from two reference nets (the shipped one is built from the whole zoo)."""
    doc = build_prior(["lenet5", "har"])
    path = tmp_path_factory.mktemp("prior") / "prior.json"
    path.write_text(json.dumps(doc))
    return path, doc


def test_prior_is_plain_data_with_shares(small_prior):
    path, doc = small_prior
    assert load_prior(path)["format"] == "thor-sdk/prior"
    assert {"conv2d", "linear", "relu", "maxpool2d", "output"} <= set(doc["kinds"])
    assert sum(k["share"] for k in doc["kinds"].values()) == pytest.approx(1.0)
    assert doc["kinds"]["linear"]["configs"][0]["models"] == ["har"]


def test_relative_shares_weigh_every_zoo_net_alike(small_prior):
    from thor_sdk.campaign.prior import proxy_cost_s

    _, doc = small_prior  # lenet5 and har: whatever their costs, each counts half
    # the nets' own kinds share 1; the kinds no zoo net has (elementwise, clamp) each add a tenth of the activations'
    from thor_sdk.campaign.prior import GENERIC_KINDS

    assert set(GENERIC_KINDS) <= set(doc["kinds"])
    assert sum(k["rel_share"] for n, k in doc["kinds"].items() if n not in GENERIC_KINDS) == pytest.approx(1.0)
    share_of = {m: 0.0 for m in ("lenet5", "har")}
    for n, e in doc["kinds"].items():
        for c in e["configs"] if n not in GENERIC_KINDS else ():
            for m in c["models"]:  # a net and its fine-tuned twin ("har:finetune") together
                share_of[m.split(":")[0]] += c["rel_share"] / len(c["models"])
    assert share_of["har"] == pytest.approx(0.5, abs=0.05) and share_of["lenet5"] == pytest.approx(0.5, abs=0.05)
    # rel_weight: count / (net cost)^2, so a config's variance counts relative to its net's cost
    from thor_sdk.layers import layers_of

    har_s = sum(proxy_cost_s(l["kind"], l["config"], l["role"]) for l in layers_of("har").layers)
    c = next(c for c in doc["kinds"]["linear"]["configs"] if c["models"] == ["har"])
    assert c["rel_weight"] == pytest.approx(c["count"] / har_s ** 2)


def test_each_net_has_a_fine_tuned_twin_whose_frozen_layers_carry_weight(small_prior):
    """The zoo trains whole; a phone mostly fine-tunes (backbone frozen, head trained). Each net's twin puts its
    backbone's forward-only configs in the prior at FINETUNE_WEIGHT of a whole net, so the profile's active selection
    values them (before, only the start's frozen share placed them: a frozen MobileNet's depthwise convs read
    1.7-5.8x their forward on profiles 64-77)."""
    from thor_sdk.campaign.prior import FINETUNE_WEIGHT, finetune_head, proxy_cost_s
    from thor_sdk.layers.kinds import get_kind

    _, doc = small_prior
    assert finetune_head("lenet5") == "11" and finetune_head("har") == "6"  # each net's last module with weights
    assert doc["net_weight"] == pytest.approx(2 * (1 + FINETUNE_WEIGHT))
    twin = [(k, c) for k, e in doc["kinds"].items() for c in e["configs"] if "lenet5:finetune" in c["models"]]
    forward_only = [(k, c) for k, c in twin if not get_kind(k).backward_runs(c["role"], c["config"])]
    assert {k for k, _ in forward_only} >= {"conv2d", "maxpool2d", "relu", "linear"}
    assert all(c["config"]["frozen"] == 1 for k, c in forward_only if get_kind(k).has_params)
    assert all("lenet5" not in c["models"] for _, c in forward_only)  # the whole net has none
    # its forward-only activations run in place, as the pretrained backbones fine-tunes start from build them
    # (lenet5's own ReLUs are out of place)
    relus = [c for k, c in forward_only if k == "relu"]
    assert relus and all(c["config"]["inplace"] == 1 for c in relus)
    assert all(not c["config"].get("inplace") for c in doc["kinds"]["relu"]["configs"] if c["role"] == "hidden")
    # weighed as a quarter of a net: count x weight / (the twin's cost)^2
    ft_s = sum(proxy_cost_s(l["kind"], l["config"], l["role"]) for l in layers_of("lenet5", trainable=["11"]).layers)
    k, c = next((k, c) for k, c in forward_only if k == "conv2d")
    assert c["rel_weight"] == pytest.approx(FINETUNE_WEIGHT * c["count"] / ft_s ** 2)
    # a frozen backbone's conv reads its input's channels as they are: only a net's first, trained conv takes the
    # channels neighbour (one channel for three, three for one)
    def first_convs(frozen):
        configs = [c for c in doc["kinds"]["conv2d"]["configs"] if c["role"] == "input"
                   and bool(c["config"].get("frozen")) == frozen and "lenet5" in c["models"][0]]
        every = dict(doc, kinds={"conv2d": dict(doc["kinds"]["conv2d"], configs=configs)}, size_factor=1.0,
                     neighbour_share=0.0, dilation_share=0.0, frozen_share=0.0, input_channels_share=1.0)
        return {c["config"]["in_channels"] for c in configs}, {cf["in_channels"] for cf, _, _ in
                                                                candidates(every, "conv2d", 50)}
    zoo, drawn = first_convs(frozen=True)
    assert zoo and drawn == zoo
    zoo, drawn = first_convs(frozen=False)
    assert zoo == {1} and drawn == {3}


def test_candidates_are_valid_deterministic_and_span_batch_sizes(small_prior):
    _, doc = small_prior
    a = candidates(doc, "conv2d", 40, seed=0)
    assert a == candidates(doc, "conv2d", 40, seed=0)
    assert len(a) == 40
    batches = sorted(b for _, b, _ in a)
    assert batches[0] <= 4 and batches[-1] >= 64
    assert all(c["groups"] == 1 and c["width"] == c["height"] for c, _, _ in a)
    assert len({json.dumps(c, sort_keys=True) for c, _, _ in a}) > 10  # sizes vary, not only the zoo's own


def test_candidates_keep_the_alignment_of_the_zoo_widths():
    prior = load_prior()
    for kind, feats in (("conv2d", ("in_channels", "out_channels")), ("linear", ("in_features", "out_features"))):
        zoo = {f: {e["config"][f] % 8 == 0 for e in prior["kinds"][kind]["configs"]} for f in feats}
        got = candidates(prior, kind, 120, seed=0)
        for f in feats:
            aligned = [c[f] for c, _, _ in got if c[f] % 8 == 0]
            assert len(aligned) >= 0.5 * len(got), (kind, f)  # the zoo's widths are mostly multiples of 8
            assert len(set(aligned)) > 5  # and they still vary
        assert True in zoo[feats[0]]
    # an unaligned zoo width (3 input channels, 113 sensor features) is scaled freely
    from thor_sdk.campaign.prior import _scaled

    assert _scaled("conv2d", {"in_channels": 3, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1,
                              "groups": 1, "height": 32, "width": 32, "bias": 1},
                   {"in_channels": 1.7, "out_channels": 1.1}) == {
        "in_channels": 5, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1, "groups": 1, "height": 32,
        "width": 32, "bias": 1}


def test_the_start_spreads_each_kind_over_batch_sizes():
    """A kind's first start probes span the batch sizes of its cheap candidates: in Sobol order they were mostly
    at batch 2-4, and kinds that get no probe after the start were then extrapolated to batch 16-128."""
    from thor_sdk.campaign.profile import ProfilePlan, _spread_start

    plan = ProfilePlan(load_prior())
    for key, start in plan.start.items():
        bs = [p.batch_size for p in start]
        first = bs[:3]
        # the spread is over batch size and sizes together: a kind with three size features (a pooling's
        # channels, height, width) may take a size for its third pick, not an eighth of the batch range; a
        # ``:gemm`` entry's batches are 1-15 by definition, a narrower span than its sizes', so it may take sizes
        # for its second and third (1, 1, 3 in the prior of 2026-11-30)
        assert max(first) / min(first) >= min(4.0 if not key.endswith(":gemm") else 3.0, max(bs) / min(bs)), \
            (key, first, sorted(set(bs)))
        assert sorted(p.id for p in start) == sorted(p.id for p in plan.candidates[key] if p in start)
    # farthest-first in ln(batch size), ties in the given order; the rest keeps its order
    class P:
        def __init__(self, b, length=1):
            self.batch_size, self.config = b, {"channels": 64, "length": length}
    ps = [P(b) for b in (2, 3, 4, 64, 16, 2, 128)]
    assert [p.batch_size for p in _spread_start(ps, first=3)] == [2, 128, 16, 3, 4, 64, 2]
    # and over sizes: one length-128 probe among length-1 ones at the same batch sizes is taken second
    ps = [P(16), P(64), P(32), P(16, length=128), P(20)]
    assert [(p.batch_size, p.config["length"]) for p in _spread_start(ps, first=2)][:2] == [(16, 1), (16, 128)]


def test_a_convs_start_takes_grouped_and_ungrouped_probes():
    """The dense conv2d entry also costs grouped convs of several channels per group (RegNetX, ResNeXt), a few of its
    candidates, and no size feature tells them apart: its start takes one among its first two probes, whatever the
    sizes; the depthwise variant's start is all depthwise."""
    from thor_sdk.campaign.profile import ProfilePlan, _spread_start
    from thor_sdk.layers.kinds import model_key

    def pattern(p):
        return "grouped" if p.config["groups"] > 1 else "dense"

    plan = ProfilePlan(load_prior(), kinds=["conv2d"])
    assert {pattern(p) for p in plan.start["conv2d"][:2]} == {"dense", "grouped"}
    assert all(model_key("conv2d", p.config) == "conv2d" for p in plan.start["conv2d"])
    assert all(p.config["in_channels"] == p.config["groups"] for p in plan.start["conv2d:grouped"])

    class P:
        def __init__(self, b, cin, groups, side=8):
            self.batch_size = b
            self.config = {"in_channels": cin, "out_channels": cin, "groups": groups, "height": side, "width": side}
    # the one grouped candidate, at the same sizes as the others, is the second pick; the dense ones spread
    ps = [P(2, 64, 1), P(128, 64, 1, side=64), P(4, 64, 8), P(16, 32, 1)]
    assert [(p.batch_size, pattern(p)) for p in _spread_start(ps, first=3)][:3] == [
        (2, "dense"), (4, "grouped"), (128, "dense")]
    # all grouped (the depthwise variant): spread as if the coordinate were not there
    dw = [P(2, 64, 64), P(128, 64, 64), P(4, 64, 64)]
    assert [p.batch_size for p in _spread_start(dw, first=3)] == [2, 128, 4]


def test_profile_covers_every_kind_then_stops_on_budget(tmp_path, small_prior):
    path, doc = small_prior
    dev = FakeDevice()
    events = []
    db = tmp_path / "p.db"
    # 36: the start takes 3 probes of each of the plan's 10 entries, the rest are active
    s = profile(device=dev, out=str(db), max_probes=36, prior_path=str(path), reference_every_s=1e-9,
                calibration_models=["lenet5"], progress=lambda e, i: events.append((e, i)))
    assert s["stop_reason"] == "probe budget of 36 reached" and s["probes_done"] == 36
    # the space-filling start reaches every kind (and its variants: lenet5's 1x1 convs below batch 16, conv2d:gemm)
    assert {base_kind(k) for k in s["kinds"]} == set(doc["kinds"]) and set(s["kinds"]) == set(ProfilePlan(doc).kinds)
    probes = [i for e, i in events if e == "probe"]
    assert any(p["worst"]["kind"] for p in probes)  # the bar shows the current worst uncertainty
    with Campaign.open(str(db)) as c:
        runs = c.model_runs()
        assert c.meta["campaign_kind"] == "profile" and c.meta["runtime"] == "torch"
        assert c.meta["calibration_held_out"] is True  # a resume plans as it did (lenet5's own configs unaimed)
    assert sum(r["model"].startswith("reference:") for r in runs) >= 2
    cal = [r for r in runs if r["model"].startswith("calibration:")]
    end = [r for r in cal if r["detail"]["pass"] != "spread"]
    assert len(end) == 2 and end[0]["detail"]["layers"]
    # the reference re-measured before every probe here: each time during the probes, a spread pass after it (the
    # end pass and the last reference have none)
    refs = sum(r["model"].startswith("reference:") for r in runs)
    assert len(cal) - len(end) == 2 * (refs - 2) and s["calibration_spread_passes"] == refs - 2
    # read back from the store alone (bench_generalization --reuse): what the run said, but what only the run knew
    stored = profile_summary(str(db))
    for key in ("probes_done", "probes_failed", "calibration_runs", "calibration_spread_passes", "flagged", "noisy",
                "kinds", "reference"):
        assert stored[key] == s[key], key
    assert "stop_reason" not in stored and stored["runtime"] == "torch" and stored["metric"] == "time"
    assert 0 <= stored["measured_span_s"] <= s["seconds"] + 1


def test_spread_calibration_passes_follow_the_reference_and_go_on_after_a_resume(tmp_path, small_prior):
    """A spread pass measures every calibration (model, batch size) right after a reference re-measurement during
    the probes, numbered on across a resume; ``calibration_spread=False`` leaves only the end passes."""
    path, _ = small_prior

    def labels(db):
        with Campaign.open(str(db)) as c:
            return [(r["model"].split(":")[0], (r.get("detail") or {}).get("pass"), (r.get("detail") or {}).get("spread"))
                    for r in c.model_runs()]

    db = tmp_path / "p.db"
    s = profile(device=FakeDevice(), out=str(db), max_probes=12, prior_path=str(path), reference_every_s=1e-9,
                calibration_models=["har"])
    got = labels(db)
    firsts = [i for i, (m, p, _) in enumerate(got) if p == "spread" and (i == 0 or got[i - 1][1] != "spread")]
    assert firsts and all(got[i - 1][0] == "reference" for i in firsts)
    spread = [k for _, p, k in got if p == "spread"]
    assert spread == [k for k in range(len(firsts)) for _ in (8, 32)] and s["calibration_spread_passes"] == len(firsts)
    s2 = profile(device=FakeDevice(), out=str(db), resume=True, max_probes=16, reference_every_s=1e-9)
    later = [k for _, p, k in labels(db) if p == "spread"][len(spread):]
    assert later and later[0] == len(firsts) and s2["calibration_spread_passes"] == len(firsts) + len(later) // 2
    off = tmp_path / "off.db"
    profile(device=FakeDevice(), out=str(off), max_probes=12, prior_path=str(path), reference_every_s=1e-9,
            calibration_models=["har"], calibration_spread=False)
    assert [p for m, p, _ in labels(off) if m == "calibration"] == [0, 0]


def test_calibration_runs_passes_while_its_budget_lasts_and_resumes_each_run_once(tmp_path, small_prior):
    """After the probes, whole calibration models are measured in passes while the reserved time lasts (one
    window of a small net read up to 1.5x another minutes later on a shared host; one pass used 5 s of 96),
    the reference before each pass; a crash mid-pass resumes with each (model, batch, pass) measured once."""
    from thor_sdk.campaign.profile import calibrate

    path, _ = small_prior
    db = tmp_path / "p.db"
    profile(device=FakeDevice(), out=str(db), max_probes=4, prior_path=str(path), reference_every_s=0,
            calibration_models=[])
    now = [0.0]

    class Timed(FakeDevice):  # each whole-model measurement takes 1 s of the fake clock; crash on call crash_at
        def __init__(self, crash_at=None):
            super().__init__()
            self.crash_at = crash_at

        def measure_model(self, *a, **k):
            if self.crash_at is not None and len(self.calls) + 1 >= self.crash_at:
                raise KeyboardInterrupt("simulated crash")
            now[0] += 1.0
            return super().measure_model(*a, **k)

    def passes(c):
        got = {}
        for r in c.model_runs():
            if r["model"].startswith("calibration:"):
                got.setdefault((r["model"], r["batch_size"]), []).append(r["detail"]["pass"])
        return got

    refs = []
    with Campaign.open(str(db), writer=True) as c:  # 4 runs a pass (4 s); a deadline at 10 s leaves room for 2
        n = calibrate(c, Timed(), "time", None, "torch", ["lenet5", "har"], (8, 32), deadline=10.0,
                      clock=lambda: now[0], before_pass=lambda: refs.append(now[0]))
        assert n == 8 and refs == [0.0, 4.0]
        assert passes(c) == {(f"calibration:{m}", b): [0, 1] for m in ("lenet5", "har") for b in (8, 32)}
    db2 = tmp_path / "p2.db"
    profile(device=FakeDevice(), out=str(db2), max_probes=4, prior_path=str(path), reference_every_s=0,
            calibration_models=[])
    with Campaign.open(str(db2), writer=True) as c:  # no time budget: one pass
        assert calibrate(c, Timed(), "time", None, "torch", ["lenet5"], (8, 32), deadline=None,
                         clock=lambda: now[0]) == 2
    now[0] = 0.0
    db3 = tmp_path / "p3.db"
    profile(device=FakeDevice(), out=str(db3), max_probes=4, prior_path=str(path), reference_every_s=0,
            calibration_models=[])
    with Campaign.open(str(db3), writer=True) as c, pytest.raises(KeyboardInterrupt):  # dies in pass 1's 2nd run
        calibrate(c, Timed(crash_at=6), "time", None, "torch", ["lenet5", "har"], (8, 32), deadline=100.0,
                  clock=lambda: now[0])
    now[0] = 0.0
    with Campaign.open(str(db3), writer=True) as c:  # resumed: pass 1's other 3 runs, then 3 s + 3 s > 5 s: stop
        assert calibrate(c, Timed(), "time", None, "torch", ["lenet5", "har"], (8, 32), deadline=5.0,
                         clock=lambda: now[0]) == 3
        assert passes(c) == {(f"calibration:{m}", b): [0, 1] for m in ("lenet5", "har") for b in (8, 32)}


def test_profile_estimates_a_model_it_never_probed(tmp_path, small_prior):
    path, _ = small_prior
    db = tmp_path / "p.db"
    profile(device=FakeDevice(noise=0.01), out=str(db), max_probes=45, prior_path=str(path),
            reference_every_s=1e-9, calibration_models=[])
    doc = fit(str(db), out=str(tmp_path / "e.json"))
    assert doc["version"] == 5 and doc["runtime"] == "torch"
    # the reference probe's spread (1% noise here) is the drift every estimate carries
    assert 0.003 < doc["whole_model"]["rel_std"] < 0.03 and "drift" in doc["whole_model"]["source"]
    for model, b in (("cnn5", 8), ("lenet5", 100)):  # cnn5: never in the prior; lenet5 at an unprobed batch
        truth = sum(planted_cost(l["kind"], l["config"], b, l["role"]) for l in layers_of(model).layers)
        got = estimate(str(tmp_path / "e.json"), model, batch_size=b)["total"]
        assert abs(got["mean"] - truth) / truth < 0.25, (model, got, truth)
        assert abs(got["mean"] - truth) <= 3 * got["std"], (model, got, truth)


def test_kill_then_resume_measures_each_probe_exactly_once(tmp_path, small_prior):
    path, _ = small_prior
    db = tmp_path / "p.db"
    dev = FakeDevice(fail_after=7)
    with pytest.raises(KeyboardInterrupt):
        profile(device=dev, out=str(db), max_probes=12, prior_path=str(path), reference_every_s=0,
                calibration_models=[])
    dev2 = FakeDevice()
    profile(device=dev2, out=str(db), resume=True, max_probes=12, reference_every_s=0)
    with Campaign.open(str(db)) as c:
        done = [p.id for p in c.probes("done")]
    assert len(done) == len(set(done)) == 12
    measured = [x for x in dev.calls[:7] + dev2.calls if not x.startswith("model:")]
    assert sorted(set(measured)) == sorted(done)
    # the probe interrupted mid-measurement is measured again once, nothing else twice
    assert len(measured) <= len(done) + 1


def test_resume_refuses_the_other_campaign_kind_and_fit_refuses_mixed_runtimes(tmp_path, small_prior):
    path, _ = small_prior
    t = tmp_path / "t.db"
    probe(["har"], device=FakeDevice(), batch_sizes=[16], out=str(t), max_probes=3)
    with pytest.raises(UsageError, match="probe --resume"):
        profile(device=FakeDevice(), out=str(t), resume=True, max_probes=5)
    with pytest.raises(UsageError, match="not a profile"):
        profile_summary(str(t))
    o = tmp_path / "o.db"
    probe(["har"], device=FakeDevice(), batch_sizes=[16], out=str(o), max_probes=3, runtime="onnxruntime")
    with pytest.raises(UsageError, match="different runtimes"):
        fit([str(t), str(o)])
    merged = fit([str(t), str(t)])
    assert merged["runtime"] == "torch"


@pytest.mark.parametrize("kw", [{"max_seconds": float("nan")}, {"max_probes": 0}, {"target_rel_std": -1}])
def test_profile_refuses_bad_budgets_before_any_work(tmp_path, small_prior, kw):
    path, _ = small_prior
    with pytest.raises(UsageError):
        profile(device=FakeDevice(), out=str(tmp_path / "x.db"), prior_path=str(path), **kw)
    assert not (tmp_path / "x.db").exists()


def test_evaluate_unseen_measures_held_out_models_beside_the_estimate(tmp_path, small_prior):
    from thor_sdk.evaluate import evaluate_unseen

    path, _ = small_prior
    db = tmp_path / "p.db"
    dev = FakeDevice(noise=0.01)
    profile(device=dev, out=str(db), max_probes=40, prior_path=str(path), reference_every_s=1e-9,
            calibration_models=[])
    fit(str(db), out=str(tmp_path / "e.json"))
    doc = json.loads((tmp_path / "e.json").read_text())
    assert doc["whole_model"]["reference"]["n"] >= 2  # the profile's reference level travels with the estimator
    r = evaluate_unseen(str(tmp_path / "e.json"), ["cnn5", "lstm"], device=dev, batch_sizes=[8], reference="har")
    assert [x["model"] for x in r["rows"]] == ["cnn5"]  # lstm's kinds were never profiled: said, not averaged in
    assert r["skipped"][0]["model"] == "lstm" and "no model for these layers' kinds: embedding" in r["skipped"][0]["reason"]
    row = r["rows"][0]
    assert row["thor_ape"] < 25 and r["coverage95"] == 1.0
    assert 0.9 < row["device_level"] < 1.1  # the fake device does not drift
    assert r["level_warning"] is None
    assert r["reference"]["model"] == "har" and len(r["reference"]["runs"]) == 1


def test_a_device_running_outside_its_profiles_drift_is_warned_about():
    """Profile 8's generalization run that covered 4 of 9 nets: the reference probe at 1.08-1.49 of its level,
    against a profile whose own drift was 1.7%. Its evaluations at 0.96-0.98 pass (at least +-5% allowed)."""
    from thor_sdk.evaluate.unseen import level_warning

    said = level_warning([1.08, 1.49, 1.0, None], 0.017)
    assert said.startswith("the device ran at 1.00-1.49 of its profile's level (2 of 3 models")
    assert "x0.95-1.05" in said and "as it was profiled" in said
    assert level_warning([0.96, 0.98], 0.017) is None
    assert level_warning([1.3], 0.2) is None  # a profile that drifted as much itself: its std already says so
    assert level_warning([], 0.01) is None and level_warning([None], 0.01) is None


def test_evaluate_measures_every_model_in_passes_and_scores_the_median(tmp_path, small_prior):
    """A machine that runs 2x slow during one model's measurement: with 3 passes (the middle one reversed)
    the median of the passes is scored, not the slow one; each pass re-measures the reference."""
    from thor_sdk.evaluate import evaluate_unseen

    path, _ = small_prior
    dev = FakeDevice(noise=0.0)
    profile(device=dev, out=str(tmp_path / "p.db"), max_probes=40, prior_path=str(path), reference_every_s=None,
            calibration_models=[])
    fit(str(tmp_path / "p.db"), out=str(tmp_path / "e.json"))

    class Drifting(FakeDevice):
        order = []

        def measure_model(self, model, batch_size, **kw):
            r = super().measure_model(model, batch_size, **kw)
            self.order.append(model)
            if model == "cnn5" and self.order.count("cnn5") == 2:  # a burst of load on one pass
                r.time_s = [2.0 * t for t in r.time_s]
            return r

    dev2 = Drifting(noise=0.0)
    one = evaluate_unseen(str(tmp_path / "e.json"), ["cnn5", "lenet5"], device=FakeDevice(noise=0.0), batch_sizes=[8],
                          reference="har")
    r = evaluate_unseen(str(tmp_path / "e.json"), ["cnn5", "lenet5"], device=dev2, batch_sizes=[8], reference="har",
                        passes=3)
    assert [c for c in dev2.order if c != "har"] == ["cnn5", "lenet5", "lenet5", "cnn5", "cnn5", "lenet5"]
    assert len(r["reference"]["runs"]) == 6 and r["passes"] == 3
    row = {x["model"]: x for x in r["rows"]}["cnn5"]
    assert len(row["measured_passes"]) == 3 and max(row["measured_passes"]) == pytest.approx(2 * row["measured"])
    assert row["measured"] == pytest.approx({x["model"]: x for x in one["rows"]}["cnn5"]["measured"])
    # the passes' spread pooled over both nets (cnn5's ln 2 burst in one of three, lenet5 none; 2 + 2 dof) is the
    # measurement's floor, said beside the MAPE; one pass has no spread to read
    from thor_sdk.cli.evaluate import unseen_table

    assert r["measurement_floor"]["log_std"] == pytest.approx(math.log(2) / math.sqrt(6))
    assert r["measurement_floor"]["dof"] == 4 and r["measurement_floor"]["mape"] > 0
    assert "measurement floor: the models' passes spread ln-std 0.283" in unseen_table(r)
    assert one["measurement_floor"] is None and "measurement floor" not in unseen_table(one)
    with pytest.raises(UsageError, match="passes"):
        evaluate_unseen(str(tmp_path / "e.json"), ["cnn5"], device=dev2, passes=0)


def test_no_kind_takes_more_than_its_capped_share_of_the_probes(tmp_path, small_prior):
    from thor_sdk.campaign.profile import MIN_CAP, SHARE_CAP, ProfilePlan

    path, doc = small_prior
    share = ProfilePlan(doc).share  # per entry: a kind's zoo share, split among its variants
    s = profile(device=FakeDevice(noise=0.3), out=str(tmp_path / "p.db"), max_probes=70, prior_path=str(path),
                reference_every_s=None, calibration_models=[])
    n = s["probes_done"]
    for kind, count in s["kinds"].items():
        assert count <= max(MIN_CAP, SHARE_CAP * share[kind] * n) + 1, (kind, count)


def test_every_kind_gets_at_least_its_floor_share_of_the_probes(tmp_path, small_prior):
    """A kind whose GP looks sure of itself still gets FLOOR_SHARE of its relative share of the probes:
    without the floor, the planted costs leave ``linear`` (over half of lenet5 + har's relative cost)
    below it, as every host profile left ``linear`` at 6-13 of 800-1,300 probes."""
    from thor_sdk.campaign.profile import FLOOR_SHARE, ProfilePlan

    path, doc = small_prior
    share = ProfilePlan(doc).share
    counts = {}
    for floor in (None, 0):
        s = profile(device=FakeDevice(), out=str(tmp_path / f"p{floor}.db"), max_probes=110, prior_path=str(path),
                    reference_every_s=None, calibration_models=[], floor_share=floor)
        counts[floor] = (s["kinds"], s["probes_done"])
    kinds, n = counts[None]
    for kind, c in kinds.items():
        assert c >= FLOOR_SHARE * share[kind] * n - 1, (kind, c)
    kinds0, n0 = counts[0]
    assert kinds0["linear"] < FLOOR_SHARE * share["linear"] * n0 - 1 < kinds["linear"]
    with pytest.raises(UsageError, match="floor_share"):
        profile(device=FakeDevice(), out=str(tmp_path / "bad.db"), max_probes=5, prior_path=str(path),
                floor_share=1.5)


def test_candidates_take_structural_neighbours_of_the_zoo_layers():
    """A quarter of a conv's candidates take the next odd kernel size (padding kept "same"), and a recurrent
    kind whose zoo layers all have one role gets the other: an unseen 7-tap conv1d and a CRNN's GRU (which
    computes its input's gradient; the zoo's GRUs read the data) are then measured, not extrapolated."""
    from thor_sdk.campaign.prior import _kernel_neighbour, _valid

    prior = load_prior()
    zoo_kernels = {e["config"]["kernel"] for e in prior["kinds"]["conv1d"]["configs"]}
    got = candidates(prior, "conv1d", 320, seed=0)  # (at 160, 0-2 unseen kernels: the few 7-, 15- and 33-taps')
    kernels = [c["kernel"] for c, _, _ in got]
    unseen = {k for k in kernels if k not in zoo_kernels}  # most neighbours are other zoo kernels (3, 5, 7)
    assert unseen and all(k % 2 and min(abs(k - z) for z in zoo_kernels) == 2 for k in unseen)
    assert sum(k not in zoo_kernels for k in kernels) / len(got) <= 0.4
    for c, _, _ in got:
        assert _valid("conv1d", c)
        if c["kernel"] not in zoo_kernels and c["padding"]:
            assert c["padding"] == c.get("dilation", 1) * (c["kernel"] // 2)  # a "same" conv stays "same"

    assert {e["role"] for e in prior["kinds"]["gru"]["configs"]} == {"input"}
    roles = [r for _, _, r in candidates(prior, "gru", 160, seed=0)]
    assert 0.15 <= roles.count("hidden") / len(roles) <= 0.35
    # kinds whose zoo layers have both roles, or that are not recurrent, keep the zoo's roles (but those run forward
    # only, as behind a frozen backbone: forward_only_share, tests/test_frozen.py)
    assert {r for c, _, r in candidates(prior, "relu", 80, seed=0)} == {"hidden", "input"}
    no_forward_only = {k: v for k, v in prior.items() if k != "forward_only_share"}
    relu = prior["kinds"]["relu"]
    whole = dict(no_forward_only, kinds={"relu": dict(relu, configs=[c for c in relu["configs"]
                                                                     if c["role"] == "hidden"])})
    assert {r for _, _, r in candidates(whole, "relu", 80, seed=0)} == {"hidden"}  # (the zoo's nets trained whole)
    # a kind whose zoo layers all have a bias: a share of the candidates has none (attention projections,
    # x @ y). Every zoo linear has one (vit_tiny's bias-free ones were the stand-ins of its attention, now kind sdpa)
    assert {e["config"]["bias"] for e in prior["kinds"]["linear"]["configs"]} == {1}
    biases = [c["bias"] for c, _, _ in candidates(prior, "linear", 160, seed=0)]
    assert 0.15 <= biases.count(0) / len(biases) <= 0.35
    # conv2d's zoo layers have both: its candidates keep the zoo's own mix
    zoo_bias = [e["config"]["bias"] for e in prior["kinds"]["conv2d"]["configs"]]
    assert set(zoo_bias) == {0, 1}
    got = [c["bias"] for c, _, _ in candidates(prior, "conv2d", 160, seed=0)]
    assert got.count(1) / len(got) < 0.25

    assert _kernel_neighbour({"kernel": 1, "stride": 1, "padding": 0}, down=True) == {"kernel": 3, "stride": 1,
                                                                                      "padding": 1}
    assert _kernel_neighbour({"kernel": 5, "stride": 2, "padding": 0}, down=True) == {"kernel": 3, "stride": 2,
                                                                                      "padding": 0}
    assert _kernel_neighbour({"kernel": 8, "stride": 8, "padding": 0}, down=False) is None  # patchify
    assert _kernel_neighbour({"kernel": 2, "stride": 1, "padding": 0}, down=False) is None  # even


def test_attention_candidates_keep_whole_heads_self_attention_keys_and_take_the_other_path():
    """Kind mha's candidates: every embedding width a multiple of its heads (aligned to 8 where the zoo layer's
    is), a self-attention layer's keys as many as its queries, cross-attention's apart; a share takes the path
    its zoo layer does not (weights returned or the fused kernel), so both are sampled for every layout."""
    from thor_sdk.campaign.prior import _valid

    prior = load_prior()
    zoo = prior["kinds"]["mha"]["configs"]
    assert {e["config"]["cross"] for e in zoo} == {0, 1}
    got = candidates(prior, "mha", 160, seed=0)
    assert len(got) == 160
    for c, b, role in got:
        assert _valid("mha", c) and c["embed_dim"] % c["num_heads"] == 0 and 1 <= b <= 128
        assert c["cross"] or c["kv_len"] == c["seq_len"]
        if c["num_heads"] in (1, 2, 4):  # the zoo's widths (64) are multiples of 8 and of these heads
            assert c["embed_dim"] % 8 == 0
    assert any(c["cross"] and c["kv_len"] != c["seq_len"] for c, _, _ in got)
    for cross in (0, 1):
        paths = {c["need_weights"] for c, _, _ in got if c["cross"] == cross}
        assert paths == {0, 1}, cross
    assert len({c["seq_len"] for c, _, _ in got}) > 40  # sizes spread, not the three zoo layers


def test_attention_candidates_and_integration_points_take_the_other_dropout():
    """Most of the zoo's attention layers drop out their probabilities (nn.TransformerEncoderLayer's 0.1);
    nn.MultiheadAttention's default drops none, and dropout costs much: a share of mha candidates takes the other
    dropout, and the kind's integration points hold each zoo config with it at half weight. Other kinds' candidate
    streams are those of before (a dimension of its own)."""
    from thor_sdk.campaign.profile import OTHER_ROLE_WEIGHT, ProfilePlan

    prior = load_prior()
    zoo = prior["kinds"]["mha"]["configs"]
    from thor_sdk.probes import canonical_config

    zoo_keys = {json.dumps(canonical_config(e["config"]), sort_keys=True) for e in zoo}
    got = candidates(prior, "mha", 200, seed=0)
    flipped = [c for c, _, _ in got if (c["p"] == 0) != any(e["config"]["p"] == 0 and e["config"]["embed_dim"] ==
                                                           c["embed_dim"] and e["config"]["num_heads"] ==
                                                           c["num_heads"] and e["config"]["cross"] == c["cross"]
                                                           for e in zoo)]
    assert 0.1 < len(flipped) / len(got) < 0.4
    assert {c["p"] for c, _, _ in got} >= {0, 0.1}
    plan = ProfilePlan(prior, kinds=["mha"])
    pts = plan.integration["mha"]
    def key(config):
        return json.dumps(canonical_config(config), sort_keys=True)

    zoo_pts = [w for p, w, _ in pts if key(p.config) in zoo_keys]
    other = [w for p, w, _ in pts if key(p.config) not in zoo_keys]
    assert len(other) == len(zoo_pts) and sum(other) == pytest.approx(OTHER_ROLE_WEIGHT * sum(zoo_pts))
    for p, _, _ in pts:
        if key(p.config) not in zoo_keys:  # a zoo config but for its dropout, which is on one side only
            same = [e["config"] for e in zoo if key(dict(e["config"], p=p.config["p"])) == key(p.config)]
            assert same and all((c["p"] == 0) != (p.config["p"] == 0) for c in same)
    conv = candidates(prior, "conv2d", 20, seed=0)  # unchanged by the extra dimension of mha
    assert conv == candidates(prior, "conv2d", 20, seed=0)


def test_group_norm_candidates_keep_whole_groups_and_take_other_group_counts():
    """Kind groupnorm's candidates: channels a multiple of the groups (aligned to 8 where the zoo layer's are);
    the zoo's group counts (resnet20_gn's 2, poolformer_tiny's 1) and, in a share, twice or half of them, so a net
    of 4 or 32 groups is not an extrapolation in that feature alone."""
    from thor_sdk.campaign.prior import _valid

    prior = load_prior()
    assert {e["config"]["num_groups"] for e in prior["kinds"]["groupnorm"]["configs"]} == {1, 2}
    got = candidates(prior, "groupnorm", 80, seed=0)
    assert len(got) == 80
    for c, b, role in got:
        assert _valid("groupnorm", c) and c["channels"] % c["num_groups"] == 0 and c["channels"] % 8 == 0
    assert {c["num_groups"] for c, _, _ in got} == {1, 2, 4}
    assert len({c["spatial"] for c, _, _ in got}) > 20


def test_prelu_candidates_take_the_shared_slope_the_zoo_lacks():
    """The zoo's PReLUs (MobileFaceNet's) have one slope per channel; nn.PReLU() shares one: a share of the
    candidates takes it, the rest keep the zoo's."""
    prior = load_prior()
    assert {e["config"]["shared"] for e in prior["kinds"]["prelu"]["configs"]} == {0}
    got = candidates(prior, "prelu", 60, seed=0)
    shared = [c["shared"] for c, _, _ in got]
    assert 0 < sum(shared) < len(shared) / 2


def test_sequence_lengths_spread_wider_than_widths_and_old_priors_keep_their_candidates():
    prior = load_prior()
    zoo = [e["config"]["seq_len"] for e in prior["kinds"]["gru"]["configs"]]
    seqs = [c["seq_len"] for c, _, _ in candidates(prior, "gru", 160, seed=0)]
    assert min(seqs) < min(zoo) / 2 and max(seqs) > max(zoo) * 2  # beyond the size factor's [1/2, 2]
    assert min(seqs) >= min(zoo) / 4 - 1 and max(seqs) <= max(zoo) * 4 + 1
    # a prior without the new fields (an older file, or --prior) gets no neighbours and the size factor
    old = {k: v for k, v in prior.items() if k not in ("sequence_factor", "neighbour_share")}
    got = candidates(old, "gru", 160, seed=0)
    assert {r for _, _, r in got} == {"input"}
    assert min(c["seq_len"] for c, _, _ in got) >= min(zoo) / 2 - 1


def test_a_recurrent_kind_integrates_over_the_role_its_zoo_layers_lack(tmp_path):
    from thor_sdk.campaign.profile import OTHER_ROLE_WEIGHT, ProfilePlan

    plan = ProfilePlan(load_prior(), kinds=["gru", "relu"])
    by_role = {}
    for p, w, rw in plan.integration["gru"]:
        by_role.setdefault(p.role, []).append(w)
    assert set(by_role) == {"input", "hidden"}
    assert sum(by_role["hidden"]) == pytest.approx(OTHER_ROLE_WEIGHT * sum(by_role["input"]))
    # a kind that is not recurrent integrates over its zoo configs' own roles: hidden, and forward only (input) as
    # the fine-tuned twins' frozen backbones run it
    assert {p.role for p, _, _ in plan.integration["relu"]} == {"hidden", "input"}
    relu = load_prior()["kinds"]["relu"]["configs"]
    assert all(all(m.endswith(":finetune") for m in c["models"]) for c in relu if c["role"] == "input")


@pytest.mark.parametrize("field,value", [("neighbour_share", 1.5), ("neighbour_share", -0.1),
                                         ("sequence_factor", 0.5), ("sequence_factor", 1e6)])
def test_prior_refuses_out_of_range_candidate_settings(tmp_path, field, value):
    doc = dict(load_prior(), **{field: value})
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(FormatError):
        load_prior(str(path))


def test_bench_calibration_refits_with_each_pass_and_scores_held_out_rows(tmp_path, small_prior, capsys):
    """``bench/bench_calibration.py``: the campaign refitted with all calibration passes, with each alone (the spread
    ones together) and with the end passes only, each fit scored on an evaluation's held-out rows (reused, not
    measured again)."""
    from bench_module import load_bench

    from thor_sdk.campaign.profile import calibrate, calibration_pass

    path, _ = small_prior
    db = tmp_path / "p.db"
    profile(device=FakeDevice(), out=str(db), max_probes=40, prior_path=str(path), reference_every_s=1e-9,
            calibration_models=[])
    now = [0.0]

    def clock():
        now[0] += 1.0
        return now[0]

    with Campaign.open(str(db), writer=True) as c:
        assert calibrate(c, FakeDevice(), "time", None, "torch", ["lenet5", "har"], (8, 32), deadline=1e9,
                         clock=clock, max_passes=2) == 8
        assert calibration_pass(c, FakeDevice(), "time", None, "torch", ["lenet5", "har"], (8,),
                                {"pass": "spread", "spread": 0}) == 2
    rows = [{"model": m, "batch_size": 16, "group": "heldout", "flops_ape": 20.0,
             "measured": sum(planted_cost(l["kind"], l["config"], 16, l["role"]) for l in layers_of(m).layers)}
            for m in ("lenet5", "har")]
    ev = tmp_path / "results.json"
    ev.write_text(json.dumps({"rows": rows}))
    bench = load_bench("bench_calibration")
    bench.main(["--campaign", str(db), "--evaluation", str(ev)])
    out = capsys.readouterr().out
    assert "calibration passes [0, 1, 'spread']" in out
    lines = {ln.split("  ")[0].strip(): ln for ln in out.splitlines() if "held out THOR" in ln}
    assert set(lines) == {"all passes", "end passes", "pass 0 alone", "pass 1 alone", "pass spread alone"}
    assert all("cover 2/2" in ln for ln in lines.values())  # planted costs, which THOR's sum assumes: covered
    # pooled: one truth (each net's median over the evaluations), without the FLOPs column each evaluation had
    bench.main(["--campaign", str(db), "--evaluation", str(ev), "--evaluation", str(ev), "--pool"])
    pooled = [ln for ln in capsys.readouterr().out.splitlines() if "held out THOR" in ln]
    assert len(pooled) == 5 and all(ln.count("| held out THOR") == 1 and "FLOPs" not in ln and "cover 2/2" in ln
                                    for ln in pooled)


def test_bench_gp_vs_probes_compares_each_probed_layer_with_its_estimate(tmp_path, small_prior, capsys):
    """``bench/bench_gp_vs_probes.py``: a profile's estimator against a target campaign's exact probes of the
    same layers, per net and per kind. On planted costs (what the fake device measures) the profile's
    estimates sit near the probes; a layer the target campaign never probed is counted, not compared."""
    from bench_module import load_bench

    path, _ = small_prior
    db, est_path, exact = tmp_path / "p.db", tmp_path / "p.json", tmp_path / "exact.db"
    profile(device=FakeDevice(), out=str(db), max_probes=60, prior_path=str(path), calibration_models=[])
    fit(str(db), out=str(est_path))
    probe(["lenet5"], device=FakeDevice(), batch_sizes=[16], out=str(exact))
    bench = load_bench("bench_gp_vs_probes")
    from thor_sdk.runtime import load_estimator

    with Campaign.open(str(exact)) as c:
        res = bench.compare(load_estimator(json.loads(est_path.read_text())), c, ["lenet5", "har"], 16)
    lenet, har = res["nets"]
    assert lenet["layers"] == len(layers_of("lenet5").layers) and lenet["unprobed"] == 0
    assert har["layers"] == 0 and har["unprobed"] == len(layers_of("har").layers) and har["ratio"] is None
    truth = sum(planted_cost(l["kind"], l["config"], 16, l["role"]) for l in layers_of("lenet5").layers)
    assert lenet["probes_s"] == pytest.approx(truth, rel=0.05)  # the fake device measures with 1% noise
    assert 0.8 < lenet["ratio"] < 1.25
    assert {(k["kind"], k["role"]) for k in res["kinds"]} == {(l["kind"], l["role"]) for l in layers_of("lenet5").layers}
    assert all(0.0 <= k["covered95"] <= 1.0 for k in res["kinds"])
    # each kind's sums add up to the net's, and its ratio is theirs
    assert sum(k["probes_s"] for k in res["kinds"]) == pytest.approx(lenet["probes_s"])
    assert sum(k["estimates_s"] for k in res["kinds"]) == pytest.approx(lenet["estimates_s"])
    assert all(k["ratio"] == pytest.approx(k["estimates_s"] / k["probes_s"]) for k in res["kinds"])
    bench.main(["--estimator", str(est_path), "--campaign", str(exact), "--model", "lenet5", "--batch-size", "16",
                "--report", str(tmp_path / "r.md")])
    out = capsys.readouterr().out
    assert f"| lenet5 | {lenet['layers']} (0) |" in out and "| kind | role |" in out
    assert (tmp_path / "r.md").read_text() == out[:-1] and json.loads((tmp_path / "r.json").read_text())["nets"]
    with pytest.raises(SystemExit):
        bench.main(["--estimator", str(est_path), "--campaign", str(exact), "--model", "lenet5", "--batch-size", "0"])


def test_coverage_probes_go_to_the_zoo_configs_least_sure_in_relative_terms(tmp_path, small_prior):
    """Every COVERAGE_EVERY-th probe after the start is a zoo config (at an integration batch size) picked by
    its ln-variance per probing second, not by its cost in the nets: cheap layers the model knows least get
    samples too. Without coverage picks, the same budget measures fewer zoo configs exactly."""
    from thor_sdk.campaign.profile import COVERAGE_EVERY, INTEGRATION_BATCHES, ProfilePlan, coverage_score

    path, doc = small_prior
    plan = ProfilePlan(doc)
    zoo = {p.id for k in plan.coverage for p in plan.coverage[k]}
    assert zoo and all(p.batch_size in INTEGRATION_BATCHES for k in plan.coverage for p in plan.coverage[k])
    n_start = sum(min(3, len(plan.start[k])) for k in plan.kinds)
    n_after = 4 * COVERAGE_EVERY
    picked = {}
    for every in (COVERAGE_EVERY, 0):
        db = tmp_path / f"p{every}.db"
        profile(device=FakeDevice(), out=str(db), max_probes=n_start + n_after, prior_path=str(path),
                reference_every_s=None, calibration_models=[], **({} if every else {"coverage_every": 0}))
        with Campaign.open(str(db)) as c:
            picked[every] = [p.id for p in c.probes("done")][n_start:]
    assert len(picked[COVERAGE_EVERY]) == n_after
    assert sum(i in zoo for i in picked[COVERAGE_EVERY]) >= n_after // COVERAGE_EVERY
    assert sum(i in zoo for i in picked[COVERAGE_EVERY]) > sum(i in zoo for i in picked[0])


def test_coverage_score_is_highest_far_from_the_samples():
    from thor_sdk.campaign.profile import coverage_score
    from thor_sdk.fitting.pipeline import fit_kind
    from thor_sdk.probes import Probe

    rows = [{"kind": "relu", "config": {"numel": n}, "batch_size": b, "role": "hidden",
             "value": 1e-5 + 1e-9 * n * b, "std": 1e-7} for n in (1000, 2000, 4000) for b in (4, 8, 16)]
    gp = fit_kind("relu", rows)
    near, far = Probe("relu", {"numel": 2000}, 8, "hidden"), Probe("relu", {"numel": 4_000_000}, 8, "hidden")
    s = coverage_score(gp, [near, far])
    assert s[1] > s[0] >= 0


def test_a_campaign_written_before_kind_mha_had_masks_reads_and_fits_as_unmasked(tmp_path):
    """Kind mha gained mask and causal after campaigns had stored mha samples without them: such a stored sample
    reads as unmasked (ADDED_FEATURES), so fit works on it (it had failed with a KeyError) and the estimator serves
    masked and unmasked layers alike. Its probes keep their stored configs (their ids hash them), so resuming such
    a campaign is one clear error naming the missing features, not a second measurement of each probe."""
    import sqlite3

    from thor_sdk.probes import Probe
    from thor_sdk.runtime import load_estimator

    path = str(tmp_path / "old.db")
    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    for i, t in enumerate((8, 12, 16, 24, 32, 48)):
        p = Probe("mha", {"embed_dim": 32, "num_heads": 4, "seq_len": t, "kv_len": t, "cross": 0, "need_weights": i % 2,
                          "p": 0.0, "mask": 0, "causal": 0}, 8, "hidden")
        c.plan(p)
        c.complete(p.id, [{"metric": "time", "value": 1e-4 * t, "std": 1e-6 * t, "n": 5, "flagged": False,
                           "flag_reason": None, "parts": {}}])
    c.close()
    with sqlite3.connect(path) as db:  # as an older thor-sdk stored them: without the two features
        for pid, cfg in db.execute("SELECT id, config FROM probes").fetchall():
            old = {k: v for k, v in json.loads(cfg).items() if k not in ("mask", "causal")}
            db.execute("UPDATE probes SET config = ? WHERE id = ?", (json.dumps(old, sort_keys=True), pid))
    with Campaign.open(path) as c:
        assert all(s["config"]["mask"] == 0 and s["config"]["causal"] == 0 for s in c.samples())
        with pytest.raises(UsageError, match="lacks config features: mask, causal"):
            c.probes()
    est = load_estimator(fit(path, out=str(tmp_path / "old.json")))
    layer = {"embed_dim": 32, "num_heads": 4, "seq_len": 20, "kv_len": 20, "cross": 0, "need_weights": 1, "p": 0.0}
    for masks in ({"mask": 0, "causal": 0}, {"mask": 1, "causal": 0}):
        mean, std = est.predict_layer("mha", dict(layer, **masks, batch_size=8, role="hidden"))
        assert 0 < mean < 1 and std > 0


def test_a_profile_says_when_its_reference_moved():
    """``reference_drift``: the reference's range and ln-spread, with a warning above 0.10."""
    from thor_sdk.campaign.profile import DRIFT_WARN_LOG_STD, reference_drift

    def runs(values):
        return [{"model": "reference:conv2d-x", "metric": "time", "mean": v, "batch_size": 16,
                 "created_utc": f"2026-11-23T14:{2 * i:02d}:00+00:00"} for i, v in enumerate(values)]

    calm = reference_drift(runs([1.0, 1.01, 0.99, 1.0, 1.02, 0.98]), "time")
    assert calm["n"] == 6 and calm["log_std"] < DRIFT_WARN_LOG_STD and "warning" not in calm
    moved = reference_drift(runs([1.0, 2.0] * 4), "time")
    assert moved["min"] == 1.0 and moved["max"] == 2.0 and moved["log_std"] > DRIFT_WARN_LOG_STD
    assert "1-2 s per step" in moved["warning"] and "ln-spread 0.37" in moved["warning"]
    assert reference_drift(runs([1.0]), "time") is None
    # merged campaigns: another, 5x slower reference probe is not a slower machine; the range is the main series'
    other = [dict(r, model="reference:conv2d-y", mean=5.0) for r in runs([1.0, 1.0])]
    assert reference_drift(runs([1.0, 1.01, 0.99, 1.0]) + other, "time")["max"] == 1.01


def test_a_campaigns_warnings_are_said_once_on_stderr_not_again_in_its_table(capsys):
    from thor_sdk.cli.common import report_campaign

    summary = {"probes_done": 3, "noisy": 0, "busy": 0, "reference": {"n": 6, "log_std": 0.29},
               "warnings": ["the reference probe read 1-2 s per step through the profile"]}
    report_campaign(summary, as_json=False)
    out, err = capsys.readouterr()
    assert err.count("the reference probe read 1-2 s") == 1 and "the reference probe read" not in out
    assert "probes_done" in out and "log_std" in out
    report_campaign(summary, as_json=True)
    out, err = capsys.readouterr()
    assert '"warnings"' in out and err.count("Warning: the reference probe read") == 1


def test_an_app_model_given_on_resume_weighs_the_rest_of_the_profile_once(tmp_path, small_prior):
    """``profile --resume --model X`` put X's layers into the campaign's prior from then on; it used to be read
    only when a profile started, so on resume it was silently ignored (a host profile resumed with a keyword
    spotter's 32x8 conv and 32,562-input linear still sampled linears of at most 1,033 inputs). Given again on
    the next resume it is not counted twice; a model that cannot be read fails before the campaign is touched."""
    from thor_sdk.campaign.profile import ProfilePlan

    path, doc = small_prior
    db = tmp_path / "p.db"
    profile(device=FakeDevice(), out=str(db), max_probes=8, prior_path=str(path), reference_every_s=None,
            calibration_models=[])
    with Campaign.open(str(db)) as c:
        before = c.meta["prior"]
    assert not any(cf.get("app") for e in before["kinds"].values() for cf in e["configs"])
    profile(device=FakeDevice(), out=str(db), resume=True, models=["cnn5"], max_probes=12)
    with Campaign.open(str(db)) as c:
        after = c.meta["prior"]
        assert len(c.probes()) >= 12
    app = [(k, cf) for k, e in after["kinds"].items() for cf in e["configs"] if cf.get("app")]
    cnn5 = layers_of("cnn5").layers
    assert len(app) == len(cnn5) and {cf["models"][0] for _, cf in app} == {"cnn5"}
    assert sorted(k for k, _ in app) == sorted(layer["kind"] for layer in cnn5)
    # the app's kinds weigh more in the selection than before
    share0, share1 = ProfilePlan(before).share, ProfilePlan(after).share
    assert share1["conv2d"] > share0["conv2d"]
    profile(device=FakeDevice(), out=str(db), resume=True, models=["cnn5"], max_probes=13)
    with Campaign.open(str(db)) as c:
        again = c.meta["prior"]
    assert sum(cf.get("app", False) for e in again["kinds"].values() for cf in e["configs"]) == len(cnn5)
    with pytest.raises(NotFoundError, match="unknown model 'no_such_net'"):
        profile(device=FakeDevice(), out=str(db), resume=True, models=["no_such_net"], max_probes=20)
    with Campaign.open(str(db)) as c:
        assert c.meta["prior"] == again and len(c.probes()) < 20


def test_range_probes_take_the_zoo_configs_outside_what_their_kind_sampled(tmp_path):
    """Every other coverage probe, from the first, goes to the zoo config furthest outside its kind's sampled range
    (range_gap, at least RANGE_GAP) per probing second. In this prior the transformer's head has 64 tokens, and the
    output kind's start and every layer probe's head sample 1-3: the first coverage probe is that head. Without
    range probes, none is a range pick."""
    from thor_sdk.campaign.profile import COVERAGE_EVERY, RANGE_GAP, ProfilePlan, range_gap, sampled_ranges

    doc = build_prior(["lenet5", "transformer"])
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(doc))
    plan = ProfilePlan(doc)
    n_start = sum(min(3, len(plan.start[k])) for k in plan.kinds)
    zoo = {p.id for k in plan.coverage for p in plan.coverage[k]}
    picked = {}
    for on in (True, False):
        db = tmp_path / f"r{on}.db"
        s = profile(device=FakeDevice(), out=str(db), max_probes=n_start + COVERAGE_EVERY, prior_path=str(path),
                    reference_every_s=None, calibration_models=[], range_probes=on)
        assert s["range_probes"] == (1 if on else 0)
        with Campaign.open(str(db)) as c:
            done = list(c.probes("done"))
            before = {p.id for p in done[:-1]}
            ranges = sampled_ranges([x for x in c.samples("time") if x["probe_id"] in before])
        picked[on] = done[-1]
        assert picked[on].id in zoo
    p = picked[True]
    assert range_gap(ranges, p) >= RANGE_GAP
    assert (p.kind, p.config["tokens"], p.batch_size) == ("output", 64, 4)  # the cheapest batch: size is what is missing


def test_range_gap_reads_size_features_in_log_units_and_the_output_kind_includes_heads():
    from thor_sdk.campaign.profile import range_gap, sampled_ranges
    from thor_sdk.probes import Probe

    parts = {"head": {"median": 1e-4, "std": 1e-6, "n": 5}, "hidden": {"median": 3e-4, "std": 1e-6, "n": 5}}
    rows = [{"kind": "relu", "config": {"numel": 1000}, "batch_size": 8, "role": "hidden", "metric": "time",
             "value": 2e-4, "std": 1e-6, "n": 5, "flagged": False, "parts": parts},
            {"kind": "relu", "config": {"numel": 99_999}, "batch_size": 8, "role": "hidden", "metric": "time",
             "value": 1.0, "std": 0.0, "n": 5, "flagged": True, "parts": None}]
    r = sampled_ranges(rows)
    assert r["relu"] == {"numel": (1000, 1000)}  # the flagged sample is not a sample
    assert r["output"]["tokens"] == (1, 1)  # the relu probe's head: 1 token
    assert range_gap(r, Probe("relu", {"numel": 1000}, 64, "hidden")) == 0.0  # batch size is not a size feature
    assert range_gap(r, Probe("relu", {"numel": 4003}, 8, "hidden")) == pytest.approx(math.log(4004 / 1001))
    assert range_gap(r, Probe("relu", {"numel": 249}, 8, "hidden")) == pytest.approx(math.log(1001 / 250))
    assert range_gap(r, Probe("output", {"in_features": 1000, "out_features": 10, "tokens": 64}, 8, "output")) \
        == pytest.approx(math.log(65 / 2))
    assert range_gap(r, Probe("tanh", {"numel": 10}, 8, "hidden")) == 0.0  # no samples: the start covers it first


def test_fit_need_is_three_samples_per_gp_input():
    """A kind's GP fits its length scales from MIN_SAMPLES_PER_DIM samples per input (its features and the derived
    FLOPs and bytes): lstm's 9 inputs need 27, as profile 60's fit said of its 21 ('length scales fixed at 1')."""
    from thor_sdk.campaign.profile import ProfilePlan, fit_need
    from thor_sdk.fitting.gp import DERIVED, MIN_SAMPLES_PER_DIM
    from thor_sdk.layers.kinds import feature_vector

    plan = ProfilePlan(load_prior(), kinds=["lstm", "relu", "conv2d"])
    need = fit_need(plan)
    assert need["lstm"] == 27
    p = plan.candidates["conv2d"][0]
    assert need["conv2d"] == MIN_SAMPLES_PER_DIM * (len(feature_vector(p.kind, p.config, p.batch_size, p.role))
                                                    + len(DERIVED))
    assert need["relu"] < need["lstm"] < need["conv2d"]


def test_a_kind_below_what_its_gp_needs_takes_the_pick_once_its_cap_allows(tmp_path, small_prior):
    """With fit_floor (the default) a kind whose share cap allows the samples its GP needs (fit_need) is starved
    until it has them, after every kind's share floor: on the same budget relu (share 9%, needing 18) gets more
    probes than by its share floor alone, and every kind still has its share floor."""
    from thor_sdk.campaign.profile import FLOOR_SHARE, SHARE_CAP, ProfilePlan, fit_need

    path, doc = small_prior
    plan = ProfilePlan(doc)
    need = fit_need(plan)
    n = sum(min(3, len(plan.start[k])) for k in plan.kinds) + 90
    counts = {}
    for on in (True, False):
        s = profile(device=FakeDevice(), out=str(tmp_path / f"f{on}.db"), max_probes=n, prior_path=str(path),
                    reference_every_s=None, calibration_models=[], fit_floor=on)
        counts[on] = s["kinds"]
    assert counts[True]["relu"] > counts[False]["relu"]
    assert need["relu"] <= SHARE_CAP * plan.share["relu"] * n
    for kind, c in counts[True].items():
        assert c >= FLOOR_SHARE * plan.share[kind] * n - 1, (kind, c)
    with pytest.raises(UsageError, match="fit_floor"):
        profile(device=FakeDevice(), out=str(tmp_path / "bad.db"), max_probes=5, prior_path=str(path), fit_floor=1)


def test_every_entry_takes_min_entry_probes_before_its_gp_need(tmp_path, small_prior):
    """With fit_floor (the default) an entry of a small share (a generic kind no zoo net has) is not left at its 3
    start probes while its cap allows MIN_ENTRY_PROBES: a mean law of three coefficients fits three samples exactly
    (profile 71's conv_transpose2d: no overhead at all, a user's transposed conv at 0.12x its probe). Without
    fit_floor such an entry stays at its start on the same budget."""
    from thor_sdk.campaign.profile import MIN_ENTRY_PROBES, ProfilePlan

    path, doc = small_prior
    plan = ProfilePlan(doc)
    n_start = sum(min(3, len(plan.start[k])) for k in plan.kinds)
    n = n_start + 2 * (MIN_ENTRY_PROBES - 3) * len(plan.kinds)  # every 4th pick a coverage one; the share floors
    counts = {}
    for on in (True, False):
        s = profile(device=FakeDevice(), out=str(tmp_path / f"m{on}.db"), max_probes=n, prior_path=str(path),
                    reference_every_s=None, calibration_models=[], fit_floor=on)
        counts[on] = s["kinds"]
    small = min(plan.kinds, key=lambda k: plan.share[k])
    assert counts[False].get(small, 0) < MIN_ENTRY_PROBES
    for k in plan.kinds:  # an entry no zoo config has at the integration batch sizes is picked at its start only
        want = min(MIN_ENTRY_PROBES, len(plan.candidates[k])) if plan.integration[k] else min(3, len(plan.start[k]))
        assert counts[True].get(k, 0) >= want, (k, counts[True])


def test_an_app_fine_tune_weighs_the_profile_with_its_frozen_layers(tmp_path, small_prior):
    """``profile --model X --trainable P``: X's layers enter the prior as the fine-tune has them (frozen where P does
    not match, forward only at the input), named ``X [trainable P]``; ``--trainable`` without ``--model`` is refused
    before any campaign is written."""
    path, _ = small_prior
    db = tmp_path / "p.db"
    profile(device=FakeDevice(), out=str(db), max_probes=8, prior_path=str(path), reference_every_s=None,
            calibration_models=[], models=["cnn5"], trainable=["13"])
    with Campaign.open(str(db)) as c:
        prior = c.meta["prior"]
    app = [cf for e in prior["kinds"].values() for cf in e["configs"] if cf.get("app")]
    tuned = layers_of("cnn5", trainable=["13"]).layers
    assert {cf["models"][0] for cf in app} == {"cnn5 [trainable 13]"} and len(app) == len(tuned)
    assert sum(cf["config"].get("frozen") == 1 for cf in app) == sum(l["config"].get("frozen") == 1 for l in tuned) > 0
    other = tmp_path / "q.db"
    with pytest.raises(UsageError, match="--model"):
        profile(device=FakeDevice(), out=str(other), max_probes=8, prior_path=str(path), trainable=["13"])
    assert not other.exists()


def test_the_calibration_nets_own_configs_are_never_aimed_at():
    """A config only the calibration nets have is no integration point and no coverage probe, so those nets are
    estimated as an unseen net is and their errors measure its; every other config stays, and so do the candidates
    (drawn around all configs). An entry that only the calibration nets have (maxpool1d) keeps its configs."""
    from thor_sdk.campaign.profile import DEFAULT_CALIBRATION, _probe, calibration_only

    prior = load_prior()
    kinds = ["conv1d", "maxpool1d", "relu"]
    aimed, held = ProfilePlan(prior, kinds=kinds), ProfilePlan(prior, kinds=kinds, held_out=DEFAULT_CALIBRATION)

    def key(p):
        return json.dumps([p.kind, p.config, p.role], sort_keys=True)

    only = {k: {key(_probe(k, e["config"], 16, e["role"])) for e in prior["kinds"][k]["configs"]
                if calibration_only(e, DEFAULT_CALIBRATION)} for k in kinds}
    assert len(only["conv1d"]) >= 5 and only["relu"] and only["maxpool1d"]
    dropped = set()
    for entry in held.coverage:
        k = entry.split(":")[0]
        before = {key(p) for p in aimed.coverage[entry]} | {key(p) for p, *_ in aimed.integration[entry]}
        after = {key(p) for p in held.coverage[entry]} | {key(p) for p, *_ in held.integration[entry]}
        if k == "maxpool1d":
            assert after == before  # all its zoo configs are the calibration's: kept
            continue
        assert after == before - only[k]  # theirs left out, nothing else
        if before & only[k]:
            dropped.add(k)
        assert [p.id for p in held.candidates[entry]] == [p.id for p in aimed.candidates[entry]]
    assert dropped == {"conv1d", "relu"}
    # a fine-tune's twin of a calibration net is that net's; a config any other net shares is nobody's alone
    assert calibration_only({"models": ["har", "lenet5:finetune"]}, ["har", "lenet5"])
    assert not calibration_only({"models": ["har", "resnet18"]}, ["har"])
    assert not calibration_only({"models": []}, ["har"]) and not calibration_only({"models": ["har"]}, [])
