"""Every layer probe's 1-layer part is an output probe (Probe.head_probe), so fit reads output samples off the heads a
campaign measured anyway (fitting.pipeline.head_part_samples): which probes give one, the sample itself, that hostile
parts give none, and that fit uses them."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thor_sdk.fitting.pipeline import build, head_part_samples
from thor_sdk.layers.kinds import with_added_features
from thor_sdk.probes import Probe

CONV = dict(in_channels=2, out_channels=3, kernel=3, stride=1, padding=1, groups=1, height=5, width=5, bias=1)
HEAD = {"median": 2e-4, "std": 4e-6, "n": 4, "steps_per_window": 50}


def _sample(kind, config, role, batch=8, head=HEAD, cache=None, metric="time", **kw):
    p = Probe(kind, config, batch, role, cache)
    s = {"probe_id": p.id, "kind": kind, "role": p.role, "batch_size": batch,
         "config": with_added_features(kind, p.config), "metric": metric, "value": 1e-4, "std": 1e-6, "n": 4,
         "flagged": False, "flag_reason": None, "parts": {"head": head, p.role: {"median": 3e-4, "std": 0, "n": 4}},
         "noisy": False, "noise_reason": None, "measured_utc": "2026-11-29T00:00:00Z", "cache": p.cache}
    s.update(kw)
    return s


@pytest.mark.parametrize("kind, config, role, gives", [
    ("conv2d", CONV, "hidden", True),
    ("conv2d", CONV, "input", True),  # trains: its head's input needs a gradient, as an output probe's
    ("relu", {"numel": 75}, "hidden", True),
    ("conv2d", dict(CONV, frozen=1), "input", False),  # swept, and its head's input needs no gradient
    ("relu", {"numel": 75}, "input", False),  # swept
    ("output", {"in_features": 8, "out_features": 4, "tokens": 1}, "output", False)])  # its head is its own sample
def test_which_probes_head_is_an_output_probe(kind, config, role, gives):
    p = Probe(kind, config, 8, role)
    hp = p.head_probe()
    assert (hp is not None) == gives
    if gives:
        assert hp == Probe("output", p.head_config(), 8, "output") and hp.parts() == ["head"]
    assert len(head_part_samples([_sample(kind, config, role)])) == int(gives)


def test_the_head_part_and_the_output_probe_build_the_same_step():
    torch = pytest.importorskip("torch")
    p = Probe("conv2d", CONV, 4, "hidden")
    a, b = p.build("head"), p.head_probe().build("head")
    assert a.x.numel() == b.x.numel() and a.x_requires_grad == b.x_requires_grad is True
    shapes = [[(n, q.shape) for n, q in m.module.named_parameters()] for m in (a, b)]
    assert shapes[0] == shapes[1]
    assert torch.equal(a.module(a.x.reshape(b.x.shape)), a.module(a.x))  # the head flattens: a view, the same numbers


def test_a_derived_sample_is_the_heads_median_with_its_standard_error():
    s = _sample("conv2d", CONV, "hidden", batch=8)
    (h,) = head_part_samples([s])
    assert h["kind"] == h["role"] == "output" and h["batch_size"] == 8 and h["source"] == "head_part"
    assert h["config"] == with_added_features("output", Probe("conv2d", CONV, 8, "hidden").head_config())
    assert h["value"] == HEAD["median"] and math.isclose(h["std"], HEAD["std"] / 2)
    assert h["metric"] == "time" and h["measured_utc"] == s["measured_utc"] and h["probe_id"] == s["probe_id"] + ":head"
    assert not h["flagged"] and not h["noisy"]
    # its own CV decides whether it is noisy, not the 2-layer part's; a busy machine carries over
    hidden_cv = "CV hidden 7.0% above the 3.0% target after 8 rounds"
    assert not head_part_samples([_sample("conv2d", CONV, "hidden", noisy=True, noise_reason=hidden_cv)])[0]["noisy"]
    busy = head_part_samples([_sample("conv2d", CONV, "hidden", noisy=True,
                                      noise_reason="machine busy (other runnable threads: median 2, other 1-minute "
                                                   "load 1.5)")])[0]
    assert busy["noisy"] and busy["noise_reason"].startswith("machine busy")
    spread = head_part_samples([_sample("conv2d", CONV, "hidden", head=dict(HEAD, std=2e-5))])[0]
    assert spread["noisy"] and spread["noise_reason"].startswith("CV head 10.0%")


@pytest.mark.parametrize("head", [None, {}, "x", {"median": float("nan"), "std": 0, "n": 3}, {"median": 0, "n": 3},
                                  {"median": -1e-4, "std": 0, "n": 3}, {"median": "1e-4", "std": 0, "n": 3},
                                  {"median": True, "std": 0, "n": 3}])
def test_a_head_part_without_a_finite_positive_median_gives_no_sample(head):
    assert head_part_samples([_sample("conv2d", CONV, "hidden", head=head)]) == []


def test_a_csv_sample_without_parts_or_with_a_config_no_probe_takes_gives_none():
    s = _sample("conv2d", CONV, "hidden")
    assert head_part_samples([{k: v for k, v in s.items() if k != "parts"}]) == []
    assert head_part_samples([dict(s, config={"in_channels": -1})]) == []
    assert head_part_samples([dict(s, role="no such role")]) == []


@settings(max_examples=80, deadline=None)
@given(head=st.dictionaries(st.sampled_from(["median", "std", "n", "steps_per_window"]),
                            st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6),
                                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4))))
def test_any_head_part_gives_no_sample_or_a_finite_positive_one(head):
    out = head_part_samples([_sample("relu", {"numel": 75}, "hidden", head=head)])
    for h in out:
        assert math.isfinite(h["value"]) and h["value"] > 0 and math.isfinite(h["std"]) and h["std"] >= 0
        assert isinstance(h["n"], int) and h["n"] >= 1


def test_fit_uses_the_heads_and_says_how_many():
    """No output probe at all, yet the estimator has an output kind fitted on the layer probes' heads, each head
    cost growing with its input as the measurements do."""
    samples = []
    for i, ch in enumerate((2, 3, 4, 6, 8, 12, 16, 24)):
        cfg = dict(CONV, out_channels=ch)
        numel = ch * 25
        for b in (4, 16):
            samples.append(_sample("conv2d", cfg, "hidden", batch=b,
                                   head={"median": 1e-4 + 2e-9 * numel * b, "std": 1e-6, "n": 5}))
    doc = build(samples, device={"kind": "host"}, runtime="torch", metric="time")
    assert doc["provenance"]["head_part_samples"] == doc["kinds"]["output"]["n_samples"] == len(samples)
    from thor_sdk.runtime import load_estimator

    est = load_estimator(doc)
    small, big = (est.estimate([{"kind": "output", "role": "output",
                                 "config": {"in_features": n, "out_features": 10, "tokens": 1}}], 16)["total"]["mean"]
                  for n in (50, 400))
    assert 0 < small < big
    assert math.isclose(big, 1e-4 + 2e-9 * 400 * 16, rel_tol=0.15)
