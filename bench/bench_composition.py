"""Does a net cost what its layers' exact probes sum to? THOR's composition, through the product's own measuring code.

    python bench/bench_composition.py --model vgg_small --model cnn5 [--batch-size 16] [--cycles 4]
    python bench/bench_composition.py --model mobilenetv3_small --trainable classifier   # a fine-tune

THOR estimates a net as the sum of its layers' probe differences. Even with every layer probed exactly
(no GP), that sum can differ from the net measured whole: a layer inside a net may cost more or less
than in its probe. Comparing a probe campaign with a whole-net measurement taken minutes apart mixes
that with the machine's drift (on this project's 2-core host the same net reads 10-25% apart over
minutes). Here each cycle measures the net whole (``HostDevice.measure_model``), then every distinct
layer of it as THOR's probe (``measure_probe`` and ``derive_samples``, exactly as a campaign does), then
the net whole again; the cycle's ratio is the probes' sum (each layer times its count) over the mean of
the two whole runs around it. The probe order is reversed every other cycle. Reported per net: each
cycle's ratio and their median, and per layer kind the median over cycles of its probes' sum. Time only.
``--trainable PATTERN`` composes a fine-tune (``thor_sdk.layers.trainable``): the layers and the whole step
with only the matching parameters trained, the rest frozen (forward-only probes where nothing before trains).
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: where the benchmarks' reports go unless ``--report`` says otherwise
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _layer_probes(model, batch_size, input_shape=None, trainable=None):
    """``[(probe, count)]``: the net's distinct layers as THOR probes, in the net's order (as a target-driven
    campaign plans them)."""
    from thor_sdk.campaign.targets import target_points
    from thor_sdk.layers import layers_of

    shape = None if input_shape is None else list(input_shape)
    return list(target_points([layers_of(model, input_shape=shape, trainable=trainable)], [batch_size]).values())


def _cycle(dev, model, batch_size, probes, settings):
    """One cycle: whole, each probe, whole. Returns (whole before s, whole after s, {probe id: cost s})."""
    from thor_sdk.campaign.measure import derive_samples

    def whole():
        return statistics.median(dev.measure_model(model, batch_size, settings=settings).values("time"))

    before = whole()
    costs = {}
    for probe, _ in probes:
        parts = dev.measure_probe(probe, settings=settings)
        costs[probe.id] = next(s["value"] for s in derive_samples(probe, parts) if s["metric"] == "time")
    return before, whole(), costs


def run(models, batch_size=16, cycles=4, threads=1, settings=None, progress=None, input_shape=None, trainable=None):
    """The benchmark's result document (see ``main``); ``progress(model, cycle, ratio)`` after each cycle.
    ``input_shape``: the per-sample shape of ``file.py:Class`` models (zoo nets have their own); ``trainable``:
    name patterns of the only parameters that train (every net a fine-tune)."""
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.harness.whole_model import resolve_model

    dev = HostDevice(threads=threads)
    nets = []
    for model in models:
        shape = input_shape if ".py:" in model else None
        probes = _layer_probes(model, batch_size, shape, trainable)
        source = resolve_model(model, input_shape=shape, trainable=trainable) \
            if shape is not None or trainable else model
        rows = []
        for c in range(cycles):
            order = probes if c % 2 == 0 else probes[::-1]
            before, after, costs = _cycle(dev, source, batch_size, order, settings)
            total = sum(costs[p.id] * n for p, n in probes)
            rows.append({"whole_before_s": before, "whole_after_s": after, "probes_sum_s": total,
                         "frozen_probes_sum_s": sum(costs[p.id] * n for p, n in probes if p.config.get("frozen")),
                         "ratio": total / (0.5 * (before + after)), "costs_s": costs})
            if progress:
                progress(model, c + 1, rows[-1]["ratio"])
        kinds = {}
        for p, n in probes:
            kinds.setdefault(p.kind, []).append((p, n))
        by_kind = {k: statistics.median(sum(r["costs_s"][p.id] * n for p, n in ps) for r in rows)
                   for k, ps in kinds.items()}
        nets.append({"model": model, "trainable": list(trainable or []), "batch_size": batch_size, "layers": sum(n for _, n in probes),
                     "distinct_probes": len(probes), "cycles": rows,
                     "median_ratio": statistics.median(r["ratio"] for r in rows),
                     "whole_median_s": statistics.median(v for r in rows for v in (r["whole_before_s"],
                                                                                    r["whole_after_s"])),
                     "probes_median_s": statistics.median(r["probes_sum_s"] for r in rows),
                     "by_kind_s": dict(sorted(by_kind.items(), key=lambda kv: -kv[1]))})
    return {"nets": nets, "device_info": dev.info()}


def machine_line(threads, load_start, load_end):
    """A report's sentence on the machine: its platform, cores and torch threads, and the load average around the
    run."""
    return (f"Machine: {platform.platform()}, {os.cpu_count()} cores, torch threads {threads}, load average at start "
            f"{load_start:.2f}, at end {load_end:.2f}.")


def report(result, command, load_start, load_end, stamp):
    lines = [f"# Composition: whole nets vs the sum of their exact probes (host, {stamp} UTC)", "",
             f"Command: `{command}`", "",
             machine_line(result['device_info']['torch_threads'], load_start, load_end) + " Time only.", "",
             "| net | batch | layers (distinct) | whole, median | probes' sum, median | ratio per cycle | median ratio |",
             "|---|---|---|---|---|---|---|"]
    for n in result["nets"]:
        per = ", ".join(f"{r['ratio']:.3f}" for r in n["cycles"])
        tuned = f" [trainable {', '.join(n['trainable'])}]" if n.get("trainable") else ""
        lines.append(f"| {n['model']}{tuned} | {n['batch_size']} | {n['layers']} ({n['distinct_probes']}) | "
                     f"{n['whole_median_s'] * 1e3:.2f} ms | {n['probes_median_s'] * 1e3:.2f} ms | {per} | "
                     f"**{n['median_ratio']:.3f}** |")
    lines += ["", "Probes' sum per layer kind (median over cycles):", ""]
    for n in result["nets"]:
        frozen = statistics.median(r.get("frozen_probes_sum_s", 0.0) for r in n["cycles"])
        lines.append(f"- {n['model']}: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in n["by_kind_s"].items())
                     + (f"; frozen layers' probes {frozen * 1e3:.2f} ms" if frozen else ""))
    return "\n".join(lines) + "\n"


def main(argv=None):
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.models import list_models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="a zoo net, or file.py:Class with --input-shape (repeatable; "
                    "default vgg_small)")
    ap.add_argument("--input-shape", default=None, help="per-sample input shape of file.py:Class models, e.g. 3,64,64")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--cycles", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--trainable", action="append", default=None,
                    help="train only parameters matching this name pattern, freeze the rest (repeatable)")
    ap.add_argument("--window-s", type=float, default=None, help="minimum window (default: the protocol's)")
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/composition-host-*.md)")
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    models = args.model or ["vgg_small"]
    known = set(list_models("all"))
    if not (1 <= args.cycles <= 100 and 1 <= args.batch_size <= 1024 and 1 <= args.threads <= 256) \
            or (args.window_s is not None and not 0.001 <= args.window_s <= 60):
        raise SystemExit("--cycles 1..100, --batch-size 1..1024, --threads 1..256, --window-s 0.001..60")
    try:
        shape = None if args.input_shape is None else tuple(int(v) for v in args.input_shape.split(","))
    except ValueError:
        shape = ()
    if shape is not None and not (1 <= len(shape) <= 4 and all(1 <= v <= 4096 for v in shape)):
        raise SystemExit("--input-shape: 1 to 4 integers in 1..4096, e.g. 3,64,64")
    unknown = [m for m in models if m not in known and not (".py:" in m and shape is not None)]
    if unknown:
        raise SystemExit(f"unknown zoo net(s), or a file.py:Class without --input-shape: {', '.join(unknown)}")
    settings = ProtocolSettings() if args.window_s is None else ProtocolSettings(min_window_s=args.window_s)
    command = "python bench/bench_composition.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load_start = os.getloadavg()[0]
    result = run(models, args.batch_size, args.cycles, args.threads, settings,
                 progress=lambda m, c, r: print(f"{m} cycle {c}: probes / whole {r:.3f}", file=sys.stderr,
                                                flush=True), input_shape=shape, trainable=args.trainable)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, load_start, os.getloadavg()[0], stamp), result, command, args.report,
                f"composition-host-{stamp}")


def check_report(report):
    """Make the report's folder (``RESULTS_DIR`` for the default name; a bare ``--report`` name goes in this
    folder) and refuse one that cannot be written, before any work: the report is written after the measurements."""
    from thor_sdk.store.files import check_output

    if report:
        os.makedirs(os.path.dirname(os.path.abspath(report)), exist_ok=True)
        check_output(report, "report")
    else:
        os.makedirs(RESULTS_DIR, exist_ok=True)


def save_report(text, result, command, path, default_name):
    """Print the Markdown report and write it to ``path`` (default ``bench/results/<default_name>.md``), with the
    result document and its command as JSON beside it."""
    from thor_sdk.store.files import write_text

    print(text)
    path = path or os.path.join(RESULTS_DIR, f"{default_name}.md")
    write_text(path, text)
    write_text(path[:-3] + ".json", json.dumps(dict(result, command=command), indent=1) + "\n")
    print(f"report: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
