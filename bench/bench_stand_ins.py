"""Stand-in kinds: an operator without a kind of its own against the kinds ``--unknown-ops approx`` costs it as.

    python bench/bench_stand_ins.py            # writes bench/results/stand-ins-host-<stamp>.md

Under ``--unknown-ops approx`` some operators without a kind are estimated as kinds that stand in for them
(``thor_sdk.layers.extract._stand_in``): a bidirectional LSTM as one layer per direction and a ``cat`` (a
bidirectional GRU is read so by default, and timed here against those layers, as its own kinds); a
projected LSTM as the lstm of its full hidden size and its projection, per direction; a transposed conv (1-D, or 2-D
with groups or non-square sides: else kind ``conv_transpose2d``, timed here against its own kind) as the stride-1
conv of the same FLOPs; nn.MultiheadAttention outside kind ``mha`` (``bias=False``), ``x @ y``, ``torch.einsum`` and
F.scaled_dot_product_attention with a mask as ``linear`` layers of the same FLOPs and a ``softmax``; an instance
norm as the batch norm of the same sizes; GroupNorm without its affine as the layernorm of the same statistics. Also
timed against the layers they are read as: a LayerNorm over several trailing dimensions (its own kind, over their
product), a GroupNorm with its affine (kind ``groupnorm``), a dilated conv (conv1d / conv2d with its dilation since
2026-11-28; before, the undilated conv of the same output), nn.MultiheadAttention (kind ``mha``, self and cross),
F.scaled_dot_product_attention (kind ``sdpa``) and nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (their
attention, norms and feed-forward, each of its own kind), with or without a causal mask.

Each case is a small module holding the operator (and a cheap ReLU after it, so no linear stand-in becomes the
loss head). Its layer list comes from the product's own ``layers_of(..., unknown_ops="approx")``; every layer
is then built alone (``build_layer``) and timed as one training step (forward, mean-square loss, backward,
SGD) on an input that needs a gradient, less the loss alone on its output (THOR's probes remove the loss by
subtraction too), and the sum of the layers (what THOR adds up) is set against the module timed the same way. Side by side in one process, one intra-op thread, median of 30 steps after 5
warm-up steps, the module and its layers alternating in three rounds (the median of the rounds is kept). The
ratio is how far the stand-in's own cost is from the operator's on this machine; the estimate adds the GP's
error on top, and the runtime widens the std of a stand-in layer by APPROX_OP_REL_STD.
"""

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def step_s(module, x, steps=30, warmup=5):
    """Median seconds of one training step (forward, mean-square loss, backward, SGD)."""
    import torch

    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1e-3) if params else None

    def one():
        if opt is not None:
            opt.zero_grad()
        if x.grad is not None:
            x.grad = None
        out = module(x)
        (out[0] if isinstance(out, tuple) else out).float().pow(2).mean().backward()
        if opt is not None:
            opt.step()

    for _ in range(warmup):
        one()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        one()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _loss_s(out_shape, batch):
    """Median seconds of the loss alone (mean square, its backward) on an output of ``out_shape``."""
    import torch
    from torch import nn

    return step_s(nn.Identity(), torch.randn(batch, *out_shape, requires_grad=True))


def _cases():
    """``[(label, module, per-sample input shape, batch)]``."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Op(nn.Module):
        def __init__(self, inner, tuple_out=False, self_attention=False):
            super().__init__()
            self.inner, self.tuple_out, self.self_attention = inner, tuple_out, self_attention

        def forward(self, x):
            y = self.inner(x, x, x) if self.self_attention else self.inner(x)
            return torch.relu(y[0] if self.tuple_out else y)

    class Scores(nn.Module):
        def forward(self, x):  # (B, heads, T, hd): q @ k^T, then the weighted sum
            return torch.relu(torch.softmax(x @ x.transpose(-1, -2), dim=-1) @ x)

    class Sdpa(nn.Module):
        def __init__(self, causal=False, masked=0):
            super().__init__()
            self.causal = causal
            self.register_buffer("mask", torch.ones(masked, masked, dtype=torch.bool).tril() if masked else None)

        def forward(self, x):
            return torch.relu(F.scaled_dot_product_attention(x, x, x, attn_mask=self.mask, is_causal=self.causal))

    class SplitSdpa(nn.Module):
        """Attention as timm and nanoGPT call it: the queries, keys and values split out of one projection's output
        (B, T, 3d) by reshape and permute, F.scaled_dot_product_attention, the heads merged back."""

        def __init__(self, heads, causal=False):
            super().__init__()
            self.heads, self.causal = heads, causal

        def forward(self, x):
            b, t, d3 = x.shape
            q, k, v = x.reshape(b, t, 3, self.heads, d3 // 3 // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
            return torch.relu(y.transpose(1, 2).reshape(b, t, d3 // 3))

    class EinsumScores(nn.Module):
        def forward(self, x):  # (B, heads, T, hd), as Scores with torch.einsum
            a = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", x, x), dim=-1)
            return torch.relu(torch.einsum("bhqk,bhkd->bhqd", a, x))

    class EinsumChain(nn.Module):
        def forward(self, x):  # (B, T, d): x x^T x, one einsum of three operands (a kernel-smoothing product)
            return torch.relu(torch.einsum("bij,bkj,bkl->bil", x, x, x))

    class Cross(nn.Module):
        def __init__(self, d, h, tk):
            super().__init__()
            self.tk, self.att = tk, nn.MultiheadAttention(d, h, batch_first=True)

        def forward(self, x):  # the first tk steps as the memory the queries read
            m = x[:, :self.tk]
            return torch.relu(self.att(x, m, m)[0])

    class MaskedMha(nn.Module):
        """Self-attention under a causal float mask buffer, the weights returned (the mask added to the scores) or
        not with PyTorch's is_causal hint (its causal fused kernel)."""

        def __init__(self, d, h, t, hint=False):
            super().__init__()
            self.hint, self.att = hint, nn.MultiheadAttention(d, h, batch_first=True)
            self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), 1))

        def forward(self, x):
            return torch.relu(self.att(x, x, x, attn_mask=self.mask, need_weights=not self.hint,
                                       is_causal=self.hint)[0])

    class CausalStack(nn.Module):
        """nn.TransformerEncoder under the mask generate_square_subsequent_mask makes in forward (it then runs its
        layers causally)."""

        def __init__(self, d, h, ff, layers):
            super().__init__()
            self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, ff, batch_first=True), layers,
                                             enable_nested_tensor=False)

        def forward(self, x):
            return torch.relu(self.enc(x, mask=nn.Transformer.generate_square_subsequent_mask(x.size(1))))

    class Decoder(nn.Module):
        """nn.TransformerDecoderLayer on the last tokens of its input as targets (causal, PyTorch's hint) over the
        first ``memory`` tokens as the memory."""

        def __init__(self, d, h, ff, memory):
            super().__init__()
            self.memory, self.dec = memory, nn.TransformerDecoderLayer(d, h, ff, batch_first=True)

        def forward(self, x):
            t = x.size(1) - self.memory
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            return torch.relu(self.dec(x[:, self.memory:], x[:, :self.memory], tgt_mask=mask, tgt_is_causal=True))

    cases = []
    for d, h, ff, t, b in ((64, 4, 128, 24, 16), (128, 4, 256, 64, 16), (256, 8, 512, 32, 8)):
        cases.append((f"TransformerEncoderLayer d{d} h{h} ff{ff} T{t} (its own kinds)",
                      Op(nn.TransformerEncoderLayer(d, h, ff, batch_first=True)), (t, d), b))
    cases += [
        ("LSTM bidirectional 64->96 T32", Op(nn.LSTM(64, 96, batch_first=True, bidirectional=True), True), (32, 64), 16),
        ("GRU bidirectional x2 12->64 T50 (its own kinds)",
         Op(nn.GRU(12, 64, 2, batch_first=True, bidirectional=True), True),
         (50, 12), 16),
        # a keyword spotter's over 98 frames of 40 log-mels, a HAR window, a text encoder's stack, a small one
        ("GRU bidirectional 40->128 T98 (its own kinds)",
         Op(nn.GRU(40, 128, batch_first=True, bidirectional=True), True),
         (98, 40), 8),
        ("GRU bidirectional 9->64 T128 (its own kinds)",
         Op(nn.GRU(9, 64, batch_first=True, bidirectional=True), True), (128, 9), 16),
        ("GRU bidirectional x2 128->128 T24 (its own kinds)",
         Op(nn.GRU(128, 128, 2, batch_first=True, bidirectional=True), True),
         (24, 128), 16),
        ("GRU bidirectional 64->32 T32 (its own kinds)",
         Op(nn.GRU(64, 32, batch_first=True, bidirectional=True), True), (32, 64), 16),
        ("LSTM bidirectional 40->128 T100", Op(nn.LSTM(40, 128, batch_first=True, bidirectional=True), True),
         (100, 40), 8),
        ("LSTM projected 40->256 P64 T50", Op(nn.LSTM(40, 256, proj_size=64, batch_first=True), True), (50, 40), 16),
        ("LSTM projected x2 80->320 P96 T32", Op(nn.LSTM(80, 320, 2, proj_size=96, batch_first=True), True), (32, 80), 8),
        ("LSTM projected 40->128 P32 T50", Op(nn.LSTM(40, 128, proj_size=32, batch_first=True), True), (50, 40), 16),
        ("LSTM projected bidirectional 40->128 P32 T50",
         Op(nn.LSTM(40, 128, proj_size=32, batch_first=True, bidirectional=True), True), (50, 40), 16),
        ("LayerNorm over [H, W] 16x32x32 (its own kind)", Op(nn.LayerNorm([32, 32])), (16, 32, 32), 16),
        ("LayerNorm over [C, H, W] 16x32x32 (its own kind)", Op(nn.LayerNorm([16, 32, 32])), (16, 32, 32), 16),
        ("GroupNorm 4 groups 32x16x16 (its own kind)", Op(nn.GroupNorm(4, 32)), (32, 16, 16), 16),
        ("GroupNorm 8 groups 64x8x8 (its own kind)", Op(nn.GroupNorm(8, 64)), (64, 8, 8), 16),
        ("GroupNorm 2 groups 16x32x32 (its own kind)", Op(nn.GroupNorm(2, 16)), (16, 32, 32), 16),
        ("GroupNorm 4 groups 32x16x16 without affine", Op(nn.GroupNorm(4, 32, affine=False)), (32, 16, 16), 16),
        ("InstanceNorm2d affine 32x16x16", Op(nn.InstanceNorm2d(32, affine=True)), (32, 16, 16), 16),
        ("InstanceNorm2d 16x32x32", Op(nn.InstanceNorm2d(16)), (16, 32, 32), 16),
        ("InstanceNorm1d affine 32xL128", Op(nn.InstanceNorm1d(32, affine=True)), (32, 128), 16),
        ("Conv1d 3->32 k3 dilation 2 L128 (its own kind)",
         Op(nn.Conv1d(3, 32, 3, padding=2, dilation=2)), (3, 128), 16),
        ("Conv1d 32->32 k3 dilation 4 L128 (its own kind)",
         Op(nn.Conv1d(32, 32, 3, padding=4, dilation=4)), (32, 128), 16),
        ("Conv1d 64->64 k5 dilation 8 L256 (its own kind)",
         Op(nn.Conv1d(64, 64, 5, padding=16, dilation=8)), (64, 256), 16),
        ("Conv2d 32->32 k3 dilation 2 32x32 (its own kind)",
         Op(nn.Conv2d(32, 32, 3, padding=2, dilation=2)), (32, 32, 32), 16),
        ("ConvTranspose2d 8->4 k2 s2 16x16 (its own kind)", Op(nn.ConvTranspose2d(8, 4, 2, stride=2)), (8, 16, 16), 16),
        ("ConvTranspose2d 64->32 k4 s2 p1 16x16 (its own kind)", Op(nn.ConvTranspose2d(64, 32, 4, 2, 1)),
         (64, 16, 16), 16),
        ("ConvTranspose2d 32->16 k3 s2 p1 op1 32x32 (its own kind)",
         Op(nn.ConvTranspose2d(32, 16, 3, 2, 1, output_padding=1)),
         (32, 32, 32), 16),
        ("ConvTranspose1d 32->16 k4 s2 p1 L64", Op(nn.ConvTranspose1d(32, 16, 4, 2, 1)), (32, 64), 16),
        ("ConvTranspose2d 32->16 k2 s2 16x16 groups 2", Op(nn.ConvTranspose2d(32, 16, 2, stride=2, groups=2)),
         (32, 16, 16), 16),
        ("MultiheadAttention d64 h4 T24 (its own kind)", Op(nn.MultiheadAttention(64, 4, batch_first=True), True, True),
         (24, 64), 16),
        ("MultiheadAttention d128 h8 T64 (its own kind)", Op(nn.MultiheadAttention(128, 8, batch_first=True), True,
                                                            True), (64, 128), 16),
        ("MultiheadAttention bias=False d64 h4 T24", Op(nn.MultiheadAttention(64, 4, bias=False, batch_first=True),
                                                        True, True), (24, 64), 16),
        ("x @ x^T, softmax, @ x: 4 heads T32 hd16", Scores(), (4, 32, 16), 16),
        ("x @ x^T, softmax, @ x: 8 heads T64 hd32", Scores(), (8, 64, 32), 8),
        ("scaled_dot_product_attention 4 heads T32 hd16 (its own kind)", Sdpa(), (4, 32, 16), 16),
        ("scaled_dot_product_attention causal 4 heads T64 hd32 (its own kind)", Sdpa(causal=True), (4, 64, 32), 16),
        ("scaled_dot_product_attention with a mask 4 heads T32 hd16", Sdpa(masked=32), (4, 32, 16), 16),
        ("scaled_dot_product_attention on a split projection 4 heads T32 hd16 (its own kind)", SplitSdpa(4),
         (32, 3 * 64), 16),
        ("scaled_dot_product_attention causal on a split projection 4 heads T64 hd32 (its own kind)",
         SplitSdpa(4, causal=True), (64, 3 * 128), 16),
        ("einsum q k^T, softmax, einsum with v: 4 heads T32 hd16", EinsumScores(), (4, 32, 16), 16),
        ("einsum q k^T, softmax, einsum with v: 8 heads T64 hd32", EinsumScores(), (8, 64, 32), 8),
        ("einsum of three operands x x^T x: T32 d16", EinsumChain(), (32, 16), 16),
        ("einsum of three operands x x^T x: T64 d64", EinsumChain(), (64, 64), 8),
        ("MultiheadAttention cross d64 h4 Tq24 Tk8 (its own kind)", Cross(64, 4, 8), (24, 64), 16),
        ("MultiheadAttention cross d128 h8 Tq64 Tk16 (its own kind)", Cross(128, 8, 16), (64, 128), 16),
        ("MultiheadAttention causal mask added d64 h4 T24 (its own kind)", MaskedMha(64, 4, 24), (24, 64), 16),
        ("MultiheadAttention causal mask added d48 h4 T40 (its own kind)", MaskedMha(48, 4, 40), (40, 48), 16),
        ("MultiheadAttention is_causal d128 h8 T64 (its own kind)", MaskedMha(128, 8, 64, True), (64, 128), 16),
        ("TransformerEncoder causal x2 d64 h2 ff128 T35 (its own kinds)", CausalStack(64, 2, 128, 2), (35, 64), 16),
        ("TransformerDecoderLayer causal d64 h4 ff128 T24 over S16 (its own kinds)", Decoder(64, 4, 128, 16), (40, 64),
         16),
    ]
    return cases


def measure(label, module, shape, batch, rounds=3):
    """(layers, module s, sum of the layers' s, [(layer name, kind, s, approx)]) for one case."""
    import torch

    from thor_sdk.layers import layers_of
    from thor_sdk.layers.build import build_layer
    from thor_sdk.layers.kinds import get_kind

    layers = layers_of(module, input_shape=list(shape), unknown_ops="approx").layers
    built = []
    for layer in layers:
        kind = get_kind(layer["kind"])
        m = build_layer(layer["kind"], layer["config"]).train()
        x = torch.randn(batch, *[int(s) for s in kind.in_shape(layer["config"])], requires_grad=True)
        built.append((layer, m, x, tuple(int(s) for s in kind.out_shape(layer["config"]))))
    x = torch.randn(batch, *shape, requires_grad=True)
    module.train()
    with torch.no_grad():
        out = module(x)
    out_shape = tuple((out[0] if isinstance(out, tuple) else out).shape[1:])
    whole, parts = [], []
    for _ in range(rounds):
        whole.append(step_s(module, x) - _loss_s(out_shape, batch))
        parts.append([step_s(m, lx) - _loss_s(o, batch) for _, m, lx, o in built])
    per_layer = [statistics.median(p[i] for p in parts) for i in range(len(built))]
    return (statistics.median(whole), statistics.median(sum(p) for p in parts),
            [(layer["name"], layer["kind"], s, "approx" in layer) for (layer, _, _, _), s in zip(built, per_layer)])


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", default=None)
    ap.add_argument("--only", default=None, help="only the cases whose label contains this text")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    torch.set_num_threads(1)
    torch.manual_seed(0)
    load = os.getloadavg()[0]
    rows = []
    for label, module, shape, batch in _cases():
        if args.only and args.only not in label:
            continue
        whole, parts, per_layer = measure(label, module, shape, batch)
        rows.append((label, batch, whole, parts, per_layer))
        print(f"{label}: module {whole * 1e3:.3f} ms, layers {parts * 1e3:.3f} ms, ratio {whole / parts:.2f}",
              flush=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M")
    lines = [f"# Stand-in kinds on the host ({stamp} UTC)", "",
             "Command: `python bench/bench_stand_ins.py" + (" " + " ".join(argv) if argv else "") + "`", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} cores, 1 torch thread, torch {torch.__version__}; "
             f"load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at end.", "",
             "One training step less the loss alone on its output, median of 30, median of 3 alternating rounds. `module`: the operator (and a ReLU "
             "after it) timed whole; `layers`: the sum of its layer list's layers, each built alone as THOR "
             "probes it (the stand-in layers are marked approx in the list); `module / layers`: above 1, the "
             "stand-in under-reads the operator.", "",
             "| case | batch | module ms | layers ms | module / layers | layers (stand-ins in bold) |",
             "|---|---|---|---|---|---|"]
    for label, batch, whole, parts, per_layer in rows:
        desc = ", ".join(f"**{k} {s * 1e3:.2f}**" if a else f"{k} {s * 1e3:.2f}" for _, k, s, a in per_layer)
        lines.append(f"| {label} | {batch} | {whole * 1e3:.3f} | {parts * 1e3:.3f} | {whole / parts:.2f} | {desc} |")
    ratios = [r[2] / r[3] for r in rows]
    if ratios:
        lines += ["", f"module / layers over all cases: {min(ratios):.2f}-{max(ratios):.2f} "
                      f"(median {statistics.median(ratios):.2f})."]
    report = args.report or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                         f"stand-ins-host-{stamp}.md")
    with open(report, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
