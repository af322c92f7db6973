"""The measurement protocol's conformance vectors (tests/vectors/protocol_*.json, docs/protocol.md) on the Python
protocol: every vector passes, the committed files are what the generator makes now, and protocols that break
the rules (a fixed part order, the stop rule on the wrong metric, an idle baseline per probe) fail them."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

VECTORS = Path(__file__).resolve().parent / "vectors"


def _generator():
    spec = importlib.util.spec_from_file_location("thor_make_protocol_vectors", VECTORS / "make_protocol_vectors.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()


def _load(name):
    return json.loads((VECTORS / f"protocol_{name}.json").read_text())


def _mismatch(want, got, where="$"):
    """The first place ``got`` differs from ``want`` (None if equal): same keys, list lengths, strings,
    booleans and None; numbers to 1e-9 relative (1e-12 absolute)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(want) != set(got):
            return f"{where}: keys {sorted(want) if isinstance(want, dict) else want} != " \
                   f"{sorted(got) if isinstance(got, dict) else got}"
        for k in want:
            m = _mismatch(want[k], got[k], f"{where}.{k}")
            if m:
                return m
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(want) != len(got):
            return f"{where}: length {len(want)} != {len(got) if isinstance(got, list) else got!r}"
        for i, (a, b) in enumerate(zip(want, got)):
            m = _mismatch(a, b, f"{where}[{i}]")
            if m:
                return m
        return None
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        ok = isinstance(got, (int, float)) and not isinstance(got, bool) and \
            math.isclose(want, got, rel_tol=1e-9, abs_tol=1e-12)
        return None if ok else f"{where}: {want!r} != {got!r}"
    return None if want == got and type(want) is type(got) else f"{where}: {want!r} != {got!r}"


def _fixed_order(parts, round_index):
    return list(parts)


@pytest.mark.parametrize("name", GEN.NAMES)
def test_vector_passes(name):
    vec = _load(name)
    assert vec["format"] == "thor-sdk/protocol-vector" and vec["name"] == name
    assert _mismatch(vec["expected"], GEN.run_vector(vec)) is None


def test_committed_vectors_are_what_the_generator_makes():
    made = GEN.vectors()
    assert sorted(made) == sorted(GEN.NAMES)
    for name, vec in made.items():
        assert (VECTORS / f"protocol_{name}.json").read_text() == GEN.text(vec), name


def test_windows_alternate_abba_and_stop_on_the_campaigns_metric():
    """What the vectors hold, said without the generator: ABBA order, stop rounds, window lengths."""
    vec = _load("drift")["expected"][0]
    parts = [e["part"] for e in vec["events"] if e["event"] == "window"]
    assert parts[:12] == ["head", "input", "hidden", "hidden", "input", "head"] * 2
    assert _load("energy")["expected"][0]["rounds"] == 4           # its min_rounds: energy CV small at once
    assert _load("time")["expected"][0]["rounds"] == 7             # time CV settles once slow rounds are a minority
    slow = _load("slow_meter")["expected"][0]
    assert slow["window_s"] == 5.0 and slow["parts"]["head"]["steps_per_window"] > 5.0 / 0.0123 * 0.9
    assert _load("outlier")["expected"][0]["parts"]["hidden"]["outliers"]["time"] == [3]
    idle = _load("idle_campaign")["expected"]
    assert [p["idle_measurements"] for p in idle] == [1, 1, 1]


@pytest.mark.parametrize("name", GEN.NAMES)
def test_a_fixed_order_protocol_fails_every_vector(name):
    vec = _load(name)
    m = _mismatch(vec["expected"], GEN.run_vector(vec, order=_fixed_order))
    assert m is not None


def test_fixed_order_biases_the_difference_abba_cancels():
    vec = _load("drift")
    c = vec["checks"]["true_difference_s"]

    def rel_error(order):
        p = GEN.run_vector(vec, order=order)[0]["parts"]
        diffs = [a - b for a, b in zip(p[c["part"]]["time_s"], p[c["base"]]["time_s"])]
        return abs(sum(diffs) / len(diffs) - c["value"]) / c["value"]

    assert rel_error(GEN.part_order) < 0.005
    assert rel_error(_fixed_order) > 0.05


def test_stopping_on_the_wrong_metric_fails():
    """A time campaign stopped on the energy CV (the old Java harness) and an energy campaign stopped on the
    time CV both run a different number of rounds than the vectors say."""
    for name, wrong in (("time", "energy"), ("energy", "time")):
        vec = _load(name)
        got = GEN.run_vector(vec, stop_metric=wrong)
        assert got[0]["rounds"] != vec["expected"][0]["rounds"]
        assert _mismatch(vec["expected"], got) is not None


def test_idle_baseline_per_probe_fails_the_campaign_vector():
    vec = _load("idle_campaign")
    got = GEN.run_vector(vec, idle_per_probe=True)
    assert [p["idle_measurements"] for p in got] == [1, 2, 1]
    assert _mismatch(vec["expected"], got) is not None


def test_java_and_swift_state_the_same_constants():
    """The Swift protocol cannot be compiled here: at least its constants (and Java's) are the spec's."""
    import re

    from thor_sdk.harness.protocol import IDLE_RECHECK_TEMP_C, IDLE_STATE_KEYS, WINDOW_SAMPLE_PERIODS

    root = VECTORS.parents[1]
    java = (root / "android_harness/app/src/main/java/dev/thorsdk/harness/Protocol.java").read_text()
    swift = (root / "ios_harness/App/Sources/Protocol.swift").read_text()
    keys = '", "'.join(IDLE_STATE_KEYS)
    assert re.search(r'Arrays\.asList\(\s*"' + re.escape(keys) + '"', java)
    assert f'idleStateKeys = ["{keys}"]' in swift
    assert f"WINDOW_SAMPLE_PERIODS = {WINDOW_SAMPLE_PERIODS};" in java
    assert f"windowSamplePeriods = {float(WINDOW_SAMPLE_PERIODS)}" in swift
    assert f"IDLE_RECHECK_TEMP_C = {IDLE_RECHECK_TEMP_C};" in java and f"idleRecheckTempC = {IDLE_RECHECK_TEMP_C}" in swift
