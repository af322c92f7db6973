"""Explain an over-budget result: the three costliest layers, and the largest batch and the epochs that would fit.

"Fits" means what passing means: the upper bound at the check's confidence is within the budget. The
batch search goes down from the batch size below the checked one, keeping the samples per epoch and
the epochs: every smaller batch size is tried while there are at most ``EXHAUSTIVE_BELOW`` of them (the
answer is then the largest that fits); above that it steps down by 10% at a time and bisects between
the first size that fits and the last that did not (which assumes the cost does not rise as the batch
shrinks within that last step: said so in the answer). The epochs that fit come from the run's cost
being ``epochs`` times an epoch's (mean and std alike), and are confirmed with ``training_run``. Every
suggestion is a ``training_run`` answer that was compared with the budget.
"""

import math
from dataclasses import dataclass, field

from thor_sdk.errors import UsageError

from .report import describe, fmt_confidence, fmt_value

TOP_LAYERS = 3
EXHAUSTIVE_BELOW = 256


class MemoEstimator:
    """An estimator whose step estimates of one layer list are kept by batch size, for one check's searches
    (an epoch with a last partial batch needs two batch sizes; the search revisits them)."""

    def __init__(self, estimator, layers):
        self._estimator = estimator
        self._layers = layers
        self._steps = {}

    def estimate(self, layers, batch_size, unknown="error"):
        if layers is not self._layers:
            return self._estimator.estimate(layers, batch_size, unknown=unknown)
        key = (batch_size, unknown)
        if key not in self._steps:
            self._steps[key] = self._estimator.estimate(layers, batch_size, unknown=unknown)
        return self._steps[key]


@dataclass
class Explanation:
    """Why a result is over budget and what would fit (``None`` fields: nothing of that kind fits, or it
    does not apply). Costs are in the budget's unit; layer costs are per step at the checked batch size."""

    costliest_layers: list  # [{"index", "name", "kind", "mean", "share"}], costliest first
    step_mean: float
    largest_batch_size: object = None  # {"batch_size", "steps_per_epoch", "steps", "mean", "upper"} or None
    batch_search: str = "exhaustive"  # or "bisection" (see the module docstring)
    batch_sizes_tried: int = 0
    epochs: object = None  # {"epochs", "mean", "upper"} or None
    epochs_apply: bool = True  # False for a budget per step or per epoch (epochs do not change it)
    lines: list = field(default_factory=list)

    @property
    def nothing_fits(self):
        return self.largest_batch_size is None and self.epochs is None

    def to_dict(self):
        return {"costliest_layers": self.costliest_layers, "step_mean": self.step_mean,
                "largest_batch_size": self.largest_batch_size, "batch_search": self.batch_search,
                "batch_sizes_tried": self.batch_sizes_tried, "epochs": self.epochs,
                "epochs_apply": self.epochs_apply, "nothing_fits": self.nothing_fits, "lines": list(self.lines)}


def _candidates(batch_size):
    """Batch sizes below ``batch_size``, largest first; ``(sizes, exhaustive)``."""
    if batch_size - 1 <= EXHAUSTIVE_BELOW:
        return range(batch_size - 1, 0, -1), True
    sizes, b = [], batch_size - 1
    while b >= 1:
        sizes.append(b)
        b = min(b - 1, int(b * 0.9))
    return sizes, False


def costliest_layers(step, n=TOP_LAYERS):
    """The ``n`` layers of a step estimate with the largest mean, costliest first, with their share of the step."""
    rows = step["layers"]
    total = step["total"]["mean"]
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["mean"], i))[:n]
    return [{"index": i, "name": rows[i].get("name") if rows[i].get("name") is not None else str(i),
             "kind": rows[i]["kind"], "mean": rows[i]["mean"], "share": rows[i]["mean"] / total if total > 0 else 0.0}
            for i in order]


def explain(estimator, layers, run, budget, unknown="error"):
    """The ``Explanation`` of a ``training_run`` answer ``run`` that is over ``budget`` (a ``Budget``)."""
    from thor_sdk.runtime.training import training_run

    unit, per, limit, conf = run["unit"], budget.per, budget.limit, run["confidence"]
    batch, samples, epochs = run["batch_size"], run["samples"], run["epochs"]

    def at(b, e):
        return training_run(estimator, layers, b, samples, e, conf, unknown)

    def fits(r):
        return r[per]["upper"] <= limit

    def bound(r):
        return f"{fmt_confidence(conf)} upper bound {fmt_value(r[per]['upper'], unit)}"

    step = estimator.estimate(layers, batch, unknown=unknown)
    top = costliest_layers(step)
    names = ", ".join(f"{t['name']} ({t['kind']}) {fmt_value(t['mean'], unit)} {t['share']:.0%}" for t in top)
    ex = Explanation(top, step["total"]["mean"], epochs_apply=per == "run")
    ex.lines.append(f"costliest layers per step at batch {batch} (of {fmt_value(step['total']['mean'], unit)}): "
                    f"{names}")

    # the largest batch size below the checked one that fits
    sizes, exhaustive = _candidates(batch)
    found = last_over = smallest = None
    for b in sizes:
        try:
            r = at(b, epochs)
        except UsageError:  # e.g. a cost too large to represent at this size: it does not fit
            last_over = b
            continue
        ex.batch_sizes_tried += 1
        smallest = (b, r)
        if fits(r):
            found = (b, r)
            break
        last_over = b
    if found is not None and not exhaustive and last_over is not None:
        ex.batch_search = "bisection"
        lo, hi = found[0], last_over
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                r = at(mid, epochs)
            except UsageError:
                hi = mid
                continue
            ex.batch_sizes_tried += 1
            if fits(r):
                lo, found = mid, (mid, r)
            else:
                hi = mid
    if found is not None:
        b, r = found
        ex.largest_batch_size = {"batch_size": b, "steps_per_epoch": r["steps_per_epoch"], "steps": r["steps"],
                                 "mean": r[per]["mean"], "upper": r[per]["upper"]}
        how = "" if exhaustive else " (searched down in 10% steps, then bisected: the largest found)"
        ex.lines.append(f"largest batch size that fits: {b} ({describe(r, per)}, {bound(r)} <= "
                        f"{fmt_value(limit, unit)}){how}")
    elif batch == 1:
        ex.lines.append("batch size 1 cannot be made smaller")
    else:
        tried = "" if exhaustive else f" (of {ex.batch_sizes_tried} tried, down in 10% steps)"
        at_smallest = "" if smallest is None else f": at batch {smallest[0]}, {bound(smallest[1])}"
        ex.lines.append(f"no batch size below {batch} fits{tried}{at_smallest}")

    # the epochs that fit at the checked batch size (a budget per run only)
    if per != "run":
        ex.lines.append(f"the number of epochs does not change the cost per {per}")
    else:
        epoch_upper = run["epoch"]["upper"]
        ratio = limit / epoch_upper if epoch_upper > 0 else math.inf  # the run is `epochs` times an epoch
        e = epochs - 1 if ratio >= epochs else min(epochs - 1, int(ratio) + 1)  # + 1: rounding; confirmed below
        r = None
        while e >= 1:
            r = at(batch, e)
            if fits(r):
                break
            e -= 1
        if e >= 1:
            ex.epochs = {"epochs": e, "mean": r["run"]["mean"], "upper": r["run"]["upper"]}
            ex.lines.append(f"epochs that fit at batch {batch}: {e} ({describe(r, 'run')}, {bound(r)} <= "
                            f"{fmt_value(limit, unit)})")
        else:
            one = r if r is not None and r["epochs"] == 1 else at(batch, 1)
            ex.lines.append(f"not even 1 epoch fits at batch {batch} ({describe(one, 'run')}, {bound(one)})")
    if ex.nothing_fits:
        ex.lines.append("nothing fits: raise the budget, train on fewer samples, or make the costliest layers cheaper")
    return ex
