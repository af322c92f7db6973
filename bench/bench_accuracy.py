"""Accuracy benchmark of THOR on the host: estimate vs measured training-step time, FLOPs beside it.

Runs ``thor_sdk.evaluate.evaluate`` (the same code as ``thor-sdk evaluate``) for the 7 reference
nets at one batch size and writes a Markdown report (and the raw JSON) to ``bench/results/``:

    python bench/bench_accuracy.py --batch-size 32 --threads 1
    python bench/bench_accuracy.py --model lenet5 --model har        # a subset

Measured values are medians of interleaved windows; THOR's is the sum of per-layer medians of
per-round differences. Run it on a quiet machine: other load inflates every number and its spread.
"""

import argparse
import datetime as dt
import json
import os
import platform
import sys


def main(argv=None):
    from thor_sdk.evaluate import evaluate
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.models import list_models
    from thor_sdk.store.files import write_text

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_composition import RESULTS_DIR, check_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="default: all reference nets")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--runtime", default="torch")
    ap.add_argument("--out-dir", default="thor-evaluate")
    ap.add_argument("--report", default=None, help="Markdown report path (default bench/results/accuracy-host-*.md)")
    args = ap.parse_args(argv)
    models = args.model or list_models()
    command = "python bench/bench_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    check_report(args.report)  # before the measurements, not after them
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    r = evaluate(models, batch_size=args.batch_size, runtime=args.runtime, out_dir=args.out_dir,
                 settings=ProtocolSettings(), threads=args.threads,
                 progress=lambda ev, name: print(f"evaluating {name} ...", file=sys.stderr, flush=True))
    r["command"] = command
    r["load_average_at_start"] = load
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    report = args.report or os.path.join(RESULTS_DIR, f"accuracy-host-{stamp}.md")
    lines = [
        f"# THOR accuracy on the host ({stamp} UTC)", "",
        f"Command: `{command}`", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} cores, torch threads "
        f"{r['device_info'].get('torch_threads')}, runtime {args.runtime}, load average at start {load:.2f}.",
        f"Metric: training-step time (forward, backward, SGD update), batch size {args.batch_size}.", "",
        "| model | measured ms | THOR ms | THOR std ms | THOR APE % | FLOPs ms | FLOPs APE % | probes | probing s | flagged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r["rows"]:
        lines.append(f"| {x['model']} | {x['measured'] * 1e3:.2f} | {x['thor'] * 1e3:.2f} | {x['thor_std'] * 1e3:.2f} | "
                     f"{x['thor_ape']:.1f} | {x['flops'] * 1e3:.2f} | {x['flops_ape']:.1f} | {x['probes']} | "
                     f"{x['probe_seconds']:.0f} | {x['flagged']} |")
    lines += ["", f"THOR MAPE {r['thor_mape']:.1f}% (max {r['thor_max_ape']:.1f}%); FLOPs-baseline MAPE "
                  f"{r['flops_mape']:.1f}%; FLOPs / THOR = {r['flops_over_thor']:.1f}x.", "",
              "Measured = median over the windows of whole-model runs before, during (every third of the probes) and "
              "after the campaign; each run's median is in the JSON (`measured_runs`) and shows the machine's drift.",
              "", "Per-run medians (ms): " + "; ".join(
                  f"{x['model']} " + ", ".join(f"{v * 1e3:.1f}" for v in x["measured_runs"]) for x in r["rows"])]
    can = r.get("canary")
    if can:
        lines += ["", f"At each campaign's canary level (every whole-model run put at the machine speed its campaign's "
                      f"probes describe, by the host's canary read beside its windows; `canary` in the JSON): THOR MAPE "
                      f"{can['thor_mape']:.1f}%, {can['within_10']} of {can['n']} within 10%; FLOPs {can['flops_mape']:.1f}%. "
                      "Per net (measured ms, THOR APE %, FLOPs APE %): " + "; ".join(
                          f"{x['model']} {x['canary']['measured'] * 1e3:.2f}, {x['canary']['thor_ape']:.1f}, "
                          f"{x['canary']['flops_ape']:.1f}" for x in r["rows"])]
    write_text(report, "\n".join(lines) + "\n")
    write_text(report[:-3] + ".json", json.dumps(r, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
