"""Speed of the stdlib estimator runtime (thor_sdk.runtime): load time and ``estimate()`` latency.

    python bench/bench_runtime.py [--runs 200] [--samples 30]

Estimators are fitted on SYNTHETIC costs (a cost-per-FLOP law with noise; speed does not depend on
the values) with ``--samples`` training points per kind -- 30 is the worst case the estimator format
is sized for. Models:

- ``synthetic50``: 50 layers, ALL distinct configs (no deduplication possible): the worst case;
- ``resnet18`` and ``mobilenetv2``: the reference networks' real layer lists (need torch).

Prints a table (median / p90 over ``--runs`` calls of ``Estimator.estimate``) and the command line.

``--save-case F`` writes the fitted estimator and the layer lists to one JSON file; ``--case F`` times
that file instead of fitting (stdlib only: no numpy/scikit-learn/torch needed), e.g. to compare Python
versions: ``python3.12 bench/bench_runtime.py --case case.json``.
"""

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _config(kind, rng):
    from thor_sdk.layers.kinds import get_kind

    k = get_kind(kind)
    c = {f: int(rng.choice([1, 2, 3, 8, 16, 28, 64, 120, 256, 400])) for f in k.features}
    if kind == "conv2d":
        c.update(groups=1, kernel=int(rng.choice([1, 3, 5])), stride=int(rng.choice([1, 2])),
                 padding=int(rng.choice([0, 1])), bias=int(rng.integers(2)), height=int(rng.choice([7, 14, 28, 56])))
        c["width"] = c["height"]
    if kind in ("maxpool2d", "avgpool2d"):
        c.update(kernel=2, stride=2, padding=0, height=int(rng.choice([8, 16, 28])))
        c["width"] = c["height"]
    if kind == "adaptive_avgpool2d":
        c["out_size"] = 1
    if kind == "dropout":
        c["p"] = 0.5
    if "bias" in c:
        c["bias"] = int(c["bias"] > 0)
    return c


def fit_estimator(kinds, n, rng):
    from thor_sdk.fitting.estimator import build_estimator
    from thor_sdk.fitting.gp import KindGP
    from thor_sdk.layers.kinds import feature_vector, get_kind, gp_features

    from thor_sdk.runtime.terms import at_batch, cost_terms

    gps = {}
    for kind in kinds:
        k = get_kind(kind)
        X, y, T = [], [], []
        for _ in range(n):
            c = _config(kind, rng)
            bs = int(rng.choice([1, 8, 32, 64]))
            role = "output" if kind == "output" else k.roles[int(rng.integers(len(k.roles)))]
            X.append(feature_vector(kind, c, bs, role))
            T.append(at_batch(cost_terms(kind, c, role), bs))
            y.append((1e-11 * k.train_flops(c, bs, role) + 1e-5) * math.exp(rng.normal(0, 0.05)))
        gps[kind] = KindGP(gp_features(kind), n_restarts_optimizer=0).fit(X, y, terms=T)
    return build_estimator(gps, device={"name": "synthetic"}, runtime="torch", metric="time", unit="s",
                           flops_baseline={"unit_per_flop": 1e-11}, provenance={"note": "synthetic benchmark"})


def synthetic50(rng):
    plan = ["conv2d"] * 20 + ["relu"] * 15 + ["batchnorm2d"] * 10 + ["linear"] * 4
    layers = []
    for i, kind in enumerate(plan):
        c = _config(kind, rng)
        c[sorted(c)[0]] += i  # make every config distinct
        layers.append({"name": str(i), "kind": kind, "role": "input" if i == 0 else "hidden", "config": c})
    layers.append({"name": "head", "kind": "output", "role": "output", "config": _config("output", rng)})
    return layers


def timeit(fn, runs):
    """(median, p90) wall seconds and median CPU seconds of this process (CPU time is less
    disturbed when other processes compete for the cores)."""
    fn()  # warm
    ts, cs = [], []
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    ts.sort()
    return statistics.median(ts), ts[min(len(ts) - 1, int(0.9 * len(ts)))], statistics.median(cs)


def calibration_us():
    """Median microseconds of one 30-element pure-Python dot product (``sum(map(mul, a, b))``), the
    runtime's inner loop: a yardstick to compare the timings of different machines."""
    from operator import mul

    a = [0.5 + i / 7.0 for i in range(30)]
    b = [1.5 - i / 11.0 for i in range(30)]

    def block():
        for _ in range(100):
            sum(map(mul, a, b))

    med, _, _ = timeit(block, 200)
    return med * 1e6 / 100


def time_fit(n):
    """CPU seconds to fit one conv2d cost model on ``n`` synthetic samples, and its JSON size."""
    import numpy as np

    from thor_sdk.fitting.gp import KindGP
    from thor_sdk.layers.kinds import feature_vector, get_kind, gp_features
    from thor_sdk.runtime.terms import at_batch, cost_terms

    rng = np.random.default_rng(0)
    X, y, T = [], [], []
    for _ in range(n):
        c = _config("conv2d", rng)
        b = int(rng.choice([1, 4, 16, 64, 128]))
        role = str(rng.choice(["input", "hidden"]))
        X.append(feature_vector("conv2d", c, b, role))
        T.append(at_batch(cost_terms("conv2d", c, role), b))
        y.append((1e-11 * get_kind("conv2d").train_flops(c, b, role) + 1e-5) * math.exp(rng.normal(0, 0.05)))
    c0 = time.process_time()
    gp = KindGP(gp_features("conv2d")).fit(X, y, terms=T)
    cpu = time.process_time() - c0
    print(f"command: {' '.join(['python'] + sys.argv)}")
    print(f"conv2d, {n} samples: fit {cpu:.1f} CPU s, {len(gp.inducing_)} inducing points, "
          f"{len(json.dumps(gp.to_dict())) / 1024:.1f} KiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--samples", type=int, default=30, help="training samples per kind")
    ap.add_argument("--no-torch", action="store_true", help="skip the reference networks")
    ap.add_argument("--save-case", metavar="F", help="also write the estimator + layer lists to F")
    ap.add_argument("--case", metavar="F", help="time the estimator + layer lists in F (no fitting)")
    ap.add_argument("--fit-samples", type=int, metavar="N",
                    help="only time fitting one conv2d kind on N synthetic samples (CPU seconds) and its size")
    args = ap.parse_args()
    if args.fit_samples:
        return time_fit(args.fit_samples)

    from thor_sdk.runtime import load_estimator

    if args.case:
        with open(args.case, encoding="utf-8") as f:
            case = json.load(f)
        doc, models = case["estimator"], case["models"]
    else:
        import numpy as np

        rng = np.random.default_rng(0)
        models = {"synthetic50": synthetic50(rng)}
        if not args.no_torch:
            from thor_sdk.layers import layers_of

            for name in ("resnet18", "mobilenetv2"):
                models[name] = layers_of(name).layers
        kinds = sorted({l["kind"] for layers in models.values() for l in layers})
        doc = fit_estimator(kinds, args.samples, rng)
        if args.save_case:
            with open(args.save_case, "w", encoding="utf-8") as f:
                json.dump({"estimator": doc, "models": models}, f)
        from thor_sdk.runtime.terms import cost_terms

        # as an app ships them: each layer with its cost terms (`thor-sdk layers --json` writes them)
        models = {name: [dict(l, cost=cost_terms(l["kind"], l["config"], l["role"])) for l in layers]
                  for name, layers in models.items()}
    from thor_sdk.fitting.estimator import dumps_estimator

    text = dumps_estimator(doc)
    kinds = sorted(doc["kinds"])
    samples = max(g["n_samples"] for g in doc["kinds"].values())
    load_med, _, _ = timeit(lambda: load_estimator(json.loads(text)), max(5, args.runs // 10))
    est = load_estimator(json.loads(text))

    print(f"command: {' '.join(['python'] + sys.argv)}")
    print(f"python {platform.python_version()} on {platform.machine()} ({platform.processor() or 'cpu'}); "
          f"{len(kinds)} kinds x {samples} samples, estimator {len(text) / 1024:.1f} KiB, "
          f"load median {load_med * 1e3:.2f} ms; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; 30-float dot product {calibration_us():.2f} us")
    print(f"{'model':<14}{'layers':>7}{'distinct':>9}{'median ms':>11}{'p90 ms':>9}{'cpu median ms':>15}")
    for name, layers in models.items():
        distinct = len({json.dumps([l["kind"], l["role"], l["config"]], sort_keys=True) for l in layers})
        med, p90, cpu = timeit(lambda: est.estimate(layers, 32), args.runs)
        print(f"{name:<14}{len(layers):>7}{distinct:>9}{med * 1e3:>11.3f}{p90 * 1e3:>9.3f}{cpu * 1e3:>15.3f}")


if __name__ == "__main__":
    main()
