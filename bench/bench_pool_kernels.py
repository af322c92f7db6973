"""Which pooling kernels are the same computation: 1-D average pooling against the 2-D call over one row,
1-D adaptive max pooling against the 2-D one, and global max pooling against a max pooling of the whole plane and
``amax`` (the evidence for mapping AvgPool1d to kind avgpool2d and AdaptiveMaxPool1d(1) to adaptive_maxpool2d, and
for adaptive_maxpool2d being a kind of its own), and a difference of tensors against their sum (kind sub). Training step (forward, backward to the input), one thread, batch
16, side by side, medians of 40 after 5 warm-ups, each pair twice.

    python bench/bench_pool_kernels.py --out bench/results/pool1d-host-<date>.md
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None):
    import torch
    from bench_unary_ops import time_pair  # the operator benches' one pair timer
    from torch.nn import functional as F

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="Markdown file to write")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = ["| input (batch 16) | pair | a (ms) | b (ms) | a / b |", "|---|---|---|---|---|"]
    ratios = {}  # (time_pair's; this report lists the pairs' rows alone)
    pairs_1d = (("F.avg_pool1d(x, 3, 2, 1)", lambda x: F.avg_pool1d(x, 3, 2, 1),
                 "F.avg_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1))",
                 lambda x: F.avg_pool2d(x.unsqueeze(2), (1, 3), (1, 2), (0, 1))),
                ("F.adaptive_max_pool1d(x, 1)", lambda x: F.adaptive_max_pool1d(x, 1),
                 "F.adaptive_max_pool2d(x[:, :, None], 1)", lambda x: F.adaptive_max_pool2d(x.unsqueeze(2), 1)))
    pairs_2d = (("F.adaptive_max_pool2d(x, 1)", lambda x: F.adaptive_max_pool2d(x, 1),
                 "F.max_pool2d(x, H)", lambda x: F.max_pool2d(x, x.shape[-1])),
                ("F.adaptive_max_pool2d(x, 1)", lambda x: F.adaptive_max_pool2d(x, 1),
                 "x.amax((2, 3))", lambda x: x.amax(dim=(2, 3))))
    for shapes, pairs in (([(16, 64, 128), (16, 128, 32), (16, 32, 512), (16, 256, 16)], pairs_1d),
                          ([(16, 64, 7, 7), (16, 128, 14, 14), (16, 32, 32, 32), (16, 256, 4, 4)], pairs_2d)):
        for shape in shapes:
            for na, fa, nb, fb in pairs:
                rows += time_pair(fa, fb, [shape], (na, nb), ratios, lambda a, b: f"| {'x'.join(map(str, shape[1:]))} | "
                                  f"{na} vs {nb} | {a:.3f} | {b:.3f} | {a / b:.2f} |")
    rows += ["", "| input (batch 16) | pair | a (ms) | b (ms) | a / b |", "|---|---|---|---|---|"]
    for shape in [(16, 64, 32, 32), (16, 256, 14, 14), (16, 128, 8, 8), (16, 512)]:
        # x - x and x + x: both operands carry the gradient, as the probes of sub and add
        rows += time_pair(lambda x: x - x, lambda x: x + x, [shape], ("x - x", "x + x"), ratios,
                          lambda a, b: f"| {'x'.join(map(str, shape[1:]))} | x - x vs x + x | {a:.3f} | {b:.3f} | "
                                       f"{a / b:.2f} |")
    text = "\n".join([f"# Pooling kernels side by side ({time.strftime('%Y-%m-%d %H:%M')} UTC, host, one thread)", "",
                      "`python bench/bench_pool_kernels.py`", ""] + rows) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
