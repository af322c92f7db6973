"""FLOPs baseline: cost = (fitted cost per FLOP) x training FLOPs (forward + backward + update).

The cost per FLOP is fitted from the same THOR probe samples as the GPs, by least squares through
the origin over the per-layer samples (cost_i ~ k * flops_i, k = sum(c f) / sum(f^2)), the usual
calibration of a FLOPs-proportional model. (A ratio of sums, sum(c) / sum(f), would make the
baseline's total exact by construction whenever the probes are exactly the target's layers.)
It is shown beside every THOR estimate so users see how far a FLOPs guess is off.
"""

from thor_sdk.layers.kinds import get_kind


def layer_train_flops(layer, batch_size):
    return get_kind(layer["kind"]).train_flops(layer["config"], batch_size, layer.get("role", "hidden"))


def fit_unit_per_flop(samples):
    """``samples``: dicts with kind, role, batch_size, config, value (non-flagged). Returns a dict."""
    flops = [layer_train_flops(s, s["batch_size"]) for s in samples]
    # a layer cannot cost less than nothing: a subtraction within noise counts as 0, so the fitted cost
    # per FLOP is never negative (it was -9.7e-12 s on a noisy har campaign)
    num = sum(max(s["value"], 0.0) * f for s, f in zip(samples, flops))
    den = sum(f * f for f in flops)
    if den <= 0 or not samples:
        return {"unit_per_flop": None, "n_samples": len(samples)}
    return {"unit_per_flop": num / den, "n_samples": len(samples),
            "method": "least squares through the origin: sum(cost * flops) / sum(flops^2)"}


def flops_estimate(layers, batch_size, unit_per_flop):
    per_layer = [layer_train_flops(layer, batch_size) for layer in layers]
    total_flops = sum(per_layer)
    if unit_per_flop is None:
        return {"total": None, "flops": total_flops, "layers": [None] * len(layers)}
    return {"total": unit_per_flop * total_flops, "flops": total_flops,
            "layers": [unit_per_flop * f for f in per_layer]}
