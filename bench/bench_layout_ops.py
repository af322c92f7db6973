"""Layout operators without a kind against the probes of the kinds that could cost them: ``nn.PixelShuffle`` and
``nn.PixelUnshuffle`` (a super-resolution net's upsampling, a space-to-depth stem) against kind ``permute``'s probe
(a transpose copied to contiguous memory) of as many elements, and reflection, replication and circular padding
against kind ``pad``'s probe (constant padding) of the same sizes. The evidence for whether they are read as those
kinds. Training step (forward, backward to the input), one thread, batch 16, side by side, medians of 40 after 5
warm-ups, each pair twice.

    python bench/bench_layout_ops.py --out bench/results/layout-ops-host-<date>.md
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (per-sample input, upscale factor) of pixel shuffles: ESPCN's last conv (3 x r^2 channels), an EDSR-style
#: upsampler (64 x r^2), and a larger factor
SHUFFLES = [((12, 64, 64), 2), ((256, 32, 32), 2), ((48, 32, 32), 4), ((64, 16, 16), 2)]
#: (per-sample input, pad per side of H and W): a style-transfer stem's ReflectionPad2d(4) before its 9x9 conv, the
#: residual blocks' 1-pixel pads, a CycleGAN stem's 3
PADS = [((3, 128, 128), 4), ((128, 32, 32), 1), ((64, 64, 64), 3), ((32, 64, 64), 1)]


def cases():
    """``(op, label, batch-16 input shape, f, reference label, reference f)``."""
    from torch import nn
    from torch.nn import functional as F

    from thor_sdk.layers.build import Pad, Permute

    out = []
    for (c, h, w), r in SHUFFLES:
        permute = Permute()
        out.append(("PixelShuffle", f"PixelShuffle({r}) {c}x{h}x{w}", (16, c, h, w), nn.PixelShuffle(r),
                    "permute (same numel)",
                    lambda x, p=permute: p(x.reshape(x.shape[0], -1))))
        out.append(("PixelUnshuffle", f"PixelUnshuffle({r}) {c}x{h}x{w}", (16, c, h, w), nn.PixelUnshuffle(r),
                    "permute (same numel)",
                    lambda x, p=permute: p(x.reshape(x.shape[0], -1))))
    for (c, h, w), p in PADS:
        constant = Pad(0, 2 * p, 2 * p)
        for mode in ("reflect", "replicate", "circular"):
            out.append((f"F.pad({mode})", f"F.pad({mode}, {p}) {c}x{h}x{w}", (16, c, h, w),
                        lambda x, m=mode, p=p: F.pad(x, (p, p, p, p), mode=m), "pad (constant, same sizes)",
                        constant))
    return out


def main(argv=None):
    import torch
    from bench_unary_ops import time_pair, write_report  # one timer and one report for the operator benches

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="Markdown file to write")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = ["| op (batch 16) | reference | op (ms) | reference (ms) | op / reference |", "|---|---|---|---|---|"]
    ratios = {}
    for op, label, shape, f, ref_label, ref in cases():
        rows += time_pair(f, ref, [shape], (op, ref_label), ratios,
                          lambda a, b: f"| {label} | {ref_label} | {a:.3f} | {b:.3f} | {a / b:.2f} |")
    write_report("Layout operators against kind probes", "python bench/bench_layout_ops.py", ratios, rows, args.out)


if __name__ == "__main__":
    main()
