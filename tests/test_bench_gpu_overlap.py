"""bench/bench_gpu_overlap.py: THOR's subtraction applied to three figures per step (wall, host side, GPU side).
The GPU path needs a GPU (run on a lent H100, bench/results/gpu-overlap-h100-20261127-1230); here the
CPU path runs end to end, and the subtraction and sums are checked on figures made up to known layer costs."""

import json

import pytest
import torch
from bench_module import load_bench

from thor_sdk.harness.torch_trainer import TorchTrainer


def test_enqueue_is_a_step_without_the_wait():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    a = TorchTrainer(m, x, y, torch.nn.functional.cross_entropy)
    w0 = m.weight.detach().clone()
    a.enqueue()
    assert not torch.equal(m.weight, w0)  # the update ran
    first = float(a.last_loss)
    a.step()
    assert float(a.last_loss) < first  # a second step on the same batch lowers the loss


def test_seconds_per_step_times_a_window_of_at_least_its_steps():
    class Counted(TorchTrainer):
        calls = 0

        def enqueue(self):
            Counted.calls += 1
            super().enqueue()

    m = torch.nn.Linear(4, 3)
    t = Counted(m, torch.randn(8, 4), torch.randint(0, 3, (8,)), torch.nn.functional.cross_entropy)
    s = t.seconds_per_step(0.0, warmup=1, min_steps=5)
    assert Counted.calls == 6 and s > 0  # one warm-up step, then the window's five
    Counted.calls = 0
    assert t.seconds_per_step(0.0, warmup=0, min_steps=3, pipelined=True) > 0 and Counted.calls == 3
    Counted.calls = 0
    t.seconds_per_step(0.02, warmup=0)
    assert Counted.calls >= 1  # a window of 20 ms: as many steps as fit, at least one


def test_layer_cost_and_sums_follow_made_up_figures():
    bench = load_bench("bench_gpu_overlap")
    # one output layer (head alone) and two hidden layers sharing one head: known differences per figure
    fig = {"out:head": (1.0, 0.9, 0.1, 7, 0.6, 0.95), "h:head": (0.5, 0.45, 0.05, 7, 0.3, 0.4),
           "h:hidden": (0.8, 0.7, 0.25, 7, 0.4, 0.6)}
    nets = {"n": {"layers": [("a", "relu", ["h:head", "h:hidden"]), ("b", "relu", ["h:head", "h:hidden"]),
                             ("c", "output", ["out:head"])], "skipped": []}}
    assert bench.layer_cost(fig, ["out:head"], 1) == 0.9
    assert bench.layer_cost(fig, ["h:head", "h:hidden"], 2) == pytest.approx(0.2)
    (row,) = bench.summarize(nets, fig, {"n": (1.2, 1.1, 0.5, 7, 0.7, 1.0)})
    assert row["sum_wall_ms"] == pytest.approx(1e3 * (1.0 + 2 * 0.3))
    assert row["sum_host_ms"] == pytest.approx(1e3 * (0.9 + 2 * 0.25))
    assert row["sum_gpu_ms"] == pytest.approx(1e3 * (0.1 + 2 * 0.2))
    assert row["max_sums_ms"] == pytest.approx(row["sum_host_ms"])
    assert row["sum_host_busy_ms"] == pytest.approx(1e3 * (0.6 + 2 * 0.1))
    assert row["sum_pipelined_ms"] == pytest.approx(1e3 * (0.95 + 2 * 0.2))
    # no GPU figure (the CPU): no GPU sum and no larger-of-two prediction
    (cpu,) = bench.summarize(nets, {k: v[:2] + (None, None, None, v[5]) for k, v in fig.items()},
                             {"n": (1.2, 1.2, None, None, None, 1.0)})
    assert cpu["sum_gpu_ms"] is None and cpu["max_sums_ms"] is None and cpu["sum_host_busy_ms"] is None
    assert cpu["sum_pipelined_ms"] == pytest.approx(row["sum_pipelined_ms"])
    text = bench.report([row], {"device": "d", "batch_size": 4, "stamp": "s", "command": "c", "machine": "m",
                                "parts": 3, "rounds": 1, "seconds": 1.0, "load": [0.1, 0.2], "whole_queues": "7 of 7"})
    assert "| n | 1200.00 | 1600.00 (1.33) | 1100.00 | 1400.00 (1.27) | 500.00 | 500.00 (1.00) | 1.17 |" in text
    assert "| n | 700.00 | 800.00 (1.14) | 1000.00 | 1350.00 (1.35) |" in text


def test_cpu_run_end_to_end(tmp_path):
    bench = load_bench("bench_gpu_overlap")
    out = tmp_path / "r.md"
    rows = bench.main(["--device", "host", "--models", "mlp5", "--rounds", "1", "--window-s", "0.005",
                       "--report", str(out)])
    (row,) = rows
    assert row["net"] == "mlp5" and row["layers"] == 13 and row["skipped"] == []
    assert row["wall_ms"] > 0 and row["sum_wall_ms"] > 0 and row["gpu_ms"] is None
    assert row["host_ms"] == row["wall_ms"]  # on the CPU a step is done when it returns
    assert row["pipelined_ms"] > 0 and row["host_busy_ms"] is None
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["meta"]["parts"] == len(doc["parts"]) > 0
    assert "| mlp5 |" in out.read_text()


def test_bad_arguments_are_refused_before_any_work():
    bench = load_bench("bench_gpu_overlap")
    with pytest.raises(SystemExit):
        bench.main(["--device", "host", "--rounds", "0"])
    with pytest.raises(SystemExit):
        bench.main(["--device", "host", "--window-s", "nan"])
