"""bench/bench_launch_share.py: the law's held-out error per share of launches a forward-only recurrent layer counts,
on a campaign whose forward-only GRUs cost a quarter of a training one's steps."""

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
