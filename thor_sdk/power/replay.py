"""Replay the power-cap selection on real GPU training traces (Zeus NSDI'23 format).

Inputs (the format of ``ml-energy/zeus`` ``examples/research_reproducibility/zeus_nsdi23/trace/``):

- power trace ``dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power``: one
  row per (workload, batch size, GPU power limit), measured once on a real GPU;
- train trace ``dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch``:
  the epoch at which each run (seed) first reached each target metric (``nan``: never reached).

Mapping onto the table: the **power limit is the frequency knob** (it is what the GPU's DVFS obeys);
``time_per_sample_s`` is the time per epoch (the dataset size is unknown but the same for every batch
size, so it cancels in every comparison) and the samples-to-accuracy ratio is the epochs-to-target
ratio. **Peak power** of a (batch, limit) pair: the trace has no peak, only the measured
``average_power``; the power limit itself is what the GPU's power management holds the draw under.
``power_column="bound"`` (default) uses ``max(power_limit, average_power)``: the limit is the bound the
GPU guarantees, and where the measured mean exceeded the limit (lowest limits, where the GPU cannot
throttle further) the measured mean is the better bound. ``"average"`` uses the measured mean only: an
optimistic "peak" (transients above the mean are ignored), shown for comparison.

Honest protocol: the runs of each (workload, batch size) are split by run index parity. In fold A
the selection sees ratios estimated from the odd runs and the oracle and the scoring use the even
runs; fold B swaps them. Candidate batch sizes are those in the power trace with at least one run in
both halves. A run that never reached the target makes that half's mean infinite: such a batch size
has no ratio (not selectable) in that half, and cannot be the oracle's choice when it is the scoring
half; if a selection or baseline picks it, that case counts as failed (reported, not hidden).
Caps span the GPU's range: from the lowest peak power in the trace (rounded down to the step) to the
highest, every ``cap_step_w`` watts; caps below a workload's lowest peak are counted as infeasible.
"""

import csv
import math
import os
import statistics

from thor_sdk.errors import FormatError, NotFoundError, UsageError

from .select import InfeasibleCapError, baseline_largest_batch, baseline_proxy_best, make_table, oracle, select

#: Default target metric per workload: the defaults of Zeus's own trace-driven simulator
#: (``get_job_with_defaults`` in ``zeus_nsdi23/run_alibaba.py``, ml-energy/zeus). librispeech's metric
#: is a word error rate (lower is better); the train trace gives the epoch either way.
ZEUS_NSDI23_TARGETS = {
    ("cifar100", "shufflenetv2"): 0.6, ("imagenet", "resnet50"): 0.65, ("squad", "bert_base_uncased"): 84.0,
    ("librispeech", "deepspeech2"): 40.0, ("movielens-1m", "ncf"): 0.41, ("sentiment140", "bert_base_uncased"): 0.84,
}
POWER_COLUMNS = ("bound", "average")
POWER_COLS = ["dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power"]
TRAIN_COLS = ["dataset", "network", "batch_size", "optimizer", "run", "target_metric", "target_epoch"]
WITHIN = 1.05


def _read_csv(path, required, what):
    if not os.path.isfile(path):
        raise NotFoundError(f"no such {what}: {path}")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(f"{what} {path} lacks columns {', '.join(missing)} (has {reader.fieldnames})")
        return list(reader)


def _float(v, where):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise FormatError(f"{where}: not a number: {v!r}") from None


def workload_name(key):
    return "/".join(key)


def read_power_trace(path):
    """``{(dataset, network, optimizer): {(batch, power_limit): (time_per_epoch_s, average_power_w)}}``."""
    out, seen = {}, {}
    for i, r in enumerate(_read_csv(path, POWER_COLS, "power trace"), start=2):
        where = f"{path}:{i}"
        key = (r["dataset"], r["network"], r["optimizer"].lower())
        bs = int(_float(r["batch_size"], where))
        pl = _float(r["power_limit"], where)
        t, p = _float(r["time_per_epoch"], where), _float(r["average_power"], where)
        if not (t > 0 and p > 0 and pl > 0 and bs > 0):
            raise FormatError(f"{where}: batch_size, power_limit, time_per_epoch, average_power must be > 0")
        cell = out.setdefault(key, {})
        if (bs, pl) in cell:  # average repeated measurements of one configuration
            n = seen[(key, bs, pl)]
            t0, p0 = cell[(bs, pl)]
            cell[(bs, pl)] = ((t0 * n + t) / (n + 1), (p0 * n + p) / (n + 1))
            seen[(key, bs, pl)] = n + 1
        else:
            cell[(bs, pl)] = (t, p)
            seen[(key, bs, pl)] = 1
    if not out:
        raise FormatError(f"power trace {path} has no rows")
    return out


def read_train_trace(path):
    """``{(dataset, network, optimizer): {target: {batch: {run: epochs or inf}}}}``."""
    out = {}
    for i, r in enumerate(_read_csv(path, TRAIN_COLS, "train trace"), start=2):
        where = f"{path}:{i}"
        key = (r["dataset"], r["network"], r["optimizer"].lower())
        e = _float(r["target_epoch"], where)
        e = math.inf if math.isnan(e) else e
        tgt = _float(r["target_metric"], where)
        run = int(_float(r["run"], where))
        out.setdefault(key, {}).setdefault(tgt, {}).setdefault(int(_float(r["batch_size"], where)), {})[run] = e
    if not out:
        raise FormatError(f"train trace {path} has no rows")
    return out


def choose_target(key, by_target, batch_sizes, targets=None):
    """``(target, source)`` for one workload: the user's, Zeus's default, or a data-driven one.

    Data-driven (workloads Zeus does not name): the most demanding target (largest median epoch)
    that every run of at least half of the candidate batch sizes reached.
    """
    name = workload_name(key)
    for k in (name, key[0]):
        if targets and k in targets:
            t = float(targets[k])
            if t not in by_target:
                raise UsageError(f"target {t:g} for {name} is not in the train trace (has "
                                 f"{', '.join(f'{x:g}' for x in sorted(by_target))})")
            return t, "given"
    z = ZEUS_NSDI23_TARGETS.get(key[:2])
    if z is not None and z in by_target:
        return z, "Zeus NSDI'23 simulator default"
    best = None
    for t, per_bs in by_target.items():
        ok = [b for b in batch_sizes if per_bs.get(b) and all(math.isfinite(e) for e in per_bs[b].values())]
        if len(ok) * 2 < len(batch_sizes) or not ok:
            continue
        med = statistics.median(e for b in ok for e in per_bs[b].values())
        if best is None or med > best[1]:
            best = (t, med)
    if best is None:
        return None, "no target reached by every run of half the batch sizes"
    return best[0], "most demanding target reached by all runs of >= half the batch sizes"


def _mean(xs):
    return math.fsum(xs) / len(xs) if xs else None


def _halves(runs, fold):
    sel = [e for r, e in runs.items() if r % 2 == fold]
    sco = [e for r, e in runs.items() if r % 2 != fold]
    return sel, sco


def _peak(pl, avg, power_column):
    return max(pl, avg) if power_column == "bound" else avg


def _geomean(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs)) if xs else None


def _fin(x):
    return x if (x is not None and math.isfinite(x)) else None


def _median_fin(xs):
    xs = [x for x in xs if not math.isnan(x)]  # nan: the selected pair itself failed (counted apart)
    return _fin(statistics.median(xs)) if xs else None


def summarise(cases):
    """Aggregate figures over a list of case dicts (see ``replay``)."""
    sl = [c["slowdown"] for c in cases]
    fin = [s for s in sl if math.isfinite(s)]
    return {
        "cases": len(cases),
        "within_5pct_share": (sum(1 for s in sl if s <= WITHIN + 1e-12) / len(sl)) if sl else None,
        "median_slowdown": statistics.median(sl) if sl else None,
        "max_slowdown": _fin(max(sl)) if sl else None,
        "selected_failed_cases": len(sl) - len(fin),
        "speedup_vs_baseline1": _geomean([c["speedup_vs_baseline1"] for c in cases]),
        "speedup_vs_baseline2": _geomean([c["speedup_vs_baseline2"] for c in cases]),
        "median_speedup_vs_baseline1": _median_fin([c["speedup_vs_baseline1"] for c in cases]),
        "median_speedup_vs_baseline2": _median_fin([c["speedup_vs_baseline2"] for c in cases]),
        "baseline1_failed_cases": sum(1 for c in cases if not math.isfinite(c["speedup_vs_baseline1"])),
        "baseline2_failed_cases": sum(1 for c in cases if not math.isfinite(c["speedup_vs_baseline2"])),
        "non_monotone_cases": sum(1 for c in cases if c["non_monotone"]),
    }


def _cap_grid(power, power_column, cap_step_w):
    peaks = [_peak(pl, avg, power_column) for cell in power.values() for (_, pl), (_, avg) in cell.items()]
    lo = math.floor(min(peaks) / cap_step_w) * cap_step_w
    hi = max(peaks)
    n = int(math.floor((hi - lo) / cap_step_w + 1e-9))
    caps = [round(lo + i * cap_step_w, 6) for i in range(n + 1)]
    if caps[-1] < hi:
        caps.append(round(hi, 6))
    return caps


def replay(power_trace, train_trace, power_column="bound", cap_step_w=5.0, caps=None, targets=None,
           with_cases=False, progress=None):
    """Run selection, baselines and oracle for every workload, cap and fold; return the figures.

    ``targets``: ``{"dataset" or "dataset/network/optimizer": target metric}`` overriding the defaults.
    ``progress``: optional callable ``(n_done, n_total, label)``.
    """
    if power_column not in POWER_COLUMNS:
        raise UsageError(f"power column must be one of {', '.join(POWER_COLUMNS)}, got {power_column!r}")
    if caps is None and not cap_step_w > 0:
        raise UsageError("cap step must be > 0 W")
    power = read_power_trace(power_trace)
    train = read_train_trace(train_trace)
    grid = sorted(float(c) for c in caps) if caps else _cap_grid(power, power_column, cap_step_w)
    cases, ref_in, ref_noise, workloads, skipped = [], [], [], [], []
    infeasible = 0
    keys = sorted(power)
    for wi, key in enumerate(keys):
        name = workload_name(key)
        if progress:
            progress(wi, len(keys), name)
        if key not in train:
            skipped.append({"workload": name, "why": "no runs in the train trace"})
            continue
        cell = power[key]
        power_bs = sorted({b for b, _ in cell})
        target, source = choose_target(key, train[key], power_bs, targets)
        if target is None:
            skipped.append({"workload": name, "why": source})
            continue
        runs_by_bs = train[key][target]
        w_cases = []
        for fold, label in ((1, "select on odd runs, score on even runs"), (0, "select on even runs, score on odd runs")):
            sel_ep, sco_ep = {}, {}
            for bs in power_bs:
                a, b = _halves(runs_by_bs.get(bs, {}), fold)
                if a and b:
                    sel_ep[bs], sco_ep[bs] = _mean(a), _mean(b)
            ratio_bs = [b for b in sel_ep if math.isfinite(sel_ep[b])]
            if len(sel_ep) < 2 or not ratio_bs:
                skipped.append({"workload": name, "fold": label,
                                "why": "fewer than two batch sizes with runs in both halves"})
                continue
            ref = max(ratio_bs)
            ratios = {b: sel_ep[b] / sel_ep[ref] for b in ratio_bs}
            rows = [{"batch_size": bs, "freq_hz": pl, "time_per_sample_s": t,
                     "peak_power_w": _peak(pl, avg, power_column)}
                    for (bs, pl), (t, avg) in sorted(cell.items()) if bs in sel_ep]
            doc = make_table([r for r in rows if r["batch_size"] in ratios], ratios, reference_batch_size=ref,
                             reference_samples_to_target=sel_ep[ref], knob="power_limit_w")
            for cap in grid:
                try:
                    s = select(doc, cap)
                except InfeasibleCapError:
                    infeasible += 1
                    continue
                orc = oracle(rows, sco_ep, cap)
                b1 = baseline_largest_batch(rows, cap)
                b2 = baseline_proxy_best(rows, ratios, cap)
                t_sel = s["time_per_sample_s"] * sco_ep[s["batch_size"]]
                t_orc = orc.time_to_target_s(sco_ep[orc.batch_size])
                t_b1 = b1.time_to_target_s(sco_ep[b1.batch_size])
                t_b2 = b2.time_to_target_s(sco_ep[b2.batch_size])
                c = {"workload": name, "fold": label, "power_cap_w": cap,
                     "selected": [s["batch_size"], s["freq_hz"]], "oracle": [orc.batch_size, orc.freq_hz],
                     "baseline1": [b1.batch_size, b1.freq_hz], "baseline2": [b2.batch_size, b2.freq_hz],
                     "slowdown": t_sel / t_orc,
                     "speedup_vs_baseline1": t_b1 / t_sel if math.isfinite(t_sel) else math.nan,
                     "speedup_vs_baseline2": t_b2 / t_sel if math.isfinite(t_sel) else math.nan,
                     "non_monotone": bool(s["non_monotone_batch_sizes"])}
                w_cases.append(c)
                # references (not the method): the same selection given the *scoring* half's ratios
                # (in-sample: what the frequency rule alone loses), and the scoring of an oracle that
                # only knows the selection half (how much seed-to-seed noise alone costs).
                fin_sco = [b for b in sco_ep if math.isfinite(sco_ep[b]) and b in sel_ep]
                if fin_sco:
                    r_in = {b: sco_ep[b] for b in fin_sco}
                    try:
                        s_in = select(make_table([r for r in rows if r["batch_size"] in r_in], r_in,
                                                 knob="power_limit_w"), cap)
                        ref_in.append(s_in["time_per_sample_s"] * sco_ep[s_in["batch_size"]] / t_orc)
                    except InfeasibleCapError:
                        pass
                o_sel = oracle(rows, sel_ep, cap)
                ref_noise.append(o_sel.time_to_target_s(sco_ep[o_sel.batch_size]) / t_orc)
        cases.extend(w_cases)
        if w_cases:
            w = {"workload": name, "target_metric": target, "target_source": source,
                 "batch_sizes": sorted({c["selected"][0] for c in w_cases} | {c["oracle"][0] for c in w_cases}),
                 **summarise(w_cases)}
            workloads.append(w)
    if progress:
        progress(len(keys), len(keys), "done")

    def share(xs):
        return (sum(1 for x in xs if x <= WITHIN + 1e-12) / len(xs)) if xs else None

    out = {"power_trace": os.path.basename(power_trace), "train_trace": os.path.basename(train_trace),
           "power_column": power_column,
           "power_definition": ("peak power = max(power_limit, average_power)" if power_column == "bound"
                                else "peak power = measured average_power (optimistic: no transients)"),
           "protocol": ("runs split by run-index parity; selection sees ratios from one half, oracle and "
                        "scoring use the other half; both folds counted"),
           "caps_w": [grid[0], grid[-1]] if grid else [], "cap_step_w": None if caps else cap_step_w,
           **summarise(cases),
           "speedup_definition": "geometric mean over cases of (baseline's true time-to-accuracy / selected's)",
           "infeasible_caps": infeasible,
           "reference": {
               "in_sample_within_5pct_share": share(ref_in),
               "in_sample_note": "selection given the scoring half's own ratios: loss from the frequency rule alone",
               "seed_noise_within_5pct_share": share(ref_noise),
               "seed_noise_note": ("oracle of the selection half scored on the scoring half: loss from "
                                   "seed-to-seed variation alone"),
           },
           "workloads": workloads, "skipped": skipped}
    if with_cases:
        out["case_list"] = [{k: (_fin(v) if isinstance(v, float) and k != "power_cap_w" else v) for k, v in c.items()}
                            for c in cases]
    return out
