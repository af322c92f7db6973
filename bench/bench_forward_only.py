"""What a forward-only layer (a frozen backbone's) costs inside a net, against its THOR probe.

    python bench/bench_forward_only.py [--batch-size 16] [--deep 9] [--cycles 3]

A fine-tuned net's frozen backbone runs its layers forward only: no weight gradient, and no backward at all while
nothing before them trains. Each case here is a net of a frozen 1x1 conv stem, ``deep`` copies of one layer and a
trained Linear head, measured whole (``HostDevice.measure_model``), beside the same net with one copy: the layer's
marginal cost in the net is the difference over ``deep - 1``. Its THOR probe (``measure_probe`` and
``derive_samples``, as a campaign measures it) is measured in the same cycle, between the two whole runs. Cases: a
frozen 3x3 conv, a frozen BatchNorm2d, a ReLU and an in-place ReLU (``nn.ReLU(inplace=True)``, what torchvision's
backbones use; its probe runs in place, ``inplace`` 1) behind them, all forward only (probe role ``input``); and as
the control, the conv trained (``hidden``: its layers behind a trained one). Reported per case: each cycle's probe
over marginal cost and their median. Time only.
"""

import argparse
import datetime as dt
import os
import statistics
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_composition's report helpers

C, SIDE = 32, 32
#: case -> (the repeated module's kind, its config, the probe's role, whether the copies train)
CASES = {
    "conv frozen": ("conv2d", {"in_channels": C, "out_channels": C, "kernel": 3, "stride": 1, "padding": 1,
                               "groups": 1, "height": SIDE, "width": SIDE, "bias": 0, "frozen": 1}, "input", False),
    "conv trained (control)": ("conv2d", {"in_channels": C, "out_channels": C, "kernel": 3, "stride": 1,
                                          "padding": 1, "groups": 1, "height": SIDE, "width": SIDE, "bias": 0},
                               "hidden", True),
    "batchnorm2d frozen": ("batchnorm2d", {"channels": C, "height": SIDE, "width": SIDE, "frozen": 1}, "input",
                           False),
    "relu": ("relu", {"numel": C * SIDE * SIDE}, "input", False),
    "relu in place": ("relu", {"numel": C * SIDE * SIDE, "inplace": 1}, "input", False),
}


def _copy(case):
    if case.startswith("conv"):
        return nn.Conv2d(C, C, 3, 1, 1, bias=False)
    if case.startswith("batchnorm2d"):
        return nn.BatchNorm2d(C)
    return nn.ReLU(inplace=case == "relu in place")


class Stack(nn.Module):
    """A frozen 1x1 conv stem, ``copies`` of the case's module, a trained Linear head (10 classes)."""

    def __init__(self, case, copies):
        super().__init__()
        self.stem = nn.Conv2d(C, C, 1, bias=False).requires_grad_(False)
        self.body = nn.Sequential(*[_copy(case) for _ in range(copies)])
        if not CASES[case][3]:
            self.body.requires_grad_(False)
        self.head = nn.Linear(C * SIDE * SIDE, 10)

    def forward(self, x):
        return self.head(self.body(self.stem(x)).flatten(1))


def _whole(dev, case, copies, batch_size, settings):
    from thor_sdk.harness.whole_model import resolve_model

    torch.manual_seed(0)
    source = resolve_model(Stack(case, copies), input_shape=(C, SIDE, SIDE))
    return statistics.median(dev.measure_model(source, batch_size, settings=settings).values("time"))


def run(batch_size=16, deep=9, cycles=3, settings=None, cases=None, progress=None):
    """The result document: per case, per cycle the whole nets of 1 and ``deep`` copies, the marginal cost and the
    probe's cost (seconds), and the median ratio probe / marginal."""
    from thor_sdk.campaign.measure import derive_samples
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.probes.build import Probe

    dev = HostDevice(threads=1)
    out = []
    for case in cases or list(CASES):
        kind, config, role, _ = CASES[case]
        probe = Probe(kind, config, batch_size, role)
        rows = []
        for c in range(cycles):
            one = _whole(dev, case, 1, batch_size, settings)
            parts = dev.measure_probe(probe, settings=settings)
            cost = next(s["value"] for s in derive_samples(probe, parts) if s["metric"] == "time")
            many = _whole(dev, case, deep, batch_size, settings)
            marginal = (many - one) / (deep - 1)
            rows.append({"whole_1_s": one, f"whole_{deep}_s": many, "marginal_s": marginal, "probe_s": cost,
                         "ratio": cost / marginal if marginal > 0 else float("nan")})
            if progress:
                progress(case, c + 1, rows[-1]["ratio"])
        out.append({"case": case, "kind": kind, "config": config, "role": role, "cycles": rows,
                    "median_ratio": statistics.median(r["ratio"] for r in rows)})
    return {"batch_size": batch_size, "deep": deep, "cases": out, "device_info": dev.info()}


def report(result, command, load_start, load_end, stamp):
    from bench_composition import machine_line

    lines = [f"# Forward-only layers in a net vs their probes (host, {stamp} UTC)", "", f"Command: `{command}`", "",
             machine_line(result['device_info']['torch_threads'], load_start, load_end)
             + f" Batch {result['batch_size']}, {result['deep']} copies against 1. Time only.", "",
             "| case | probe role | marginal in the net, median | probe, median | probe / marginal per cycle | median |",
             "|---|---|---|---|---|---|"]
    for c in result["cases"]:
        per = ", ".join(f"{r['ratio']:.2f}" for r in c["cycles"])
        lines.append(f"| {c['case']} | {c['role']} | {statistics.median(r['marginal_s'] for r in c['cycles']) * 1e3:.3f}"
                     f" ms | {statistics.median(r['probe_s'] for r in c['cycles']) * 1e3:.3f} ms | {per} | "
                     f"**{c['median_ratio']:.2f}** |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    from bench_composition import check_report, save_report
    from thor_sdk.harness.protocol import ProtocolSettings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--deep", type=int, default=9, help="copies in the deep net (against 1)")
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--case", action="append", choices=list(CASES), help="repeatable; default all")
    ap.add_argument("--window-s", type=float, default=None, help="minimum window (default: the protocol's)")
    ap.add_argument("--report", default=None, help="Markdown path (default bench/results/forward-only-host-*.md)")
    args = ap.parse_args(argv)
    check_report(args.report)  # before the measurements: the report is written after them
    if not (1 <= args.batch_size <= 256 and 2 <= args.deep <= 64 and 1 <= args.cycles <= 20) \
            or (args.window_s is not None and not 0.001 <= args.window_s <= 60):
        raise SystemExit("--batch-size 1..256, --deep 2..64, --cycles 1..20, --window-s 0.001..60")
    settings = ProtocolSettings() if args.window_s is None else ProtocolSettings(min_window_s=args.window_s)
    command = "python bench/bench_forward_only.py " + " ".join(argv if argv is not None else sys.argv[1:])
    load_start = os.getloadavg()[0]
    result = run(args.batch_size, args.deep, args.cycles, settings, args.case,
                 progress=lambda case, c, r: print(f"{case} cycle {c}: probe / marginal {r:.2f}", file=sys.stderr,
                                                   flush=True))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    save_report(report(result, command, load_start, os.getloadavg()[0], stamp), result, command, args.report,
                f"forward-only-host-{stamp}")


if __name__ == "__main__":
    main()
