"""The energy-aware pruning plan (THOR's case study): greedy width cuts ranked by estimated saving per capacity.

``plan_cuts`` is the search, on a layer list and an estimator (stdlib only); ``prune_plan`` is the library
function behind ``thor-sdk prune-plan``: it checks its arguments and outputs before any work, runs the
search, writes the pruned layer list and a PyTorch module beside it, and with ``measure`` times the
original and the pruned network on the device, interleaved.

Capacity is what a cut takes from the network: ``params`` (default), the trainable parameters it removes
(the producer's weights for the cut units and the consumer's weights that read them, batch-norm
scales, ...); ``units``, the fraction of the producer's original units it removes. Each candidate cut
is ranked by its estimated saving (the estimator's whole-model mean before minus after) divided by its
capacity; the best one is applied and every candidate re-estimated, until the estimate is at most
``(1 - target_saving)`` of the original's, or no cut saves anything. Accuracy is out of scope: the plan
is about cost only; retrain or fine-tune the pruned network and check its accuracy yourself.
"""

import math
import os

from thor_sdk.errors import ModelError, UsageError

from .groups import cut, find_groups, params_of, units_of

CAPACITIES = ("params", "units")
#: kinds that join two tensors: where they are, the layer list is not the whole dataflow
BRANCH_KINDS = ("add", "sub", "cat", "mul")
ACCURACY_NOTE = ("accuracy after pruning is out of scope: the plan is about cost only; retrain or fine-tune the "
                 "pruned network and check its accuracy yourself")


def _fraction(name, v, lo_open, hi_open):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        and (v > 0 if lo_open else v >= 0) and (v < 1 if hi_open else v <= 1)
    if not ok:
        raise UsageError(f"{name} must be a finite number in {'(' if lo_open else '['}0, 1{')' if hi_open else ']'}, "
                         f"got {v!r}")
    return float(v)


def _cost(est, layers, batch_size, unknown_ops):
    t = est.estimate(layers, batch_size, unknown=unknown_ops)["total"]
    return t["mean"], t["std"]


def _chains(layers):
    from thor_sdk.harness.whole_model import chain_reshapes

    try:
        chain_reshapes(layers, "pruned layer list")
    except ModelError:
        return False
    return True


def plan_cuts(est, layers, batch_size, target_saving=0.5, step_fraction=0.125, min_fraction=0.25,
              capacity="params", unknown_ops="error"):
    """The greedy search on a layer list: ``{"layers", "estimated_before", "estimated_before_std",
    "estimated_after", "estimated_after_std", "target_met", "steps", "changes", "groups"}``.

    Each producer's width moves in steps of ``step_fraction`` of its original units (at least 1) and never
    below ``min_fraction`` of them (at least 1 unit). A step whose estimated saving is not positive is
    passed over for a larger one of the same layer (the estimate of a layer need not fall at every
    width); ``steps`` lists every applied cut with its estimated saving, ``changes`` each cut layer once
    (original and final width, its steps' savings summed)."""
    target_saving = _fraction("target saving", target_saving, True, True)
    step_fraction = _fraction("step fraction", step_fraction, True, False)
    min_fraction = _fraction("minimum fraction", min_fraction, False, True)
    if capacity not in CAPACITIES:
        raise UsageError(f"capacity must be one of {', '.join(CAPACITIES)}, got {capacity!r}")
    layers = list(layers)
    before, before_std = _cost(est, layers, batch_size, unknown_ops)
    target = (1.0 - target_saving) * before
    groups = find_groups(layers)
    chained = _chains(layers)  # a list that is one network stays one (else only the groups' own rules hold)
    original = {i: units_of(layers[i]) for i in groups}
    step = {i: max(1, int(round(step_fraction * n))) for i, n in original.items()}
    floor = {i: max(1, math.ceil(min_fraction * n)) for i, n in original.items()}
    current, cost, cost_std = layers, before, before_std
    params = params_of(layers)
    steps = []
    while cost > target:
        best = None
        for i in groups:
            width = units_of(current[i])
            for new in range(width - step[i], floor[i] - step[i], -step[i]):
                new = max(new, floor[i])
                try:
                    cand, edits = cut(current, i, new, groups)
                except (UsageError, ModelError):
                    break
                if chained and not _chains(cand):
                    break
                m, s = _cost(est, cand, batch_size, unknown_ops)
                saving = cost - m
                if saving > 0:
                    removed = params - params_of(cand)
                    cap = removed if capacity == "params" else (width - new) / original[i]
                    score = saving / max(cap, 1e-12)
                    if best is None or score > best["score"]:
                        best = {"score": score, "index": i, "from": width, "to": new, "layers": cand, "edits": edits,
                                "mean": m, "std": s, "saving": saving, "params_removed": removed}
                    break
                if new == floor[i]:
                    break
        if best is None:
            break
        p = current[best["index"]]
        steps.append({"step": len(steps) + 1, "layer": p.get("name", str(best["index"])), "index": best["index"],
                      "kind": p["kind"], "feature": best["edits"][0]["feature"], "from": best["from"],
                      "to": best["to"], "estimated_saving": best["saving"], "estimated_after": best["mean"],
                      "params_removed": best["params_removed"], "score": best["score"],
                      "follow": [{k: e[k] for k in ("layer", "index", "kind", "feature", "from", "to")}
                                 for e in best["edits"][1:]]})
        current, cost, cost_std = best["layers"], best["mean"], best["std"]
        params -= best["params_removed"]
    changes = {}
    for s in steps:
        c = changes.get(s["index"])
        if c is None:
            c = changes[s["index"]] = {"layer": s["layer"], "index": s["index"], "kind": s["kind"],
                                       "feature": s["feature"], "from": original[s["index"]], "to": s["to"],
                                       "estimated_saving": 0.0, "params_removed": 0, "follow": {}}
        c["to"] = s["to"]
        c["estimated_saving"] += s["estimated_saving"]
        c["params_removed"] += s["params_removed"]
        for f in s["follow"]:
            key = (f["index"], f["feature"])
            c["follow"].setdefault(key, dict(f))["to"] = f["to"]
    out_changes = []
    for i in sorted(changes):
        c = changes[i]
        c["follow"] = list(c["follow"].values())
        out_changes.append(c)
    return {"layers": current, "estimated_before": before, "estimated_before_std": before_std,
            "estimated_after": cost, "estimated_after_std": cost_std, "target": target,
            "target_met": cost <= target, "steps": steps, "changes": out_changes,
            "params_before": params_of(layers), "params_after": params,
            "groups": [{"layer": layers[i].get("name", str(i)), "index": i, "kind": layers[i]["kind"],
                        "units": original[i], "min_units": floor[i], "step_units": step[i]} for i in sorted(groups)]}


def _source(ml, label):
    """A ``ModelSource`` that ``measure`` rebuilds layer by layer from ``ml``'s layer list."""
    from thor_sdk.harness.whole_model import ModelSource, chain_reshapes
    from thor_sdk.layers.kinds import get_kind

    first = ml.layers[0]
    kind = get_kind(first["kind"])
    return ModelSource(label, "layers", ml, tuple(int(round(s)) for s in kind.in_shape(first["config"])),
                       kind.input_dtype, reshapes=chain_reshapes(ml.layers, label))


def _measure_pair(original, pruned, device, batch_size, repeats, settings, threads, progress):
    """Host time of the original and the pruned network, measured A B A B ... (``repeats`` each), with the
    machine's load read before and after; medians of the runs' medians."""
    import statistics

    from thor_sdk.api import measure
    from thor_sdk.devices.state import load_state

    own = threads or 1
    load_before = load_state(own_threads=own)
    runs = {"before": [], "after": []}
    busy, warnings = False, []
    for r in range(repeats):
        for which, src in (("before", original), ("after", pruned)):
            if progress:
                progress(f"measuring {which} ({r + 1}/{repeats})")
            m = measure(src, device=device, batch_size=batch_size, metric="time", settings=settings, threads=threads)
            runs[which].append({"median_s": m["median"], "mean_s": m["mean"], "std_s": m["std"], "n": m["n"],
                                "cv": m["cv"], "load": m["load"], "noisy": m["noisy"]})
            busy = busy or bool(m["load"].get("busy"))
            warnings += [w for w in m["warnings"] if w not in warnings]
    before = statistics.median(x["median_s"] for x in runs["before"])
    after = statistics.median(x["median_s"] for x in runs["after"])
    return {"device": device if isinstance(device, str) else getattr(device, "name", str(device)), "metric": "time",
            "unit": "s", "threads": own, "order": "A B " * repeats, "repeats": repeats,
            "before_median_s": before, "after_median_s": after, "saving": 1.0 - after / before,
            "runs": runs, "load_before": load_before, "load_after": load_state(own_threads=own), "busy": busy,
            "how": "both networks rebuilt layer by layer from their layer lists (as `thor-sdk measure` rebuilds a "
                   "layer-list JSON), so they differ only in the cut widths",
            "warnings": warnings}


def module_path_for(out):
    """The PyTorch module written beside a pruned layer list: ``x.json`` -> ``x.py``."""
    return os.path.splitext(os.fspath(out))[0] + ".py"


def prune_plan(estimator, model, target_saving=0.5, batch_size=32, out=None, input_shape=None, unknown_ops="error",
               step_fraction=0.125, min_fraction=0.25, capacity="params", class_name="PrunedModel", measure=False,
               device="host", threads=None, settings=None, repeats=2, progress=None):
    """Plan width cuts of ``model`` until its estimated cost falls by ``target_saving`` (a fraction in (0, 1)).

    ``estimator``: an estimator JSON path (``thor-sdk fit``) or a loaded one; ``model``: any form
    ``estimate`` takes. With ``out`` (a ``.json`` path, checked before any work together with the ``.py``
    beside it) the pruned layer list is written there (``thor-sdk layers --json``'s format, which
    ``estimate`` and ``measure`` read) and a PyTorch module beside it, class ``class_name`` (``thor-sdk
    measure --model X.py:PrunedModel --input-shape ...`` builds it). With ``measure`` the original and the
    pruned network are timed on ``device`` (one intra-op thread on the host unless ``threads``),
    ``repeats`` times each, interleaved.

    Returns ``{"model", "estimated_before", "estimated_after", "unit", "estimated_saving", "target_met",
    "changes", "steps", ..., "measured"}``; see ``plan_cuts``. Accuracy after pruning is out of scope."""
    import numbers

    from thor_sdk.api import _check_batch_sizes
    from thor_sdk.layers import ModelLayers, layers_of
    from thor_sdk.runtime import load_estimator

    _fraction("target saving", target_saving, True, True)
    _fraction("step fraction", step_fraction, True, False)
    _fraction("minimum fraction", min_fraction, False, True)
    if capacity not in CAPACITIES:
        raise UsageError(f"capacity must be one of {', '.join(CAPACITIES)}, got {capacity!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral):
        raise UsageError(f"batch size must be an integer >= 1, got {batch_size!r}")
    (batch_size,) = _check_batch_sizes([batch_size])
    if isinstance(repeats, bool) or not isinstance(repeats, numbers.Integral) or not 1 <= repeats <= 100:
        raise UsageError(f"repeats must be an integer in [1, 100], got {repeats!r}")
    if not isinstance(class_name, str) or not class_name.isidentifier():
        raise UsageError(f"class name must be a Python identifier, got {class_name!r}")
    if measure and isinstance(device, str) and device != "host":
        raise UsageError(f"--measure times the networks on the host only ({device} measures reference networks "
                         "by name, and the pruned network has none): plan here, then measure the written module "
                         "on the device yourself")
    py = None
    if out is not None:
        from thor_sdk.store.files import check_output

        if not os.fspath(out).endswith(".json"):
            raise UsageError(f"the pruned layer list is a .json file (estimate and measure read it by its "
                             f"extension), got {os.fspath(out)!r}")
        check_output(out, "pruned layer list")
        py = module_path_for(out)
        check_output(py, "pruned PyTorch module")
    est = load_estimator(estimator) if not hasattr(estimator, "estimate") else estimator
    ml = layers_of(model, input_shape=input_shape, unknown_ops=unknown_ops)
    label = model if isinstance(model, str) else ml.name
    from thor_sdk.harness.whole_model import chain_reshapes

    try:
        chain_reshapes(ml.layers, str(label))
        chained = True
    except ModelError as e:
        if out is not None or measure:  # the plan is written (and measured) as one buildable network
            raise UsageError(f"{e}; --out and --measure need a layer list that is one network (plan without them "
                             "to see the cuts)") from None
        chained = False
    plan = plan_cuts(est, ml.layers, batch_size, target_saving, step_fraction, min_fraction, capacity, unknown_ops)
    name = os.path.splitext(os.path.basename(os.fspath(out)))[0] if out is not None else f"{ml.name}-pruned"
    pruned = ModelLayers(name, list(ml.input_shape), ml.input_dtype, plan["layers"])
    shape = ",".join(str(int(s)) for s in ml.input_shape)
    result = {
        "model": str(label), "pruned_model": name, "device": est.device.get("name"), "runtime": est.runtime,
        "metric": est.metric, "unit": est.unit, "batch_size": batch_size, "target_saving": target_saving,
        "estimated_before": plan["estimated_before"], "estimated_before_std": plan["estimated_before_std"],
        "estimated_after": plan["estimated_after"], "estimated_after_std": plan["estimated_after_std"],
        "estimated_saving": 1.0 - plan["estimated_after"] / plan["estimated_before"],
        "target_met": plan["target_met"], "capacity": capacity, "step_fraction": step_fraction,
        "min_fraction": min_fraction, "params_before": plan["params_before"], "params_after": plan["params_after"],
        "changes": plan["changes"], "steps": plan["steps"], "groups": plan["groups"],
        "out": None if out is None else os.fspath(out), "module": py, "class": class_name,
        "layers": pruned.to_dict()["layers"], "measured": None, "note": ACCURACY_NOTE, "warnings": [],
    }
    if not chained or any(l["kind"] in BRANCH_KINDS for l in ml.layers):
        result["warnings"].append(
            f"{label} has branches (residual adds, concatenations, products) its layer list shows only as a chain: "
            "no cut crosses one, but a branch that reads a cut layer's output elsewhere is not seen, and the written "
            "module is the list rebuilt as a chain (as `thor-sdk measure` rebuilds a layer list), not the original "
            "topology; check the cuts against the network")
    if not plan["groups"]:
        result["warnings"].append(f"no layer of {label} can be cut (no convolution or linear layer whose units "
                                  "flow only through per-unit layers into the next layer with weights)")
    if not plan["target_met"]:
        result["warnings"].append(
            f"the target saving of {target_saving:.0%} cannot be reached within the limits (each width at least "
            f"{min_fraction:.0%} of its original): the plan reaches {result['estimated_saving']:.1%}")
    if out is not None:
        import json

        from thor_sdk.store.files import write_text

        from .module import module_source

        write_text(py, module_source(pruned, class_name, result), "pruned PyTorch module")
        write_text(out, json.dumps(pruned.to_dict(), indent=1, allow_nan=False) + "\n", "pruned layer list")
        result["measure_with"] = (f"thor-sdk measure --model {py}:{class_name} --input-shape {shape} "
                                  f"--batch-size {batch_size}")
    if measure:
        result["measured"] = _measure_pair(_source(ml, f"{label} (layer list)"), _source(pruned, name), device,
                                           batch_size, int(repeats), settings, threads, progress)
        result["warnings"] += result["measured"]["warnings"]
    return result
