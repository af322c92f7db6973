"""The methods compared in an evaluation: what each baseline is given per model, and how each is scored.

A baseline is scored only on models it was not fitted on:

- **FLOPs** (the estimator's own, fitted on the profile's probes) and THOR are filled by the caller;
- **TDP** (``thor_sdk.baselines.tdp``): its effective FLOP/s is fitted, per held-out model, on the measured
  steps of the *other* evaluated models (leave one model out); for energy it also needs a TDP
  (``tdp_w`` or a device in its table) and says that TDP x time is an assumption;
- **PRE** (``thor_sdk.baselines.pre``), each variant: refitted per held-out model on the other models'
  measured steps and on ``pre_runs`` (a user's runs CSV or campaign), never on the model itself;
- **STEP** (``thor_sdk.baselines.step``) projects a *run* from its own first epochs, so it does not
  estimate a model it never ran: it is scored separately, on per-epoch logs (``step_logs``): its
  projection from the epochs up to its stable window against the log's measured total.
"""

from thor_sdk.errors import ThorError

NOTES = {"THOR": "sum of per-layer GP estimates; std from the GPs and the profile's whole-model calibration",
         "FLOPs": "per layer kind: fitted cost per training FLOP + overhead, on the profile's probes"}
MIN_PRE_MODELS = 3  # PRE's inner cross-validation groups by model


def row_context(est_result, batch_size, features=None):
    """What a baseline may know about one model at one batch size: its layers (kind, config, role), the
    batch size, its training FLOPs per step and PRE's feature row (``features_of``)."""
    return {"layers": [{"kind": l["kind"], "config": l["config"], "role": l.get("role", "hidden")}
                       for l in est_result["layers"]],
            "batch_size": batch_size, "model": est_result.get("model"),
            "train_flops": est_result["flops_baseline"].get("train_flops"), "features": features}


def _ape(est, true):
    return abs(est - true) / abs(true) * 100.0 if est is not None and true else None


def _put(row, name, value, **extra):
    row["estimates"][name] = {"value": value, "ape": _ape(value, row["measured"]), **extra}


def finish_methods(rows, metric, tdp=None, pre_variants=(), pre_runs=()):
    """Fill ``row["estimates"][name]`` for TDP and each PRE variant (leave one model out) and return
    ``({name: what it assumed}, [method names in order])``. ``tdp``: None (no TDP) or keyword arguments
    of ``TdpBaseline`` (``tdp_w``, ``device``, ``utilisation``, ``flops_per_s``)."""
    from thor_sdk.baselines.pre import COST_COLUMNS

    col = COST_COLUMNS[metric]
    notes, names = dict(NOTES), ["THOR", "FLOPs"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    if tdp is not None:
        names.append("TDP")
        notes["TDP"] = _tdp(rows, models, metric, tdp)
    own = [dict(r["_context"]["features"], model=r["model"], **{col: r["measured"]}) for r in rows
           if r["_context"].get("features")]
    for v in pre_variants:
        name = f"PRE {v}"
        names.append(name)
        notes[name] = _pre(rows, models, metric, v, own, list(pre_runs))
    return notes, names


def _tdp(rows, models, metric, kw):
    from thor_sdk.baselines.tdp import TdpBaseline

    note = None
    for m in models:
        runs = [{"model": r["_context"]["layers"], "batch_size": r["batch_size"], "time_s": r["measured"]}
                for r in rows if r["model"] != m]
        try:
            b = TdpBaseline(metric=metric, **kw)
            if metric == "time" and kw.get("flops_per_s") is None:
                b.fit(runs)  # the throughput from the other models' measured steps
        except ThorError as e:
            note = f"not estimated: {e}"
            continue
        if not b.is_fitted():  # energy: measured joules cannot fit a FLOP/s; it needs a throughput given
            note = ("not estimated: for energy the TDP baseline needs a FLOPs throughput (flops_per_s) besides the "
                    "TDP: measured energy cannot fit one")
            continue
        note = b.assumptions + (" (fitted per model on the other evaluated models: leave one model out)"
                                if metric == "time" and kw.get("flops_per_s") is None else "")
        for r in rows:
            if r["model"] == m:
                got = b.estimate(r["_context"]["layers"], r["batch_size"])
                _put(r, "TDP", got["value"], measured=False)
    return note


def _pre(rows, models, metric, variant, own, extra):
    from thor_sdk.baselines.pre import PreBaseline

    note = None
    for m in models:
        train = [x for x in own + extra if x.get("model") != m]
        if len({x.get("model") for x in train}) < MIN_PRE_MODELS:
            note = (f"not estimated: needs runs of at least {MIN_PRE_MODELS} other models (evaluate more models or "
                    "give --pre-runs)")
            continue
        try:
            b = PreBaseline(variant, metric).fit(train)
        except ThorError as e:
            note = f"not estimated: {e}"
            continue
        note = (b.assumptions + f"; refitted per model without it on {len(train)} runs of "
                f"{len({x.get('model') for x in train})} other models (leave one model out)")
        mine = [r for r in rows if r["model"] == m and r["_context"].get("features")]
        for r, v in zip(mine, b.predict_rows([r["_context"]["features"] for r in mine])):
            _put(r, f"PRE {variant}", v, measured=False)
    return note


def score_step_logs(paths, metric=None):
    """STEP on per-epoch logs: for each, the projection of the whole run from the epochs up to its stable
    window, against the log's measured total (the sum of all its epochs)."""
    from thor_sdk.baselines.step import StepBaseline

    out = []
    for p in paths:
        b = StepBaseline(metric=metric).fit(p)
        got = b.estimate()
        total = sum(b.costs_)
        out.append({"log": str(p), "metric": b.metric_, "unit": got["unit"], "epochs": len(b.costs_),
                    "epochs_used": b.epochs_used_, "stabilised": b.stabilised_, "stable_epoch": b.stable_epoch_,
                    "projected": got["value"], "measured_total": total, "ape": _ape(got["value"], total),
                    "reason": got.get("reason"), "assumptions": b.assumptions})
    return out
