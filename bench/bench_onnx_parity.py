"""Which nets read the same from an ONNX export as from their PyTorch module: the ONNX reader's coverage, net by net.

Every net of the model zoo (``thor_sdk.models``) and of ``bench/user_nets.py`` is exported with torch.onnx in
training mode (``docs/layer-list.md``, "Exporting from PyTorch") and read by both readers; per net: ``same`` (the
two layer lists are equal: kinds, roles, configs, in order), ``same set`` (equal but for their order), ``differs``
(the first difference shown), ``refused`` (the ONNX reader's error: operators without a kind), ``fx refuses``,
``no export`` (torch.onnx cannot export it in training mode). No timing: the figures are counts.

    python bench/bench_onnx_parity.py --out bench/results/onnx-parity-<date>.md
"""

import argparse
import collections
import datetime as dt
import json
import os
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
USER_NETS = os.path.join(ROOT, "bench", "user_nets.py")


def _nets():
    """``(label, fx source, module factory, per-sample shape, integer input vocabulary or None)``."""
    import importlib.util

    from thor_sdk import models

    for name in models.SPECS:
        spec = models.model_spec(name)
        yield (name, name, lambda n=name: models.build_model(n), tuple(spec.input_shape),
               spec.vocab if spec.input_dtype == "int64" else None)
    loader = importlib.util.spec_from_file_location("thor_user_nets", USER_NETS)
    user = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(user)
    for name, shape in user.NETS:
        yield f"user:{name}", f"{USER_NETS}:{name}", getattr(user, name), tuple(shape), None


def _rows(layers):
    return [(layer["kind"], layer["role"], json.dumps(layer["config"], sort_keys=True)) for layer in layers]


def compare(label, source, factory, shape, vocab, folder):
    """``(status, detail)`` of one net."""
    import torch

    from thor_sdk.errors import ThorError
    from thor_sdk.layers import layers_of
    from thor_sdk.layers.onnx_import import layers_from_onnx

    def why(e):  # the operators a reader names (UnsupportedOperatorError.ops), else its message
        return ", ".join(e.ops) if getattr(e, "ops", None) else str(e)

    try:
        fx = layers_of(source, input_shape=list(shape)).layers
    except ThorError as e:
        return "fx refuses", why(e)
    embedding = any(layer["kind"] == "embedding" for layer in fx)
    x = torch.randint(0, vocab or 50, (2, *shape)) if vocab or embedding else torch.randn(2, *shape)
    path = os.path.join(folder, label.replace(":", "_") + ".onnx")
    net = factory().train()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(net, (x,), path, dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                              input_names=["x"], dynamic_axes={"x": {0: "batch"}})
    except Exception as e:  # noqa: BLE001 -- torch.onnx's own errors: the net is not exportable this way
        return "no export", f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    try:
        ox = layers_from_onnx(path).layers
    except ThorError as e:
        return "refused", why(e)[:160]
    a, b = _rows(fx), _rows(ox)
    if a == b:
        return "same", f"{len(a)} layers"
    if collections.Counter(a) == collections.Counter(b):
        return "same set", f"{len(a)} layers, another order"
    first = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), min(len(a), len(b)))
    got = lambda rows: " ".join(rows[first][:1] + rows[first][2:]) if first < len(rows) else "(none)"  # noqa: E731
    return "differs", f"fx {len(a)}, ONNX {len(b)} layers; first at {first}: fx {got(a)} / ONNX {got(b)}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the table here (Markdown) besides printing it")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for label, source, factory, shape, vocab in _nets():
            status, detail = compare(label, source, factory, shape, vocab, folder)
            results.append((label, status, detail))
            print(f"{label:28s} {status:10s} {detail}", flush=True)
    tally = collections.Counter(s for _, s, _ in results)
    lines = [f"# ONNX reader against torch.fx, net by net ({stamp} UTC)", "",
             "Command: `python bench/bench_onnx_parity.py" + (f" --out {args.out}`" if args.out else "`"), "",
             f"torch {torch.__version__}; export: `torch.onnx.export(net.train(), ..., dynamo=False, "
             "training=TrainingMode.TRAINING)`. " + ", ".join(f"**{n}** {s}" for s, n in tally.most_common())
             + f" of {len(results)} nets.", "", "| net | ONNX vs torch.fx | detail |", "|---|---|---|"]
    lines += [f"| {label} | {status} | {detail.replace('|', '/')} |" for label, status, detail in results]
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(", ".join(f"{s}: {n}" for s, n in tally.most_common()))


if __name__ == "__main__":
    main()
