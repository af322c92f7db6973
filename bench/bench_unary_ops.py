"""Pointwise operators without a kind of their own against the probes of the kinds that could cost them: each unary
op against softplus (the generic ``elementwise`` kind's probe) and the kinds whose kernels it runs or resembles
(SELU and CELU against ELU, clamp against hardtanh, mish against SiLU and GELU, exp against sigmoid, abs against
ReLU); ``x / y`` and ``torch.maximum`` against ``x * y`` (kind mul, full size). The evidence for
which of them are read as those kinds by default. Training step (forward, backward to every input), one thread,
batch 16, side by side, medians of 40 after 5 warm-ups, each pair twice.

    python bench/bench_unary_ops.py --out bench/results/unary-ops-host-<date>.md
"""

import argparse
import statistics
import time

SHAPES = [(16, 64, 32, 32), (16, 256, 14, 14), (16, 128, 8, 8), (16, 24, 128), (16, 512)]


def _step_ms(f, shapes, positive=False, n=40):
    """Median ms of one forward + backward of ``f`` on tensors of ``shapes`` that all take a gradient."""
    import torch

    xs = [(torch.randn(*s).abs() + 0.5 if positive else torch.randn(*s)).requires_grad_(True) for s in shapes]

    def step():
        for x in xs:
            x.grad = None
        f(*xs).sum().backward()

    for _ in range(5):
        step()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def cases():
    """``(label, f, positive inputs, reference label, reference f, arity)``."""
    import torch
    from torch.nn import functional as F

    softplus = ("F.softplus (elementwise)", F.softplus)
    elu = ("F.elu (elu)", F.elu)
    mul = ("x * y (mul)", lambda x, y: x * y)
    unary = [("torch.clamp(x, -1, 1)", lambda x: torch.clamp(x, -1.0, 1.0), False),
             ("x.clamp(min=0.1)", lambda x: x.clamp(min=0.1), False),
             ("torch.abs", torch.abs, False), ("torch.exp", torch.exp, False), ("torch.log", torch.log, True),
             ("torch.sqrt", torch.sqrt, True), ("torch.rsqrt", torch.rsqrt, True), ("x ** 2", lambda x: x ** 2, False),
             ("x ** 0.5", lambda x: x ** 0.5, True), ("torch.sin", torch.sin, False), ("torch.erf", torch.erf, False),
             ("x.reciprocal()", lambda x: x.reciprocal(), True), ("F.mish", F.mish, False),
             ("F.softsign", F.softsign, False), ("F.logsigmoid", F.logsigmoid, False), ("F.selu", F.selu, False),
             ("F.celu", F.celu, False)]
    out = [(label, f, pos, *softplus, 1) for label, f, pos in unary]
    # and against the kinds whose kernels they run or resemble: SELU and CELU are ELU's kernel; clamp is hardtanh's
    # forward (kind relu6 is any hardtanh); mish is a gated activation as SiLU and GELU are
    closest = {"F.selu": [elu], "F.celu": [elu], "torch.clamp(x, -1, 1)": [("F.hardtanh(x, -1, 1) (relu6)",
                                                                             lambda x: F.hardtanh(x, -1.0, 1.0))],
               "F.mish": [("F.silu (silu)", F.silu), ("F.gelu (gelu)", F.gelu)],
               "torch.exp": [("torch.sigmoid (sigmoid)", torch.sigmoid)], "torch.abs": [("F.relu (relu)", F.relu)]}
    out += [(label, f, pos, *ref, 1) for label, f, pos in unary for ref in closest.get(label, [])]
    out += [("x / y", lambda x, y: x / y, True, *mul, 2), ("torch.maximum", torch.maximum, False, *mul, 2),
            ("torch.minimum", torch.minimum, False, *mul, 2)]
    return out


def main(argv=None):
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="Markdown file to write")
    ap.add_argument("--shapes", type=int, default=len(SHAPES), help="how many of the shapes (default all)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = ["| input (batch 16) | op | reference | op (ms) | reference (ms) | op / reference |",
            "|---|---|---|---|---|---|"]
    ratios = {}
    for shape in SHAPES[:args.shapes]:
        for label, f, positive, ref_label, ref, arity in cases():
            rows += time_pair(f, ref, [shape] * arity, (label, ref_label), ratios,
                              lambda a, b: f"| {'x'.join(map(str, shape[1:]))} | {label} | {ref_label} | {a:.3f} | "
                                           f"{b:.3f} | {a / b:.2f} |", positive, positive and arity == 2)
    write_report("Pointwise operators against kind probes", "python bench/bench_unary_ops.py", ratios, rows, args.out)


def time_pair(f, ref, shapes, key, ratios, row, positive=False, ref_positive=False, times=2):
    """``f`` and ``ref`` timed side by side (``_step_ms``) ``times`` times on tensors of ``shapes``: each ratio
    f / ref appended to ``ratios[key]``; the Markdown rows ``row(f ms, ref ms)``, each printed as it is measured."""
    out = []
    for _ in range(times):
        a, b = _step_ms(f, shapes, positive), _step_ms(ref, shapes, ref_positive)
        ratios.setdefault(key, []).append(a / b)
        out.append(row(a, b))
        print(out[-1], flush=True)
    return out


def write_report(title, command, ratios, rows, out=None):
    """Print the ratios' summary (``{(op, reference): [op / reference, ...]}``: min, median, max) and write it with
    the measured ``rows`` to ``out`` (Markdown) where given."""
    summary = ["| op | reference | ratios: min | median | max |", "|---|---|---|---|---|"]
    for (label, ref_label), rs in ratios.items():
        summary.append(f"| {label} | {ref_label} | {min(rs):.2f} | {statistics.median(rs):.2f} | {max(rs):.2f} |")
    text = "\n".join([f"# {title} ({time.strftime('%Y-%m-%d %H:%M')} UTC, host, one thread)", "", f"`{command}`", "",
                      *summary, "", *rows]) + "\n"
    print("\n".join(summary))
    if out:
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
