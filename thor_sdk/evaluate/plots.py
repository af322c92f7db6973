"""The evaluation report's figures (matplotlib, the ``[report]`` extra), each returned as PNG bytes.

- ``estimated_vs_measured``: every method's estimate against the measurement, log-log, with THOR's 95%
  interval as error bars and the y = x line;
- ``error_per_method``: each method's absolute percentage error per model, and its mean (MAPE);
- ``kind_fits``: per layer kind, the GP's estimate (mean and 95% band) against training FLOPs at the
  configs of the evaluated models' layers and of the profile's probes, with the probes' measured costs
  (from the campaign, where one is given) as points.
"""

import io

#: one colour per method, stable across figures (colour-blind-safe Okabe-Ito order)
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
MAX_KIND_PANELS = 12


def _pyplot():
    from thor_sdk.extras import require

    require("report", "thor-sdk evaluate's plots")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def _scale(unit):
    return (1e3, "ms") if unit == "s" else (1.0, unit)


def estimated_vs_measured(result):
    plt = _pyplot()
    scale, unit = _scale(result["unit"])
    fig, ax = plt.subplots(figsize=(6.4, 5.4))
    rows = result["rows"]
    lo, hi = float("inf"), 0.0
    for i, name in enumerate(result["methods"]):
        pts = [(r["measured"] * scale, r["estimates"][name]) for r in rows
               if r["estimates"].get(name, {}).get("value") is not None]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1]["value"] * scale for p in pts]
        kw = dict(color=COLOURS[i % len(COLOURS)], marker=MARKERS[i % len(MARKERS)], linestyle="none",
                  label=f"{name} (MAPE {result['methods'][name]['mape']:.1f}%)", alpha=0.85)
        if name == "THOR":
            err = [[max(0.0, y - p[1]["low95"] * scale) for y, p in zip(ys, pts)],
                   [max(0.0, p[1]["high95"] * scale - y) for y, p in zip(ys, pts)]]
            ax.errorbar(xs, ys, yerr=err, capsize=2, **kw)
        else:
            ax.plot(xs, ys, **kw)
        lo, hi = min(lo, *xs, *ys), max(hi, *xs, *ys)
    if hi > 0:
        lo = max(lo, hi * 1e-6)
        ax.plot([lo / 1.5, hi * 1.5], [lo / 1.5, hi * 1.5], color="grey", linewidth=1, label="estimate = measured")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(f"measured {result['metric']} per training step ({unit})")
    ax.set_ylabel(f"estimated ({unit})")
    ax.set_title(f"Estimated vs measured, {result['device']} / {result['runtime']}\n(THOR: 95% interval bars)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return _png(fig)


def error_per_method(result):
    plt = _pyplot()
    rows = result["rows"]
    names = [n for n in result["methods"] if result["methods"][n]["n"]]
    labels = [f"{r['model']} b{r['batch_size']}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.8), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(1, len(names))
    for i, name in enumerate(names):
        apes = [r["estimates"].get(name, {}).get("ape") for r in rows]
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(rows))]
        ax1.bar([x for x, a in zip(xs, apes) if a is not None], [a for a in apes if a is not None], width,
                color=COLOURS[i % len(COLOURS)], label=name)
    every = [a for n in names for r in rows if (a := r["estimates"].get(n, {}).get("ape")) is not None]
    if every and max(every) > 1000.0:  # a diverging method must not flatten every other bar
        ax1.set_yscale("log")
    ax1.set_xticks(range(len(rows)))
    ax1.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax1.set_ylabel("absolute percentage error (%)")
    ax1.set_title("Error per model and method")
    ax1.legend(fontsize=8)
    ax1.grid(True, axis="y", alpha=0.3)
    mapes = [result["methods"][n]["mape"] for n in names]
    ax2.bar(range(len(names)), mapes, color=[COLOURS[i % len(COLOURS)] for i in range(len(names))])
    for i, v in enumerate(mapes):
        ax2.text(i, v, f"{v:.1f}" if v < 1e4 else f"{v:.2g}", ha="center", va="bottom", fontsize=8)
    if mapes and max(mapes) > 1000.0:
        ax2.set_yscale("log")
    ax2.set_xticks(range(len(names)))
    ax2.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax2.set_ylabel("MAPE (%)")
    ax2.set_title("Mean (MAPE)")
    ax2.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def kind_points(estimator, layers, samples=()):
    """``{kind: {"configs": [(flops, mean, std)], "probes": [(flops, measured, std)]}}`` for the kinds of
    ``layers`` (dicts with kind, config, role, batch_size) that the estimator knows; ``samples``: the
    profile's probe samples (``Campaign.samples()``), shown as measured points."""
    from thor_sdk.runtime.terms import at_batch, cost_terms

    def flops_of(kind, config, role, batch):
        return at_batch(cost_terms(kind, config, role), batch)[0]

    out = {}
    for l in layers:
        kind = l["kind"]
        if kind not in estimator.kinds:
            continue
        role, b = l.get("role", "hidden"), l["batch_size"]
        mean, std = estimator.predict_layer(kind, dict(l["config"], batch_size=b, role=role))
        out.setdefault(kind, {"configs": [], "probes": []})["configs"].append(
            (flops_of(kind, l["config"], role, b), mean, std))
    for s in samples:
        if s["kind"] in out and s.get("value") is not None:
            out[s["kind"]]["probes"].append((flops_of(s["kind"], s["config"], s["role"], s["batch_size"]),
                                             s["value"], s.get("std") or 0.0))
    return out


def kind_fits(points, unit, device):
    """One panel per kind (the MAX_KIND_PANELS with the most points): the GP's mean and 95% band at each
    config, against training FLOPs per step, and the probes' measured costs."""
    plt = _pyplot()
    scale, unit_label = _scale(unit)
    kinds = sorted(points, key=lambda k: -(len(points[k]["configs"]) + len(points[k]["probes"])))[:MAX_KIND_PANELS]
    kinds.sort()
    n = max(1, len(kinds))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    for ax, kind in zip(axes.flat, kinds):
        cfg = sorted(points[kind]["configs"])
        xs = [max(c[0], 1.0) for c in cfg]
        mean = [c[1] * scale for c in cfg]
        lo = [max(c[1] - 1.96 * c[2], c[1] * 1e-3) * scale for c in cfg]
        hi = [(c[1] + 1.96 * c[2]) * scale for c in cfg]
        ax.errorbar(xs, mean, yerr=[[m - l for m, l in zip(mean, lo)], [h - m for m, h in zip(mean, hi)]],
                    fmt="o", color=COLOURS[0], markersize=3, capsize=2, label="GP mean, 95% band")
        pr = points[kind]["probes"]
        if pr:
            ax.plot([max(p[0], 1.0) for p in pr], [max(p[1] * scale, 1e-12) for p in pr], "x", color=COLOURS[3],
                    markersize=4, label="probes (measured)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(kind, fontsize=10)
        ax.set_xlabel("training FLOPs per step", fontsize=8)
        ax.set_ylabel(unit_label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(f"Per-kind GP estimates at the evaluated layers' configs, {device}", fontsize=11)
    fig.tight_layout()
    return _png(fig)
