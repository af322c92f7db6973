"""bench/bench_additivity.py: refuses bad bounds before any work; measures a small net for real (mlp5, two rounds
of short windows), writes its report and leaves the process's torch settings as they were (timings themselves
are the benchmark's, not asserted here)."""

import json
import os

import pytest
from bench_module import load_bench


@pytest.mark.parametrize("bad", [["--rounds", "1"], ["--batch-size", "0"], ["--window-s", "0"]])
def test_bad_bounds_stop_before_any_work(bad, tmp_path):
    with pytest.raises(SystemExit) as e:
        load_bench("bench_additivity").main(bad + ["--report", str(tmp_path / "r.md")])
    assert e.value.code not in (0, None)
    assert not os.listdir(tmp_path)


def test_a_run_reports_and_restores_torch_settings(tmp_path):
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    tiny = torch.tensor([1e-39], dtype=torch.float32)  # a denormal float32: flushing it is the host's setting
    assert (tiny * 1.0).item() != 0.0
    report = tmp_path / "r.md"
    load_bench("bench_additivity").main(["--model", "mlp5", "--batch-size", "4", "--rounds", "2",
                                         "--window-s", "0.01", "--report", str(report)])
    assert torch.get_num_threads() == threads
    assert (tiny * 1.0).item() != 0.0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["model"] == "mlp5" and len(doc["net_rounds_ms"]) == 2 and doc["net_ms"] > 0
    for g in doc["groups"]:  # groups too cheap to resolve are left out; those kept are fully described
        assert g["layers"] and g["probes_ms"] > 0
    assert "# Additivity by ablation: mlp5, batch 4" in report.read_text()
