"""bench/bench_canary.py: ``rederive`` copies a campaign with its samples derived again from its windows, with the
canary or as if measured without it (every reading dropped), refusing to overwrite a file; ``window_table`` reads a
window's spread as measured and at the canary."""

import json
import math

import pytest
from bench_module import load_bench

from test_canary import CANARY_S, META, Stub, _measure, _probe, _store
from thor_sdk.campaign.measure import derive_samples
from thor_sdk.store import Campaign


def test_rederive_derives_each_sample_again_from_its_windows_with_or_without_the_canary(tmp_path):
    src = str(tmp_path / "c.db")
    c = Campaign.create(src, META)
    p = _probe(0)
    c.plan(p)
    res, _ = _measure([1.0, 1.5, 1.5, 1.0])  # hidden always slow, head always fast
    s = derive_samples(Stub(), res)[0]
    _store(c, p, res, [dict(s, value=9.0, noisy=True, noise_reason="old")])
    c.add_model_run("calibration:lenet5", 8, "time", 1e-3, 1e-5, 5, "torch", {"layers": [], "canary_s": CANARY_S})
    c.close()
    bench = load_bench("bench_canary")
    with_c, without = str(tmp_path / "with.db"), str(tmp_path / "without.db")
    assert bench.rederive(src, with_c) == 1 and bench.rederive(src, without, canary=False) == 1
    with Campaign.open(with_c) as a, Campaign.open(without) as b, Campaign.open(src) as kept:
        sa, sb = a.samples()[0], b.samples()[0]
        assert sa["value"] == pytest.approx(1.1e-3) == sb["value"]  # 1.5 x 1.4 - 1.0 ms, as measured, both
        assert sa["canary_s"] == pytest.approx(1.25 * CANARY_S) and sb["canary_s"] is None
        assert sa["noise_reason"] != "old"  # decided again from the windows
        assert kept.samples()[0]["value"] == 9.0  # the source is untouched
        assert all(w["canary_s"] is None for w in b.windows(p.id, detail=True))
        assert b.model_runs()[0]["detail"] == {"layers": []} and a.model_runs()[0]["detail"]["canary_s"] == CANARY_S
    with pytest.raises(Exception, match="exists"):
        bench.rederive(src, with_c)


def test_window_table_reads_what_the_canary_explains():
    bench = load_bench("bench_canary")
    got = {"conv": [(CANARY_S * f, 1e-3 * f, CANARY_S * f) for f in (1.0, 1.5) * 10]}
    t = bench.window_table(got)["nets"]["conv"]
    assert t["windows"] == 20 and t["raw"][0] == pytest.approx(math.log(1.5) / 2)
    assert t["canary"][0] == pytest.approx(0.0, abs=1e-12) and t["canary_before"][0] == pytest.approx(0.0, abs=1e-12)
    assert json.dumps(t)  # plain data


def test_settle_times_each_run_of_the_workload_by_its_place_after_a_window():
    bench = load_bench("bench_canary")
    got = bench.settle(["mlp_tabular"], rounds=1, reads=3, window_s=0.01)
    assert list(got) == ["mlp_tabular"] and len(got["mlp_tabular"]) == 3
    assert all(0 < t < 1 for t in got["mlp_tabular"])
    text = bench.settle_report(got, "cmd", 0.5)
    assert "| mlp_tabular |" in text and "first / the rest" in text


def test_kinds_reads_a_kind_whose_own_work_slows_the_canary_beside_it(tmp_path):
    from thor_sdk.probes import Probe

    path = str(tmp_path / "c.db")
    c = Campaign.create(path, META)
    for i in range(24):
        kind = "gru" if i % 3 == 0 else "relu"
        p = (Probe("gru", {"input_size": 8, "hidden_size": 8 + i, "seq_len": 4, "num_layers": 1}, 4, "input")
             if kind == "gru" else Probe("relu", {"numel": 64 * (i + 1)}, 4, "hidden"))
        c.plan(p)
        c.complete(p.id, [{"metric": "time", "value": 1e-4, "std": 1e-6, "n": 5, "flagged": False,
                           "flag_reason": None, "parts": {}, "canary_s": CANARY_S * (1.3 if kind == "gru" else 1.0)}])
    c.close()
    got = load_bench("bench_canary").kind_readings(path)
    assert got["canary_version"] == 1  # META names none: a campaign from before the version was recorded
    # with two kinds, a relu's neighbours of another kind are the GRUs: it reads 1 / 1.3 (edges: fewer than 4, left out)
    assert [(k, round(r, 4), n) for k, r, n in got["kinds"]] == [("gru", 1.3, 8), ("relu", round(1 / 1.3, 4), 14)]
    # the subcommand prints and writes the same Markdown (no JSON beside it: only `windows` has a table to keep)
    report = tmp_path / "kinds.md"
    load_bench("bench_canary").main(["kinds", "--campaign", path, "--report", str(report)])
    text = report.read_text()
    assert f"- {path} (canary version 1): gru 1.30 (8), relu 0.77 (14)" in text
    assert not (tmp_path / "kinds.json").exists()
