"""How many launches a forward-only recurrent layer counts: the law's held-out error per share, per kind and campaign.

    python bench/bench_launch_share.py --campaign host-torch.db [--campaign ...] [--shares 1,0.5,0.25,0.15] \
        [--report F]
    python bench/bench_launch_share.py --weighted --campaign ...   # forward-only convs and dense layers, per entry

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
#: a kind that is not recurrent is scored with this many samples or more (a profile gives most kinds 6)
MIN_SINGLE_SAMPLES = 6


def _law_error(T, y, split, call):
    """The law's 10-fold centred RMS ln error: the root of ``KindGP._loo_error``, every sample weighed alike."""
    import numpy as np

    from thor_sdk.fitting.gp import KindGP

    return float(np.sqrt(KindGP._loo_error(T, y, np.ones(len(y)), split, call)))


def _fit_samples(path):
    """The samples ``fit`` fits on of the campaign at ``path`` (``fitting.pipeline.fit_samples``)."""
    from thor_sdk.fitting.pipeline import fit_samples
    from thor_sdk.store import Campaign

    with Campaign.open(path) as c:
        metric = c.meta["metric"]
        samples, runs = c.samples(), c.model_runs()
    return fit_samples(samples, runs, metric, [os.path.basename(path)])["samples"]


def campaign_shares(path, shares):
    """``{"campaign", "kinds": {kind: {"n", "forward_only", "error": {share: RMS ln error}}}}`` of one campaign."""
    import numpy as np

    from thor_sdk.fitting.gp import _term_rows
    from thor_sdk.fitting.pipeline import sample_terms
    from thor_sdk.layers.kinds import get_kind

    good = _fit_samples(path)
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


def single_op_shares(path, shares):
    """``{"campaign", "kinds": {kind: {"n", "forward_only", "error": {share: RMS ln error}}}}`` for the kinds that are
    not recurrent (one launch a step): their forward-only samples' launches set to ``share`` (a training one's 1),
    the law scored as for the recurrent kinds (without ``per_call``). Kinds with MIN_SINGLE_SAMPLES or more samples, of
    which some but not all run forward only."""
    import numpy as np

    from thor_sdk.fitting.gp import _term_rows
    from thor_sdk.fitting.pipeline import sample_terms
    from thor_sdk.layers.kinds import get_kind

    good = _fit_samples(path)
    out = {}
    for kind in sorted({s["kind"] for s in good} - set(KINDS) - {"output"}):
        rows = [s for s in good if s["kind"] == kind and s["value"] > 0]
        fwd = np.array([not get_kind(kind).backward_runs(s["role"], s["config"]) for s in rows], dtype=bool)
        if len(rows) < MIN_SINGLE_SAMPLES or not fwd.any() or fwd.all():
            continue
        T = _term_rows(sample_terms(rows))
        y = np.array([s["value"] for s in rows], dtype=float)
        err = {}
        for share in shares:
            Ts = T.copy()
            Ts[:, 2] = np.where(fwd, share, Ts[:, 2])
            err[share] = min(_law_error(Ts, y, split, False) for split in (False, True))
        out[kind] = {"n": len(rows), "forward_only": int(fwd.sum()), "error": err}
    return {"campaign": path, "kinds": out}


def weighted_shares(path, shares, kinds=None):
    """``{"campaign", "entries": {entry: {"n", "forward_only", "error": {share: [all, forward-only, bias]}}}}``: each
    estimator entry (``layers.kinds.model_key``: ``conv2d``, ``conv2d:gemm``, ``conv2d:grouped``, ...) of ``kinds``
    (default: those ``runtime.terms.FORWARD_ONLY_SHARED`` counts at a share), fitted apart as ``fit`` fits it, its
    forward-only samples' one launch set to ``share`` (a training one's 1; ``--shares 1`` scores the terms as the
    installed tree computes them, e.g. two trees' bytes formulas side by side). The law's 10-fold held-out ln errors
    (folds drawn at random, seed 0; each form with and without per-step bytes tried, the lower kept), centred on their median: the RMS over
    all samples, over the forward-only ones, and the forward-only ones' median (above 0: they cost more than the
    law). Entries with MIN_SAMPLES or more samples, at least 2 of them forward only."""
    import numpy as np

    from thor_sdk.fitting.gp import _term_rows, fit_mean_function, mean_law
    from thor_sdk.fitting.pipeline import sample_terms
    from thor_sdk.layers.kinds import get_kind, model_key
    from thor_sdk.runtime.terms import FORWARD_ONLY_SHARED

    kinds = FORWARD_ONLY_SHARED if kinds is None else kinds
    groups = {}
    for s in _fit_samples(path):
        if s["kind"] in kinds and s["value"] > 0:
            groups.setdefault(model_key(s["kind"], s["config"], s["batch_size"]), []).append(s)
    out = {}
    for key, rows in sorted(groups.items()):
        fwd = np.array([not get_kind(s["kind"]).backward_runs(s["role"], s["config"]) for s in rows], dtype=bool)
        if len(rows) < MIN_SAMPLES or fwd.sum() < 2:
            continue
        T = _term_rows(sample_terms(rows))
        y = np.array([s["value"] for s in rows], dtype=float)
        folds = np.array_split(np.random.RandomState(0).permutation(len(y)), 10)
        err = {}
        for share in shares:
            Ts = T.copy()
            Ts[:, 2] = np.where(fwd, share, 1.0)
            best = None
            for split in (False, True):
                e = np.zeros(len(y))
                for f in folds:
                    w = np.ones(len(y))
                    w[f] = 0.0
                    e[f] = np.log(y[f]) - np.log(mean_law(Ts[f], fit_mean_function(Ts, y, weights=w, split=split),
                                                          split))
                e = e - np.median(e)
                got = [float(np.sqrt(np.mean(e ** 2))), float(np.sqrt(np.mean(e[fwd] ** 2))), float(np.median(e[fwd]))]
                if best is None or got[0] < best[0]:
                    best = got
            err[share] = best
        out[key] = {"n": len(rows), "forward_only": int(fwd.sum()), "error": err}
    return {"campaign": path, "entries": out}


def weighted_summary(results, shares):
    """Per entry, the median over campaigns of each share's errors: all samples / forward-only (their median)."""
    import statistics

    lines = ["| entry | campaigns | forward-only / samples | " + " | ".join(f"share {s:g}" for s in shares) + " |",
             "|---|---|---|" + "---|" * len(shares)]
    for key in sorted({k for r in results for k in r["entries"]}):
        vs = [r["entries"][key] for r in results if key in r["entries"]]
        med = [[statistics.median(v["error"][sh][i] for v in vs) for i in range(3)] for sh in shares]
        lowest = min(m[1] for m in med)
        lines.append(f"| {key} | {len(vs)} | {sum(v['forward_only'] for v in vs)} / {sum(v['n'] for v in vs)} | "
                     + " | ".join((f"{m[0]:.3f} / **{m[1]:.3f}** ({m[2]:+.2f})" if m[1] == lowest
                                   else f"{m[0]:.3f} / {m[1]:.3f} ({m[2]:+.2f})") for m in med) + " |")
    return lines


def single_summary(results, shares):
    """Lines summing the single-op scan: per share, the median over kind x campaign cells of the error and of its
    ratio to share 1's, and in how many cells it is the lowest; then each kind's median error per share."""
    import statistics

    cells = [v for r in results for v in r["kinds"].values()]
    if not cells:
        return ["(no kind with forward-only samples)"]
    lines = ["| share | median error | median ratio to share 1 | lower than share 1 | lowest |", "|---|---|---|---|---|"]
    for sh in shares:
        ratios = [v["error"][sh] / v["error"][1.0] for v in cells if 1.0 in v["error"] and v["error"][1.0] > 0]
        lowest = sum(1 for v in cells if min(v["error"], key=v["error"].get) == sh)
        lines.append(f"| {sh:g} | {statistics.median(v['error'][sh] for v in cells):.3f} | "
                     f"{statistics.median(ratios) if ratios else float('nan'):.3f} | "
                     f"{sum(1 for x in ratios if x < 1)} of {len(ratios)} | {lowest} of {len(cells)} |")
    lines += ["", "| kind | cells | forward-only / samples | " + " | ".join(f"share {s:g}" for s in shares) + " |",
              "|---|---|---|" + "---|" * len(shares)]
    for kind in sorted({k for r in results for k in r["kinds"]}):
        vs = [r["kinds"][kind] for r in results if kind in r["kinds"]]
        med = [statistics.median(v["error"][sh] for v in vs) for sh in shares]
        lines.append(f"| {kind} | {len(vs)} | {sum(v['forward_only'] for v in vs)} / {sum(v['n'] for v in vs)} | "
                     + " | ".join(f"**{m:.3f}**" if m == min(med) else f"{m:.3f}" for m in med) + " |")
    return lines


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
    ap.add_argument("--weighted", action="store_true",
                    help="score the convolution and dense kinds a forward-only layer of which counts a share of one "
                         "launch (runtime.terms.FORWARD_ONLY_SHARED), each estimator entry apart")
    ap.add_argument("--kinds", default=None,
                    help="with --weighted: comma-separated kinds to score instead (e.g. mha,transformer_block,sdpa "
                         "with --shares 1: their terms as this tree computes them)")
    ap.add_argument("--single-ops", action="store_true",
                    help="score the kinds that are not recurrent instead: a forward-only sample's one launch at each "
                         "share of a training one's")
    args = ap.parse_args(argv)
    try:
        shares = [float(s) for s in args.shares.split(",") if s]
    except ValueError:
        raise SystemExit("--shares: comma-separated numbers") from None
    if not shares or any(not 0.0 < s <= 1.0 for s in shares):
        raise SystemExit("--shares: numbers in (0, 1]")
    if args.kinds and not args.weighted:
        raise SystemExit("--kinds scores entries as --weighted does: give --weighted too")
    for path in args.campaign:
        if not os.path.isfile(path):
            raise SystemExit(f"no campaign file {path}")
    command = "python bench/bench_launch_share.py " + " ".join(argv if argv is not None else sys.argv[1:])
    from bench_kind_cv import publish  # one report writer for the per-kind benches

    if args.weighted:
        kinds = tuple(k for k in args.kinds.split(",") if k) if args.kinds else None
        results = [weighted_shares(p, shares, kinds) for p in args.campaign]
        title = (f"# Forward-only layers of {', '.join(kinds)}: the law's error with this tree's terms" if kinds
                 else "# Forward-only convolution and dense layers: one launch counted at a share")
        text = "\n".join([title, "",
                           f"Command: `{command}`", "",
                           "Per estimator entry, the median over "
                           f"{len(results)} campaign(s) of the mean function's 10-fold RMS ln error (centred) over all "
                           "samples / over the forward-only ones (their median error: above 0, they cost more than "
                           "the law), with the forward-only samples' one launch at each share (1: as a training "
                           "layer's); the lowest forward-only error in bold.", ""] + weighted_summary(results, shares))
        publish(text + "\n", {"command": command, "weighted": True, "campaigns": results}, args.report)
        return
    if args.single_ops:
        if 1.0 not in shares:
            shares = [1.0] + shares  # the ratios are to it
        results = [single_op_shares(p, shares) for p in args.campaign]
        text = "\n".join(["# Forward-only single operations: one launch counted at a share of a training one's", "",
                           f"Command: `{command}`", "",
                           "The mean function's 10-fold RMS ln error (centred) of each kind that is not recurrent, "
                           "with its forward-only samples' launch at each share (1: as a training layer's), over "
                           f"{len(results)} campaign(s); lowest in bold.", ""] + single_summary(results, shares)) + "\n"
        publish(text, {"command": command, "single_ops": True, "campaigns": results}, args.report)
        return
    results = [campaign_shares(p, shares) for p in args.campaign]
    publish(report(results, shares, command), {"command": command, "campaigns": results}, args.report)


if __name__ == "__main__":
    main()
