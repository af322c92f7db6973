"""bench/bench_probe_tail.py: refuses bad arguments before any work; times the tail after each op for real (two steps
a round) and reports each row against the tail alone (timings themselves are the benchmark's, not asserted)."""

import math
import os

import pytest
from bench_module import load_bench


def _bench():
    return load_bench("bench_probe_tail")


@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--steps", "0"], ["--rounds", "x"]])
def test_bad_arguments_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        _bench().main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code not in (0, None)
    assert not os.listdir(tmp_path)


def test_every_op_is_followed_by_the_same_tail_and_compared_with_the_tail_alone(tmp_path):
    bench = _bench()
    seen = []
    result = bench.run(rounds=2, steps=2, progress=lambda *a: seen.append(a))
    assert seen == [(1, 2), (2, 2)]
    rows = {r["before"]: r for r in result["rows"]}
    assert list(rows)[0] == "nothing" and rows["nothing"]["tail_ratio"] == 1.0 and rows["nothing"]["op_s"] < 1e-4
    assert {"the sweep (4 MiB)", "the layer (1x1 conv 96->576)"} <= set(rows)
    for r in rows.values():
        assert r["tail_s"] > 0 and math.isfinite(r["tail_ratio"])
        assert r["tail_ratio"] == pytest.approx(r["tail_s"] / rows["nothing"]["tail_s"])
    assert set(result["probe_difference_s"]) == {"warm", "swept"} and result["layer_alone_s"] > 0
    text = bench.report(result, "python bench/bench_probe_tail.py", 0.5, 0.6, "20261129-0000")
    assert f"| the sweep (4 MiB) | {rows['the sweep (4 MiB)']['op_s'] * 1e3:.3f} ms |" in text
    assert "The layer's probe difference: warm " in text
