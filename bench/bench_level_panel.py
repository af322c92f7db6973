"""Does the device's level from one reference probe, or from a panel of probes, track whole nets?

    python bench/bench_level_panel.py --estimator host-torch.json [--models zoo:heldout] [--rounds 4]

An estimator describes its device as it was while profiled; ``thor_sdk.measure_level`` measures how fast the
device runs now against that, so estimates can be scaled (``evaluate --relevel``, ``estimate --relevel``).
It measures one small reference probe. Does a panel of probes of several kinds track the nets better? Each
round here measures the reference (``measure_level``, its 5 readings), then each panel probe once by THOR's
subtraction (``thor_sdk.api.level_panel``, 16 at most: layers of the profile's calibration nets, zoo nets never
held out, up to two per kind), then every net's training step (``Device.measure_model``; nets in reverse order every other round).
The panel's level is the median over the reference and its probes of measured over expected, two ways:
expected = the estimator's layer estimate as it is (which carries the calibration's common bias,
``whole_model.log_bias``), or without that bias (a layer alone, as its probe measures it). The truth is each
net's measured step over THOR's estimate at the profile's level; per round, THOR's MAPE with no level and
scaled by each level. Host, one intra-op thread; time only. The panel is not adopted as the level; the product
uses it to check a level beyond the profile's drift before applying it (``measure_level``).
"""

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def panel_level(ratios):
    """The median of the positive ratios (a subtraction lost in noise says nothing)."""
    return statistics.median([r for r in ratios if r > 0])


def score(truth, level):
    """THOR's MAPE (%) when its estimates are scaled by ``level``, over nets at ``truth`` = measured / estimate."""
    return 100 * statistics.fmean(abs(level / t - 1) for t in truth)


def main(argv=None):
    from thor_sdk.api import _device, layer_cost_now, level_panel, measure_level
    from thor_sdk.layers import layers_of
    from thor_sdk.models import expand_models
    from thor_sdk.runtime import load_estimator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--models", default="zoo:heldout")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    if not (1 <= args.rounds <= 100 and 1 <= args.batch_size <= 1024):
        raise SystemExit("--rounds 1..100, --batch-size 1..1024")
    command = "python bench/bench_level_panel.py " + " ".join(argv if argv is not None else sys.argv[1:])
    est = load_estimator(args.estimator)
    log_bias = est.whole_model_log_bias
    panel = level_panel(est, max_probes=16)
    nets = expand_models(args.models.split(","))
    thor = {n: est.estimate(layers_of(n).layers, args.batch_size)["total"]["mean"] for n in nets}
    dev = _device("host", threads=1)
    load_start = os.getloadavg()[0]
    rounds = []
    for r in range(args.rounds):
        lv = measure_level(est, dev)
        ref_ratio = lv["level"]
        got = [layer_cost_now(dev, m["probe"], est.metric) for m in panel]
        as_estimated = panel_level([ref_ratio] + [g / m["estimate"] for g, m in zip(got, panel)])
        alone = panel_level([ref_ratio] + [g / m["expected"] for g, m in zip(got, panel)])
        measured = {}
        for n in (nets if r % 2 == 0 else nets[::-1]):
            measured[n] = statistics.median(dev.measure_model(n, args.batch_size).values(est.metric))
        truth = [measured[n] / thor[n] for n in nets]
        row = {"reference_level": ref_ratio, "panel_level": as_estimated, "panel_alone_level": alone,
               "panel": [{"probe": m["probe"].id, "expected": m["expected"], "estimate": m["estimate"], "measured": g}
                         for g, m in zip(got, panel)],
               "measured": measured, "truth_median": statistics.median(truth),
               "mape_none": score(truth, 1.0), "mape_reference": score(truth, ref_ratio),
               "mape_panel": score(truth, as_estimated), "mape_panel_alone": score(truth, alone)}
        rounds.append(row)
        print(f"round {r + 1}/{args.rounds}: reference {ref_ratio:.3f}, panel {as_estimated:.3f} / alone {alone:.3f}, "
              f"nets at {row['truth_median']:.3f}; THOR MAPE none {row['mape_none']:.1f}%, reference "
              f"{row['mape_reference']:.1f}%, panel {row['mape_panel']:.1f}% / {row['mape_panel_alone']:.1f}%",
              file=sys.stderr, flush=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# The device's level: one reference probe or a panel, against whole nets (host, {stamp} UTC)", "",
             f"Command: `{command}`", "",
             f"Estimator: `{args.estimator}` ({est.device.get('name')} / {est.runtime}, {est.metric}; calibration "
             f"ln bias {log_bias:+.3f}, drift ln-std {est.drift_log_std:.3f}). Machine: "
             f"{platform.platform()}, {os.cpu_count()} cores, 1 torch thread; load average {load_start:.2f} at start, "
             f"{os.getloadavg()[0]:.2f} at end. {len(nets)} nets at batch {args.batch_size}; panel of "
             f"{len(panel) + 1} probes (the reference and {len(panel)} of `level_panel`).", "",
             "| round | reference level | panel level, as estimated / alone | nets' measured / THOR (median) | "
             "THOR MAPE, no level | scaled by the reference | scaled by the panel, as estimated / alone |",
             "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rounds, 1):
        lines.append(f"| {i} | {r['reference_level']:.3f} | {r['panel_level']:.3f} / {r['panel_alone_level']:.3f} | "
                     f"{r['truth_median']:.3f} | {r['mape_none']:.1f}% | {r['mape_reference']:.1f}% | "
                     f"{r['mape_panel']:.1f}% / {r['mape_panel_alone']:.1f}% |")

    def gap(key):
        return statistics.median(abs(math.log(r[key] / r["truth_median"])) for r in rounds)

    def mean(key):
        return statistics.fmean(r[key] for r in rounds)

    lines += ["", f"Median over rounds of |ln(level / nets' median)|: reference {gap('reference_level'):.3f}, panel "
                  f"as estimated {gap('panel_level'):.3f}, alone {gap('panel_alone_level'):.3f}. Mean THOR MAPE: no "
                  f"level {mean('mape_none'):.1f}%, reference {mean('mape_reference'):.1f}%, panel as estimated "
                  f"{mean('mape_panel'):.1f}%, alone {mean('mape_panel_alone'):.1f}%."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                      f"level-panel-host-{stamp}.md")
    from thor_sdk.store.files import write_text

    write_text(out, text)
    write_text(out[:-3] + ".json", json.dumps({"command": command, "estimator": args.estimator, "thor": thor,
                                               "rounds": rounds}, indent=1) + "\n")
    print(f"report: {out}", file=sys.stderr)
    return rounds


if __name__ == "__main__":
    main()
