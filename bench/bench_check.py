"""Wall time of ``thor-sdk check`` on a 150-layer layer-list JSON from a cold process (issue 11's bar: < 1 s).

    python bench/bench_check.py [--runs 15] [--out bench/results]

Each run is a fresh ``python -c`` process calling the CLI entry point on the shipped example
(``examples/check/``: SYNTHETIC phone estimators, ``example_cnn.layers.json`` grown to 150 layers), both
with a budget that passes (exit 0) and one that fails (exit 1: the explanation searches batch sizes and
epochs), with ``--junit``. Reports the median and max wall time per case, which heavy modules the process
imported (must be none: a layer list needs no torch), the machine's load before and after, and the command.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
EXAMPLE = os.path.join(ROOT, "examples", "check")
HEAVY = ("torch", "numpy", "sklearn", "onnx", "onnxruntime", "coremltools")


def big_layer_list(folder, n=150):
    with open(os.path.join(EXAMPLE, "example_cnn.layers.json"), encoding="utf-8") as f:
        doc = json.load(f)
    body, head = doc["layers"][:-1], doc["layers"][-1]
    layers = [dict(body[i % len(body)], name=f"l{i}", role="input" if i == 0 else "hidden") for i in range(n - 1)]
    path = os.path.join(folder, f"big{n}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(doc, name=f"big{n}", layers=[*layers, head]), f)
    return path


def one_run(model, budget_j, junit):
    code = ("import sys\nfrom thor_sdk.cli.main import main\ntry:\n"
            "    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            f"    print('exit', e.code, sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    argv = ["check", "--estimator", os.path.join(EXAMPLE, "synthetic-phone-energy.json"),
            "--estimator", os.path.join(EXAMPLE, "synthetic-phone-time.json"), "--model", model,
            "--batch-size", "16", "--samples", "5000", "--epochs", "3", "--budget-j", budget_j,
            "--budget-s", "1000", "--junit", junit]
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - t0
    tail = p.stderr.strip().splitlines()[-1]
    return wall, tail


def main(argv=None):
    from thor_sdk.devices.state import load_state

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args(argv)
    before = load_state("/")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = big_layer_list(tmp)
        junit = os.path.join(tmp, "r.xml")
        one_run(model, "1000", junit)  # warm the page cache, not the process
        for case, budget, want in (("within budget", "1000", 0), ("over budget", "1", 1)):
            walls, tails = [], set()
            for _ in range(a.runs):
                wall, tail = one_run(model, budget, junit)
                if not tail.startswith(f"exit {want} "):
                    raise SystemExit(f"{case}: expected exit {want}, got {tail!r}")
                walls.append(wall)
                tails.add(tail)
            rows.append({"case": case, "exit_expected": want, "exit_and_heavy_imports": sorted(tails),
                         "median_s": statistics.median(walls), "max_s": max(walls), "runs": a.runs})
    after = load_state("/")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    cmd = "python bench/bench_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# Cold `thor-sdk check` on a 150-layer layer list ({stamp} UTC)", "",
             f"Command: `{cmd.strip()}`  ", f"Python {platform.python_version()}, {platform.machine()}, "
             f"{os.cpu_count()} CPUs; load before {before}, after {after}", "",
             "| case | runs | median wall | max wall | exit, heavy modules imported |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['runs']} | {r['median_s'] * 1000:.0f} ms | {r['max_s'] * 1000:.0f} ms "
                     f"| {'; '.join(r['exit_and_heavy_imports'])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"check-cold-{stamp}")
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write(text)
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump({"rows": rows, "load_before": before, "load_after": after, "command": cmd.strip()}, f, indent=1)


if __name__ == "__main__":
    main()
