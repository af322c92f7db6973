"""Real-GPU check of the NVML meters and the ``host:cuda`` device: run it where an NVIDIA GPU is (it refuses elsewhere).

Part 0, how often each source's value changes while the GPU is busy (its real update period).

Part 1, the meter's three sources side by side. Every NVML meter (the instantaneous power field sampled and
integrated, the total-energy counter, the ~1 s averaged power sampled and integrated) measures the same
windows at once: idle, a saturating bf16 matrix-product loop, idle again, 50%-duty loops (products for half of
every 100, 73 or 310 ms: a sampled source whose refresh period divides the load's period reads one phase of it
again and again, and aliases), and a training loop. The total-energy counter is
the GPU's own accumulator, so each source is reported as its ratio to it. Which source ``nvml_meter()`` picks
(what every measurement uses) is printed.

Part 2, the product's path: ``HostDevice(accelerator="cuda")`` measures whole models' training steps with
``metric="energy"`` through the shared protocol (idle baseline, rounds, outliers), the result's time, gross and
net energy per step and idle power, with the GPU's clocks and temperature recorded per window.

Nothing here changes a GPU setting (clocks, power limit, persistence): NVML is only read.

    python bench/bench_nvml.py --report bench/results/nvml-h100-DATE.md --json nvml.json
"""

import argparse
import json
import os
import platform
import sys
import time


def _busy(seconds, duty=1.0, n=8192, period_s=0.1):
    """bf16 matrix products on the GPU for ``seconds``; with ``duty`` < 1, products for ``duty`` of every
    ``period_s`` and nothing for the rest. Returns the products run."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    done, t_end = 0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t_on = time.perf_counter() + duty * period_s
        while time.perf_counter() < t_on:
            a @ b
            torch.cuda.synchronize()
            done += 1
        if duty < 1.0:
            time.sleep(max(0.0, t_on + (1.0 - duty) * period_s - time.perf_counter()))
    return done


def _train(seconds, model="mobilenetv2", batch_size=128):
    from thor_sdk.harness.torch_trainer import trainer_for_model

    t = trainer_for_model(model, batch_size, device="cuda:0")
    steps, t_end = 0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t.step()
        steps += 1
    return steps


def update_intervals(index=0, seconds=2.0, poll_s=0.001):
    """How often each source's value changes while the GPU is busy (part 0): polled every ``poll_s`` for
    ``seconds`` while a thread runs products; the median and 90th percentile of the intervals between changes."""
    import threading

    from thor_sdk.meters.nvml import NvmlEnergyMeter, NvmlPowerMeter

    readers = {"total-energy": lambda m: m.read_counters(),
               "power-instant": lambda m: m.power_w(), "power-average": lambda m: m.power_w()}
    meters = {"total-energy": NvmlEnergyMeter(index),
              "power-instant": NvmlPowerMeter(index, source="power-instant"),
              "power-average": NvmlPowerMeter(index, source="power-average")}
    stop = threading.Event()
    worker = threading.Thread(target=lambda: [_busy(0.2) for _ in iter(stop.is_set, True)], daemon=True)
    worker.start()
    time.sleep(0.5)
    out = {}
    try:
        for k, m in meters.items():
            if m.why_unavailable():
                continue
            changes, last, t_end = [], None, time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                v = readers[k](m)
                if v != last:
                    changes.append(time.perf_counter())
                    last = v
                time.sleep(poll_s)
            gaps = sorted(b - a for a, b in zip(changes[1:], changes[2:]))  # the first change is the first read
            out[k] = {"changes": len(changes) - 1,
                      "median_interval_ms": 1e3 * gaps[len(gaps) // 2] if gaps else None,
                      "p90_interval_ms": 1e3 * gaps[int(0.9 * (len(gaps) - 1))] if gaps else None}
    finally:
        stop.set()
        worker.join()
    return out


def meter_sources(index=0, seconds=5.0):
    """Every NVML source over the same windows (part 1): a list of per-window dicts."""
    from thor_sdk.meters.nvml import NvmlEnergyMeter, NvmlPowerMeter, nvml_meter

    meters = {"total-energy": NvmlEnergyMeter(index, poll_period_s=0.5),
              "power-instant": NvmlPowerMeter(index, source="power-instant", poll_period_s=0.02),
              "power-average": NvmlPowerMeter(index, source="power-average", poll_period_s=0.1)}
    avail = {k: m.why_unavailable() for k, m in meters.items()}
    live = {k: m for k, m in meters.items() if not avail[k]}
    if "total-energy" not in live:
        raise SystemExit(f"the total-energy counter is the reference and is not readable: {avail['total-energy']}")
    phases = [("idle", lambda: time.sleep(seconds)),
              ("bf16 8192^3 products", lambda: _busy(seconds)),
              ("idle again", lambda: time.sleep(seconds)),
              ("products at 50% duty, period 100 ms", lambda: _busy(seconds, duty=0.5, period_s=0.1)),
              ("products at 50% duty, period 73 ms", lambda: _busy(seconds, duty=0.5, period_s=0.073)),
              ("products at 50% duty, period 310 ms", lambda: _busy(seconds, duty=0.5, period_s=0.31)),
              ("training mobilenetv2, batch 128", lambda: _train(seconds))]
    _busy(1.0)  # clocks up, kernels compiled, before the first window
    time.sleep(2.0)
    rows = []
    for name, work in phases:
        for m in live.values():
            m.start()
        work()
        wins = {k: m.stop() for k, m in live.items()}
        ref = wins["total-energy"]
        row = {"phase": name, "duration_s": ref.duration_s, "sources": {}}
        for k, w in wins.items():
            row["sources"][k] = {"energy_j": w.energy_j, "mean_power_w": w.mean_power_w, "n_samples": len(w.samples),
                                 "ratio_to_counter": w.energy_j / ref.energy_j if ref.energy_j > 0 else None}
        rows.append(row)
    chosen = nvml_meter(index)
    return {"available": {k: (v or "yes") for k, v in avail.items()}, "chosen": chosen.window_source(),
            "chosen_meter": chosen.name, "windows": rows}


def measure_models(models, batch_size, index=0):
    """Part 2: each model's training step through the host:cuda device and the protocol, metric energy."""
    from thor_sdk.devices.host import HostDevice

    dev = HostDevice(threads=1, accelerator="cuda", gpu_index=index)
    out = []
    for model in models:
        r = dev.measure_model(model, batch_size, metric="energy")
        s_t, s_e = r.summary("time"), r.summary("energy")
        net = r.summary("net_energy") if r.net_energy_j else None
        clocks = [st.get("gpu_sm_mhz") for st in r.states if st.get("gpu_sm_mhz")]
        temps = [st.get("gpu_temp_c") for st in r.states if st.get("gpu_temp_c") is not None]
        out.append({"model": model, "batch_size": batch_size, "rounds": len(r.time_s),
                    "steps_per_window": r.steps_per_window,
                    "time_ms": s_t["median"] * 1e3, "time_cv": s_t["cv"],
                    "energy_j": s_e["median"], "energy_cv": s_e["cv"],
                    "net_energy_j": net["median"] if net else None, "net_energy_cv": net["cv"] if net else None,
                    "idle_power_w": r.idle_power_w,
                    "mean_power_w": s_e["median"] / s_t["median"],
                    "outliers_energy": len(r.outliers("energy")),
                    "sm_mhz": [min(clocks), max(clocks)] if clocks else None,
                    "temp_c": [min(temps), max(temps)] if temps else None})
    return dev.info(), out


def report(part0, part1, info, part2, command):
    lines = ["# NVML meters and host:cuda on a real GPU", "",
             f"Command: `{command}`", "",
             f"GPU: {info.get('gpu_name')} (driver {info.get('gpu_driver')}, {info.get('gpu_memory_mib')} MiB, "
             f"power limit {info.get('gpu_power_limit_w')} W, read only); torch {info.get('torch_version')}, "
             f"CUDA {info.get('cuda_version')}; {platform.machine()}, {os.cpu_count()} CPUs.", "",
             "## 0. How often each source's value changes (GPU busy, polled every 1 ms)", "",
             "| source | changes in 2 s | median interval ms | 90th percentile ms |", "|---|---|---|---|"]
    for k, v in part0.items():
        med, p90 = v["median_interval_ms"], v["p90_interval_ms"]
        lines.append(f"| {k} | {v['changes']} | {'n/a' if med is None else f'{med:.1f}'} | "
                     f"{'n/a' if p90 is None else f'{p90:.1f}'} |")
    lines += ["", "## 1. The three NVML sources over the same windows", "",
             "Sources readable: " + ", ".join(f"{k}: {v}" for k, v in part1["available"].items())
             + f". `nvml_meter()` chooses **{part1['chosen']}** ({part1['chosen_meter']}).", "",
             "| window | s | counter J (W) | instant / counter | average / counter |", "|---|---|---|---|---|"]
    for row in part1["windows"]:
        src = row["sources"]
        ref = src["total-energy"]

        def ratio(k):
            v = src.get(k, {}).get("ratio_to_counter")
            return "n/a" if v is None else f"{v:.3f} ({src[k]['n_samples']} samples)"
        lines.append(f"| {row['phase']} | {row['duration_s']:.2f} | {ref['energy_j']:.1f} ({ref['mean_power_w']:.1f} W) "
                     f"| {ratio('power-instant')} | {ratio('power-average')} |")
    lines += ["", "## 2. Whole models' training steps through `host:cuda` (metric energy, the shared protocol)", "",
              "| model | batch | rounds x steps | time ms (cv) | gross J/step (cv) | net J/step (cv) | idle W | "
              "mean W | SM MHz | temp C |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m in part2:
        net = "n/a" if m["net_energy_j"] is None else f"{m['net_energy_j']:.4f} ({m['net_energy_cv']:.1%})"
        lines.append(f"| {m['model']} | {m['batch_size']} | {m['rounds']} x {m['steps_per_window']} | "
                     f"{m['time_ms']:.2f} ({m['time_cv']:.1%}) | {m['energy_j']:.4f} ({m['energy_cv']:.1%}) | {net} | "
                     f"{m['idle_power_w']:.1f} | {m['mean_power_w']:.1f} | {m['sm_mhz']} | {m['temp_c']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=5.0, help="each part-1 window (default 5)")
    ap.add_argument("--models", default="lenet5,cnn5,mobilenetv2")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--report", help="write the markdown report here")
    ap.add_argument("--json", dest="json_out", help="write every number here")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: this benchmark runs on a machine with an NVIDIA GPU")
    command = "python " + " ".join([os.path.relpath(__file__)] + sys.argv[1:])
    part0 = update_intervals(a.gpu)
    part1 = meter_sources(a.gpu, a.seconds)
    info, part2 = measure_models([m for m in a.models.split(",") if m], a.batch_size, a.gpu)
    text = report(part0, part1, info, part2, command)
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"command": command, "device": info, "updates": part0, "sources": part1, "models": part2}, f, indent=1)
    ok = all(abs(r["sources"]["power-instant"]["ratio_to_counter"] - 1) < 0.1 for r in part1["windows"]
             if "power-instant" in r["sources"] and r["sources"]["power-instant"]["ratio_to_counter"])
    print("instant power within 10% of the counter in every window:", ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
