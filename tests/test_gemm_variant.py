"""The ``gemm`` structural variant: dense convs that PyTorch at one thread runs off oneDNN (``runs_as_gemm``) get
their own cost model, fitted apart, chosen per layer *and batch size* by every runtime, and planned apart by a
profile."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_structural_variants import _estimator, _row  # the structural variants' shared helpers

from thor_sdk.campaign.prior import load_prior
from thor_sdk.campaign.profile import INTEGRATION_BATCHES, ProfilePlan
from thor_sdk.fitting.pipeline import fit_kinds
from thor_sdk.layers.kinds import model_key, runs_as_gemm
from thor_sdk.probes import Probe
from thor_sdk.runtime.terms import at_batch, cost_terms

VECTORS = Path(__file__).resolve().parent / "vectors"
GEMM_SPEEDUP = 0.3  # planted: a gemm-path conv costs 0.3x the dense law of its FLOPs and bytes


def _conv2d(cin, cout, k, stride=1, hw=16, **over):
    return {"in_channels": cin, "out_channels": cout, "kernel": k, "stride": stride, "padding": k // 2, "groups": 1,
            "height": hw, "width": hw, "bias": 0, **over}


def _law(config, batch, role):
    flops, nbytes = at_batch(cost_terms("conv2d", config, role), batch)[:2]
    cost = 1e-4 + flops / 2e10 + nbytes / 5e9
    return cost * (GEMM_SPEEDUP if runs_as_gemm("conv2d", config, batch) else 1.0)


def _samples(n, seed=0, noise=0.03):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.choice([1, 1, 3, 5]))
        cfg = _conv2d(int(rng.integers(4, 128)), int(rng.integers(4, 128)), k, int(rng.choice([1, 1, 2])),
                      int(rng.choice([4, 8, 16, 32])))
        batch = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
        role = str(rng.choice(["input", "hidden"]))
        out.append(_row("conv2d", cfg, batch, role, _law(cfg, batch, role) * math.exp(rng.normal(0, noise))))
    return out


def test_model_key_names_the_gemm_variant_only_with_a_batch_size():
    pw = _conv2d(32, 64, 1)
    assert model_key("conv2d", pw, 8) == "conv2d:gemm"
    assert model_key("conv2d", pw, 15) == "conv2d:gemm" and model_key("conv2d", pw, 16) == "conv2d"
    assert model_key("conv2d", pw) == "conv2d"  # a zoo config has no batch: the kind's
    assert model_key("conv2d", dict(pw, groups=32), 8) == "conv2d:grouped"  # depthwise first
    assert model_key("conv2d", pw, True) == "conv2d"  # a bool is no batch size
    assert model_key("conv2d", dict(pw, kernel=True), 8) == "conv2d"  # nor a kernel
    assert model_key("linear", {"in_features": 8, "out_features": 8}, 1) == "linear"


def test_every_runtime_rule_agrees_with_the_vectors_made_by_aten():
    queries = json.loads((VECTORS / "expected_time_gemm.json").read_text())["model_key"]
    assert sum(q["key"].endswith(":gemm") for q in queries) >= 5
    for q in queries:
        assert model_key(q["kind"], q["config"], q["batch_size"]) == q["key"], q


_dims = st.integers(1, 40)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["conv1d", "conv2d"]), cin=st.integers(1, 48), kh=st.integers(1, 5),
       kw=st.integers(1, 5), sh=st.integers(1, 2), sw=st.integers(1, 2), dilation=st.integers(1, 2),
       groups=st.sampled_from([1, 2]), h=_dims, w=st.integers(1, 600), batch=st.integers(1, 20))
def test_runs_as_gemm_is_atens_own_choice_at_one_thread(kind, cin, kh, kw, sh, sw, dilation, groups, h, w, batch):
    torch = pytest.importorskip("torch")
    cin = cin * groups
    reach_h, reach_w = (kh - 1) * dilation + 1, (kw - 1) * dilation + 1  # the input covers the kernel
    h, w = max(h, reach_h), max(w if kind == "conv1d" else w // 20, reach_w)
    if kind == "conv2d":
        config = {"in_channels": cin, "out_channels": 8, "kernel": kh, "kernel_w": kw, "stride": sh, "stride_w": sw,
                  "padding": 0, "groups": groups, "height": h, "width": w, "bias": 0,
                  "dilation": dilation}
        x = torch.empty(batch, cin, h, w)
        wt = torch.empty(8, cin // groups, kh, kw)
        args = ([sh, sw], [0, 0], [dilation] * 2, False, [0, 0])
    else:
        config = {"in_channels": cin, "out_channels": 8, "kernel": kw, "stride": sw, "padding": 0, "groups": groups,
                  "length": w, "bias": 0, "dilation": dilation}
        x, wt = torch.empty(batch, cin, w), torch.empty(8, cin // groups, kw)
        args = ([sw], [0], [dilation], False, [0])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        backend = torch._C._select_conv_backend(x, wt, None, *args, groups, None)
    finally:
        torch.set_num_threads(threads)
    assert runs_as_gemm(kind, config, batch) == (backend != torch._C._ConvBackend.Mkldnn)


def test_fit_gives_gemm_path_convs_their_own_model_and_each_layer_its_entry_at_its_batch():
    rows = _samples(120)
    gps = fit_kinds(rows)
    n_gemm = sum(runs_as_gemm("conv2d", s["config"], s["batch_size"]) for s in rows)
    assert set(gps) == {"conv2d", "conv2d:gemm"} and 10 <= n_gemm <= 60
    assert gps["conv2d:gemm"].n_samples_ == n_gemm and gps["conv2d"].n_samples_ == 120 - n_gemm
    est, one = _estimator(gps), _estimator({"conv2d": gps["conv2d"]})
    pw = _conv2d(48, 96, 1, hw=16)
    for batch in (4, 8):
        truth = _law(pw, batch, "hidden")
        split = est.estimate([{"kind": "conv2d", "config": pw, "role": "hidden"}], batch)["total"]["mean"]
        dense = one.estimate([{"kind": "conv2d", "config": pw, "role": "hidden"}], batch)["total"]["mean"]
        # the split model reads the 1x1 conv near its cost; the dense entry alone (an older file) near the
        # dense law's, 1 / GEMM_SPEEDUP as much
        assert abs(math.log(split / truth)) < 0.25, (batch, split, truth)
        assert dense > 2 * split
    # at batch 16 the same layer is the dense entry's in both files
    a = est.estimate([{"kind": "conv2d", "config": pw, "role": "hidden"}], 16)["total"]["mean"]
    b = one.estimate([{"kind": "conv2d", "config": pw, "role": "hidden"}], 16)["total"]["mean"]
    assert a == b


def test_predict_layer_reads_the_batch_size_from_its_features():
    gps = fit_kinds(_samples(120))
    est = _estimator(gps)
    pw = _conv2d(48, 96, 1, hw=16)
    small = est.predict_layer("conv2d", dict(pw, batch_size=8, role="hidden"))[0]
    whole = est.estimate([{"kind": "conv2d", "config": pw, "role": "hidden"}], 8)["total"]["mean"]
    assert math.isclose(small, whole, rel_tol=1e-9)


def test_a_profile_plans_the_gemm_entries_apart_and_keeps_each_kinds_share():
    prior = load_prior()
    plan = ProfilePlan(prior, kinds=["conv2d", "conv1d"], per_kind=40)
    for kind in ("conv2d", "conv1d"):
        key = kind + ":gemm"
        assert key in plan.candidates and plan.candidates[key] and plan.start[key]
        for k in (kind, key, kind + ":grouped"):
            if k in plan.candidates:
                assert all(p.model_key == k for p in plan.candidates[k])
                assert all(p.model_key == k for p, *_ in plan.integration[k])
                assert all(p.model_key == k for p in plan.coverage[k])
        assert all(p.batch_size < 16 or p.config["kernel"] > 1 for p in plan.candidates[key])
        assert 0 < plan.share[key] < plan.share[kind]
        # every integration batch size alike: the variant's part of the dense share is its zoo configs' relative
        # share at the batch sizes where they are its (a 1x1 conv at 4 of 4, 16 and 64: a third), not their cost
        dense = [e for e in prior["kinds"][kind]["configs"] if model_key(kind, e["config"]) == kind]
        at = [(e.get("rel_share", e["share"]), b) for e in dense for b in INTEGRATION_BATCHES
              if model_key(kind, e["config"], b) == key]
        total = len(INTEGRATION_BATCHES) * sum(e.get("rel_share", e["share"]) for e in dense)
        expected = sum(w for w, _ in at) / total
        assert plan.share[key] / (plan.share[key] + plan.share[kind]) == pytest.approx(expected, rel=1e-9)
        assert expected > 0.03  # profile 70, split by proxy cost: 0.3% of dense conv2d's, 5 of 937 probes
    alone = ProfilePlan(prior, kinds=["conv2d"], per_kind=40)
    assert math.isclose(sum(v for k, v in alone.share.items()), sum(v for k, v in plan.share.items()
                                                                      if k.startswith("conv2d")), rel_tol=1e-9)


def test_a_probe_names_its_entry_at_its_batch_size():
    assert Probe("conv2d", _conv2d(16, 32, 1), 8, "hidden").model_key == "conv2d:gemm"
    assert Probe("conv2d", _conv2d(16, 32, 1), 32, "hidden").model_key == "conv2d"
