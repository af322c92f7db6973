"""Fine-tunes chosen with ``--trainable``, estimated from a device profile and measured directly, side by side.

    python bench/bench_finetune.py --estimator host-torch.json [--passes 3] [--batch-size 16] [--relevel]

Training on a phone is most often fine-tuning. Each case is one net of the zoo or the held-out list trained
whole, in its classifier alone, and in its last stage(s) plus the classifier (``CASES``: parameter name patterns,
``thor_sdk.layers.trainable``), and one MobileNetV2 exported to ONNX (training mode) and read back with
``--trainable fc``, its initializers' names choosing the fine-tune and its measurement rebuilt from its layers.
Each goes through ``thor_sdk.evaluate.evaluate_unseen`` with ``trainable`` (what ``thor-sdk estimate / measure
--trainable`` do): a reference net measured before every pass, the net measured ``--passes`` times and scored on
the median, THOR's estimate with its std and the FLOPs baseline fitted on the same profile. One intra-op thread.
Time only (no energy meter on the host).

Writes ``bench/results/finetune-host-<stamp>.md`` and ``.json``.
"""

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

#: (net, label, patterns): None trains the net whole (what its fine-tunes are compared with)
CASES = (
    ("mobilenetv2", "whole", None),
    ("mobilenetv2", "classifier", ["fc"]),
    ("mobilenetv2", "last stages + classifier", ["features.1[5-9]*", "features.2*", "fc"]),
    ("resnet18", "whole", None),
    ("resnet18", "classifier", ["fc"]),
    ("resnet18", "last stage + classifier", ["blocks.6", "blocks.7", "fc"]),
    ("mobilenetv3_small", "classifier", ["classifier"]),
    ("vgg_small", "classifier", ["16", "19"]),
    ("crnn_kws", "recurrent + classifier", ["rnn", "fc"]),
    ("transformer", "last block + head", ["7", "8"]),
)
ONNX_CASE = ("mobilenetv2", "ONNX, classifier", ["fc"])


def _export_onnx(net, folder):
    """``net`` exported by torch.onnx in training mode (its parameters named as the module's) into ``folder``."""
    import warnings

    import torch

    from thor_sdk.models import build_model, model_spec

    path = os.path.join(folder, f"{net}.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(build_model(net), (torch.randn(2, *model_spec(net).input_shape),), path, dynamo=False,
                          input_names=["x"], training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    return path


def _summary(rows):
    from thor_sdk.evaluate.unseen import floor_mape

    if not rows:
        return None
    return {"n": len(rows), "thor_mape": statistics.fmean(r["thor_ape"] for r in rows),
            "flops_mape": statistics.fmean(r["flops_ape"] for r in rows),
            "coverage95": sum(bool(r["covered95"]) for r in rows) / len(rows),
            "thor_ratio_median": statistics.median(r["thor"] / r["measured"] for r in rows),
            "measurement_floor_mape": floor_mape(rows)}


def render(doc):
    lines = [f"# Fine-tunes (`--trainable`): THOR vs measured (host, {doc['stamp']} UTC)", "",
             f"Command: `{doc['command']}`", "", f"Estimator: `{doc['estimator']}` ({doc['estimator_key']}). "
             f"{doc['machine']} Batch {doc['batch_size']}, {doc['passes']} passes (median), "
             f"relevel {'on' if doc['relevel'] else 'off'}. Time only (no energy meter on the host).", "",
             "| net | trained | patterns | measured | THOR ± std | THOR / measured | z | FLOPs / measured |",
             "|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(f"| {r['net']} | {r['case']} | {', '.join(r['patterns'] or ['(all)'])} | "
                     f"{r['measured'] * 1e3:.2f} ms | {r['thor'] * 1e3:.2f} ± {r['thor_std'] * 1e3:.2f} ms | "
                     f"{r['thor'] / r['measured']:.2f} | {r['z']:+.2f} | {r['flops'] / r['measured']:.2f} |")
    lines.append("")
    for name, g in doc["groups"].items():
        if g:
            lines.append(f"- {name}: {g['n']} case(s), THOR MAPE {g['thor_mape']:.1f}% vs FLOPs {g['flops_mape']:.1f}%, "
                         f"95% coverage {g['coverage95'] * 100:.0f}%, median THOR / measured {g['thor_ratio_median']:.2f}"
                         + (f"; measurement floor {g['measurement_floor_mape']:.1f}% (what the passes' spread leaves "
                            "a perfect estimate)" if g.get("measurement_floor_mape") is not None else ""))
    for s in doc["skipped"]:
        lines.append(f"- skipped {s['model']} b{s['batch_size']}: {s['reason']}")
    return lines


def main(argv=None):
    from bench_composition import machine_line, check_report, save_report

    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.runtime import load_estimator

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--relevel", action="store_true",
                    help="measure the device's level before each case and score at it where it lies beyond the "
                         "profile's drift (evaluate --relevel)")
    ap.add_argument("--only", default=None, help="comma-separated nets")
    ap.add_argument("--out", default=None, help="report path (default bench/results/finetune-host-<stamp>.md)")
    args = ap.parse_args(argv)
    check_report(args.out)  # before the measurements: the report is written after them
    argv = sys.argv[1:] if argv is None else argv
    est = load_estimator(args.estimator)
    load_start = os.getloadavg()[0]
    rows, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for c in CASES if not args.only or c[0] in args.only.split(",")]
        if not args.only or ONNX_CASE[0] in args.only.split(","):
            cases.append((_export_onnx(ONNX_CASE[0], tmp),) + ONNX_CASE[1:])
        for model, case, patterns in cases:
            r = evaluate_unseen(est, [model], device="host", batch_sizes=(args.batch_size,), threads=1,
                                passes=args.passes, relevel=args.relevel, trainable=patterns)
            skipped += r["skipped"]
            for row in r["rows"]:
                row.update(net=os.path.basename(model), case=case, patterns=patterns)
                rows.append(row)
                print(f"{row['model']}: measured {row['measured'] * 1e3:.2f} ms, THOR {row['thor'] * 1e3:.2f} +- "
                      f"{row['thor_std'] * 1e3:.2f} ms ({row['thor'] / row['measured']:.2f}x, z {row['z']:+.2f}), "
                      f"FLOPs {row['flops'] / row['measured']:.2f}x", flush=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    doc = {"command": "python bench/bench_finetune.py " + " ".join(argv), "estimator": args.estimator,
           "estimator_key": f"{(est.device or {}).get('name')} / {est.runtime}, {est.metric}", "stamp": stamp,
           "machine": machine_line(1, load_start, os.getloadavg()[0]), "batch_size": args.batch_size,
           "passes": args.passes, "relevel": args.relevel, "rows": rows, "skipped": skipped,
           "groups": {"fine-tunes": _summary([r for r in rows if r["patterns"]]),
                      "trained whole": _summary([r for r in rows if not r["patterns"]])}}
    save_report("\n".join(render(doc)) + "\n", doc, doc["command"], args.out, f"finetune-host-{stamp}")


if __name__ == "__main__":
    main()
