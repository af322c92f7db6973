"""Rectangular conv kernels: which GP inputs read them best, measured against exact probes of the layers.

    python bench/bench_rect_kernels.py --campaign host-torch.db [--repeats 2] [--out-dir bench/results]

A profile's ``conv2d`` samples (dense, not flagged) fit three GPs that differ only in their inputs: the kind's
features as they are (a rectangular kernel reaches the GP through its exact FLOPs and bytes: what thor-sdk ships),
plus ``kernel_w``, plus ``kernel_w``, ``stride_w`` and ``padding_w``. Each reads the conv layers of small nets built
of rectangular kernels (1xk, kx1, 3x5, 2x4, strided 3x1 and 1x3; 3x3, 5x5 and 1x1 beside them in the same nets),
each layer probed exactly (``thor-sdk probe --model``) ``--repeats`` times on this host, one intra-op thread.
Prints per layer estimate / measured and the std, and per GP the median ratio, MAPE and coverage of the 95%
intervals over the rectangular layers and over the square ones. Time only (no energy meter on the host).
Writes ``rect-kernels-host-<stamp>.md`` and ``.json``.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import torch  # noqa: E402
from torch import nn  # noqa: E402


class _Branches(nn.Module):
    """A 1x1 stem (so every branch is a hidden layer) and one conv per (kernel, stride) over its output."""

    def __init__(self, cin, c, cout, convs):
        super().__init__()
        self.stem = nn.Conv2d(cin, c, 1)
        self.b = nn.ModuleList(nn.Conv2d(c, cout, k, s, (k[0] // 2, k[1] // 2)) for k, s in convs)
        self.fc = nn.Linear(cout * len(convs), 4)

    def forward(self, x):
        h = self.stem(x)
        return self.fc(torch.cat([m(h).mean(dim=(2, 3)) for m in self.b], 1))


class rect_32x16(_Branches):  # noqa: N801 (named as `--model file.py:name` reads it)
    def __init__(self):
        super().__init__(8, 32, 32, [((3, 1), 1), ((1, 3), 1), ((5, 1), 1), ((1, 5), 1), ((7, 1), 1), ((1, 7), 1),
                                     ((3, 5), 1), ((3, 3), 1), ((5, 5), 1), ((1, 1), 1)])


class rect_64x12(_Branches):  # noqa: N801
    def __init__(self):
        super().__init__(8, 64, 64, [((3, 1), 1), ((1, 3), 1), ((7, 1), 1), ((1, 7), 1), ((2, 4), 1), ((3, 3), 1),
                                     ((1, 1), 1)])


class rect_strided(_Branches):  # noqa: N801
    def __init__(self):
        super().__init__(4, 16, 32, [((3, 1), (2, 1)), ((1, 3), (1, 2)), ((5, 3), 2), ((3, 3), 2)])


NETS = {"rect_32x16": (8, 16, 16), "rect_64x12": (8, 12, 12), "rect_strided": (4, 40, 24)}  # per-sample inputs


def _variants():
    from thor_sdk.layers.kinds import gp_features

    shipped = gp_features("conv2d")
    at = shipped.index("bias") + 1
    return {"shipped (FLOPs and bytes)": shipped,
            "+ kernel_w": shipped[:at] + ["kernel_w"] + shipped[at:],
            "+ kernel_w, stride_w, padding_w": shipped[:at] + ["kernel_w", "stride_w", "padding_w"] + shipped[at:]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--campaign", required=True, help="a host profile's campaign (thor-sdk profile --out)")
    ap.add_argument("--repeats", type=int, default=2, help="exact probes of each net (1-5)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = ap.parse_args(argv)
    if not 1 <= args.repeats <= 5 or not 1 <= args.batch_size <= 128:
        ap.error("--repeats 1-5, --batch-size 1-128")
    import subprocess

    from thor_sdk.fitting.pipeline import at_campaign_level, drift_log_var, fit_kind
    from thor_sdk.layers.kinds import complete_config, feature_vector
    from thor_sdk.runtime.terms import at_batch, cost_terms
    from thor_sdk.store.campaign import Campaign

    camp = Campaign.open(args.campaign)
    runs = camp.model_runs()
    drift_var, _ = drift_log_var(runs, "time")  # as `thor-sdk fit` does: the drift, the samples at one level
    good, _ = at_campaign_level([s for s in camp.samples(metric="time", include_flagged=False)
                                 if s["value"] is not None], runs, "time")
    rows = [s for s in good if s["kind"] == "conv2d" and s["config"]["groups"] == 1]
    n_rect = sum(r["config"]["kernel"] != r["config"]["kernel_w"] for r in rows)
    gps = {v: (names, fit_kind("conv2d", rows, extra_log_var=drift_var, features=names))
           for v, names in _variants().items()}

    truth = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape in NETS.items():
            for rep in range(args.repeats):
                db = os.path.join(tmp, f"{name}-{rep}.db")
                cmd = [sys.executable, "-m", "thor_sdk.cli.main", "probe", "--device", "host", "--model",
                       f"{os.path.abspath(__file__)}:{name}", "--input-shape", ",".join(map(str, shape)),
                       "--batch-size", str(args.batch_size), "--out", db, "--quiet"]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                for s in Campaign.open(db).samples(metric="time", include_flagged=False):
                    if s["kind"] == "conv2d" and s["config"]["groups"] == 1 and s["value"] and s["value"] > 0:
                        truth.append({"net": name, "repeat": rep, "config": complete_config("conv2d", s["config"]),
                                      "role": s["role"], "batch_size": s["batch_size"], "measured_s": s["value"]})
    for t in truth:
        t["estimates"] = {}
        for v, (names, gp) in gps.items():
            x = feature_vector("conv2d", t["config"], t["batch_size"], t["role"], names)
            m, sd = gp.predict([x], terms=[at_batch(cost_terms("conv2d", t["config"], t["role"]), t["batch_size"])],
                               return_std=True)
            t["estimates"][v] = {"mean_s": float(m[0]), "std_s": float(sd[0])}

    def summary(v, rect):
        sel = [t for t in truth if (t["config"]["kernel"] != t["config"]["kernel_w"]) == rect]
        r = [t["estimates"][v]["mean_s"] / t["measured_s"] for t in sel]
        cov = sum(abs(t["estimates"][v]["mean_s"] - t["measured_s"]) <= 1.96 * t["estimates"][v]["std_s"]
                  for t in sel)
        return {"layers": len(sel), "median_ratio": statistics.median(r), "mape": 100 * statistics.mean(
            abs(x - 1) for x in r), "coverage": cov / len(sel)}

    summaries = {v: {"rect": summary(v, True), "square": summary(v, False)} for v in gps}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    cmdline = "python bench/bench_rect_kernels.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# Rectangular conv kernels: GP inputs vs exact probes (host, {stamp} UTC)", "",
             f"Command: `{cmdline}`", "",
             f"Profile campaign `{os.path.basename(args.campaign)}`: {len(rows)} dense conv2d samples, {n_rect} of "
             f"them rectangular. Exact probes: {len(truth)} conv layers of {len(NETS)} nets x {args.repeats} "
             f"repeats, batch {args.batch_size}, one intra-op thread, time only. Ratios are estimate / measured; "
             "the machine's own drift between the profile and the probes moves every ratio alike, so compare "
             "the GPs with each other and rectangular layers with square ones.", "",
             "| GP inputs | rect layers | rect median ratio | rect MAPE % | rect 95% coverage | square layers | "
             "square median ratio | square MAPE % | square coverage |", "|---|---|---|---|---|---|---|---|---|"]
    for v, s in summaries.items():
        r, q = s["rect"], s["square"]
        lines.append(f"| {v} | {r['layers']} | {r['median_ratio']:.2f} | {r['mape']:.1f} | {100 * r['coverage']:.0f}% "
                     f"| {q['layers']} | {q['median_ratio']:.2f} | {q['mape']:.1f} | {100 * q['coverage']:.0f}% |")
    lines += ["", "| net | repeat | conv | role | measured ms | " + " | ".join(gps) + " |",
              "|---|---|---|---|---|" + "---|" * len(gps)]
    for t in truth:
        c = t["config"]
        conv = (f"{c['kernel']}x{c['kernel_w']} s{c['stride']}x{c['stride_w']} {c['in_channels']}->"
                f"{c['out_channels']} {c['height']}x{c['width']}")
        est = " | ".join(f"{e['mean_s'] / t['measured_s']:.2f} +- {e['std_s'] / e['mean_s']:.2f}"
                         for e in t["estimates"].values())
        lines.append(f"| {t['net']} | {t['repeat']} | {conv} | {t['role']} | {1e3 * t['measured_s']:.3f} | {est} |")
    os.makedirs(args.out_dir, exist_ok=True)
    base = os.path.join(args.out_dir, f"rect-kernels-host-{stamp}")
    with open(base + ".md", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(base + ".json", "w", encoding="utf-8") as f:
        json.dump({"command": cmdline, "samples": len(rows), "rect_samples": n_rect, "summaries": summaries,
                   "layers": truth}, f, indent=1)
    print("\n".join(lines[:12 + len(gps)]))
    print(f"wrote {base}.md")


if __name__ == "__main__":
    main()
