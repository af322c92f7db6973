"""bench/bench_generalization.py: what it is told is checked before its 20-minute profile (the profile, fit and
evaluation themselves are the product's, tested through the API)."""

import pytest
from bench_module import load_bench

from thor_sdk.errors import UsageError


@pytest.mark.parametrize("bad", [["--passes", "0"], ["--passes", "21"]])
def test_passes_out_of_range_are_refused_before_anything_is_profiled_or_written(tmp_path, bad):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        load_bench("bench_generalization").main(["--out-dir", str(out), *bad])
    assert e.value.code not in (0, None) and "--passes must be 1 to 20" in str(e.value.code)
    assert not out.exists()


def test_a_report_path_it_cannot_write_is_refused_before_the_profile(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(UsageError, match="report path"):
        load_bench("bench_generalization").main(["--out-dir", str(out), "--report", str(tmp_path) + "/"])
    assert not out.exists()
