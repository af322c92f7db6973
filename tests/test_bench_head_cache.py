"""bench/bench_head_cache.py: refuses bad bounds before any work, and prints the three medians and the paired
differences it says it prints (timings themselves are the benchmark's, not asserted here)."""

import pytest
from bench_module import load_bench


def _bench():
    return load_bench("bench_head_cache")


def test_bounds_are_checked_before_any_work():
    for bad in (["--rounds", "0"], ["--copies", "1"]):
        with pytest.raises(SystemExit) as e:
            _bench().main(bad)
        assert e.value.code == 2


def test_prints_medians_and_one_paired_difference_per_round(capsys):
    _bench().main(["--rounds", "2", "--copies", "2"])
    out = capsys.readouterr().out
    for name in ("head, one input", "head, rotated inputs", "hidden probe"):
        assert f"{name}" in out and "(median of 2 rounds)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("rotated - one input, per round:"))
    assert len(line.split(":")[1].split(";")[0].split(",")) == 2 and "% of the probe difference" in line
