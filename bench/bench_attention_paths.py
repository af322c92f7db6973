"""Attention written out against kind ``sdpa``'s probe: what reading an ONNX attention as ``sdpa`` risks.

An ONNX file holds attention as ``MatMul(q, k^T)``, a scale, a mask, ``Softmax``, ``Dropout``, ``MatMul(., v)``
whether the model called ``F.scaled_dot_product_attention`` (PyTorch's fused kernel: what kind ``sdpa`` probes) or
wrote those steps out (``q @ k.transpose(-2, -1)``, ``masked_fill``, ``softmax``, ``@ v``: the zoo transformers'
blocks, older code). The ONNX reader reads both as kind ``sdpa``; this times, side by side, the written-out
attention against kind ``sdpa``'s probe module on the same input (one projection's output viewed as q, k and v),
training step (forward, backward to the input), one thread, medians of 40 after 5 warm-ups, each pair twice. The
ratio is how far the estimate of a model that runs the written-out attention can be from its truth on this host.

    python bench/bench_attention_paths.py --out bench/results/attention-paths-host-<date>.md
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (label, batch, heads, tokens, head_dim, causal, dropout p): the zoo's attention (its transformer blocks' and
#: gpt_nano's causal self-attention with dropout, vit_tiny's), and the same sizes without mask and dropout
CONFIGS = [("transformer", 16, 6, 64, 64, True, 0.1), ("transformer_lm_small", 8, 3, 128, 64, True, 0.1),
           ("transformer_cls", 8, 4, 128, 32, True, 0.1), ("transformer_tiny", 16, 3, 32, 32, True, 0.1),
           ("gpt_nano", 8, 4, 128, 32, True, 0.1), ("vit_tiny", 16, 4, 64, 16, False, 0.0),
           ("T64 hd64 plain", 16, 6, 64, 64, False, 0.0), ("T128 hd32 plain", 8, 4, 128, 32, False, 0.0),
           ("T32 hd32 plain", 16, 3, 32, 32, False, 0.0)]


def written_out(tokens, causal, p):
    """Attention as its steps, on the probe's input layout ``(batch, 3 x tokens, heads, head_dim)``."""
    import torch
    from torch.nn import functional as F

    mask = torch.ones(tokens, tokens, dtype=torch.bool).triu(1) if causal else None

    def f(x):
        b, _, h, d = x.shape
        q, k, v = x.view(b, tokens, 3, h, d).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * d ** -0.5
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        return F.dropout(torch.softmax(scores, dim=-1), p) @ v

    return f


def main(argv=None):
    import torch
    from bench_unary_ops import time_pair, write_report  # one timer and one report for the operator benches

    from thor_sdk.layers.build import Sdpa

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="Markdown file to write")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = ["| attention | batch | heads x tokens x head_dim | causal, p | written out (ms) | sdpa probe (ms) | "
            "written out / sdpa |", "|---|---|---|---|---|---|---|"]
    ratios = {}
    for label, b, h, t, d, causal, p in CONFIGS:
        probe = Sdpa(t, t, causal, p).train()
        f = written_out(t, causal, p)
        group = ("causal, dropout" if causal and p else "causal" if causal else "dropout" if p else "plain",
                 "sdpa probe")
        rows += time_pair(f, probe, [(b, 3 * t, h, d)], group, ratios,
                          lambda a, r: f"| {label} | {b} | {h} x {t} x {d} | {int(causal)}, {p} | {a:.3f} | {r:.3f} | "
                                       f"{a / r:.2f} |")
    write_report("Written-out attention against kind sdpa's probe", "python bench/bench_attention_paths.py",
                 ratios, rows, args.out)


if __name__ == "__main__":
    main()
