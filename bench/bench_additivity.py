"""Does a layer cost in its probe what it costs inside a whole net? THOR's additivity, checked by ablation.

    python bench/bench_additivity.py [--model resnet_tiny] [--batch-size 16] [--rounds 10] [--window-s 0.4]

THOR estimates a net as the sum of its layers' probe differences (3-layer minus 2-layer probe). Here the
same layers are measured in context instead: every group of layers that keep their input's shape (same
kind and config, e.g. the four 16->16 3x3 convs of resnet_tiny's first stage) is replaced by an identity,
and the whole net's training step is timed with and without them. The drop is what those layers cost
inside the net; beside it, the sum of the same layers' probe differences, all timed in one process,
interleaved round by round (the net, each ablated net, each probe part; order reversed every other
round), so machine drift hits every figure alike. Per group: the median over rounds of the paired drop,
its rounds' spread, the probes' sum and their ratio. One intra-op thread, denormals flushed and freed
memory held, as the host device measures (inside its settings context, restored after); time only.
"""

import argparse
import datetime as dt
import gc
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition's machine_line

MIN_GROUP_MS = 0.5  # groups whose probes sum to less are below this host's resolution: left out


def _groups(model_name):
    """``{(kind, config json): [layer names]}`` of layers whose output has their input's shape (an identity
    can stand in for them), with each group's probe (role taken from the first)."""
    from thor_sdk.layers import layers_of
    from thor_sdk.layers.kinds import get_kind

    groups = {}
    for layer in layers_of(model_name).layers:
        if layer["role"] != "hidden":
            continue
        kind = get_kind(layer["kind"])
        try:
            same = list(kind.out_shape(layer["config"])) == list(kind.in_shape(layer["config"]))
        except (AttributeError, NotImplementedError, KeyError):
            continue
        if same:
            key = (layer["kind"], json.dumps(layer["config"], sort_keys=True))
            groups.setdefault(key, []).append(layer["name"])
    return groups


def _ablated(model_name, names):
    from torch import nn

    from thor_sdk.models import build_model

    m = build_model(model_name)
    for n in names:
        parent = m.get_submodule(n.rsplit(".", 1)[0]) if "." in n else m
        if not hasattr(parent, n.rsplit(".", 1)[-1]):
            return None  # a functional op (x + y) has no module to take out
        setattr(parent, n.rsplit(".", 1)[-1], nn.Identity())
    return m


def main(argv=None):
    from thor_sdk.devices.host import HostDevice

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet_tiny")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--window-s", type=float, default=0.4)
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not (2 <= args.rounds <= 1000 and 1 <= args.batch_size <= 1024 and 0.01 <= args.window_s <= 60):
        raise SystemExit("--rounds 2..1000, --batch-size 1..1024, --window-s 0.01..60")
    command = "python bench/bench_additivity.py " + " ".join(argv if argv is not None else sys.argv[1:])
    # measured under the host device's own settings (1 intra-op thread, denormals flushed, freed memory
    # held), restored after: a caller's process keeps its torch state
    with HostDevice(threads=1).measuring():
        _measure(args, command)


def _measure(args, command):
    import torch
    from bench_composition import machine_line

    from thor_sdk.harness.torch_trainer import TorchTrainer, trainer_for_probe_model
    from thor_sdk.models import model_spec
    from thor_sdk.probes import Probe
    from thor_sdk.probes.torch_build import build_part, cross_entropy

    load_start = os.getloadavg()[0]

    spec = model_spec(args.model)
    g = torch.Generator().manual_seed(0)
    x = torch.randn((args.batch_size, *spec.input_shape), generator=g)
    y = torch.randint(0, spec.num_classes, (args.batch_size,), generator=g)
    nets = {"full": TorchTrainer(_ablated(args.model, []), x, y, cross_entropy)}
    probes, members = {}, {}
    for (kind, cfg), names in sorted(_groups(args.model).items()):
        m = _ablated(args.model, names)
        try:  # the kinds' shapes are per sample: a flatten's identity can still change the net's output
            with torch.no_grad():
                ok = m is not None and m(x).shape == nets["full"].module(x).shape
        except RuntimeError:
            ok = False
        if not ok:
            continue
        label = f"{kind} x{len(names)} {cfg}"
        nets[label] = TorchTrainer(m, x, y, cross_entropy)
        p = Probe(kind, json.loads(cfg), args.batch_size, "hidden")
        probes[label] = {part: trainer_for_probe_model(build_part(p, part)) for part in p.parts()}
        members[label] = names
    rows = {k: [] for k in nets}
    diffs = {k: [] for k in probes}
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(args.rounds):
            order = list(nets) if r % 2 == 0 else list(nets)[::-1]
            got = {k: nets[k].seconds_per_step(args.window_s) for k in order}
            for k in nets:
                rows[k].append(got[k])
            for k in (list(probes) if r % 2 == 0 else list(probes)[::-1]):
                t = {part: tr.seconds_per_step(args.window_s / 4) for part, tr in probes[k].items()}
                diffs[k].append(len(members[k]) * (t["hidden"] - t["head"]))
            print(f"round {r + 1}/{args.rounds}: net {rows['full'][-1] * 1e3:.1f} ms", file=sys.stderr, flush=True)
    finally:
        if gc_was:
            gc.enable()
    out = []
    for k in probes:
        drop = [f - a for f, a in zip(rows["full"], rows[k])]
        probe_ms = statistics.median(diffs[k]) * 1e3
        if probe_ms < MIN_GROUP_MS:
            continue
        q = statistics.quantiles(drop, n=4) if len(drop) >= 4 else [min(drop), 0, max(drop)]
        context_ms = statistics.median(drop) * 1e3
        out.append({"group": k, "layers": members[k], "in_context_ms": context_ms,
                    "in_context_iqr_ms": [q[0] * 1e3, q[-1] * 1e3], "probes_ms": probe_ms,
                    "probes_over_context": probe_ms / context_ms if context_ms > 0 else None})
    net = statistics.median(rows["full"]) * 1e3
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# Additivity by ablation: {args.model}, batch {args.batch_size} (host, {stamp} UTC)", "",
             f"Command: `{command}`", "",
             machine_line(1, load_start, os.getloadavg()[0]) + f" Whole net: median {net:.1f} ms over "
             f"{args.rounds} rounds (min {min(rows['full']) * 1e3:.1f}, max {max(rows['full']) * 1e3:.1f}).", "",
             "| layers taken out | in context (median drop) | rounds' IQR | their probes' sum | probes / context |",
             "|---|---|---|---|---|"]
    for o in out:
        ratio = "-" if o["probes_over_context"] is None else f"{o['probes_over_context']:.2f}"
        lines.append(f"| {o['group']} | {o['in_context_ms']:.2f} ms | {o['in_context_iqr_ms'][0]:.2f} to "
                     f"{o['in_context_iqr_ms'][1]:.2f} | {o['probes_ms']:.2f} ms | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    report = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                         f"additivity-{args.model}-host-{stamp}.md")
    from thor_sdk.store.files import write_text

    write_text(report, text)
    write_text(report[:-3] + ".json", json.dumps({"command": command, "model": args.model,
                                                          "batch_size": args.batch_size, "net_ms": net,
                                                          "net_rounds_ms": [v * 1e3 for v in rows["full"]],
                                                          "groups": out}, indent=1) + "\n")
    print(f"report: {report}", file=sys.stderr)


if __name__ == "__main__":
    main()
