"""What the profile's calibration passes buy: one campaign fitted with every pass, and with each pass alone.

    python bench/bench_calibration.py --campaign host-torch.db --evaluation report/results.json [--evaluation ...]
    python bench/bench_calibration.py ... --without squeezenet11,shufflenetv2_05   # + fits without those nets

``thor-sdk profile`` measures its calibration nets whole in passes while the reserved time lasts, and
``fit`` counts each (model, batch size) once with the median of its passes. This refits the same samples
with all passes and with each single pass (what one pass, the earlier behaviour, would have given; the passes
spread over the probes, ``pass`` "spread", as one, and the end passes without them), and
scores every fit on the held-out rows of ``thor-sdk evaluate`` results measured beside that profile (the
measurements are reused: nothing is measured here; ``--pool``: on each net's median over them).
``--without A,B``: also fits whose calibration leaves those nets out (with all passes, and with each pass
alone), to see what they add. Printed per fit: the corrected ln bias, the whole-model rel std and, per
evaluation, held-out THOR MAPE beside the per-kind FLOPs baseline's and the 95% coverage.
Needs the ``[fit]`` extra; writes nothing.
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _pass(run):
    return (run.get("detail") or {}).get("pass", 0)


def _score(est, rows, layers_of):
    from thor_sdk.evaluate.unseen import Z95

    held = [r for r in rows if r.get("group") == "heldout"]
    apes, covered = [], 0
    for r in held:
        e = est.estimate(layers_of(r["model"]).layers, r["batch_size"])["total"]
        apes.append(abs(e["mean"] - r["measured"]) / r["measured"] * 100.0)
        covered += abs(e["mean"] - r["measured"]) <= Z95 * e["std"]
    flops = statistics.mean(r["flops_ape"] for r in held) if all("flops_ape" in r for r in held) else None
    return statistics.mean(apes), flops, covered, len(held)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", required=True, help="a device profile (SQLite) with calibration passes")
    ap.add_argument("--evaluation", action="append", required=True,
                    help="results.json of thor-sdk evaluate --models zoo:heldout run beside that profile")
    ap.add_argument("--without", default="", help="comma-separated calibration nets: also fit without them")
    ap.add_argument("--pool", action="store_true",
                    help="score on each net's median over every --evaluation (bench_rescore.pool_results), not on each")
    a = ap.parse_args(argv)

    from thor_sdk.fitting.pipeline import CALIBRATION_PREFIX, build
    from thor_sdk.layers import layers_of
    from thor_sdk.runtime import load_estimator
    from thor_sdk.store import Campaign

    with Campaign.open(a.campaign) as c:
        meta, samples, runs = c.meta, c.samples(), c.model_runs()
    evals = []
    for path in a.evaluation:
        with open(path, encoding="utf-8") as f:
            evals.append((path, json.load(f)["rows"]))
    if a.pool:  # one truth: each (net, batch size)'s median over the evaluations (no FLOPs column: each had its own)
        from bench_rescore import pool_results

        evals = [(f"median of {len(evals)}", pool_results([(p, {"rows": rows}) for p, rows in evals])["rows"])]
    # the end passes by number, then "spread" (every pass measured during the probes, one fit of them together)
    passes = sorted({_pass(r) for r in runs if r["model"].startswith(CALIBRATION_PREFIX)},
                    key=lambda p: (isinstance(p, str), str(p) if isinstance(p, str) else p))
    spread = "spread" in passes

    def keep(r, k, drop):
        """A non-calibration run always; a calibration run if its net is not dropped and it is of pass k (None: any;
        "end": any end pass, not the spread ones)."""
        if not r["model"].startswith(CALIBRATION_PREFIX):
            return True
        p = _pass(r)
        return (r["model"][len(CALIBRATION_PREFIX):] not in drop
                and (k is None or p == k or (k == "end" and p != "spread")))

    drop = tuple(n for n in a.without.split(",") if n)
    variants = [("", ())] + ([("without " + ",".join(drop) + ": ", drop)] if drop else [])
    fits = {}
    for label, d in variants:
        for k in (None, *(("end",) if spread else ()), *passes):
            name = "all passes" if k is None else "end passes" if k == "end" else f"pass {k} alone"
            fits[label + name] = [r for r in runs if keep(r, k, d)]
    print(f"campaign {a.campaign}: {len(samples)} samples, calibration passes {passes}")
    for name, rs in fits.items():
        doc = build(samples, device=meta["device"], runtime=meta.get("runtime", "torch"), metric=meta["metric"],
                    model_runs=rs, sources=[os.path.basename(a.campaign)])
        est, wm = load_estimator(doc), doc["whole_model"]
        line = f"{name:17s}  ln bias {wm.get('log_bias', 0.0):+.3f}  rel std {wm['rel_std']:.3f}"
        for path, rows in evals:
            thor, flops, cov, n = _score(est, rows, layers_of)
            line += (f" | held out THOR {thor:5.1f}% FLOPs {flops:5.1f}% ({flops / thor:.2f}x) cover {cov}/{n}"
                     if flops is not None else f" | held out THOR {thor:5.1f}% cover {cov}/{n}")
        print(line, flush=True)
    print("command: python bench/bench_calibration.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
