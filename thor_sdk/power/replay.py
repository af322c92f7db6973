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

Honest protocol: the runs of each (workload, batch size) are split in two halves, by run index parity
(default) or by ``splits`` random balanced half-splits. The selection sees ratios fitted on one half
(``ratio_model``: ``unimodal`` by default, ``mccandlish`` or ``mean``, see ``thor_sdk.power.ratios``);
the oracle and the scoring use the other half; then the halves swap, and both directions count.
Candidate batch sizes are those in the power trace with at least one run in both halves.

Scoring: a pair's time-to-accuracy is its time per epoch x the mean epochs-to-target of the scoring
half's runs; the selection, both baselines, the oracle and the references are all scored by that one
function on the same runs. A run that never reached the target makes that half's mean infinite: such a
batch size is left out of the selection half's fit (not selectable) and cannot be the oracle when it is
the scoring half; if a selection or baseline picks it, that case counts as failed (reported, not
hidden). The oracle is chosen on the draws it is scored on (a winner's curse, biased against the
selection): the ``all_runs_oracle`` reference shows how much that costs. Caps span the GPU's range: from
the lowest peak power in the trace (rounded down to the step) to the highest, every ``cap_step_w`` watts;
caps below a workload's lowest peak are counted as infeasible.
"""

import math
import os
import random
import statistics

from thor_sdk.errors import FormatError, MeasurementError, UsageError

from .ratios import EFFICIENCY_DEFINITIONS, EFFICIENCY_MODELS, EfficiencyModel
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
WITHIN_10 = 1.10
#: Reference choices scored beside the selection (not methods).
REFERENCES = {
    "in_sample": "selection rule given the scoring half's own mean epochs: loss from the frequency rule alone",
    "plug_in_noise": ("oracle of the selection half's mean epochs, scored on the scoring half: the per-batch-mean "
                      "estimator with a perfect frequency rule (seed-to-seed variation alone)"),
    "all_runs_oracle": ("oracle of the mean epochs over both halves, scored on the scoring half: has seen the "
                        "scoring runs, an optimistic stand-in for knowing the true expected epochs; its shortfall "
                        "from 100% is roughly what the scoring's own noise (winner's curse) costs"),
}


#: bounds of a trace's values: batch sizes, seconds per epoch, watts
MAX_BATCH_SIZE = 10 ** 9
MAX_EPOCH_S = 1e9
MAX_POWER_W = 1e6
#: caps replayed at most (``--cap-step`` that would give more is refused), and random half-splits
MAX_CAPS = 10000
MAX_SPLITS = 1000
#: rows read from a trace, and (caps x power-trace rows) replayed at most: the replay's work is about
#: proportional to that product (the V100 trace: 31 caps x 476 rows, 0.14 s here)
MAX_TRACE_ROWS = 1_000_000
MAX_CAP_ROWS = 1_000_000


def _read_csv(path, required, what):
    """Rows ``(line, {column: text})`` of a trace, read strictly (``thor_sdk.store.files.read_csv``)."""
    from thor_sdk.store.files import read_csv

    _, rows = read_csv(path, required, what)
    if len(rows) > MAX_TRACE_ROWS:
        raise FormatError(f"{what} {path} has {len(rows)} rows; at most {MAX_TRACE_ROWS} are read")
    return rows


def _float(v, where, column="value", **bounds):
    from thor_sdk.store.files import csv_number

    return csv_number(v, where, column, **bounds)


def workload_name(key):
    return "/".join(key)


def read_power_trace(path):
    """``{(dataset, network, optimizer): {(batch, power_limit): (time_per_epoch_s, average_power_w)}}``."""
    out, seen = {}, {}
    for i, r in _read_csv(path, POWER_COLS, "power trace"):
        where = f"{path}:{i}"
        key = (r["dataset"], r["network"], r["optimizer"].lower())
        bs = _float(r["batch_size"], where, "batch_size", integer=True, low=1, high=MAX_BATCH_SIZE)
        pl = _float(r["power_limit"], where, "power_limit", low=0, low_open=True, high=MAX_POWER_W)
        t = _float(r["time_per_epoch"], where, "time_per_epoch", low=0, low_open=True, high=MAX_EPOCH_S)
        p = _float(r["average_power"], where, "average_power", low=0, low_open=True, high=MAX_POWER_W)
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
    for i, r in _read_csv(path, TRAIN_COLS, "train trace"):
        where = f"{path}:{i}"
        key = (r["dataset"], r["network"], r["optimizer"].lower())
        if r["target_epoch"].lower() == "nan":  # the run never reached the target
            e = math.inf
        else:
            e = _float(r["target_epoch"], where, "target_epoch (or nan: never reached)", low=0, low_open=True,
                       high=1e9)
        tgt = _float(r["target_metric"], where, "target_metric")
        run = _float(r["run"], where, "run", integer=True, low=0, high=1e9)
        bs = _float(r["batch_size"], where, "batch_size", integer=True, low=1, high=MAX_BATCH_SIZE)
        runs = out.setdefault(key, {}).setdefault(tgt, {}).setdefault(bs, {})
        if run in runs:
            raise FormatError(f"{where}: run {run} of batch {bs} at target {tgt:g} appears twice")
        runs[run] = e
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


def _share(xs, within):
    return (sum(1 for x in xs if x <= within + 1e-12) / len(xs)) if xs else None


def summarise(cases):
    """Aggregate figures over a list of case dicts (see ``replay``)."""
    sl = [c["slowdown"] for c in cases]
    fin = [s for s in sl if math.isfinite(s)]
    return {
        "cases": len(cases),
        "within_5pct_share": _share(sl, WITHIN),
        "within_10pct_share": _share(sl, WITHIN_10),
        "median_slowdown": _fin(statistics.median(sl)) if sl else None,  # null: half the picks failed
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


def summarise_references(cases):
    """Shares within 5% / 10% and median slowdown of the reference choices (see ``REFERENCES``)."""
    out = {}
    for name in REFERENCES:
        xs = [c["reference"][name] for c in cases if c["reference"].get(name) is not None]
        out[name] = {"cases": len(xs), "within_5pct_share": _share(xs, WITHIN),
                     "within_10pct_share": _share(xs, WITHIN_10),
                     "median_slowdown": _fin(statistics.median(xs)) if xs else None,
                     "note": REFERENCES[name]}
    return out


def _cap_grid(power, power_column, cap_step_w):
    peaks = [_peak(pl, avg, power_column) for cell in power.values() for (_, pl), (_, avg) in cell.items()]
    lo = math.floor(min(peaks) / cap_step_w) * cap_step_w
    hi = max(peaks)
    n = math.floor((hi - lo) / cap_step_w + 1e-9)
    if not n < MAX_CAPS:
        raise UsageError(f"cap step {cap_step_w:g} W gives more than {MAX_CAPS} caps over {lo:g}-{hi:g} W; "
                         f"give at least {(hi - lo) / (MAX_CAPS - 1):.3g} W")
    n = int(n)
    caps = [round(lo + i * cap_step_w, 6) for i in range(n + 1)]
    if caps[-1] < hi:
        caps.append(round(hi, 6))
    return caps


def _partitions(runs_by_bs, batch_sizes, splits, seed):
    """``[(split label, {batch: (half A run ids, half B run ids)})]``: parity, or random balanced halves."""
    if splits is None:
        return [("parity", {b: ([r for r in sorted(runs_by_bs.get(b, {})) if r % 2 == 1],
                                [r for r in sorted(runs_by_bs.get(b, {})) if r % 2 == 0]) for b in batch_sizes})]
    rng = random.Random(seed)
    out = []
    for i in range(splits):
        part = {}
        for b in batch_sizes:
            ids = sorted(runs_by_bs.get(b, {}))
            rng.shuffle(ids)
            k = len(ids) // 2 + (len(ids) % 2 if rng.random() < 0.5 else 0)
            part[b] = (sorted(ids[:k]), sorted(ids[k:]))
        out.append((f"random split {i}", part))
    return out


def _fold(name, label, cell, power_column, runs_by_bs, halves, sel_side, grid, ratio_model):
    """Selection, baselines, oracle and references for one (workload, fold) at every cap."""
    sel_ids = {b: h[sel_side] for b, h in halves.items()}
    sco_ids = {b: h[1 - sel_side] for b, h in halves.items()}
    cand = [b for b in halves if sel_ids[b] and sco_ids[b]]
    if len(cand) < 2:
        return None, "fewer than two batch sizes with runs in both halves"
    sel_runs = {b: [runs_by_bs[b][r] for r in sel_ids[b]] for b in cand}
    sco_ep = {b: _mean([runs_by_bs[b][r] for r in sco_ids[b]]) for b in cand}  # inf if any run failed
    all_ep = {b: _mean(list(runs_by_bs[b].values())) for b in cand}
    sel_mean = {b: _mean(v) for b, v in sel_runs.items()}
    try:
        model = EfficiencyModel(ratio_model).fit(sel_runs)
    except MeasurementError:
        return None, "no batch size reached the target in every run of the selection half"
    ratios = model.ratios()
    ref = max(ratios)
    rows = [{"batch_size": bs, "freq_hz": pl, "time_per_sample_s": t, "peak_power_w": _peak(pl, avg, power_column)}
            for (bs, pl), (t, avg) in sorted(cell.items()) if bs in sco_ep]
    doc = make_table([r for r in rows if r["batch_size"] in ratios], ratios, reference_batch_size=ref,
                     reference_samples_to_target=model.expected_[ref], knob="power_limit_w")
    fin_sco = {b: e for b, e in sco_ep.items() if math.isfinite(e)}
    doc_in = (make_table([r for r in rows if r["batch_size"] in fin_sco], fin_sco, knob="power_limit_w")
              if fin_sco else None)

    def tta(pair_bs, t_per_epoch):  # the one scoring function: scoring half's mean epochs x time per epoch
        return t_per_epoch * sco_ep[pair_bs]

    cases, infeasible, unscorable = [], 0, 0
    for cap in grid:
        try:
            s = select(doc, cap)
        except InfeasibleCapError:
            infeasible += 1
            continue
        try:
            orc = oracle(rows, sco_ep, cap)
        except InfeasibleCapError:  # every feasible batch failed in the scoring half: nothing to compare to
            unscorable += 1
            continue
        b1 = baseline_largest_batch(rows, cap)
        b2 = baseline_proxy_best(rows, ratios, cap)
        t_sel = tta(s["batch_size"], s["time_per_sample_s"])
        t_orc = tta(orc.batch_size, orc.time_per_sample_s)
        t_b1 = tta(b1.batch_size, b1.time_per_sample_s)
        t_b2 = tta(b2.batch_size, b2.time_per_sample_s)
        refs = {}
        # references (not the method), scored by the same function on the same runs
        if doc_in is not None:
            try:
                s_in = select(doc_in, cap)
                refs["in_sample"] = tta(s_in["batch_size"], s_in["time_per_sample_s"]) / t_orc
            except InfeasibleCapError:
                pass
        for rname, ep in (("plug_in_noise", sel_mean), ("all_runs_oracle", all_ep)):
            try:
                o = oracle(rows, ep, cap)
                refs[rname] = tta(o.batch_size, o.time_per_sample_s) / t_orc
            except InfeasibleCapError:
                pass
        cases.append({"workload": name, "fold": label, "power_cap_w": cap,
                      "selected": [s["batch_size"], s["freq_hz"]], "oracle": [orc.batch_size, orc.freq_hz],
                      "baseline1": [b1.batch_size, b1.freq_hz], "baseline2": [b2.batch_size, b2.freq_hz],
                      "slowdown": t_sel / t_orc,
                      "speedup_vs_baseline1": t_b1 / t_sel if math.isfinite(t_sel) else math.nan,
                      "speedup_vs_baseline2": t_b2 / t_sel if math.isfinite(t_sel) else math.nan,
                      "non_monotone": bool(s["non_monotone_batch_sizes"]), "reference": refs})
    fit = {"fold": label, "selection_runs": {b: sel_ids[b] for b in cand},
           "scoring_runs": {b: sco_ids[b] for b in cand},
           "expected_epochs": model.expected_, "mean_epochs": model.means_,
           "failed_batch_sizes": model.failed_batch_sizes_,
           "params": {k: _fin(v) for k, v in model.params_.items()}}
    return (cases, infeasible, unscorable, fit), None


def replay(power_trace, train_trace, power_column="bound", cap_step_w=5.0, caps=None, targets=None,
           with_cases=False, progress=None, ratio_model="unimodal", splits=None, seed=0):
    """Run selection, baselines and oracle for every workload, cap and fold; return the figures.

    ``targets``: ``{"dataset" or "dataset/network/optimizer": target metric}`` overriding the defaults.
    ``ratio_model``: how the selection half's runs become ratios (``thor_sdk.power.ratios.EFFICIENCY_MODELS``).
    ``splits``: ``None`` for the run-index-parity 2-fold split, or a number of random balanced half-splits
    of each (workload, batch size)'s runs (``seed``), each counted in both directions.
    ``progress``: optional callable ``(n_done, n_total, label)``.
    """
    if power_column not in POWER_COLUMNS:
        raise UsageError(f"power column must be one of {', '.join(POWER_COLUMNS)}, got {power_column!r}")
    if ratio_model not in EFFICIENCY_MODELS:
        raise UsageError(f"ratio model must be one of {', '.join(EFFICIENCY_MODELS)}, got {ratio_model!r}")
    if splits is not None and not (isinstance(splits, int) and not isinstance(splits, bool)
                                   and 1 <= splits <= MAX_SPLITS):
        raise UsageError(f"splits must be an integer in [1, {MAX_SPLITS}] (or None for the parity split), "
                         f"got {splits!r}")
    if caps is None and not (isinstance(cap_step_w, (int, float)) and math.isfinite(cap_step_w) and cap_step_w > 0):
        raise UsageError(f"cap step must be a finite number of watts > 0, got {cap_step_w!r}")
    if caps is not None:
        caps = list(caps)
        if len(caps) > MAX_CAPS or not all(isinstance(c, (int, float)) and math.isfinite(c) and c > 0 for c in caps):
            raise UsageError(f"caps must be at most {MAX_CAPS} finite numbers of watts > 0")
    for k, v in (targets or {}).items():
        if not k or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UsageError(f"a target is a workload (dataset or dataset/network/optimizer) and a finite metric, "
                             f"got {k!r}={v!r}")
    power = read_power_trace(power_trace)
    train = read_train_trace(train_trace)
    grid = sorted(float(c) for c in caps) if caps else _cap_grid(power, power_column, cap_step_w)
    n_rows = sum(len(cell) for cell in power.values())
    if len(grid) * n_rows > MAX_CAP_ROWS:
        raise UsageError(f"{len(grid)} caps x {n_rows} power-trace rows is more than {MAX_CAP_ROWS} to replay; "
                         "give a larger --cap-step")
    cases, workloads, skipped, fits = [], [], [], []
    infeasible = unscorable = 0
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
        for split_label, halves in _partitions(runs_by_bs, power_bs, splits, seed):
            if splits is None:
                folds = ((0, "select on odd runs, score on even runs"), (1, "select on even runs, score on odd runs"))
            else:
                folds = ((0, f"{split_label}: select on half A, score on half B"),
                         (1, f"{split_label}: select on half B, score on half A"))
            for side, label in folds:
                res, why = _fold(name, label, cell, power_column, runs_by_bs, halves, side, grid, ratio_model)
                if res is None:
                    skipped.append({"workload": name, "fold": label, "why": why})
                    continue
                f_cases, f_inf, f_uns, fit = res
                w_cases.extend(f_cases)
                infeasible += f_inf
                unscorable += f_uns
                fits.append({"workload": name, **fit})
        cases.extend(w_cases)
        if w_cases:
            workloads.append({"workload": name, "target_metric": target, "target_source": source,
                              "batch_sizes": sorted({c["selected"][0] for c in w_cases}
                                                    | {c["oracle"][0] for c in w_cases}),
                              **summarise(w_cases), "reference": summarise_references(w_cases)})
    if progress:
        progress(len(keys), len(keys), "done")
    refs = summarise_references(cases)
    split_text = ("runs split by run-index parity" if splits is None else
                  f"{splits} random balanced half-splits of each (workload, batch size)'s runs (seed {seed})")
    out = {"power_trace": os.path.basename(power_trace), "train_trace": os.path.basename(train_trace),
           "power_column": power_column,
           "power_definition": ("peak power = max(power_limit, average_power)" if power_column == "bound"
                                else "peak power = measured average_power (optimistic: no transients)"),
           "ratio_model": ratio_model, "ratio_model_definition": EFFICIENCY_DEFINITIONS[ratio_model],
           "splits": splits,
           "protocol": (f"{split_text}; the selection sees ratios fitted on one half, the oracle and the scoring "
                        "use the other half; both directions counted"),
           "scoring": ("time-to-accuracy = time per epoch x mean epochs-to-target of the scoring half's runs, the "
                       "same function for selection, baselines, oracle and references; a batch with a failed "
                       "scoring run has none (cannot be the oracle; a choice of it counts as failed)"),
           "caps_w": [grid[0], grid[-1]] if grid else [], "cap_step_w": None if caps else cap_step_w,
           **summarise(cases),
           "speedup_definition": "geometric mean over cases of (baseline's true time-to-accuracy / selected's)",
           "infeasible_caps": infeasible, "unscorable_caps": unscorable,
           "reference": {
               # flat keys kept for older readers (seed_noise = plug_in_noise)
               "in_sample_within_5pct_share": refs["in_sample"]["within_5pct_share"],
               "in_sample_note": REFERENCES["in_sample"],
               "seed_noise_within_5pct_share": refs["plug_in_noise"]["within_5pct_share"],
               "seed_noise_note": REFERENCES["plug_in_noise"],
               **refs,
           },
           "workloads": workloads, "skipped": skipped}
    if with_cases:
        out["case_list"] = [{**{k: (_fin(v) if isinstance(v, float) and k != "power_cap_w" else v)
                                for k, v in c.items()},
                             "reference": {k: _fin(v) for k, v in c["reference"].items()}} for c in cases]
        out["fits"] = [{**f, "expected_epochs": {str(b): e for b, e in f["expected_epochs"].items()},
                        "mean_epochs": {str(b): e for b, e in f["mean_epochs"].items()},
                        "selection_runs": {str(b): r for b, r in f["selection_runs"].items()},
                        "scoring_runs": {str(b): r for b, r in f["scoring_runs"].items()}} for f in fits]
    return out
