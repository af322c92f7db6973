"""Two source trees' stdlib runtimes side by side: ``Estimator.estimate`` latency, call by call, in one process.

This VM's speed swings 1.5-2x within seconds, and its two cores are not always in the same state, so timings taken
one after the other, or at once on two cores, compare machine states, not code. Here one process, pinned to one
core (``taskset``), holds both trees' runtimes (the base tree's ``thor_sdk`` imported first and kept under its
own module objects, then this tree's) and times them in pairs of calls, alternating which goes first; each pair
sees one machine state. Per layer list: each tree's median over ``--pairs`` calls, and the median (and
quartiles) of the per-pair ratio base / new, the figure to quote.

    git archive BASE thor_sdk | tar -x -C /tmp/base
    python bench/bench_runtime_ab.py --estimator host-torch.json --base /tmp/base [--pairs 2000] [--report F]

Layer lists: the first 50 layers of mobilenetv2 and of resnet18 (repeated layers, as real nets have), 50
distinct SYNTHETIC layers (``bench_runtime.synthetic50``: the worst case, nothing repeats), and the list whose
estimate ``bench_generalization`` times for issue 9's part 8 (``part8_layers``), batch 16, each layer with its
cost terms precomputed (as ``bench_generalization`` and the Java and Swift runtimes give them). The trees share
whatever their runtimes import lazily (the layer kinds, for layers without cost terms): none here.
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


def load(src):
    """``thor_sdk.runtime.load_estimator`` of the tree at src, its modules taken out of sys.modules again."""
    sys.path.insert(0, src)
    from thor_sdk.runtime import load_estimator
    est = load_estimator(EST)
    sys.path.remove(src)
    for name in [m for m in sys.modules if m == "thor_sdk" or m.startswith("thor_sdk.")]:
        del sys.modules[name]
    return est


ests = {"base": load(BASE), "new": load(NEW)}
res = {}
for name, layers in json.load(open(LAYERS)).items():
    times = {"base": [], "new": []}
    for label in ("base", "new"):
        for _ in range(5):
            ests[label].estimate(layers, 16)
    for i in range(PAIRS):
        for label in (("base", "new") if i % 2 else ("new", "base")):
            t = time.perf_counter()
            ests[label].estimate(layers, 16)
            times[label].append(time.perf_counter() - t)
    res[name] = times
print(json.dumps(res))
'''


def layer_lists(path, estimator):
    import numpy as np

    sys.path.insert(0, HERE)
    from bench_generalization import part8_layers
    from bench_runtime import synthetic50

    from thor_sdk.layers import layers_of
    from thor_sdk.runtime.estimator import read_json_file
    from thor_sdk.runtime.terms import cost_terms

    out = {f"{m} (first 50)": [dict(x) for x in layers_of(m).layers[:50]] for m in ("mobilenetv2", "resnet18")}
    out["synthetic50 (distinct)"] = synthetic50(np.random.default_rng(0))
    out["part 8's (bench_generalization)"] = part8_layers(read_json_file(estimator)["kinds"])
    out = {name: [dict(l, cost=cost_terms(l["kind"], l["config"], l.get("role", "hidden"))) for l in layers]
           for name, layers in out.items()}
    with open(path, "w") as f:
        json.dump(out, f)


def quartiles(xs):
    xs = sorted(xs)
    return xs[len(xs) // 4], statistics.median(xs), xs[(3 * len(xs)) // 4]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--base", required=True, help="the other tree (holding thor_sdk/)")
    ap.add_argument("--new", default=ROOT, help="this tree (default: the repository)")
    ap.add_argument("--pairs", type=int, default=2000, help="pairs of calls per layer list (1 to 100000)")
    ap.add_argument("--core", type=int, default=0, help="the core the process is pinned to")
    ap.add_argument("--report")
    a = ap.parse_args(argv)
    if not 1 <= a.pairs <= 100_000:
        raise SystemExit(f"--pairs must be 1 to 100000, got {a.pairs}")
    est = os.path.abspath(a.estimator)
    with tempfile.TemporaryDirectory() as tmp:
        layers = os.path.join(tmp, "layers.json")
        layer_lists(layers, est)
        code = (f"BASE={os.path.abspath(a.base)!r}; NEW={os.path.abspath(a.new)!r}; EST={est!r}; "
                f"LAYERS={layers!r}; PAIRS={a.pairs}\n" + TIMER)
        p = subprocess.run(["taskset", "-c", str(a.core), sys.executable, "-c", code], capture_output=True,
                           text=True, cwd=tmp)
        if p.returncode:
            raise SystemExit(f"timer: {p.stderr.strip().splitlines()[-1]}")
        out = json.loads(p.stdout)
    command = "python " + " ".join([os.path.relpath(__file__, ROOT)] + (sys.argv[1:] if argv is None else argv))
    lines = [f"Command: `{command}`", "",
             f"{a.pairs} pairs of calls per layer list, one process on core {a.core}, alternating which tree goes "
             "first.", "",
             "| layer list | base ms (median) | new ms (median) | base / new, per pair: median (quartiles) "
             "| base ms p10-p90 | new ms p10-p90 |",
             "|---|---|---|---|---|---|"]
    for name, t in out.items():
        b, n = t["base"], t["new"]
        lo, mid, hi = quartiles([x / y for x, y in zip(b, n)])
        bs, ns = sorted(b), sorted(n)
        lines.append(f"| {name} | {statistics.median(b) * 1e3:.3f} | {statistics.median(n) * 1e3:.3f} | "
                     f"{mid:.2f}x ({lo:.2f}-{hi:.2f}) | {bs[len(bs) // 10] * 1e3:.2f}-{bs[9 * len(bs) // 10] * 1e3:.2f} "
                     f"| {ns[len(ns) // 10] * 1e3:.2f}-{ns[9 * len(ns) // 10] * 1e3:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.report:
        with open(a.report, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
