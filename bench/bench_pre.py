"""PRE benchmark: measure many zoo nets whole on the host at several batch sizes, then score PRE's variants by model.

    python bench/bench_pre.py                               # every net of list_models("all") at batch 4, 8, 16
    python bench/bench_pre.py --reuse bench/results/pre-host-<stamp>.csv    # re-score a collected CSV

1. For each net and batch size, the training step is measured whole with the library's protocol
   (``thor_sdk.measure``, one intra-op thread, a short protocol: 2 warm-up steps, 3-5 windows); the
   median step time is kept with the net's PRE features and the machine's load beside the run
   (``thor_sdk.devices.state.load_state``). Time only: this host has no energy meter.
2. ``thor_sdk.baselines.pre.cross_validate``: each PRE variant (linear, ridge, kernel ridge, SVR) leaving
   one model out at a time, so no net is in its own training set; beside them, the TDP baseline's time
   (one FLOP/s fitted on the other nets by ``TdpBaseline.fit``) for reference.

Writes ``bench/results/pre-host-<stamp>.csv`` (the runs, in the documented runs-CSV format) and ``.md``.
"""

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time


def _collect(models, batch_sizes, threads, say):
    import thor_sdk
    from thor_sdk.baselines.pre import features_of
    from thor_sdk.devices.state import load_state
    from thor_sdk.errors import ThorError
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.layers import layers_of

    settings = ProtocolSettings(warmup_steps=2, min_rounds=3, max_rounds=5, min_window_s=0.05)
    device = {"cpu_count": os.cpu_count(), "threads": threads}
    rows, skipped = [], []
    for i, name in enumerate(models, 1):
        try:
            ml = layers_of(name)
        except ThorError as e:
            skipped.append(f"{name}: {e}")
            continue
        for b in batch_sizes:
            load = load_state(own_threads=threads)
            t0 = time.monotonic()
            try:
                r = thor_sdk.measure(name, batch_size=b, threads=threads, settings=settings)
            except ThorError as e:
                skipped.append(f"{name} b{b}: {e}")
                continue
            row = features_of(ml, b, device)
            row.update(model=name, time_s=r["median"], device="host", runtime="torch", load_1m=load.get("load_1m"),
                       other_runnable=load.get("other_runnable"))
            rows.append(row)
            say(f"[{i}/{len(models)}] {name} b{b}: {r['median'] * 1e3:.2f} ms ({r['n']} windows, "
                f"{time.monotonic() - t0:.1f} s, load {load.get('load_1m')})")
    return rows, skipped


def _tdp_time_cv(rows):
    """Leave-one-model-out APE (%) of the TDP baseline's time: train_flops / F, F fitted on the other models."""
    from thor_sdk.baselines.tdp import TdpBaseline

    out = []
    for r in rows:
        f = TdpBaseline(metric="time").fit([o for o in rows if o["model"] != r["model"]]).flops_per_s_
        out.append(abs(r["train_flops"] / f - r["time_s"]) / r["time_s"] * 100.0)
    return out


def main(argv=None):
    from thor_sdk.baselines.pre import VARIANTS, cross_validate, pre_csv_text, read_pre_csv
    from thor_sdk.devices.state import load_state
    from thor_sdk.models import list_models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, action="append", help="default: 4, 8, 16")
    ap.add_argument("--group", default="all", help="list_models group (default all: zoo + held-out)")
    ap.add_argument("--model", action="append", help="default: every net of --group")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reuse", help="a runs CSV collected before: skip measuring")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = ap.parse_args(argv)
    command = "python bench/bench_pre.py " + " ".join(argv if argv is not None else sys.argv[1:])
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    os.makedirs(args.out_dir, exist_ok=True)
    load_start = load_state(own_threads=0)
    t0 = time.monotonic()
    skipped = []
    if args.reuse:
        rows = read_pre_csv(args.reuse)
        csv_path = args.reuse
    else:
        models = args.model or list_models(args.group)
        rows, skipped = _collect(models, args.batch_size or [4, 8, 16], args.threads,
                                 lambda line: print(line, file=sys.stderr, flush=True))
        csv_path = os.path.join(args.out_dir, f"pre-host-{stamp}.csv")
        with open(csv_path, "w", encoding="utf-8") as f:
            f.write(pre_csv_text(rows))
    collect_s = time.monotonic() - t0
    load_end = load_state(own_threads=0)
    t1 = time.monotonic()
    cv = cross_validate(rows, variants=VARIANTS)
    cv_s = time.monotonic() - t1
    tdp = _tdp_time_cv(rows)
    loads = [r["load_1m"] for r in rows if r.get("load_1m") is not None]
    others = [r["other_runnable"] for r in rows if r.get("other_runnable") is not None]
    models = sorted({r["model"] for r in rows})
    batches = sorted({int(r["batch_size"]) for r in rows})
    lines = [f"# PRE on the host ({stamp} UTC)", "", f"Command: `{command}`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores, {args.threads} torch thread(s), runtime torch; "
             f"time per training step (no energy meter here). {len(rows)} runs: {len(models)} nets x batch sizes "
             f"{', '.join(map(str, batches))}; measuring took {collect_s:.0f} s, the cross-validation {cv_s:.1f} s.",
             "",
             f"Load (1-minute average, this run's own thread included; other agents share this machine at times, "
             f"so times may be noisy): "
             f"{load_start.get('load_1m')} at start, {load_end.get('load_1m')} at end"
             + (f", per run min {min(loads):.2f} / median {statistics.median(loads):.2f} / max {max(loads):.2f}"
                if loads else "")
             + (f"; other runnable threads beside ours before a run: median {statistics.median(others):g}, max "
                f"{max(others):g}" if others else "") + ".", "",
             f"Cross-validation: {cv['scheme']} ({cv['n_models']} nets), so a net is never in its own training set; "
             "hyper-parameters chosen by an inner grouped CV on the training nets alone. APE of the step time, %.", "",
             "| method | MAPE | median APE | max APE |", "|---|---|---|---|"]
    for v in VARIANTS:
        d = cv["variants"][v]
        lines.append(f"| PRE {v} | {d['mape']:.1f} | {d['median_ape']:.1f} | {d['max_ape']:.1f} |")
    lines.append(f"| TDP time (one fitted FLOP/s) | {statistics.fmean(tdp):.1f} | {statistics.median(tdp):.1f} | "
                 f"{max(tdp):.1f} |")
    lines += ["", "Per net (mean APE over its batch sizes, %):", "",
              "| net | " + " | ".join(VARIANTS) + " |", "|---|" + "---|" * len(VARIANTS)]
    for m in models:
        lines.append(f"| {m} | " + " | ".join(f"{cv['variants'][v]['per_model'][m]:.1f}" for v in VARIANTS) + " |")
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped)]
    lines += ["", f"Runs: `{os.path.relpath(csv_path, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))}`"
              " (columns: docs/baselines.md)."]
    report = os.path.join(args.out_dir, f"pre-host-{stamp}.md")
    with open(report, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
