"""Estimators side by side on the same measurements: an evaluation's measured nets re-estimated, nothing measured.

    thor-sdk evaluate --estimator A.json --device host --models zoo:reference,zoo:heldout --out report_a
    python bench/bench_rescore.py --results report_a/results.json --estimator A.json --estimator B.json

On a host whose speed moves 20% in minutes, two evaluations of two estimators compare the machine as much
as the estimators. This takes the nets of one or more evaluations (their measured medians and the device
level measured around each, from ``results.json``) and estimates them again with every ``--estimator``:
per results file, estimator and group, THOR's MAPE, the estimator's own FLOPs baseline (fitted on its own
samples), their ratio, the 95% coverage and THOR scaled by the device level. The measurements are the
evaluation's; only the estimates change, so a difference between two rows of one results file is the
estimators' alone. Nets given as files to ``evaluate`` (not by name) are skipped, with the reason: a path in
a results file is never imported.

``--pool`` scores against the median over the results files of each (net, batch size)'s measured value (each
file one run, ``pool_results``) instead of each file alone: on this project's VM one net read 1.1-1.8x apart in
evaluations 15 minutes apart (each file's own passes agreeing within it), so a single evaluation's MAPE is as much
the machine's state in those minutes as the estimator's error.

    python bench/bench_rescore.py --pool --results eval_a/results.json --results eval_b/results.json --estimator A.json

``--truth canary`` scores against each row's measured value put at the profile's canary level (``evaluate``'s
``canary.measured``: every window of the net at the machine speed the estimator's profile describes, as the host's
canary reads it, ``thor_sdk.harness.canary``) instead of as measured; rows without one are skipped.

``--results`` also takes the JSON of ``bench_finetune.py`` (each row a net by name with its ``--trainable`` patterns:
the fine-tune is rebuilt with them; its ONNX case, a file, is skipped) and of ``bench_user_nets.py`` (each row a net
of this repository's ``bench/user_nets.py``, rebuilt by its name from that file with its listed input shape and
``--unknown-ops approx``, as that benchmark estimates it; no other path is imported).
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RESULTS_FORMAT = "thor-sdk/evaluation"


def load_results(path):
    """An evaluation's ``results.json``, checked: its format, and every row's model, group, batch size and
    measured value (positive, finite)."""
    import math

    from thor_sdk.errors import FormatError
    from thor_sdk.store.files import read_json

    doc = read_json(path, "evaluation results")
    if isinstance(doc, dict) and "format" not in doc and isinstance(doc.get("rows"), list) \
            and isinstance(doc.get("estimator_key"), str):  # a bench_finetune or bench_user_nets report
        # its estimator's key, "device / runtime, metric": what it measured and ran
        where, _, metric = doc["estimator_key"].rpartition(", ")
        doc = dict(doc, rows=[_bench_row(r) for r in doc["rows"]], metric=metric or None,
                   runtime=where.rpartition(" / ")[2] or None)
    elif not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT or doc.get("version") != 1:
        raise FormatError(f"{path}: not a thor-sdk evaluate results.json (format {RESULTS_FORMAT}, version 1), nor a "
                          "bench_finetune or bench_user_nets report")
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise FormatError(f"{path}: no measured rows")
    for i, r in enumerate(rows):
        ok = (isinstance(r, dict) and isinstance(r.get("model"), str) and isinstance(r.get("batch_size"), int)
              and not isinstance(r.get("batch_size"), bool) and 1 <= r["batch_size"] <= 1024
              and _positive(r.get("measured"))
              and (r.get("device_level") is None or (isinstance(r["device_level"], (int, float))
                                                     and math.isfinite(r["device_level"]) and r["device_level"] > 0)))
        if not ok:
            raise FormatError(f"{path}: row {i} needs a model name, a batch size 1..1024 and a positive measured value")
        can = r.get("canary")
        if can is not None and not (isinstance(can, dict) and _positive(can.get("measured"))):
            raise FormatError(f"{path}: row {i}'s canary needs a positive measured value")
    return doc


def _bench_row(r):
    """A row of a ``bench_finetune`` / ``bench_user_nets`` report as a results row: its ``model`` the key it is
    rebuilt by (``name [trainable p,q]``, as ``layers.trainable.label`` names a fine-tune, or ``user_nets.py:Name``),
    ``source`` how (``("zoo", name, patterns)`` or ``("user", name)``); anything else keeps its file path as its
    model, and is skipped where rescored."""
    from thor_sdk.layers.trainable import label

    if not isinstance(r, dict):
        return r
    net, patterns, model = r.get("net"), r.get("patterns"), r.get("model")
    if isinstance(net, str) and "patterns" in r and not net.endswith(".onnx"):
        pats = tuple(patterns) if isinstance(patterns, list) and all(isinstance(p, str) for p in patterns) else None
        group = "fine-tune" if pats else "trained whole"
        return dict(r, model=label(net, pats), source=("zoo", net, pats), group=group)
    if isinstance(model, str) and isinstance(net, str) and model.endswith("user_nets.py:" + net):
        return dict(r, model="user_nets.py:" + net, source=("user", net))
    return r


def _rebuild(row, known):
    """The layer list of a results row, or None where it is not rebuilt (a file path, an unknown name)."""
    from thor_sdk.layers import layers_of

    source = row.get("source")
    if source is None:
        return layers_of(row["model"]) if row["model"] in known else None
    if source[0] == "zoo":
        return layers_of(source[1], trainable=source[2]) if source[1] in known else None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from user_nets import NETS

    shapes = dict(NETS)
    if source[1] not in shapes:
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "user_nets.py")
    return layers_of(f"{path}:{source[1]}", input_shape=list(shapes[source[1]]), unknown_ops="approx")


def _positive(v):
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def truth_of(row, truth="measured"):
    """A row's measured value: as measured (``measured``), or put at the profile's canary level (``canary``:
    ``evaluate``'s ``canary.measured``; None where the row has none)."""
    if truth == "measured":
        return row["measured"]
    return (row.get("canary") or {}).get("measured")


def pool_results(docs):
    """One results document from several evaluations' (``[(path, doc)]``, each loaded by ``load_results``): per
    (model, batch size) measured in every one of them, the median of their measured values (``runs``: how many),
    its group from the first; no device level (each run had its own). Metric and runtime must agree; a net
    missing from one run is left out (``skipped``), so every pooled row rests on the same runs."""
    from thor_sdk.errors import UsageError

    if len(docs) < 2:
        raise UsageError("--pool needs at least two results files")
    for key in ("metric", "runtime"):
        values = {d.get(key) for _, d in docs}
        if len(values) > 1:
            raise UsageError(f"the results files differ in {key}: {sorted(map(str, values))}")
    by_key = {}
    for i, (_, d) in enumerate(docs):
        for r in d["rows"]:
            by_key.setdefault((r["model"], r["batch_size"]), {}).setdefault(i, r)
    rows, skipped = [], []
    for (model, batch), got in by_key.items():
        if len(got) < len(docs):
            skipped.append({"model": model, "batch_size": batch,
                            "reason": f"measured in {len(got)} of the {len(docs)} runs"})
            continue
        first = got[min(got)]
        can = [truth_of(r, "canary") for r in got.values()]
        rows.append({"model": model, "group": first.get("group"), "batch_size": batch, "runs": len(got),
                     "measured": statistics.median(r["measured"] for r in got.values()), "device_level": None,
                     **({"canary": {"measured": statistics.median(can)}} if None not in can else {})})
    if not rows:
        raise UsageError("no (net, batch size) was measured in every results file")
    return {"format": RESULTS_FORMAT, "version": 1, "metric": docs[0][1].get("metric"),
            "runtime": docs[0][1].get("runtime"), "rows": rows, "pooled_from": [p for p, _ in docs],
            "pool_skipped": skipped}


def rescore(results, estimator, layers_cache=None, truth="measured"):
    """``{"groups": {group: summary}, "rows": [...], "skipped": [...]}``: every row of ``results`` estimated
    with ``estimator`` (a loaded estimator). ``layers_cache``: ``{model: layer list}`` shared between calls.
    ``truth``: what each estimate is scored against (``truth_of``); a row without it is skipped."""
    from thor_sdk.api import estimate_layers
    from thor_sdk.errors import ThorError, UsageError
    from thor_sdk.evaluate.unseen import Z95, _ape, group_summaries, thor_summary

    if results.get("metric") not in (None, estimator.metric):
        raise UsageError(f"the evaluation measured {results['metric']}; the estimator estimates {estimator.metric}")
    if results.get("runtime") not in (None, estimator.runtime):
        raise UsageError(f"the evaluation ran {results['runtime']!r}; the estimator was fitted on {estimator.runtime!r}")
    from thor_sdk.models import list_models

    known = set(list_models("all"))
    cache = {} if layers_cache is None else layers_cache
    rows, skipped = [], []
    for r in results["rows"]:
        measured = truth_of(r, truth)
        if measured is None:
            skipped.append({"model": r["model"], "batch_size": r["batch_size"],
                            "reason": f"no {truth} value (the evaluation read no canary, or its estimator had none)"})
            continue
        r = dict(r, measured=measured)
        try:
            if r["model"] not in cache:  # a file path in a results file is never imported: names only
                cache[r["model"]] = _rebuild(r, known)
            if cache[r["model"]] is None:
                skipped.append({"model": r["model"], "batch_size": r["batch_size"],
                                "reason": "not a reference, zoo, held-out or bench/user_nets.py net name (nets given "
                                          "as files are not rebuilt)"})
                continue
            e = estimate_layers(estimator, cache[r["model"]], r["batch_size"],
                                unknown_ops="approx" if r.get("source", ("",))[0] == "user" else "error")
        except ThorError as err:  # a kind this estimator lacks
            skipped.append({"model": r["model"], "batch_size": r["batch_size"], "reason": str(err)})
            continue
        mean, std, flops = e["total"]["mean"], e["total"]["std"], e["flops_baseline"]["total"]
        level = r.get("device_level") if truth == "measured" else None  # (a canary truth is at the profile's level)
        rows.append({"model": r["model"], "group": r["group"] if isinstance(r.get("group"), str) else None,
                     "batch_size": r["batch_size"],
                     "measured": r["measured"], "thor": mean, "thor_std": std, "flops": flops,
                     "thor_ape": _ape(mean, r["measured"]), "flops_ape": _ape(flops, r["measured"]),
                     "covered95": abs(r["measured"] - mean) <= Z95 * std,
                     "thor_level_adjusted_ape": _ape(mean * level, r["measured"]) if level else None})
    groups = dict(group_summaries(rows), **({"all": thor_summary(rows)} if rows else {}))
    return {"groups": groups, "rows": rows, "skipped": skipped}


def _or_dash(value, spec):
    return "-" if value is None else format(value, spec)


def report(table, command):
    lines = ["# Estimators on the same measurements", "", f"Command: `{command}`", "",
             "Each results file's measured nets, estimated again by each estimator (nothing re-measured).", "",
             "| results | estimator | group | nets | THOR MAPE % | FLOPs MAPE % | FLOPs / THOR | 95% coverage | "
             "THOR x level % |", "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        for g, s in t["groups"].items():
            lines.append(f"| {t['results']} | {t['estimator']} | {g} | {s['n']} | {s['thor_mape']:.1f} | "
                         f"{s['flops_mape']:.1f} | {_or_dash(s['flops_over_thor'], '.2f')}x | {s['coverage95']:.0%} | "
                         f"{_or_dash(s['thor_level_adjusted_mape'], '.1f')} |")
    skipped = [(t["results"], t["estimator"], s) for t in table for s in t["skipped"]]
    if skipped:
        lines += ["", "Skipped:", ""] + [f"- {r} / {e}: {s['model']} b{s['batch_size']}: {s['reason']}"
                                         for r, e, s in skipped]
    return "\n".join(lines) + "\n"


def main(argv=None):
    from thor_sdk.errors import ThorError
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.files import read_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", action="append", required=True, help="an evaluation's results.json (repeatable)")
    ap.add_argument("--estimator", action="append", required=True, help="an estimator file (repeatable)")
    ap.add_argument("--report", default=None, help="also write the Markdown here (and the rows as JSON beside it)")
    ap.add_argument("--pool", action="store_true",
                    help="score against each net's median measured value over the results files (pool_results)")
    ap.add_argument("--truth", choices=("measured", "canary"), default="measured",
                    help="score against the measured values (default) or those put at the profile's canary level "
                         "(evaluate's rows' canary.measured)")
    args = ap.parse_args(argv)
    try:  # every input read and checked before any estimate or write
        docs = [(p, load_results(p)) for p in args.results]
        if args.pool:
            pooled = pool_results(docs)
            docs = [(f"median of {len(docs)} runs", pooled)]
        ests = [(p, load_estimator(read_json(p, "estimator"))) for p in args.estimator]
        cache, table = {}, []
        for rp, doc in docs:
            for ep, est in ests:
                got = rescore(doc, est, cache, args.truth)
                got["skipped"] = doc.get("pool_skipped", []) + got["skipped"]
                table.append(dict(got, results=rp, estimator=ep))
    except ThorError as err:
        raise SystemExit(f"Error: {err}")
    publish(table, "python bench/bench_rescore.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            args.report)


def publish(table, command, out=None):
    """Print ``report(table, command)`` and, given ``out``, write it there and the table as JSON beside it."""
    from thor_sdk.store.files import write_text

    text = report(table, command)
    print(text)
    if out:
        write_text(out, text)
        write_text(out[:-3] + ".json" if out.endswith(".md") else out + ".json",
                   json.dumps({"command": command, "table": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
