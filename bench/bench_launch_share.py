"""How many launches a forward-only recurrent layer counts: the law's held-out error per share, per kind and campaign.

    python bench/bench_launch_share.py --campaign host-torch.db [--campaign ...] [--shares 1,0.5,0.25,0.15] \
        [--report F]

A recurrent layer that never runs its backward (frozen, reading the data) issues its time steps once, without
autograd; a training one issues them forward and backward. ``thor_sdk.runtime.terms`` counts the former's launches
at ``FORWARD_ONLY_LAUNCH_SHARE`` of the latter's (at least 1). This scores that share: for each campaign (the
samples ``fit`` fits on, ``fitting.pipeline.fit_samples``) and each recurrent kind, the launches of its forward-only
samples are set to ``max(1, share x steps x layers)`` and the kind's mean function (``fitting.gp.fit_mean_function``,
every form ``KindGP`` may choose: with and without per-step bytes and ``per_call``, the best kept) is scored by its
10-fold ln error (centred, as ``KindGP._loo_error`` scores it). Nothing timed; needs the ``[fit]`` extra.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KINDS = ("gru", "lstm", "gru_cell", "lstm_cell")
MIN_SAMPLES = 8


def _law_error(T, y, split, call):
    """The law's 10-fold centred RMS ln error: the root of ``KindGP._loo_error``, every sample weighed alike."""
    import numpy as np

    from thor_sdk.fitting.gp import KindGP

    return float(np.sqrt(KindGP._loo_error(T, y, np.ones(len(y)), split, call)))


def campaign_shares(path, shares):
    """``{"campaign", "kinds": {kind: {"n", "forward_only", "error": {share: RMS ln error}}}}`` of one campaign."""
    import numpy as np

    from thor_sdk.fitting.gp import _term_rows
    from thor_sdk.fitting.pipeline import fit_samples, sample_terms
    from thor_sdk.layers.kinds import get_kind
    from thor_sdk.store import Campaign

    with Campaign.open(path) as c:
        metric = c.meta["metric"]
        samples, runs = c.samples(), c.model_runs()
    good = fit_samples(samples, runs, metric, [os.path.basename(path)])["samples"]
    out = {}
    for kind in KINDS:
        rows = [s for s in good if s["kind"] == kind and s["value"] > 0]
        if len(rows) < MIN_SAMPLES:
            continue
        T = _term_rows(sample_terms(rows))
        y = np.array([s["value"] for s in rows], dtype=float)
        fwd = np.array([not get_kind(kind).backward_runs(s["role"], s["config"]) for s in rows])
        steps = np.array([s["config"]["seq_len"] * s["config"]["num_layers"] if "seq_len" in s["config"]
                          else s["config"]["steps"] for s in rows], dtype=float)
        err = {}
        for share in shares:
            Ts = T.copy()
            Ts[:, 2] = np.where(fwd, np.maximum(1.0, steps * share), steps)
            err[share] = min(_law_error(Ts, y, split, call) for split in (False, True) for call in (False, True))
        out[kind] = {"n": len(rows), "forward_only": int(fwd.sum()), "error": err}
    return {"campaign": path, "kinds": out}


def report(results, shares, command):
    lines = ["# Forward-only recurrent layers: launches counted at a share of a training one's", "",
             f"Command: `{command}`", "",
             "The mean function's 10-fold RMS ln error (centred) per kind, with the forward-only samples' launches "
             "at each share (1: counted like a training layer's); lowest in bold.", "",
             "| campaign | kind | samples | forward only | " + " | ".join(f"share {s:g}" for s in shares) + " |",
             "|---|---|---|---|" + "---|" * len(shares)]
    for r in results:
        for kind, v in r["kinds"].items():
            best = min(v["error"].values())
            cells = [(f"**{e:.3f}**" if e == best else f"{e:.3f}") for e in v["error"].values()]
            lines.append(f"| {r['campaign']} | {kind} | {v['n']} | {v['forward_only']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign", action="append", required=True, help="a campaign (SQLite); repeatable")
    ap.add_argument("--shares", default="1,0.5,0.25,0.15", help="comma-separated shares in (0, 1]")
    ap.add_argument("--report", default=None, help="also write the Markdown here (and its .json beside it)")
    args = ap.parse_args(argv)
    try:
        shares = [float(s) for s in args.shares.split(",") if s]
    except ValueError:
        raise SystemExit("--shares: comma-separated numbers") from None
    if not shares or any(not 0.0 < s <= 1.0 for s in shares):
        raise SystemExit("--shares: numbers in (0, 1]")
    for path in args.campaign:
        if not os.path.isfile(path):
            raise SystemExit(f"no campaign file {path}")
    results = [campaign_shares(p, shares) for p in args.campaign]
    command = "python bench/bench_launch_share.py " + " ".join(argv if argv is not None else sys.argv[1:])
    from bench_kind_cv import publish  # one report writer for the per-kind benches

    publish(report(results, shares, command), {"command": command, "campaigns": results}, args.report)


if __name__ == "__main__":
    main()
