"""Answer ``select(table_doc, power_cap_w)`` from a power table JSON with the Python standard library.

A power table (format ``thor-sdk/power-table``, schema ``thor_sdk/schemas/table.schema.json``, written
by ``thor-sdk table build``) holds, per (batch size, GPU frequency), the measured time per training
sample and the peak power of a few training mini-batches, plus per batch size the proxy-estimated
*samples-to-accuracy ratio* relative to the largest (reference) batch size.

Selection ("Accelerated Training on Low-Power Edge Devices"):

1. for each batch size, the highest frequency whose peak power is ``<= power_cap_w``. Power is
   *assumed* to rise monotonically with frequency at a fixed batch size, so a binary search over the
   sorted frequencies finds it. That assumption is checked on every call: where a batch size's power
   does not rise monotonically (measurement noise, thermal throttling), the answer comes from a linear
   scan instead (still the highest frequency whose own measured power is under the cap) and the batch
   size is listed in ``non_monotone_batch_sizes``;
2. among those (batch, frequency) pairs, the one minimising ``time_per_sample_s x ratio``: time per
   sample of the reference batch's samples-to-accuracy, i.e. time-to-accuracy up to a constant;
3. if ``reference_samples_to_target`` is known, ``est_time_to_accuracy_s`` = that product times it.

No cap can be met -> ``InfeasibleCapError`` naming the lowest peak power in the table.
Only ``thor_sdk.errors`` and the standard library are imported, like the rest of ``thor_sdk.runtime``.
"""

import math
from bisect import bisect_right

from thor_sdk.errors import FormatError, InfeasibleCapError, UsageError

TABLE_FORMAT = "thor-sdk/power-table"
TABLE_VERSION = 1


#: rows a table may hold (batch sizes x frequencies: a Jetson has about 15 frequencies)
MAX_ROWS = 100000


def _num(v):
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond the float range
        return False


def is_monotone(powers):
    """True when ``powers`` (ordered by rising frequency) never decrease."""
    return all(a <= b for a, b in zip(powers, powers[1:]))


def highest_feasible_index(powers, power_cap_w):
    """Index of the highest frequency with ``powers[i] <= power_cap_w``, or -1; and whether it was exact.

    ``powers`` is ordered by rising frequency. Returns ``(index, monotone)``: with monotone powers a
    binary search (``bisect``); otherwise a linear scan for the highest index whose own power is
    under the cap (``monotone`` False says so).
    """
    if is_monotone(powers):
        return bisect_right(powers, power_cap_w) - 1, True
    for i in range(len(powers) - 1, -1, -1):
        if powers[i] <= power_cap_w:
            return i, False
    return -1, False


def group_rows(rows):
    """``{batch_size: [row, ...] sorted by freq_hz}`` from table rows (dicts)."""
    by_batch = {}
    for r in rows:
        by_batch.setdefault(int(r["batch_size"]), []).append(r)
    for lst in by_batch.values():
        lst.sort(key=lambda r: r["freq_hz"])
    return by_batch


def feasible_per_batch(by_batch, power_cap_w):
    """``({batch: (row, monotone)}, [non-monotone batch sizes])``: each batch's highest feasible row."""
    out, non_monotone = {}, []
    for bs in sorted(by_batch):
        lst = by_batch[bs]
        idx, mono = highest_feasible_index([r["peak_power_w"] for r in lst], power_cap_w)
        if not mono:
            non_monotone.append(bs)
        if idx >= 0:
            out[bs] = (lst[idx], mono)
    return out, non_monotone


def check_table(doc):
    """Light structural check (the full JSON Schema check needs ``jsonschema``; this needs nothing)."""
    if not isinstance(doc, dict) or doc.get("format") != TABLE_FORMAT:
        raise FormatError(f"not a power table: format must be {TABLE_FORMAT!r}")
    if doc.get("version") != TABLE_VERSION or isinstance(doc.get("version"), bool):
        raise FormatError(f"power table version {doc.get('version')!r} not supported (expected {TABLE_VERSION})")
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise FormatError("power table has no rows")
    if len(rows) > MAX_ROWS:
        raise FormatError(f"power table has {len(rows)} rows; at most {MAX_ROWS} are read")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise FormatError(f"power table row {i} is not an object")
        for k in ("batch_size", "freq_hz", "time_per_sample_s", "peak_power_w"):
            if not _num(r.get(k)) or r[k] < 0:
                raise FormatError(f"power table row {i}: {k} must be a non-negative number")
        if r["batch_size"] < 1 or r["time_per_sample_s"] <= 0:
            raise FormatError(f"power table row {i}: batch_size and time_per_sample_s must be positive")
        if r["batch_size"] != int(r["batch_size"]):
            raise FormatError(f"power table row {i}: batch_size must be an integer, got {r['batch_size']!r}")
    ratios = doc.get("ratios")
    if not isinstance(ratios, list) or not ratios:
        raise FormatError("power table has no batch-size ratios")
    seen = {}
    for i, r in enumerate(ratios):
        if not isinstance(r, dict) or not _num(r.get("batch_size")) or not _num(r.get("ratio")) or r["ratio"] <= 0:
            raise FormatError(f"power table ratio {i}: needs batch_size and a positive ratio")
        if r["batch_size"] < 1 or r["batch_size"] != int(r["batch_size"]):
            raise FormatError(f"power table ratio {i}: batch_size must be a positive integer, got {r['batch_size']!r}")
        if int(r["batch_size"]) in seen:
            raise FormatError(f"power table ratios {seen[int(r['batch_size'])]} and {i} are both of batch "
                              f"{int(r['batch_size'])}: one ratio per batch size")
        seen[int(r["batch_size"])] = i
    ref = doc.get("reference_samples_to_target")
    if ref is not None and (not _num(ref) or ref <= 0):
        raise FormatError(f"power table: reference_samples_to_target must be a positive number or null, got {ref!r}")


def knob_text(value, knob="gpu_freq_hz"):
    """``640 MHz`` for a GPU frequency in Hz, ``150 W limit`` for a power-limit knob (GPU traces)."""
    if knob == "power_limit_w":
        return f"{value:g} W limit"
    return f"{value / 1e6:g} MHz"


def select(table_doc, power_cap_w):
    """The (batch size, GPU frequency) pair to train with under ``power_cap_w`` watts.

    Returns a dict: ``batch_size``, ``freq_hz``, ``time_per_sample_s``, ``peak_power_w``, ``ratio``,
    ``score_s`` (time per sample x ratio), ``est_time_to_accuracy_s`` (``None`` unless the table knows
    the reference batch's samples-to-target), ``candidates`` (every batch size's highest feasible pair,
    with its score), ``non_monotone_batch_sizes``, ``simulated`` and ``why`` (one sentence).
    """
    check_table(table_doc)
    if not _num(power_cap_w) or power_cap_w <= 0:
        raise UsageError(f"power cap must be a positive number of watts, got {power_cap_w!r}")
    ratios = {int(r["batch_size"]): float(r["ratio"]) for r in table_doc["ratios"]}
    by_batch = {bs: lst for bs, lst in group_rows(table_doc["rows"]).items() if bs in ratios}
    if not by_batch:
        raise FormatError("power table: no batch size has both profile rows and a ratio")
    feasible, non_monotone = feasible_per_batch(by_batch, power_cap_w)
    if not feasible:
        lowest = min(r["peak_power_w"] for lst in by_batch.values() for r in lst)
        raise InfeasibleCapError(power_cap_w, lowest)
    candidates = []
    for bs, (row, mono) in feasible.items():
        score = row["time_per_sample_s"] * ratios[bs]
        candidates.append({"batch_size": bs, "freq_hz": row["freq_hz"], "time_per_sample_s": row["time_per_sample_s"],
                           "peak_power_w": row["peak_power_w"], "ratio": ratios[bs], "score_s": score,
                           "monotone": mono})
    candidates.sort(key=lambda c: (c["score_s"], -c["batch_size"]))
    best = candidates[0]
    ref_samples = table_doc.get("reference_samples_to_target")
    est = best["score_s"] * ref_samples if _num(ref_samples) else None
    knob = table_doc.get("knob", "gpu_freq_hz")
    why = (f"batch {best['batch_size']} at {knob_text(best['freq_hz'], knob)} is the highest setting under "
           f"{power_cap_w:g} W for that batch (peak {best['peak_power_w']:.3f} W) and has the lowest "
           f"time-per-sample x samples-to-accuracy ratio ({best['time_per_sample_s']:.4g} s x "
           f"{best['ratio']:.3g})")
    if len(candidates) > 1:
        nxt = candidates[1]
        why += (f"; next best batch {nxt['batch_size']} at {knob_text(nxt['freq_hz'], knob)} is "
                f"{nxt['score_s'] / best['score_s']:.3f}x slower")
    if non_monotone:
        why += (f"; power did not rise monotonically with the setting for batch sizes "
                f"{', '.join(map(str, non_monotone))} (scanned linearly there)")
    return {"batch_size": best["batch_size"], "freq_hz": best["freq_hz"],
            "time_per_sample_s": best["time_per_sample_s"], "peak_power_w": best["peak_power_w"],
            "ratio": best["ratio"], "score_s": best["score_s"], "est_time_to_accuracy_s": est,
            "power_cap_w": power_cap_w, "knob": knob, "candidates": candidates, "non_monotone_batch_sizes": non_monotone,
            "simulated": bool(table_doc.get("simulated", False)), "why": why}
