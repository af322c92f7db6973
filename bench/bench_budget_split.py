"""Does a kind's share of a profile's probes move its accuracy on unseen nets? Fewer probes of one kind, offline.

    python bench/bench_budget_split.py --campaign P/host-torch.db --results P/eval_a/results.json \
        --kind conv2d --keep 300,200,130 --seeds 1,2 --out-dir /tmp/split --report bench/results/budget-split-<...>.md

Profiles whose ``conv2d`` took 45-55% of the probes met the host bar on the held-out nets and profiles where it
took 21-31% missed it; this asks whether the share is the cause. A copy of the campaign keeps ``--keep`` of the
kind's probes (the first ones picked, as if the profile had turned to other kinds sooner, or a random subset per
seed) and drops the rest with their samples; each copy is fitted (``thor-sdk fit``'s code) and the evaluation's
measured nets are estimated again (``bench_rescore``: nothing re-measured), beside the whole campaign's fit. A
difference between rows is then the fewer probes' alone. What it cannot tell: what the other kinds would have
gained from the probes the kind did not take.
"""

import argparse
import os
import random
import shutil
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _positive_ints(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"not a list of positive integers: {text!r}")
    return values


def thin(campaign, out, kind, keep, seed=None):
    """Copy ``campaign`` to ``out`` keeping ``keep`` of ``kind``'s measured probes -- the first picked when
    ``seed`` is None, else a random subset -- the others dropped with their samples; ``(kept, probes left)``."""
    shutil.copyfile(campaign, out)
    with sqlite3.connect(out) as db:
        ids = [r[0] for r in db.execute("SELECT id FROM probes WHERE kind = ? AND status = 'done' ORDER BY seq",
                                        (kind,))]
        drop = [] if keep >= len(ids) else ids[keep:] if seed is None else random.Random(seed).sample(ids, len(ids) - keep)
        db.executemany("DELETE FROM samples WHERE probe_id = ?", [(i,) for i in drop])
        db.executemany("DELETE FROM probes WHERE id = ?", [(i,) for i in drop])
        left = db.execute("SELECT COUNT(*) FROM probes WHERE status = 'done'").fetchone()[0]
    return len(ids) - len(drop), left


def main(argv=None):
    from bench_rescore import load_results, publish, rescore

    from thor_sdk import api
    from thor_sdk.errors import ThorError
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store.files import read_json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="a profile's campaign database (read, never written)")
    ap.add_argument("--results", required=True, help="an evaluation of that profile's estimator (results.json)")
    ap.add_argument("--kind", default="conv2d")
    ap.add_argument("--keep", type=_positive_ints, default=[300, 200, 130], help="probes of the kind kept, e.g. 300,200")
    ap.add_argument("--seeds", type=_positive_ints, default=[1, 2], help="random subsets per --keep besides the first")
    ap.add_argument("--out-dir", required=True, help="the thinned campaigns and their estimators go here")
    ap.add_argument("--report", default=None, help="also write the Markdown here")
    args = ap.parse_args(argv)
    try:
        results = load_results(args.results)
        if not os.path.isfile(args.campaign):
            raise SystemExit(f"Error: no campaign at {args.campaign}")
        os.makedirs(args.out_dir, exist_ok=True)
        variants = [("all", 10 ** 9, None)] + [(f"first {k}", k, None) for k in args.keep] + \
            [(f"random {k} (seed {s})", k, s) for k in args.keep for s in args.seeds]
        table, cache = [], {}
        for label, keep, seed in variants:
            stem = os.path.join(args.out_dir, label.replace(" ", "_").replace("(", "").replace(")", ""))
            kept, left = thin(args.campaign, stem + ".db", args.kind, keep, seed)
            api.fit(campaign=stem + ".db", out=stem + ".json")
            est = load_estimator(read_json(stem + ".json", "estimator"))
            row = dict(rescore(results, est, cache), results=os.path.basename(args.results),
                       estimator=f"{label}: {args.kind} {kept} of {left} probes ({kept / left:.0%})")
            table.append(row)
            g = row["groups"].get("heldout", {})
            print(f"{row['estimator']}: held out THOR {g.get('thor_mape', float('nan')):.1f}% "
                  f"FLOPs {g.get('flops_mape', float('nan')):.1f}%", flush=True)
    except ThorError as err:
        raise SystemExit(f"Error: {err}")
    publish(table, "python bench/bench_budget_split.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            args.report)


if __name__ == "__main__":
    main()
