"""bench/bench_launch_share.py: the law's held-out error per share of launches a forward-only recurrent layer counts,
on a campaign whose forward-only GRUs cost a quarter of a training one's steps."""

import pytest
from bench_module import load_bench

from thor_sdk.probes import Probe
from thor_sdk.store import Campaign


def test_the_share_the_samples_were_made_with_reads_lowest(tmp_path):
    path = str(tmp_path / "c.db")
    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    for i in range(16):
        steps, frozen = 20 + 13 * i, int(i % 4 == 0)
        p = Probe("gru", {"input_size": 8, "hidden_size": 16 + 4 * (i % 5), "seq_len": steps, "num_layers": 1,
                          "frozen": frozen}, 4 + i % 3, "input")
        c.plan(p)
        value = 1e-4 * steps * (0.25 if frozen else 1.0) * (1.0 + 0.02 * (i % 3))  # per-step overhead only
        c.complete(p.id, [{"metric": "time", "value": value, "std": 0.01 * value, "n": 5, "flagged": False,
                           "flag_reason": None, "parts": {}}])
    c.close()
    bench = load_bench("bench_launch_share")
    got = bench.campaign_shares(path, [1.0, 0.25])["kinds"]["gru"]
    assert got["n"] == 16 and got["forward_only"] == 4
    assert got["error"][0.25] < 0.5 * got["error"][1.0]
    assert "| gru | 16 | 4 |" in bench.report([{"campaign": "c.db", "kinds": {"gru": got}}], [1.0, 0.25], "cmd")


def test_single_ops_read_lowest_at_the_share_their_forward_only_samples_were_made_with(tmp_path):
    """--single-ops: a kind that is not recurrent, whose forward-only samples (role input) cost a third of a training
    one's launch: the law reads lowest at a share near a third, and a recurrent kind is left to the other mode."""
    path = str(tmp_path / "s.db")
    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    for i in range(18):
        fwd = i % 3 == 0
        numel = 64 * (1 + i)
        p = Probe("relu", {"numel": numel}, 2 + i % 4, "input" if fwd else "hidden")
        c.plan(p)
        value = 3e-5 * (1.0 / 3.0 if fwd else 1.0) * (1.0 + 0.02 * (i % 3)) + 1e-10 * numel  # launch-bound
        c.complete(p.id, [{"metric": "time", "value": value, "std": 0.01 * value, "n": 5, "flagged": False,
                           "flag_reason": None, "parts": {}}])
    c.close()
    bench = load_bench("bench_launch_share")
    got = bench.single_op_shares(path, [1.0, 0.35, 0.15])["kinds"]
    assert set(got) == {"relu"} and got["relu"]["forward_only"] == 6 and got["relu"]["n"] == 18
    err = got["relu"]["error"]
    assert err[0.35] < 0.5 * err[1.0] and err[0.35] < err[0.15]
    lines = bench.single_summary([{"campaign": "s.db", "kinds": got}], [1.0, 0.35, 0.15])
    assert any(line.startswith("| 0.35 |") and "| 1 of 1 |" in line for line in lines)
    assert any(line.startswith("| relu | 1 | 6 / 18 |") for line in lines)


def test_weighted_reads_each_entry_lowest_at_the_share_its_forward_only_convs_were_made_with(tmp_path):
    """--weighted: dense convs (1x1 at batch 16 or more: the conv2d entry) and 1x1 convs below batch 16 (conv2d:gemm),
    a quarter of them frozen reading the data and costing a quarter of a training one's fixed cost: each entry apart
    reads its forward-only samples lowest at that share, and a kind outside the shared ones (relu) is not scored."""
    path = str(tmp_path / "w.db")
    c = Campaign.create(path, {"metric": "time", "protocol": {}, "device": {"name": "synthetic"}, "runtime": "torch"})
    for i in range(40):
        fwd = i % 4 == 0
        batch = 16 + 8 * (i % 3) if i < 20 else 2 + i % 3
        cfg = {"in_channels": 8 + 4 * (i % 5), "out_channels": 8 + 8 * (i % 4), "kernel": 1, "stride": 1,
               "padding": 0, "groups": 1, "height": 2 + i % 3, "width": 2 + i % 3, "bias": 1, "dilation": 1,
               "frozen": int(fwd)}
        p = Probe("conv2d", cfg, batch, "input" if fwd else "hidden")
        c.plan(p)
        flops = 2.0 * cfg["in_channels"] * cfg["out_channels"] * cfg["height"] ** 2 * batch
        value = (4e-4 * (0.25 if fwd else 1.0) + 1e-11 * flops) * (1.0 + 0.02 * (i % 3))  # overhead-bound
        c.complete(p.id, [{"metric": "time", "value": value, "std": 0.01 * value, "n": 5, "flagged": False,
                           "flag_reason": None, "parts": {}}])
    p = Probe("relu", {"numel": 64}, 4, "input")
    c.plan(p)
    c.complete(p.id, [{"metric": "time", "value": 1e-5, "std": 1e-7, "n": 5, "flagged": False, "flag_reason": None,
                       "parts": {}}])
    c.close()
    bench = load_bench("bench_launch_share")
    got = bench.weighted_shares(path, [1.0, 0.25])["entries"]
    assert set(got) == {"conv2d", "conv2d:gemm"}
    for entry in got.values():
        assert entry["forward_only"] == 5 and entry["n"] == 20
        assert entry["error"][0.25][1] < 0.5 * entry["error"][1.0][1]  # the forward-only samples' error
        assert entry["error"][0.25][0] < 0.1 * entry["error"][1.0][0]  # and all: one launch bends the whole law
    lines = bench.weighted_summary([{"campaign": "w.db", "entries": got}], [1.0, 0.25])
    assert any(line.startswith("| conv2d | 1 | 5 / 20 |") and line.count("**") == 2 for line in lines)
    # --kinds scores other kinds instead: the one relu sample is too few to score, the convs are not asked for
    assert bench.weighted_shares(path, [1.0], kinds=("relu",))["entries"] == {}
    assert set(bench.weighted_shares(path, [1.0], kinds=("conv2d",))["entries"]) == {"conv2d", "conv2d:gemm"}
    with pytest.raises(SystemExit, match="--weighted"):
        bench.main(["--campaign", path, "--kinds", "relu"])
