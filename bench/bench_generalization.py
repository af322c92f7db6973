"""Generalization benchmark: profile the host once, then estimate and measure nets the profile never saw.

The same code as ``thor-sdk profile`` + ``thor-sdk fit`` + ``thor-sdk evaluate --unseen``:

    python bench/bench_generalization.py --profile-seconds 1200 --batch-size 16
    python bench/bench_generalization.py --reuse thor-generalization/host-profile.db     # skip the profile
    python bench/bench_generalization.py --reuse ... --relevel    # the device's level measured first (evaluate --relevel)
    python bench/bench_generalization.py --reuse ... --passes 3   # each net measured 3 times, scored on the median,
                                                                  # with the measurement floor the passes leave

1. ``profile`` over the zoo prior (one intra-op thread, the machine's load recorded), within the budget;
2. ``fit``, timing each kind's fit; the estimator's size; the stdlib runtime's load and estimate times;
3. for every HELD-OUT net (``thor_sdk.models.list_models("heldout")``: nets that are not in the zoo the
   prior is built from, kept separate for this purpose), a reference net measured first (drift), the
   net measured directly, THOR's estimate with its std, and the FLOPs baseline fitted on the same samples.

Writes ``bench/results/generalization-host-<stamp>.md`` and ``.json``.
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition, however this file is loaded


def _busy_processes():
    """Other processes using CPU right now (from /proc; empty where unreadable)."""
    out = []
    try:
        import subprocess

        ps = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True, timeout=5)
        for line in ps.stdout.splitlines()[1:6]:
            pcpu, _, comm = line.strip().partition(" ")
            if float(pcpu) >= 5.0:
                out.append(f"{comm.strip()} {pcpu}%")
    except (OSError, ValueError):
        pass
    return out


def part8_layers(kinds):
    """The layer list whose estimate part 8 times: the first 50 layers, of kinds the estimator has, of the zoo's
    longest net."""
    from thor_sdk.layers import layers_of
    from thor_sdk.models import list_models

    big = max((layers_of(m).layers for m in list_models("zoo")), key=len)
    return [l for l in big if l["kind"] in kinds][:50]


def runtime_timings(est_path, model_layers, runs=200):
    """Median load time of the estimator in the stdlib runtime and median estimate time of a layer list, and the
    estimate's 10th and 90th percentiles (this VM's speed flips between two states within seconds: the median
    falls in either, the p10 reads the fast one and the p90 the slow one)."""
    from thor_sdk.runtime import load_estimator

    with open(est_path, encoding="utf-8") as f:
        text = f.read()
    loads = []
    for _ in range(20):
        t = time.perf_counter()
        est = load_estimator(json.loads(text))
        loads.append(time.perf_counter() - t)
    from thor_sdk.runtime.terms import cost_terms

    layers = [dict(l, cost=cost_terms(l["kind"], l["config"], l["role"])) for l in model_layers]
    ests = []
    for _ in range(runs):
        t = time.perf_counter()
        est.estimate(layers, 16)
        ests.append(time.perf_counter() - t)
    ests.sort()
    return statistics.median(loads), statistics.median(ests), ests[len(ests) // 10], ests[9 * len(ests) // 10]


def main(argv=None):
    import thor_sdk
    from thor_sdk.cli.evaluate import unseen_table
    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.evaluate.unseen import MAX_PASSES
    from thor_sdk.models import list_models
    from thor_sdk.store.files import write_text

    from bench_composition import RESULTS_DIR, check_report

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile-seconds", type=float, default=1200.0)
    ap.add_argument("--batch-size", type=int, action="append", help="default: 16")
    ap.add_argument("--model", action="append", help="default: every held-out net")
    ap.add_argument("--out-dir", default="thor-generalization")
    ap.add_argument("--reuse", help="an existing profile database (skips profiling)")
    ap.add_argument("--report", default=None)
    ap.add_argument("--relevel", action="store_true",
                    help="measure the device's level first and score THOR and FLOPs at it (evaluate --relevel)")
    ap.add_argument("--passes", type=int, default=1,
                    help="measure every net this many times and score the median (evaluate --passes; 2 or more "
                         "also give the measurement floor)")
    args = ap.parse_args(argv)
    command = "python bench/bench_generalization.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if not 1 <= args.passes <= MAX_PASSES:
        raise SystemExit(f"--passes must be 1 to {MAX_PASSES}, got {args.passes}")  # before a 20-minute profile
    check_report(args.report)  # before the profile and the measurements, not after them
    os.makedirs(args.out_dir, exist_ok=True)
    batches = args.batch_size or [16]
    models = args.model or list_models("heldout")
    zoo = set(list_models("zoo"))
    leaked = sorted(set(models) & zoo)
    if leaked:
        raise SystemExit(f"held-out list overlaps the zoo the prior is built from: {leaked}")
    load_start = os.getloadavg()[0]
    busy = _busy_processes()
    db = args.reuse or os.path.join(args.out_dir, "host-profile.db")
    profile_summary, profile_s = None, None
    if not args.reuse:
        if os.path.exists(db):
            os.remove(db)
        t0 = time.monotonic()
        profile_summary = thor_sdk.profile(device="host", out=db, max_seconds=args.profile_seconds, threads=1,
                                           progress=_printer())
        profile_s = time.monotonic() - t0
    else:  # what the stored profile holds; its stop reason and probing seconds only its own run knew
        profile_summary = thor_sdk.profile_summary(db)
    est_path = os.path.join(args.out_dir, "host-profile.json")
    fit_times = {}
    last = [time.process_time()]

    def fit_progress(kind, n):
        now = time.process_time()
        fit_times[kind] = {"samples": n, "cpu_s": now - last[0]}
        last[0] = now

    t0 = time.monotonic()
    doc = thor_sdk.fit(db, out=est_path, progress=fit_progress)
    fit_s = time.monotonic() - t0
    size = os.path.getsize(est_path)
    big = part8_layers(doc["kinds"])
    load_s, est_s, est_p10_s, est_p90_s = runtime_timings(est_path, big)
    r = evaluate_unseen(est_path, models, device="host", batch_sizes=batches, threads=1, relevel=args.relevel,
                        passes=args.passes,
                        progress=lambda ev, name: print(f"measuring {name} ...", file=sys.stderr, flush=True))
    r.update(command=command, load_average_at_start=load_start, load_average_at_end=os.getloadavg()[0],
             busy_processes_at_start=busy, profile=profile_summary, profile_wall_s=profile_s, fit_wall_s=fit_s,
             fit_per_kind=fit_times, estimator_bytes=size, runtime_load_s=load_s, runtime_estimate_s=est_s,
             runtime_estimate_p10_s=est_p10_s, runtime_estimate_p90_s=est_p90_s,
             runtime_estimate_layers=len(big), whole_model=doc.get("whole_model"),
             calibration=doc["provenance"].get("calibration"))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    report = args.report or os.path.join(RESULTS_DIR, f"generalization-host-{stamp}.md")
    ps = profile_summary or {}
    lines = [f"# Generalization on the host ({stamp} UTC)", "", f"Command: `{command}`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores, 1 torch thread, runtime torch; load average "
             f"{load_start:.2f} at start, {r['load_average_at_end']:.2f} at end; busy processes at start: "
             f"{', '.join(busy) or 'none'}.", "",
             f"Profile: {ps.get('probes_done', '?')} probes ({ps.get('probes_failed', 0)} failed, "
             f"{ps.get('flagged', '?')} flagged), {ps.get('calibration_runs', '?')} calibration runs"
             f" ({ps.get('calibration_spread_passes', 0)} spread passes besides), "
             + (f"{profile_s:.0f} s wall; stop: {ps.get('stop_reason')}" if profile_s is not None else
                f"reused: measured over {ps.get('measured_span_s') or 0:.0f} s wall")
             + (f"; reference ln-spread {ps['reference']['log_std']:.3f}" if ps.get("reference") else "")
             + f". Probes per kind: {json.dumps(ps.get('kinds', {}))}.",
             f"Fit: {fit_s:.1f} s wall; slowest kind "
             + (max(((k, v['cpu_s'], v['samples']) for k, v in fit_times.items()), key=lambda t: t[1],
                    default=("-", 0, 0)).__repr__()) + f"; estimator {size / 1024:.0f} KB; whole-model rel std "
             f"{doc['whole_model']['rel_std']:.3f} ({doc['whole_model'].get('source')}).",
             f"Stdlib runtime: load {load_s * 1e3:.1f} ms, estimate of a {len(big)}-layer model "
             f"{est_s * 1e3:.2f} ms (medians; the estimate's p10-p90 {est_p10_s * 1e3:.2f}-{est_p90_s * 1e3:.2f} ms).",
             "",
             "Held-out nets (never in the zoo the prior is built from):", "", "```", unseen_table(r), "```", ""]
    write_text(report, "\n".join(lines) + "\n")
    write_text(report[:-3] + ".json", json.dumps(r, indent=1, default=str))
    print("\n".join(lines))


def _printer():
    last = [0.0]

    def progress(event, info):
        now = time.monotonic()
        if event in ("probe", "calibration", "stop") and (now - last[0] > 30 or event != "probe"):
            last[0] = now
            print(f"[profile] {event} {json.dumps({k: v for k, v in info.items() if k != 'samples'}, default=str)[:200]}",
                  file=sys.stderr, flush=True)

    return progress


if __name__ == "__main__":
    main()
