"""The methods compared in an evaluation: what each baseline is given per model, and how each is scored.

A baseline is scored only on models it was not fitted on. Per-model baselines (TDP) estimate from the
model's layers and training FLOPs; PRE is refitted once per held-out model on the whole-model runs of
the other models (and of a user's measurements file), leave one model out.
"""


def row_context(est_result, batch_size):
    """What a baseline may know about one model at one batch size: its layers (kind, config, role), the
    batch size and its training FLOPs per step (from the estimate's FLOPs baseline)."""
    return {"layers": [{"kind": l["kind"], "config": l["config"], "role": l.get("role", "hidden")}
                       for l in est_result["layers"]],
            "batch_size": batch_size, "model": est_result.get("model"),
            "train_flops": est_result["flops_baseline"].get("train_flops")}


def finish_methods(rows, baselines, estimator):
    """Fill ``row["estimates"][name]`` for every baseline in ``baselines`` and return ``{name: note}`` (what
    each method assumed). THOR and FLOPs are filled by the caller."""
    notes = {"THOR": "sum of per-layer GP estimates; std from the GPs and the profile's whole-model calibration",
             "FLOPs": "per layer kind: fitted cost per training FLOP + overhead, on the profile's probes"}
    return notes
