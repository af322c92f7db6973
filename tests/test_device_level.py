"""The device's level: a profile's reference probe measured again, and estimates put at it (runtime, library,
evaluate --relevel, CLI) on a fake device that runs slower than when it was profiled."""

import importlib.util
import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fake_device import FakeDevice
from thor_sdk.api import estimate, fit, measure_level, profile
from thor_sdk.campaign.prior import build_prior
from thor_sdk.errors import FormatError, NotFoundError, UsageError
from thor_sdk.runtime import device_level, load_estimator

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "vectors")


class Slowed(FakeDevice):
    """The fake device in another state: every probe part and whole model costs ``factor`` times as much."""

    def __init__(self, factor, **kw):
        super().__init__(**kw)
        self.factor = factor

    def measure_probe(self, probe, **kw):
        res = super().measure_probe(probe, **kw)
        for r in res.values():
            r.time_s = [t * self.factor for t in r.time_s]
        return res

    def measure_model(self, model, batch_size, **kw):
        r = super().measure_model(model, batch_size, **kw)
        r.time_s = [t * self.factor for t in r.time_s]
        return r


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """A fake device's profile (reference probe re-measured throughout) and its estimator."""
    d = tmp_path_factory.mktemp("level")
    prior = d / "prior.json"
    prior.write_text(json.dumps(build_prior(["lenet5", "har"])))
    profile(device=FakeDevice(noise=0.01), out=str(d / "p.db"), max_probes=40, prior_path=str(prior),
            reference_every_s=1e-9, calibration_models=[])
    fit(str(d / "p.db"), out=str(d / "e.json"))
    return d / "e.json"


# ----------------------------------------------------------------------------- the runtime's arithmetic
def test_the_level_is_the_median_reading_over_the_profiles_and_its_std_never_below_the_drift():
    lv = device_level([1.3, 1.1, 1.2], 1.0, drift_log_std=0.2)
    assert lv["level"] == pytest.approx(1.2) and lv["readings"] == 3
    assert lv["log_std"] == pytest.approx(0.2 / math.sqrt(3))  # the readings agree better than the drift: drift
    noisy = device_level([1.0, 2.0], 1.0, drift_log_std=0.01)
    assert noisy["level"] == pytest.approx(1.5)
    assert noisy["log_std"] == pytest.approx(math.log(2.0) / math.sqrt(2) / math.sqrt(2))


@pytest.mark.parametrize("readings, ref, drift", [
    ([], 1.0, 0.0), ([1.0, float("nan")], 1.0, 0.0), ([1.0, float("inf")], 1.0, 0.0), ([True], 1.0, 0.0),
    ("1.0", 1.0, 0.0), ([1.0], float("nan"), 0.0), ([1.0], 1.0, float("inf")), ([1.0], 1.0, -1e-9),
    ([1.0], 1e-300, 0.0), ([1e-300], 1.0, 0.0), ([1.0] * 10_001, 1.0, 0.0)])
def test_device_level_refuses_what_is_not_a_level(readings, ref, drift):
    with pytest.raises(UsageError):
        device_level(readings, ref, drift)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=0, max_size=8),
       st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True))
def test_device_level_is_a_finite_bounded_level_or_a_usage_error(readings, ref, drift):
    try:
        lv = device_level(readings, ref, drift)
    except UsageError:
        return
    assert 0.02 <= lv["level"] <= 50 and math.isfinite(lv["log_std"]) and 0 <= lv["log_std"] <= 5


def test_an_estimate_at_a_level_is_the_estimate_times_it_with_the_levels_std_added(profiled):
    est = load_estimator(str(profiled))
    base = estimate(est, "lenet5", batch_size=8)
    at = estimate(est, "lenet5", batch_size=8, level={"level": 1.4, "log_std": 0.05})
    assert at["total"]["mean"] == pytest.approx(1.4 * base["total"]["mean"])
    assert at["total"]["std"] == pytest.approx(math.hypot(1.4 * base["total"]["std"], 0.05 * at["total"]["mean"]))
    assert at["layers_total"]["std"] == pytest.approx(1.4 * base["layers_total"]["std"])
    assert [l["mean"] for l in at["layers"]] == pytest.approx([1.4 * l["mean"] for l in base["layers"]])
    assert at["flops_baseline"]["total"] == pytest.approx(1.4 * base["flops_baseline"]["total"])  # the same profile
    assert at["level"] == {"level": 1.4, "log_std": 0.05} and "level" not in base
    with pytest.raises(UsageError, match="outside"):
        estimate(est, "lenet5", batch_size=8, level=0.0)


def test_an_estimator_without_a_reference_probe_cannot_be_leveled(tmp_path):
    est = load_estimator(os.path.join(VECTORS, "estimator_time_profile.json"))
    with pytest.raises(NotFoundError, match="no reference probe"):
        est.level([0.001])
    with pytest.raises(NotFoundError, match="no reference probe"):
        measure_level(est, device=FakeDevice())


@pytest.mark.parametrize("patch, match", [
    ({"drift_log_std": -0.1}, "drift_log_std"), ({"drift_log_std": 6.0}, "not a drift"),
    ({"drift_log_std": "0.1"}, "drift_log_std"),
    ({"reference": {"probe": {}, "median_value": 0.0}}, "median_value"),
    ({"reference": {"probe": {}, "median_value": float("inf")}}, "median_value"),
    ({"reference": {"median_value": 0.001}}, "probe"), ({"reference": {"probe": [], "median_value": 0.001}}, "probe"),
    ({"reference": [1]}, "reference"), ({"log_bias": "0.1"}, "log_bias"), ({"log_bias": 9.0}, "not a calibration"),
    ({"log_bias": float("nan")}, "log_bias")])
def test_a_corrupt_reference_or_drift_is_refused_on_load(patch, match):
    with open(os.path.join(VECTORS, "estimator_level.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["whole_model"].update(patch)
    with pytest.raises(FormatError, match=match):
        load_estimator(doc)


def test_level_vectors_are_what_make_vectors_makes_now():
    spec = importlib.util.spec_from_file_location("thor_make_vectors", os.path.join(VECTORS, "make_vectors.py"))
    make_vectors = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_vectors)
    for name, text in make_vectors.level_files().items():
        with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
            assert f.read() == text, f"{name} is stale: python tests/vectors/make_vectors.py --levels-only"


def test_level_vectors_cover_refusals_and_every_part_of_the_estimate():
    with open(os.path.join(VECTORS, "levels.json"), encoding="utf-8") as f:
        vec = json.load(f)
    assert sum("error" in q for q in vec["device_level"]) >= 5
    assert {q.get("error") for q in vec["estimator_level"]} == {None, "not_found"}
    ok = [q for q in vec["at_level"] if "expected" in q]
    assert len(ok) >= 8 and len(vec["at_level"]) - len(ok) >= 8
    assert any(q["expected"]["level"]["log_std"] > 0 for q in ok)


# ----------------------------------------------------------------------------- measured on a device
def test_measure_level_reads_a_slower_device_and_estimates_follow_it(profiled):
    lv = measure_level(str(profiled), device=Slowed(1.4, noise=0.0), readings=3)
    assert lv["level"] == pytest.approx(1.4, rel=0.02) and lv["readings"] == 3 and len(lv["values"]) == 3
    assert lv["beyond_drift"] is True and lv["applied"] is True and lv["device"] == "fake"
    assert lv["probe"].startswith("conv2d-")
    same = measure_level(str(profiled), device=FakeDevice(noise=0.0), readings=1)
    assert same["level"] == pytest.approx(1.0, rel=0.02) and same["beyond_drift"] is False
    assert same["applied"] is False  # within the profile's drift: the std covers it, nothing is scaled
    with pytest.raises(UsageError, match="readings"):
        measure_level(str(profiled), device=FakeDevice(), readings=0)


class ReferenceSlowed(FakeDevice):
    """The fake device with only the profile's reference probe ``factor`` times as slow: one probe moved, not the
    device (what this project's VM did three times in an hour)."""

    def __init__(self, factor, **kw):
        super().__init__(**kw)
        self.factor = factor

    def measure_probe(self, probe, **kw):
        from thor_sdk.campaign.profile import reference_probe

        res = super().measure_probe(probe, **kw)
        if probe.id == reference_probe().id:
            for r in res.values():
                r.time_s = [t * self.factor for t in r.time_s]
        return res


def test_a_level_beyond_the_drift_is_applied_where_a_panel_of_other_probes_agrees(profiled):
    lv = measure_level(str(profiled), device=Slowed(1.4, noise=0.0), readings=3)
    check = lv["cross_check"]
    assert lv["applied"] is True and check["agrees"] is True and check["panel_level"] == pytest.approx(1.4, rel=0.1)
    assert len(check["members"]) >= 3 and {m["kind"] for m in check["members"]} >= {"conv2d"}
    for m in check["members"]:
        assert m["ratio"] == pytest.approx(m["measured"] / m["expected"])
    within = measure_level(str(profiled), device=FakeDevice(noise=0.0), readings=1)
    assert within["cross_check"] is None  # within the band nothing more is measured


def test_a_level_only_the_reference_probe_reads_is_not_applied(profiled):
    dev = ReferenceSlowed(1.4, noise=0.0)
    lv = measure_level(str(profiled), device=dev, readings=3)
    assert lv["level"] == pytest.approx(1.4, rel=0.02) and lv["beyond_drift"] is True
    assert lv["applied"] is False and lv["cross_check"]["agrees"] is False
    assert lv["cross_check"]["panel_level"] == pytest.approx(1.0, rel=0.1)
    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.evaluate.report import _facts

    r = evaluate_unseen(str(profiled), ["cnn5"], device=ReferenceSlowed(1.4, noise=0.0), batch_sizes=[8],
                        reference=None, relevel=True)
    assert r["relevel"]["applied"] is False
    row = r["rows"][0]
    assert row["thor"] == row["unleveled"]["thor"]  # the estimates stay at the profile's level
    assert any("the reference probe alone moved" in line for line in _facts(r))
    from thor_sdk.cli.evaluate import relevel_lines

    assert "the reference probe alone moved" in relevel_lines(r) and "lies within" not in relevel_lines(r)


def test_a_panel_probe_the_device_cannot_measure_leaves_the_panel_not_the_level(profiled):
    from thor_sdk.api import level_panel
    from thor_sdk.errors import MeasurementError

    kinds = [m["probe"].kind for m in level_panel(str(profiled))]
    assert len(set(kinds)) >= 2
    gone = kinds[-1]

    class Without(Slowed):
        def measure_probe(self, probe, **kw):
            if probe.kind == gone:
                raise MeasurementError(f"this device cannot run {gone}")
            return super().measure_probe(probe, **kw)

    lv = measure_level(str(profiled), device=Without(1.4, noise=0.0), readings=2)
    failed = [m for m in lv["cross_check"]["members"] if m.get("error")]
    assert len(failed) == kinds.count(gone) and all(m["kind"] == gone and m["ratio"] is None for m in failed)
    assert lv["applied"] is True and lv["cross_check"]["panel_level"] == pytest.approx(1.4, rel=0.1)

    class Nothing(Slowed):
        def measure_probe(self, probe, **kw):
            from thor_sdk.campaign.profile import reference_probe

            if probe.id != reference_probe().id:
                raise MeasurementError("only the reference runs here")
            return super().measure_probe(probe, **kw)

    alone = measure_level(str(profiled), device=Nothing(1.4, noise=0.0), readings=2)
    assert alone["cross_check"]["agrees"] is None and alone["applied"] is True  # unchecked, as before


def test_measure_level_refuses_another_kind_of_device(profiled):
    class Other(FakeDevice):
        def info(self):
            return {"name": "phone", "kind": "android"}

    with pytest.raises(UsageError, match="android"):
        measure_level(str(profiled), device=Other())


def test_evaluate_relevel_leaves_a_level_within_the_profiles_drift_alone(profiled):
    """A device 3% faster than profiled, within the +-5% a profile's drift allows at least: the level is reported
    and not applied (on this project's VM, levels read before a run moved 0.85-1.26 while the device did not)."""
    from thor_sdk.evaluate import evaluate_unseen

    r = evaluate_unseen(str(profiled), ["cnn5"], device=Slowed(0.97, noise=0.0), batch_sizes=[8], reference=None,
                        relevel=True)
    assert r["relevel"]["level"] == pytest.approx(0.97, rel=0.02) and r["relevel"]["applied"] is False
    row = r["rows"][0]
    assert row["thor"] == row["unleveled"]["thor"] and row["flops"] == row["unleveled"]["flops"]
    from thor_sdk.cli.evaluate import relevel_lines

    assert "lies within the profile's own drift" in relevel_lines(r)


def test_evaluate_relevel_scores_a_slowed_device_at_its_level(profiled):
    """Profiled at speed 1, evaluated at 1.4x slower: as profiled, every estimate reads 1/1.4 of the truth and
    the warning fires; releveled once before the run, the estimates and the FLOPs baseline follow the device."""
    from thor_sdk.evaluate import evaluate_unseen

    raw = evaluate_unseen(str(profiled), ["cnn5", "lenet5"], device=Slowed(1.4, noise=0.0), batch_sizes=[8],
                          reference="har")
    assert raw["relevel"] is None and raw["unleveled"] is None and raw["level_warning"]
    assert all(r["thor"] < r["measured"] / 1.25 for r in raw["rows"])
    r = evaluate_unseen(str(profiled), ["cnn5", "lenet5"], device=Slowed(1.4, noise=0.0), batch_sizes=[8],
                        reference="har", relevel=True)
    assert r["relevel"]["level"] == pytest.approx(1.4, rel=0.02) and r["relevel"]["applied"] is True
    assert r["thor_mape"] < raw["thor_mape"] / 2 and r["coverage95"] == 1.0
    for row, before in zip(r["rows"], raw["rows"]):
        f = r["relevel"]["level"]
        assert row["thor"] == pytest.approx(f * row["unleveled"]["thor"])
        assert row["flops"] == pytest.approx(f * row["unleveled"]["flops"])
        assert row["unleveled"]["thor"] == pytest.approx(before["thor"])
        # the diagnostic is still the estimate at the profile's level times the level around the model
        assert row["thor_level_adjusted"] == pytest.approx(row["unleveled"]["thor"] * row["device_level"])
    assert r["unleveled"]["thor_mape"] == pytest.approx(raw["thor_mape"], rel=0.05)
    assert set(r["unleveled"]["groups"]) == set(r["groups"])


# ----------------------------------------------------------------------------- the CLI
def _cli(capsys, *args):
    """``thor-sdk ARGS`` through the console script's own main (ThorError -> one line): (exit code, out, err)."""
    from thor_sdk.cli.main import main

    with pytest.raises(SystemExit) as ex:
        main(list(args))
    out = capsys.readouterr()
    return ex.value.code, out.out, out.err


def test_cli_estimate_at_a_given_level_and_its_refusals(profiled, capsys):
    args = ["estimate", "--estimator", str(profiled), "--model", "lenet5", "--batch-size", "8"]
    code, out, _ = _cli(capsys, *args, "--json")
    base = json.loads(out)
    code, out, err = _cli(capsys, *args, "--level", "0.8", "--json")
    assert code == 0, err
    at = json.loads(out)
    assert at["total"]["mean"] == pytest.approx(0.8 * base["total"]["mean"]) and at["level"]["level"] == 0.8
    _, text, _ = _cli(capsys, *args, "--level", "0.8")
    assert "the device's level 0.800" in text and "given; THOR and FLOPs scaled by it" in text
    for bad in (["--level", "0"], ["--level", "nan"], ["--level", "0.9", "--relevel"],
                ["--relevel", "--level-readings", "0"]):
        code, _, err = _cli(capsys, *args, *bad)
        assert code != 0 and err.startswith("Error: ") and len(err.strip().splitlines()) == 1, (bad, err)
    code, _, err = _cli(capsys, "estimate", "--estimator", os.path.join(VECTORS, "estimator_time_profile.json"),
                        "--model", os.path.join(VECTORS, "layers_time_profile_0.json"), "--relevel")
    assert code != 0 and "no reference probe" in err


def test_cli_evaluate_relevel_needs_an_estimator(capsys):
    code, _, err = _cli(capsys, "evaluate", "--models", "lenet5", "--relevel")
    assert code != 0 and "--relevel goes with --estimator" in err

_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=12), c, max_size=3),
                        max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(drift=_JSONISH, ref=_JSONISH | st.fixed_dictionaries({"probe": _JSONISH, "median_value": _JSONISH}))
def test_any_reference_and_drift_load_to_a_usable_level_or_a_format_error(drift, ref):
    """The estimator reader over hostile whole_model.reference and drift_log_std: refused with FormatError on
    load, or a level that is finite and in range (or a usage error for readings it refuses)."""
    with open(os.path.join(VECTORS, "estimator_level.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["whole_model"].update(drift_log_std=drift, reference=ref)
    try:
        est = load_estimator(doc)
    except FormatError:
        return
    try:
        lv = est.level([0.0012, 0.0013])
    except (NotFoundError, UsageError):
        return
    assert 0.02 <= lv["level"] <= 50 and 0 <= lv["log_std"] <= 5
