"""Nets written the way a user would, estimated from a device profile and measured directly, side by side.

    python bench/bench_user_nets.py --estimator host-torch.json [--passes 3] [--batch-size 16]

The held-out list is ``bench/user_nets.py`` (``NETS``): a U-Net, a bidirectional LSTM, a 2-layer GRU,
nn.MultiheadAttention, a dilated TCN, a MobileNet-style block, a transposed conv, a text GRU, hand-written
attention (``@``), nn.TransformerEncoderLayer, F.scaled_dot_product_attention, attention with torch.einsum,
cross-attention, a sequence-first LSTM, a Style block, causal nn.MultiheadAttention, PyTorch's MNIST example, a
GroupNorm CNN, a PReLU MLP, ERFNet's factorised 3x1/1x3 blocks and two keyword spotters of rectangular kernels
(cnn-one-fstride4's 32x8 striding 1x4; cnn-trad-fpool3's 20x8, 10x4 and (1, 3) pooling), a CNN with channel
dropout (nn.Dropout2d), a bilinear U-Net padding to its skips, a convolutional autoencoder of 3x3 transposed convs,
a ResNet-8 with option-A shortcuts, a TensorFlow port's ZeroPad2d before strided convs, an LSTM pooled by an
attention-weighted sum, a small PointNet (its max over the points), a text CNN taking amax over time and nanoGPT at
a character-level size (its mask a buffer sliced by the sequence length: traced with its input's sizes), a ConvNeXt
(timm's channels-first LayerNorm, layer scale, stochastic depth) and the tutorials' LSTM (zero initial states sized
by the batch). None is in
the prior's zoo (some architectures and operators joined it since: ``COVERED_SINCE``, reported apart);
several use operators with no kind of their own, which ``--unknown-ops approx`` estimates through stand-in
kinds (``thor_sdk.layers.extract._stand_in``, their own error in ``bench/bench_stand_ins.py``) with a wider std.

Each net goes through ``thor_sdk.evaluate.evaluate_unseen`` (what ``thor-sdk evaluate --estimator ...
--unknown-ops approx`` runs) with its own input shape: a reference net measured before every pass (drift),
the net measured ``--passes`` times and scored on the median, THOR's estimate with its std and the FLOPs
baseline fitted on the same profile. One intra-op thread. Time only (no energy meter on the host).

Writes ``bench/results/user-nets-host-<stamp>.md`` and ``.json``.

``--rescore JSON`` measures nothing: it estimates an earlier run's nets again with each ``--estimator`` (two or
more, side by side on the same measurements) and scores them against the run's medians as measured and, where
the run read the canary, at the canary level; each net's estimate over its truth per estimator. Writes
``user-nets-rescore-<stamp>.md`` and ``.json``.

    python bench/bench_user_nets.py --rescore bench/results/user-nets-host-<stamp>.json \
        --estimator A.json --estimator B.json
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def main(argv=None):
    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.runtime import load_estimator
    from user_nets import NETS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", action="append", default=[],
                    help="the device profile (with --rescore: each of them)")
    ap.add_argument("--render", metavar="JSON", help="write the Markdown of an earlier run's JSON again, measure nothing")
    ap.add_argument("--rescore", metavar="JSON", help="estimate an earlier run's nets again with each --estimator, "
                                                      "measure nothing")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--only", default=None, help="comma-separated net names")
    ap.add_argument("--relevel", action="store_true",
                    help="measure the device's level before each net and score at it where it lies beyond the "
                         "profile's drift (evaluate --relevel)")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    if args.render:
        with open(args.render, encoding="utf-8") as f:
            doc = json.load(f)
        lines = render(doc)
        with open(args.render[:-len(".json")] + ".md", "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))
        return
    if args.rescore:
        if not args.estimator:
            ap.error("--rescore needs at least one --estimator")
        with open(args.rescore, encoding="utf-8") as f:
            doc = rescore(json.load(f), args.estimator)
        doc["command"] = "python bench/bench_user_nets.py " + " ".join(argv)
        _write(doc, render_rescore(doc), os.path.join(args.out_dir, f"user-nets-rescore-{doc['stamp']}"))
        return
    if len(args.estimator) != 1:
        ap.error("give one --estimator (or --render JSON, or --rescore JSON with several)")
    est = load_estimator(args.estimator[0])
    only = set(args.only.split(",")) if args.only else None
    load_start = os.getloadavg()[0]
    rows, skipped = [], []
    for name, shape in NETS:
        if only and name not in only:
            continue
        r = evaluate_unseen(est, [os.path.join(HERE, "user_nets.py") + ":" + name], device="host",
                            batch_sizes=(args.batch_size,), threads=1, input_shape=list(shape), passes=args.passes,
                            unknown_ops="approx", relevel=args.relevel)
        skipped += r["skipped"]
        applied = (r.get("relevel") or {}).get("applied")
        for row in r["rows"]:
            row["net"], row["shape"] = name, list(shape)
            row["relevel_applied"] = (r.get("relevel") or {}).get("level") if applied else None
            rows.append(row)
            print(f"{name}: measured {row['measured'] * 1e3:.2f} ms, THOR {row['thor'] * 1e3:.2f} +- "
                  f"{row['thor_std'] * 1e3:.2f} ms (APE {row['thor_ape']:.1f}%, z {row['z']:+.2f}), FLOPs "
                  f"{row['flops'] * 1e3:.2f} ms (APE {row['flops_ape']:.1f}%)", flush=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    torch_version = __import__("torch").__version__
    doc = {"command": "python bench/bench_user_nets.py " + " ".join(argv), "estimator": args.estimator[0],
           "stamp": stamp, "rows": rows, "skipped": skipped, "passes": args.passes, "batch_size": args.batch_size,
           "relevel": args.relevel,
           "machine": f"{platform.platform()}, {os.cpu_count()} cores, 1 torch thread, torch {torch_version}; "
                      f"load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end",
           "estimator_key": f"{est.device.get('name') if isinstance(est.device, dict) else est.device} / "
                            f"{est.runtime}, {est.metric}"}
    doc["groups"] = groups_of(rows)
    if args.relevel:
        doc["groups_unleveled"] = groups_of([dict(r, **r["unleveled"]) for r in rows])
    if rows and all(r.get("canary") for r in rows):
        doc["groups_canary"] = groups_of([at_canary(r) for r in rows])
    _write(doc, render(doc), os.path.join(args.out_dir, f"user-nets-host-{stamp}"))


def _write(doc, lines, base):
    os.makedirs(os.path.dirname(base), exist_ok=True)
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)
    print("\n".join(lines))


def rescore(run, estimators):
    """``run``'s nets (a ``bench_user_nets`` JSON) estimated again with each of ``estimators`` (paths), nothing
    measured: per estimator and net, THOR's and the estimator's FLOPs baseline's mean, THOR's std, the run's
    median as measured and at the canary level (None where the run has none)."""
    from thor_sdk.api import estimate_layers
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator

    layers = {}
    out = {"run": run.get("command"), "run_stamp": run.get("stamp"), "batch_size": run.get("batch_size"),
           "stamp": dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M"), "estimators": []}
    for path in estimators:
        est, rows = load_estimator(path), []
        for r in run["rows"]:
            key = (r["net"], tuple(r["shape"]))
            if key not in layers:
                layers[key] = layers_of(os.path.join(HERE, "user_nets.py") + ":" + r["net"],
                                        input_shape=list(r["shape"]), unknown_ops="approx")
            e = estimate_layers(est, layers[key], r["batch_size"], unknown_ops="approx")
            rows.append({"net": r["net"], "batch_size": r["batch_size"], "measured": r["measured"],
                         "canary": (r.get("canary") or {}).get("measured"), "thor": e["total"]["mean"],
                         "thor_std": e["total"]["std"], "flops": e["flops_baseline"]["total"]})
        out["estimators"].append({"estimator": path, "rows": rows})
    return out


def rescore_scores(rows, truth):
    """(n, THOR MAPE, FLOPs MAPE, nets covered by THOR's 95% interval) against ``truth`` (``measured`` or
    ``canary``) over the rows that have it."""
    from thor_sdk.evaluate.unseen import Z95, _ape

    sel = [r for r in rows if r.get(truth)]
    if not sel:
        return 0, None, None, 0
    return (len(sel), statistics.fmean(_ape(r["thor"], r[truth]) for r in sel),
            statistics.fmean(_ape(r["flops"], r[truth]) for r in sel),
            sum(abs(r["thor"] - r[truth]) <= Z95 * r["thor_std"] for r in sel))


def render_rescore(doc):
    """The Markdown of a ``rescore``."""
    lines = [f"# User-style nets estimated again ({doc['stamp']} UTC)", "", f"Command: `{doc['command']}`", "",
             f"The nets and measurements of `{doc['run']}` ({doc['run_stamp']}, batch {doc['batch_size']}), each "
             "estimated again by every estimator below; nothing measured. `canary`: each net's median put at the "
             "profile's canary level (the machine speed its estimator describes); `measured`: as measured. "
             "Time only.", "", "| estimator | truth | nets | THOR MAPE % | FLOPs MAPE % | FLOPs / THOR | 95% covered |",
             "|---|---|---|---|---|---|---|"]
    for e in doc["estimators"]:
        for truth in ("measured", "canary"):
            n, thor, flops, cov = rescore_scores(e["rows"], truth)
            if n:
                lines.append(f"| {e['estimator']} | {truth} | {n} | {thor:.1f} | {flops:.1f} | {flops / thor:.2f}x | "
                             f"{cov} of {n} |")
    truth = "canary" if all(r["canary"] for e in doc["estimators"] for r in e["rows"]) else "measured"
    lines += ["", f"THOR / {truth}, per net:", "",
              "| net | " + " | ".join(f"estimator {i + 1}" for i in range(len(doc["estimators"]))) + " |",
              "|---|" + "---|" * len(doc["estimators"])]
    for i, r in enumerate(doc["estimators"][0]["rows"]):
        lines.append(f"| {r['net']} | " + " | ".join(f"{e['rows'][i]['thor'] / e['rows'][i][truth]:.2f}"
                                                     for e in doc["estimators"]) + " |")
    return lines


def at_canary(row):
    """A row scored against its passes put at the profile's canary level (``evaluate_unseen``'s ``canary``), with
    THOR and FLOPs at the profile's level (not releveled)."""
    c, at = row["canary"], row.get("unleveled") or row
    return dict(row, measured=c["measured"], measured_passes=c["measured_passes"], thor=at["thor"], flops=at["flops"],
                thor_ape=c["thor_ape"], flops_ape=c["flops_ape"], covered95=c["covered95"])


def groups_of(rows):
    """MAPE of THOR and FLOPs and THOR's 95% coverage over all nets, those with stand-ins and those without, and
    the clean ones (all but the nets whose architecture joined the zoo after they were written, COVERED_SINCE); and
    each method's MAPE at its best single scale (``best_scale_mape``)."""
    from user_nets import COVERED_SINCE

    from thor_sdk.evaluate.unseen import best_scale_mape, floor_mape

    def group(sel):
        sel = list(sel)
        if not sel:
            return None
        return {"n": len(sel), "thor_mape": statistics.fmean(r["thor_ape"] for r in sel),
                "measurement_floor_mape": floor_mape(sel),
                "flops_mape": statistics.fmean(r["flops_ape"] for r in sel),
                "covered": sum(bool(r["covered95"]) for r in sel),
                "thor_best_scale_mape": best_scale_mape([(r["measured"], r["thor"]) for r in sel]),
                "flops_best_scale_mape": best_scale_mape([(r["measured"], r["flops"]) for r in sel])}

    out = {"all": group(rows), "with stand-ins": group(r for r in rows if r["approximated"]),
           "without": group(r for r in rows if not r["approximated"])}
    if any(r["net"] in COVERED_SINCE for r in rows):
        out["clean (without " + ", ".join(sorted(COVERED_SINCE)) + ")"] = group(
            r for r in rows if r["net"] not in COVERED_SINCE)
    return out


def render(doc):
    """The Markdown report's lines."""
    rows = doc["rows"]
    lines = [f"# User-style nets on the host ({doc['stamp']} UTC)", "",
             f"Command: `{doc['command']}`", "",
             f"Estimator: `{doc['estimator']}` ({doc['estimator_key']}). Machine: {doc['machine']}. Batch "
             f"{doc['batch_size']}, {doc['passes']} passes per net (median). Time only. `level`: the profile's "
             "reference probe measured around the net, over its level during the profile (1.30: the host runs "
             "30% slower than when profiled); with --relevel, whether the level read before the net was applied "
             "(THOR and FLOPs are then scaled by it).", "",
             "| net | measured ms | THOR ms | THOR std | THOR / measured | z | covered | FLOPs ms | FLOPs / measured "
             "| level | stand-in layers |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ops = sorted({a.get("op") or a["kind"] for a in r["approximated"]})
        stand_ins = f"{len(r['approximated'])} ({', '.join(ops)})" if ops else "-"
        level = "-" if r.get("device_level") is None else f"{r['device_level']:.2f}"
        if r.get("unleveled"):
            level += f" (applied {r['relevel_applied']:.2f})" if r.get("relevel_applied") else " (not applied)"
        lines.append(f"| {r['net']} | {r['measured'] * 1e3:.2f} | {r['thor'] * 1e3:.2f} | {r['thor_std'] * 1e3:.2f} | "
                     f"{r['thor'] / r['measured']:.2f} | {r['z']:+.2f} | {'yes' if r['covered95'] else 'no'} | "
                     f"{r['flops'] * 1e3:.2f} | {r['flops'] / r['measured']:.2f} | {level} | {stand_ins} |")
    lines.append("")
    if doc.get("groups") and not all(k in doc["groups"]["all"] for k in ("thor_best_scale_mape",
                                                                         "measurement_floor_mape")):
        # written before those figures: computed again from its rows
        doc = dict(doc, groups=groups_of(rows))
        if doc.get("groups_unleveled"):
            doc["groups_unleveled"] = groups_of([dict(r, **r["unleveled"]) if r.get("unleveled") else r for r in rows])
    for title, key in (("As scored", "groups"), ("At the profile's level (no relevel)", "groups_unleveled"),
                       ("Against each pass put at the profile's canary level (the host's canary read beside its "
                        "windows; THOR and FLOPs at the profile's level)", "groups_canary")):
        if not doc.get(key):
            continue
        lines.append(f"{title}:")
        for gname, g in doc[key].items():
            if g:
                best = ""
                if g.get("thor_best_scale_mape"):  # JSON written before these figures: none
                    best = (f"; each at its best single scale (a machine uniformly faster or slower than profiled "
                            f"taken out) THOR {g['thor_best_scale_mape']:.1f}%, FLOPs {g['flops_best_scale_mape']:.1f}% "
                            f"({g['flops_best_scale_mape'] / g['thor_best_scale_mape']:.1f}x)")
                floor = ("" if g.get("measurement_floor_mape") is None else
                         f"; measurement floor {g['measurement_floor_mape']:.1f}% (what the passes' spread leaves a "
                         "perfect estimate)")
                lines.append(f"- {gname} ({g['n']} nets): THOR MAPE {g['thor_mape']:.1f}%, FLOPs MAPE "
                             f"{g['flops_mape']:.1f}% ({g['flops_mape'] / g['thor_mape']:.1f}x), 95% intervals "
                             f"covering {g['covered']} of {g['n']}{best}{floor}.")
        lines.append("")
    if doc.get("skipped"):
        lines += ["Skipped: " + "; ".join(f"{s['model']}: {s['reason']}" for s in doc["skipped"])]
    return lines


if __name__ == "__main__":
    main()
