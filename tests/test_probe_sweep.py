"""Swept probes (thor_sdk.probes.build): a forward-only probe's parts sweep the caches before each step; which probes
are swept, that the sweep changes no number of the step, their ids, and campaigns written before the sweep
existed (their probes read back warm, with their old ids)."""

import sqlite3

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from thor_sdk.errors import UsageError
from thor_sdk.fitting.pipeline import warm_forward_only
from thor_sdk.probes import Probe
from thor_sdk.probes.build import SWEEP_BYTES
from thor_sdk.store import Campaign

CONV = dict(in_channels=2, out_channels=3, kernel=3, stride=1, padding=1, groups=1, height=5, width=5, bias=1)
META = {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"}


@pytest.mark.parametrize("kind, config, role, swept", [
    ("conv2d", dict(CONV, frozen=1), "input", True),  # a frozen backbone's layer: forward only
    ("relu", {"numel": 16}, "input", True),  # no weights, nothing before it trains
    ("relu", {"numel": 16, "inplace": 1}, "input", True),
    ("conv2d", CONV, "input", False),  # trains: its weight gradient runs
    ("conv2d", dict(CONV, frozen=1), "hidden", False),  # computes its input's gradient
    ("relu", {"numel": 16}, "hidden", False),
    ("output", {"in_features": 8, "out_features": 4, "tokens": 1}, "output", False)])
def test_only_forward_only_probes_are_swept(kind, config, role, swept):
    p = Probe(kind, config, 2, role)
    assert p.cache == ("swept" if swept else "warm") and p.sweep_applies() == swept
    assert ('"cache": "swept"' in p.key) == swept
    for part in p.parts():
        assert hasattr(p.build(part).module, "n") == swept
    if not swept:
        with pytest.raises(UsageError, match="swept cache applies to a forward-only probe"):
            Probe(kind, config, 2, role, "swept")


def test_the_sweep_changes_no_number_of_the_step():
    """Both parts of a swept probe compute the unswept parts' logits and gradients exactly (the sum scales by 1),
    keep the layer first and the head last, and sweep SWEEP_BYTES."""
    swept = Probe("conv2d", dict(CONV, frozen=1), 3, "input")
    warm = Probe("conv2d", dict(CONV, frozen=1), 3, "input", "warm")
    for part in swept.parts():
        a, b = swept.build(part), warm.build(part)
        assert a.module.n * 4 == SWEEP_BYTES and type(a.module[-1]).__name__ == "Head"
        assert [type(m) for m in a.module] == [type(m) for m in (b.module if part == "input" else [b.module])]
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y) and a.x_requires_grad == b.x_requires_grad is False
        for m in (a.module, b.module):
            m.zero_grad()
            torch.nn.functional.cross_entropy(m(a.x), a.y).backward()
        assert torch.equal(a.module(a.x), b.module(b.x))
        head_a, head_b = a.module[-1], (b.module[-1] if part == "input" else b.module)
        assert torch.equal(head_a.fc.weight.grad, head_b.fc.weight.grad)
        assert torch.equal(head_a.fc.bias.grad, head_b.fc.bias.grad)


def test_the_sweep_and_the_frozen_block_run_before_the_layer_in_both_parts():
    """Each step: the sweep (SWEEP_BYTES of the head's first bias), then the frozen conv block, then the part's own
    modules; the block trains nothing and is in both parts alike, so it cancels in the difference."""
    p = Probe("relu", {"numel": 64}, 4, "input")
    for part in p.parts():
        pm = p.build(part)
        order = []
        for name, m in [("block", pm.module.context.conv)] + [(str(i), m) for i, m in enumerate(pm.module)]:
            m.register_forward_pre_hook(lambda mod, args, name=name: order.append(name))
        pm.module(pm.x)
        assert order == ["block"] + [str(i) for i in range(len(pm.module))]
        assert not any(q.requires_grad for q in pm.module.context.parameters())
        assert [n for n, q in pm.module.named_parameters() if q.requires_grad] == \
            [f"part.{len(pm.module) - 1}.fc.weight", f"part.{len(pm.module) - 1}.fc.bias"]  # the head only


def test_a_campaign_written_before_the_sweep_reads_back_warm_and_gains_the_column_on_its_first_plan(tmp_path):
    path = str(tmp_path / "old.db")
    c = Campaign.create(path, META)
    old = Probe("relu", {"numel": 16}, 2, "input", "warm")  # what an older thor-sdk planned and measured
    c.plan(old)
    c.complete(old.id, [{"metric": "time", "value": 1e-5, "std": 1e-7, "n": 5, "flagged": False,
                         "flag_reason": None, "parts": {}}])
    c.close()
    with sqlite3.connect(path) as conn:  # the file as an older thor-sdk wrote it: no cache column
        conn.execute("ALTER TABLE probes DROP COLUMN cache")
    c = Campaign.open(path)
    assert c.probes() == [old] and c.probes()[0].id == old.id
    assert [s["cache"] for s in c.samples()] == ["warm"]
    c.close()
    c = Campaign.open(path, writer=True)
    new = Probe("relu", {"numel": 16}, 2, "input")
    assert new.cache == "swept" and new.id != old.id
    assert c.plan(new) and not c.plan(new)  # a new probe beside the old one, planned once
    assert c.probes() == [old, new] and c.probes("planned") == [new]
    assert [s["cache"] for s in c.samples()] == ["warm"]
    assert warm_forward_only(c.samples()) == 1  # fit records it, and the CLI says to profile again
    assert warm_forward_only([dict(s, cache="swept") for s in c.samples()]) == 0
    assert warm_forward_only([{k: v for k, v in s.items() if k != "cache"} for s in c.samples()]) == 0  # a CSV
    c.close()


@settings(max_examples=60, deadline=None)
@given(cache=st.one_of(st.none(), st.text(max_size=8), st.integers(), st.sampled_from(["warm", "swept"])))
def test_a_probe_read_from_a_manifest_takes_only_a_known_cache_state(cache):
    d = {"kind": "relu", "config": {"numel": 16}, "batch_size": 2, "role": "input"}
    if cache is not None:
        d["cache"] = cache
    if cache in (None, "warm", "swept"):
        assert Probe.from_dict(d).cache == (cache or "warm")
    else:
        with pytest.raises(UsageError, match="cache state must be one of warm, swept"):
            Probe.from_dict(d)
