"""bench/bench_host_noise.py: the perfect estimator's APE is what its docstring says (against every choice of passes),
bounds are refused before any work, and a short run prints one row per model and the floor (timings themselves
are the benchmark's, not asserted here)."""

import pytest
from bench_module import load_bench


def _bench():
    return load_bench("bench_host_noise")


def test_perfect_ape_is_the_mean_over_every_choice_of_passes():
    ape = _bench().perfect_ape
    assert ape([2.0, 2.0, 2.0, 2.0], 3) == 0.0
    # median 1; of the 10 choices of 3 from three 1s and two 2s, 3 hold both 2s: their median 2 reads 50% off
    assert ape([1.0, 2.0, 1.0, 2.0, 1.0], 3) == pytest.approx(15.0)
    # one pass: each value alone; the two 2s read 50% off a median of 1
    assert ape([1.0, 1.0, 1.0, 2.0, 2.0], 1) == pytest.approx(20.0)
    # more passes never score a perfect estimate worse on these values (medians of more rounds sit nearer the median)
    vals = [1.0, 1.6, 1.1, 1.7, 1.0, 1.05, 1.65]
    assert ape(vals, 5) <= ape(vals, 3) <= ape(vals, 1)


def test_evaluates_floor_is_measurement_floor_over_every_choice_of_passes():
    b = _bench()
    from thor_sdk.evaluate.unseen import measurement_floor

    assert b.evaluate_floor([1.0, 1.0, 1.0], 3) == pytest.approx(0.0)
    vals = [1.0, 1.3, 1.1, 1.2]
    want = sum(measurement_floor([{"measured_passes": [vals[i] for i in range(4) if i != j]}])["mape"]
               for j in range(4)) / 4
    assert b.evaluate_floor(vals, 3) == pytest.approx(want) and b.evaluate_floor(vals, 1) is None


def test_bounds_are_checked_before_any_work():
    for bad in (["--rounds", "1"], ["--rounds", "41"], ["--passes", "0"], ["--rounds", "2", "--passes", "3"],
                ["--batch-size", "0"]):
        with pytest.raises(SystemExit) as e:
            _bench().main(bad)
        assert e.value.code not in (0, None)


def test_prints_one_row_per_model_and_the_floor(capsys):
    _bench().main(["--models", "har,mlp5", "--rounds", "3", "--passes", "1", "--batch-size", "4"])
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| har ") or ln.startswith("| mlp5 ")]
    assert len(rows) == 2 and all(ln.rstrip().endswith("- |") for ln in rows)  # one pass: no spread to read
    assert "A perfect estimator" in out and "scored on the median of 1 rounds" in out


def test_with_passes_it_prints_evaluates_floor_beside_the_direct_one(capsys):
    _bench().main(["--models", "har", "--rounds", "3", "--passes", "2", "--batch-size", "4"])
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("| har "))
    assert row.rstrip().endswith("% |") and row.count("%") == 3  # its CV, the direct floor and evaluate's
    assert "`evaluate` would say" in out and "from its 2 passes" in out
