"""Export time and training-step parity of the exporters on the 7 reference nets.

For every net: seconds to export its ONNX training step (SGD and Adam; warm process: torch.onnx's op
registry, built once per process, is timed separately) and its TorchScript step; then parity of 3
chained steps against eager torch.optim -- max |param difference| for ONNX (onnxruntime) and
TorchScript, SGD (lr 0.01) on every entry and Adam (lr 1e-3) on the entries whose gradient exceeds
1e-6 at every step -- next to the drift of eager float32 itself from float64 on the same steps,
which bounds what any float32 runtime can achieve. Dropout is set to p = 0 for parity.

With ``--cold``, each net's ONNX export is also timed as a user runs it: a fresh ``thor-sdk export``
process (Python start, imports, torch.onnx's registry and all), wall clock, median of ``--repeats``.

    python bench/bench_export.py [--nets lenet5,cnn5] [--export-batch 32] [--cold --repeats 3]
"""

import argparse
import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

NETS = ["lenet5", "cnn5", "har", "lstm", "transformer", "resnet18", "mobilenetv2"]
LR = {"sgd": 0.01, "adam": 1e-3}


def eager(module, x, y, opt, dtype=None, steps=3):
    import torch

    from thor_sdk.probes.torch_build import cross_entropy

    m = copy.deepcopy(module).train()
    if dtype is not None:
        m = m.to(dtype)
        x = x.to(dtype) if x.is_floating_point() else x
    o = (torch.optim.SGD if opt == "sgd" else torch.optim.Adam)(m.parameters(), lr=LR[opt])
    grads = []
    for _ in range(steps):
        o.zero_grad()
        cross_entropy(m(x), y).backward()
        grads.append({n: p.grad.abs().double().numpy() for n, p in m.named_parameters()})
        o.step()
    return {n: p.detach().double().numpy() for n, p in m.named_parameters()}, grads


def max_diff(a, b, grads=None):
    import numpy as np

    worst = 0.0
    for n, ref in b.items():
        d = np.abs(np.asarray(a[n], dtype=np.float64) - ref)
        if grads is not None:
            d = d[np.all([g[n] > 1e-6 for g in grads], axis=0)]
        if d.size:
            worst = max(worst, float(d.max()))
    return worst


def cold_exports(nets, batch, repeats):
    """{net: (median wall s, median in-command export s)} of fresh ``thor-sdk export`` processes."""
    import json

    exe = shutil.which("thor-sdk")
    if exe is None:
        sys.exit("thor-sdk is not on PATH (pip install -e . first)")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in nets:
            walls, inner = [], []
            for _ in range(repeats):
                cmd = [exe, "export", "--model", name, "--batch-size", str(batch), "--format", "onnx",
                       "--out", os.path.join(tmp, f"{name}.onnx"), "--json"]
                t = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True, check=True)
                walls.append(time.perf_counter() - t)
                inner.append(json.loads(r.stdout)["seconds"])
            out[name] = (statistics.median(walls), statistics.median(inner))
            print(f"cold {name}: {out[name][0]:.1f} s", file=sys.stderr, flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--export-batch", type=int, default=32, help="batch size of the timed exports")
    ap.add_argument("--cold", action="store_true", help="also time fresh `thor-sdk export` processes")
    ap.add_argument("--repeats", type=int, default=3, help="cold runs per net (median reported)")
    args = ap.parse_args(argv)
    cold = cold_exports(args.nets.split(","), args.export_batch, args.repeats) if args.cold else {}
    warnings.filterwarnings("ignore")
    import torch

    from thor_sdk.exporters import onnx_train
    from thor_sdk.harness.ort_trainer import OrtTrainer
    from thor_sdk.exporters.torchscript_train import TorchScriptTrainer, export_torchscript
    from thor_sdk.models import build_model

    t0 = time.perf_counter()
    exporter = onnx_train.OnnxStepExporter()
    exporter._prepare()
    registry_s = time.perf_counter() - t0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.nets.split(","):
            module = build_model(name)
            xb, yb = onnx_train.example_batch(name, args.export_batch)
            secs = {}
            for opt in ("sgd", "adam"):
                t = time.perf_counter()
                exporter.export(module, xb, yb, os.path.join(tmp, f"{name}-{opt}-b.onnx"), optimizer=opt, lr=LR[opt])
                secs[opt] = time.perf_counter() - t
            t = time.perf_counter()
            export_torchscript(module, xb, yb, os.path.join(tmp, f"{name}.pt"))
            ts_s = time.perf_counter() - t
            # parity at the test batch (small: eager float64 references of the big nets are slow)
            pmod = copy.deepcopy(module)
            for m in pmod.modules():
                if isinstance(m, torch.nn.Dropout):
                    m.p = 0.0
            x, y = onnx_train.example_batch(name, 4 if name in ("lenet5", "cnn5", "har") else 2)
            par = {}
            for opt in ("sgd", "adam"):
                path = os.path.join(tmp, f"{name}-{opt}.onnx")
                exporter.export(pmod, x, y, path, optimizer=opt, lr=LR[opt])
                tr = OrtTrainer(path)
                for _ in range(3):
                    tr.step()
                onnx_state = tr.state()
                tr.close()
                tsp = os.path.join(tmp, f"{name}-{opt}.pt")
                export_torchscript(pmod, x, y, tsp, optimizer=opt, lr=LR[opt])
                ts = TorchScriptTrainer(tsp)
                for _ in range(3):
                    ts.step()
                ts_state = {n: p.detach().double().numpy() for n, p in ts.module.model.named_parameters()}
                p32, grads = eager(pmod, x, y, opt)
                p64, _ = eager(pmod, x, y, opt, dtype=torch.float64)
                mask = grads if opt == "adam" else None
                par[opt] = (max_diff(onnx_state, p32, mask), max_diff(ts_state, p32, mask), max_diff(p32, p64, mask))
            rows.append((name, secs["sgd"], secs["adam"], ts_s, par))
            print(f"done {name}", file=sys.stderr, flush=True)

    cmd = " ".join(["python", "bench/bench_export.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"# {cmd}")
    print(f"# torch {torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"torch.onnx registry built once per process: {registry_s:.1f} s (not in the per-net seconds)")
    print(f"# export seconds at batch {args.export_batch}; parity = max |param difference| after 3 chained steps "
          "vs eager torch.optim (Adam: entries with |grad| > 1e-6 at every step); f32-vs-f64 = eager float32's "
          "own drift from float64")
    head = ("net", "onnx sgd s", "onnx adam s", "torchscript s", "onnx sgd", "ts sgd", "f32-vs-f64 sgd",
            "onnx adam", "ts adam", "f32-vs-f64 adam")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for name, s_sgd, s_adam, s_ts, par in rows:
        cells = [name, f"{s_sgd:.1f}", f"{s_adam:.1f}", f"{s_ts:.1f}"]
        for opt in ("sgd", "adam"):
            cells += [f"{v:.1e}" for v in par[opt]]
        print(" | ".join(cells))
    if cold:
        print()
        print(f"# cold: a fresh `thor-sdk export --format onnx --optimizer sgd --batch-size {args.export_batch}` "
              f"process per run, median of {args.repeats}")
        print("net | wall s (whole command) | export s (reported by the command)")
        print("--- | --- | ---")
        for name, (wall, inner) in cold.items():
            print(f"{name} | {wall:.1f} | {inner:.1f}")


if __name__ == "__main__":
    main()
