"""Selection core: the (batch size, frequency) pair under a power cap, the paper's baselines, the oracle.

Rows are dicts ``{"batch_size", "freq_hz", "time_per_sample_s", "peak_power_w"}`` (one per profiled
pair); ratios are ``{batch_size: samples-to-accuracy ratio vs the reference batch}``. The selection
itself is ``thor_sdk.runtime.table.select`` (stdlib only, shipped with the runtimes); this module adds
what evaluation needs:

- **baseline 1**: the largest batch size that has any frequency under the cap, at its highest such
  frequency (the "cap-safe" frequency: conventional practice, maximise the batch);
- **baseline 2**: the proxy-best batch (smallest samples-to-accuracy ratio) at baseline 1's frequency
  (if that pair is not under the cap or was not profiled, the highest frequency below it that is);
- **oracle**: every (batch, frequency) pair under the cap, scored with the *true* samples (or epochs)
  to the target: the fastest true time-to-accuracy.

Power is assumed to rise monotonically with frequency at a fixed batch size (binary search); the
runtime checks that and falls back to a linear scan where it does not hold.
"""

import math
from dataclasses import asdict, dataclass

from thor_sdk.errors import UsageError
from thor_sdk.runtime.table import (
    TABLE_FORMAT, TABLE_VERSION, InfeasibleCapError, feasible_per_batch, group_rows, select,
)

__all__ = ["Pair", "make_table", "select", "baseline_largest_batch", "baseline_proxy_best", "oracle",
           "compare", "InfeasibleCapError"]


@dataclass
class Pair:
    """One (batch size, frequency) choice and what it costs per sample."""

    batch_size: int
    freq_hz: float
    time_per_sample_s: float
    peak_power_w: float
    note: str = ""

    def time_to_target_s(self, samples_to_target):
        """Time-to-accuracy given the samples (or epochs: then time per sample is per epoch) needed."""
        return self.time_per_sample_s * samples_to_target

    def to_dict(self):
        return asdict(self)


def _pair(row, note=""):
    return Pair(int(row["batch_size"]), row["freq_hz"], row["time_per_sample_s"], row["peak_power_w"], note)


def make_table(rows, ratios, reference_batch_size=None, reference_samples_to_target=None, knob="gpu_freq_hz",
               simulated=False, **meta):
    """A power-table document (format ``thor-sdk/power-table`` v1) from rows and ``{batch: ratio}``."""
    if reference_batch_size is None:
        reference_batch_size = max(ratios)
    doc = {"format": TABLE_FORMAT, "version": TABLE_VERSION, "simulated": bool(simulated), "knob": knob,
           "reference_batch_size": int(reference_batch_size),
           "reference_samples_to_target": reference_samples_to_target,
           "rows": [{"batch_size": int(r["batch_size"]), "freq_hz": r["freq_hz"],
                     "time_per_sample_s": r["time_per_sample_s"], "peak_power_w": r["peak_power_w"]}
                    for r in rows],
           "ratios": [{"batch_size": int(b), "ratio": float(v)} for b, v in sorted(ratios.items())]}
    doc.update(meta)
    return doc


def _check_cap(power_cap_w):
    if not isinstance(power_cap_w, (int, float)) or not power_cap_w > 0:
        raise UsageError(f"power cap must be a positive number of watts, got {power_cap_w!r}")


def _lowest(by_batch):
    return min(r["peak_power_w"] for lst in by_batch.values() for r in lst)


def baseline_largest_batch(rows, power_cap_w, batch_sizes=None):
    """Baseline 1: the largest batch with a frequency under the cap, at its highest such frequency."""
    _check_cap(power_cap_w)
    by_batch = group_rows(rows)
    if batch_sizes is not None:
        by_batch = {b: v for b, v in by_batch.items() if b in set(batch_sizes)}
    feasible, _ = feasible_per_batch(by_batch, power_cap_w)
    if not feasible:
        raise InfeasibleCapError(power_cap_w, _lowest(by_batch))
    bs = max(feasible)
    note = "" if bs == max(by_batch) else f"larger batches have no frequency under {power_cap_w:g} W"
    return _pair(feasible[bs][0], note)


def baseline_proxy_best(rows, ratios, power_cap_w):
    """Baseline 2: the batch with the smallest ratio, at baseline 1's (cap-safe) frequency."""
    b1 = baseline_largest_batch(rows, power_cap_w, batch_sizes=ratios)
    by_batch = group_rows(rows)
    skipped = []
    for bs in sorted((b for b in ratios if b in by_batch), key=lambda b: (ratios[b], -b)):
        lst = [r for r in by_batch[bs] if r["freq_hz"] <= b1.freq_hz and r["peak_power_w"] <= power_cap_w]
        if not lst:
            skipped.append(bs)
            continue
        row = lst[-1]
        notes = []
        if skipped:
            notes.append(f"the proxy-best batch{'es' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} "
                         f"{'have' if len(skipped) > 1 else 'has'} no profiled setting at or below baseline 1's "
                         "(an economical profile skips a smaller batch's lower settings); the next best ratio is used")
        if row["freq_hz"] != b1.freq_hz:
            notes.append(f"batch {bs} was not profiled (or is over the cap) at baseline 1's setting; highest below it")
        return _pair(row, "; ".join(notes))
    raise InfeasibleCapError(power_cap_w, _lowest(by_batch), "the proxy-best batch sizes")


def oracle(rows, samples_to_target, power_cap_w):
    """The pair with the fastest *true* time-to-accuracy under the cap.

    ``samples_to_target``: ``{batch_size: samples (or epochs) the batch truly needs}``; batch sizes
    missing or infinite (never reached the target) are not candidates.
    """
    _check_cap(power_cap_w)
    best, best_t = None, math.inf
    lowest = math.inf
    for r in rows:
        bs = int(r["batch_size"])
        lowest = min(lowest, r["peak_power_w"])
        n = samples_to_target.get(bs)
        if n is None or not math.isfinite(n) or r["peak_power_w"] > power_cap_w:
            continue
        t = r["time_per_sample_s"] * n
        if t < best_t or (t == best_t and best is not None and bs > best["batch_size"]):
            best, best_t = r, t
    if best is None:
        raise InfeasibleCapError(power_cap_w, lowest)
    return _pair(best)


def compare(table_doc, power_cap_w, true_samples_to_target=None):
    """Selection, baselines 1 and 2, and (with true samples-to-target) the oracle, side by side.

    Each entry has the pair and ``est_time_to_accuracy_s`` (table ratios); with
    ``true_samples_to_target`` also ``true_time_to_accuracy_s`` and ``slowdown_vs_oracle``.
    """
    sel = select(table_doc, power_cap_w)
    ratios = {int(r["batch_size"]): float(r["ratio"]) for r in table_doc["ratios"]}
    rows = table_doc["rows"]
    ref = table_doc.get("reference_samples_to_target")
    entries = {"selected": _pair(sel), "baseline1": baseline_largest_batch(rows, power_cap_w, batch_sizes=ratios),
               "baseline2": baseline_proxy_best(rows, ratios, power_cap_w)}
    if true_samples_to_target is not None:
        entries["oracle"] = oracle(rows, true_samples_to_target, power_cap_w)
    out = {"power_cap_w": power_cap_w, "why": sel["why"], "non_monotone_batch_sizes": sel["non_monotone_batch_sizes"]}
    for name, p in entries.items():
        d = p.to_dict()
        est_n = ratios.get(p.batch_size)
        d["est_time_to_accuracy_s"] = p.time_per_sample_s * est_n * ref if (est_n and ref) else None
        if true_samples_to_target is not None:
            d["true_time_to_accuracy_s"] = p.time_to_target_s(true_samples_to_target.get(p.batch_size, math.inf))
        out[name] = d
    if true_samples_to_target is not None:
        o = out["oracle"]["true_time_to_accuracy_s"]
        for name in ("selected", "baseline1", "baseline2", "oracle"):
            out[name]["slowdown_vs_oracle"] = out[name]["true_time_to_accuracy_s"] / o
    return out
