"""bench/bench_core_states.py: refuses bad bounds before any work, and its per-second series and summary say what
its docstring says (the host's timings themselves are the benchmark's, not asserted here)."""

import math

import pytest
from bench_module import load_bench


def _bench():
    return load_bench("bench_core_states")


@pytest.mark.parametrize("bad", ["0", "4.9", "601", "nan"])
def test_bounds_are_checked_before_any_work(bad):
    with pytest.raises(SystemExit) as e:
        _bench().main(["--seconds", bad])
    assert e.value.code == 2


def test_per_second_takes_each_seconds_median_block():
    b = _bench()
    blocks = [(100.1, 0.004), (100.5, 0.006), (100.9, 0.005), (101.2, 0.007), (103.0, 0.002)]
    assert b.per_second(blocks) == {100: 0.005, 101: 0.007, 103: 0.002}


def test_summary_counts_the_seconds_whose_speed_moved_past_the_threshold():
    b = _bench()
    # 4.0 -> 4.2 (+5%: no move), 4.2 -> 6.0 (+43%: a move), 6.0 -> 6.1, 6.1 -> 4.0 (a move)
    series = {10: 0.0040, 11: 0.0042, 12: 0.0060, 13: 0.0061, 14: 0.0040}
    s = b.summary(series)
    assert s["moved_share"] == pytest.approx(2 / 4)
    assert s["median_ms"] == pytest.approx(4.2)
    assert s["p10_ms"] == pytest.approx(4.0) and s["p90_ms"] == pytest.approx(6.1)
    assert math.isfinite(s["median_ms"])
