"""Selection core: binary search, monotonicity check, infeasible caps, baselines, oracle, stdlib runtime."""

import itertools
import random
import subprocess
import sys

import pytest

from thor_sdk.errors import FormatError, UsageError
from thor_sdk.power.select import (
    InfeasibleCapError, baseline_largest_batch, baseline_proxy_best, compare, make_table, oracle, select,
)
from thor_sdk.runtime.table import highest_feasible_index, is_monotone

MHZ = 1e6


def grid(batches, freqs, power, time):
    return [{"batch_size": b, "freq_hz": f, "time_per_sample_s": time(b, f), "peak_power_w": power(b, f)}
            for b, f in itertools.product(batches, freqs)]


def std_rows():
    # power rises with frequency and batch; time falls with both
    return grid([16, 32, 64, 128], [f * MHZ for f in (200, 400, 600, 800)],
                lambda b, f: 1.0 + f / MHZ / 200 * (0.5 + b / 128),
                lambda b, f: (1 / (f / MHZ)) * (1 + 16 / b))


def brute_force(rows, ratios, cap):
    best = {}
    for r in rows:
        if r["peak_power_w"] <= cap and r["batch_size"] in ratios:
            b = r["batch_size"]
            if b not in best or r["freq_hz"] > best[b]["freq_hz"]:
                best[b] = r
    return min(best.values(), key=lambda r: (r["time_per_sample_s"] * ratios[r["batch_size"]], -r["batch_size"]))


def test_binary_search_matches_linear_scan_on_random_monotone_powers():
    rng = random.Random(0)
    for _ in range(300):
        powers = sorted(rng.uniform(0, 10) for _ in range(rng.randint(1, 12)))
        cap = rng.uniform(-1, 11)
        idx, mono = highest_feasible_index(powers, cap)
        assert mono
        expect = max((i for i, p in enumerate(powers) if p <= cap), default=-1)
        assert idx == expect


def test_non_monotone_powers_fall_back_to_linear_scan_and_say_so():
    powers = [1.0, 3.0, 2.0, 4.0]  # dips at index 2
    assert not is_monotone(powers)
    idx, mono = highest_feasible_index(powers, 2.5)
    assert (idx, mono) == (2, False)  # binary search on this list would answer 0
    rows = [{"batch_size": 8, "freq_hz": f, "time_per_sample_s": 1.0 / f, "peak_power_w": p}
            for f, p in zip((1, 2, 3, 4), powers)]
    res = select(make_table(rows, {8: 1.0}), 2.5)
    assert res["freq_hz"] == 3 and res["non_monotone_batch_sizes"] == [8]
    assert "monotonically" in res["why"]


def test_select_equals_brute_force_on_random_tables():
    rng = random.Random(1)
    for _ in range(100):
        batches = sorted(rng.sample([4, 8, 16, 32, 64, 128, 256], rng.randint(1, 5)))
        freqs = sorted(rng.sample(range(100, 1000, 50), rng.randint(1, 6)))
        pw = {b: rng.uniform(0.5, 3) for b in batches}
        rows = grid(batches, freqs, lambda b, f: pw[b] * f / 100,
                    lambda b, f: rng.uniform(0.5, 2.0) / f)
        ratios = {b: rng.uniform(0.2, 3) for b in batches}
        cap = rng.uniform(1, 40)
        lowest = min(r["peak_power_w"] for r in rows)
        if cap < lowest:
            with pytest.raises(InfeasibleCapError):
                select(make_table(rows, ratios), cap)
            continue
        res = select(make_table(rows, ratios), cap)
        exp = brute_force(rows, ratios, cap)
        assert (res["batch_size"], res["freq_hz"]) == (exp["batch_size"], exp["freq_hz"])
        assert res["peak_power_w"] <= cap


def test_infeasible_cap_names_the_lowest_feasible_power():
    rows = std_rows()
    lowest = min(r["peak_power_w"] for r in rows)
    with pytest.raises(InfeasibleCapError) as ei:
        select(make_table(rows, {16: 0.5, 32: 0.6, 64: 0.8, 128: 1.0}), lowest - 0.01)
    assert ei.value.lowest_feasible_power_w == pytest.approx(lowest)
    assert f"{lowest:.3f} W" in str(ei.value)
    assert isinstance(ei.value, UsageError)


def test_selection_trades_batch_efficiency_against_speed():
    rows = std_rows()
    # small batches need far fewer samples: the selection should leave the largest batch
    ratios = {16: 0.3, 32: 0.35, 64: 0.7, 128: 1.0}
    res = select(make_table(rows, ratios, reference_samples_to_target=1000.0), 4.0)
    exp = brute_force(rows, ratios, 4.0)
    assert res["batch_size"] == exp["batch_size"] != 128
    assert res["est_time_to_accuracy_s"] == pytest.approx(res["time_per_sample_s"] * res["ratio"] * 1000.0)
    # with flat ratios the fastest batch per sample wins
    flat = select(make_table(rows, {b: 1.0 for b in ratios}), 4.0)
    assert flat["batch_size"] == brute_force(rows, {b: 1.0 for b in ratios}, 4.0)["batch_size"]


def test_baselines_and_oracle():
    rows = std_rows()
    ratios = {16: 0.3, 32: 0.35, 64: 0.7, 128: 1.0}
    cap = 4.0
    b1 = baseline_largest_batch(rows, cap)
    feas128 = [r for r in rows if r["batch_size"] == 128 and r["peak_power_w"] <= cap]
    assert b1.batch_size == 128 and b1.freq_hz == max(r["freq_hz"] for r in feas128)
    b2 = baseline_proxy_best(rows, ratios, cap)
    assert b2.batch_size == 16 and b2.freq_hz == b1.freq_hz
    true = {16: 400.0, 32: 300.0, 64: 500.0, 128: 900.0}
    o = oracle(rows, true, cap)
    cands = [(r["time_per_sample_s"] * true[r["batch_size"]], r["batch_size"], r["freq_hz"])
             for r in rows if r["peak_power_w"] <= cap]
    assert (o.batch_size, o.freq_hz) == min(cands)[1:]
    cmp = compare(make_table(rows, ratios, reference_samples_to_target=100.0), cap, true)
    assert cmp["oracle"]["slowdown_vs_oracle"] == pytest.approx(1.0)
    for k in ("selected", "baseline1", "baseline2"):
        assert cmp[k]["slowdown_vs_oracle"] >= 1.0 - 1e-12


def test_baseline2_says_when_the_proxy_best_batch_was_not_profiled_at_that_setting():
    # an economical profile measures a smaller batch only from the previous batch's last feasible
    # setting upward: batch 16 has no row at or below baseline 1's frequency
    rows = [r for r in std_rows() if not (r["batch_size"] == 16 and r["freq_hz"] < 800 * MHZ)]
    ratios = {16: 0.3, 32: 0.35, 64: 0.7, 128: 1.0}
    cap = 4.0
    b1 = baseline_largest_batch(rows, cap)
    assert b1.freq_hz < 800 * MHZ
    b2 = baseline_proxy_best(rows, ratios, cap)
    assert (b2.batch_size, b2.freq_hz) == (32, b1.freq_hz)
    assert "proxy-best batch 16 has no profiled setting" in b2.note
    # with the row present, no note
    assert baseline_proxy_best(std_rows(), ratios, cap).note == ""


def test_baseline1_moves_to_a_smaller_batch_when_the_largest_cannot_fit():
    rows = std_rows()
    lowest128 = min(r["peak_power_w"] for r in rows if r["batch_size"] == 128)
    b1 = baseline_largest_batch(rows, lowest128 - 1e-6)
    assert b1.batch_size < 128 and "larger batches" in b1.note


def test_oracle_skips_batches_that_never_reach_the_target():
    rows = std_rows()
    o = oracle(rows, {16: float("inf"), 32: 300.0}, 10.0)
    assert o.batch_size == 32


def test_malformed_tables_are_format_errors():
    good = make_table(std_rows(), {16: 1.0})
    for broken in ({**good, "format": "x"}, {**good, "version": 9}, {**good, "rows": []},
                   {**good, "ratios": [{"batch_size": 16, "ratio": 0}]},
                   {**good, "rows": [{"batch_size": 16, "freq_hz": 1, "time_per_sample_s": -1, "peak_power_w": 1}]}):
        with pytest.raises(FormatError):
            select(broken, 5.0)
    with pytest.raises(UsageError):
        select(good, 0)


def test_runtime_select_is_stdlib_only():
    code = ("import sys\n"
            "for m in ('numpy', 'torch', 'sklearn', 'jsonschema'): sys.modules[m] = None\n"
            "from thor_sdk.runtime.table import select\n"
            "doc = {'format': 'thor-sdk/power-table', 'version': 1, 'reference_batch_size': 8,\n"
            "       'rows': [{'batch_size': 8, 'freq_hz': 1e8, 'time_per_sample_s': 0.1, 'peak_power_w': 2.0},\n"
            "                {'batch_size': 8, 'freq_hz': 2e8, 'time_per_sample_s': 0.05, 'peak_power_w': 3.0}],\n"
            "       'ratios': [{'batch_size': 8, 'ratio': 1.0}]}\n"
            "print(select(doc, 2.5)['freq_hz'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "100000000.0"
