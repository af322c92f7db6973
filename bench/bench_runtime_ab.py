"""Two source trees' stdlib runtimes side by side: ``Estimator.estimate`` latency, both at once, one core each.

This VM's speed swings 1.5x within minutes, so timings taken one after the other compare machine phases, not
code. Here the two trees run at the same time, pinned to one core each (``taskset``), and swap cores every
repetition: both see the same phase. Each run times ``--runs`` calls per layer list after 5 warm-ups and keeps
the median; the table gives each tree's median over the repetitions, each repetition's value, and the ratio.

    git archive BASE thor_sdk | tar -x -C /tmp/base
    python bench/bench_runtime_ab.py --estimator host-torch.json --base /tmp/base [--reps 5] [--report F]

Layer lists: the first 50 layers of mobilenetv2 and of resnet18 (repeated layers, as real nets have) and 50
distinct SYNTHETIC layers (``bench_runtime.synthetic50``: the worst case, nothing repeats), batch 16.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TIMER = r'''
import json, sys, time
sys.path.insert(0, SRC)
from thor_sdk.runtime import load_estimator
est = load_estimator(EST)
res = {}
for name, layers in json.load(open(LAYERS)).items():
    for _ in range(5):
        est.estimate(layers, 16)
    ts = []
    for _ in range(RUNS):
        t = time.perf_counter()
        est.estimate(layers, 16)
        ts.append(time.perf_counter() - t)
    ts.sort()
    res[name] = ts[len(ts) // 2] * 1e3
print(json.dumps(res))
'''


def layer_lists(path):
    import numpy as np

    sys.path.insert(0, HERE)
    from bench_runtime import synthetic50

    from thor_sdk.layers import layers_of

    out = {f"{m} (first 50)": [dict(x) for x in layers_of(m).layers[:50]] for m in ("mobilenetv2", "resnet18")}
    out["synthetic50 (distinct)"] = synthetic50(np.random.default_rng(0))
    with open(path, "w") as f:
        json.dump(out, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--base", required=True, help="the other tree (holding thor_sdk/)")
    ap.add_argument("--new", default=ROOT, help="this tree (default: the repository)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--report")
    a = ap.parse_args(argv)
    est = os.path.abspath(a.estimator)
    with tempfile.TemporaryDirectory() as tmp:
        layers = os.path.join(tmp, "layers.json")
        layer_lists(layers)
        out = {"base": [], "new": []}
        for rep in range(a.reps):
            procs = {}
            for i, (label, src) in enumerate((("base", a.base), ("new", a.new))):
                code = f"SRC={os.path.abspath(src)!r}; EST={est!r}; LAYERS={layers!r}; RUNS={a.runs}\n" + TIMER
                procs[label] = subprocess.Popen(["taskset", "-c", str((i + rep) % 2), sys.executable, "-c", code],
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
            for label, p in procs.items():
                o, e = p.communicate()
                if p.returncode:
                    raise SystemExit(f"{label}: {e.strip().splitlines()[-1]}")
                out[label].append(json.loads(o))
    command = "python " + " ".join([os.path.relpath(__file__, ROOT)] + (sys.argv[1:] if argv is None else argv))
    lines = [f"Command: `{command}`", "",
             "| layer list | base ms (median of reps) | new ms | base / new | base per rep | new per rep |",
             "|---|---|---|---|---|---|"]
    for name in out["base"][0]:
        b = [r[name] for r in out["base"]]
        n = [r[name] for r in out["new"]]
        lines.append(f"| {name} | {statistics.median(b):.3f} | {statistics.median(n):.3f} | "
                     f"{statistics.median(b) / statistics.median(n):.2f}x | {', '.join(f'{x:.2f}' for x in b)} | "
                     f"{', '.join(f'{x:.2f}' for x in n)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
