"""Stand-in kinds: a module without a kind of its own against the kind ``--unknown-ops approx`` costs it as.

    python bench/bench_stand_ins.py            # writes bench/results/stand-ins-host-<stamp>.md

``nn.TransformerEncoderLayer`` (batch first) is estimated as the ``transformer_block`` kind of the same sizes
(``thor_sdk.layers.extract._stand_in``). This measures one training step (forward, backward, SGD) of each,
side by side in one process, one intra-op thread, median of 30 steps after 5 warm-up steps, at a few sizes:
the ratio is how far the stand-in's own cost is from the module's on this machine (the estimate adds the
GP's error on top, and the runtime widens the std of a stand-in layer by APPROX_OP_REL_STD).
"""

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (d_model, heads, d_ff, tokens, batch)
SIZES = ((64, 4, 128, 24, 16), (128, 4, 256, 64, 16), (256, 8, 512, 32, 8), (64, 2, 256, 128, 4))


def step_s(module, x, steps=30, warmup=5):
    """Median seconds of one training step (forward, mean-square loss, backward, SGD)."""
    import torch

    opt = torch.optim.SGD(module.parameters(), lr=1e-3)

    def one():
        opt.zero_grad()
        module(x).pow(2).mean().backward()
        opt.step()

    for _ in range(warmup):
        one()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        one()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None):
    import torch
    from torch import nn

    from thor_sdk.models.blocks import TransformerBlock

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    load = os.getloadavg()[0]
    rows = []
    for d, h, ff, t, b in SIZES:
        x = torch.randn(b, t, d)
        block = step_s(TransformerBlock(d, h, d // h, ff).train(), x)
        tel = step_s(nn.TransformerEncoderLayer(d, h, ff, batch_first=True).train(), x)
        pre = step_s(nn.TransformerEncoderLayer(d, h, ff, batch_first=True, activation="gelu",
                                                norm_first=True).train(), x)
        rows.append((d, h, ff, t, b, block, tel, pre))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# Stand-in kinds on the host ({stamp} UTC)", "",
             "Command: `python bench/bench_stand_ins.py" + (" " + " ".join(argv) if argv else "") + "`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores, 1 torch thread, torch {torch.__version__}; "
             f"load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end.", "",
             "One training step, median of 30. `block`: the zoo's TransformerBlock (what `transformer_block` "
             "probes), head_dim = d_model / heads; `TEL`: nn.TransformerEncoderLayer (post-norm, ReLU); `TEL pre`: "
             "norm_first, GELU.", "",
             "| d_model | heads | d_ff | tokens | batch | block ms | TEL ms | TEL / block | TEL pre ms | TEL pre / block |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for d, h, ff, t, b, block, tel, pre in rows:
        lines.append(f"| {d} | {h} | {ff} | {t} | {b} | {block * 1e3:.3f} | {tel * 1e3:.3f} | {tel / block:.2f} | "
                     f"{pre * 1e3:.3f} | {pre / block:.2f} |")
    ratios = [r[6] / r[5] for r in rows] + [r[7] / r[5] for r in rows]
    lines += ["", f"TEL / block over all sizes and both variants: {min(ratios):.2f}-{max(ratios):.2f} "
                  f"(median {statistics.median(ratios):.2f})."]
    report = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                         f"stand-ins-host-{stamp}.md")
    with open(report, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
