"""Does the 1-layer head probe read its input from cache? The head alone with one input vs rotated inputs.

    python bench/bench_head_cache.py [--rounds 12] [--copies 24]

THOR's layer cost is T(head after the layer) - T(head alone). The head alone reuses one input tensor every
step (warm in cache); after the layer it reads a freshly written one. Here the head of the conv2d probe
32->32, 3x3, 32x32, batch 16 (vgg_small's second conv) is timed with one input and with its input rotated
among ``--copies`` copies (beyond the caches), beside the hidden probe, interleaved round by round in one
process (order reversed every other round), as the host device measures (one intra-op thread, denormals
flushed, freed memory held; torch's settings restored after). Prints the medians and
each round's paired difference: how much the warm head over-states the layer's probe difference.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = {"in_channels": 32, "out_channels": 32, "kernel": 3, "stride": 1, "padding": 1, "groups": 1,
          "height": 32, "width": 32, "bias": 1}


def _per_step(fn, n):
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--copies", type=int, default=24)
    a = ap.parse_args(argv)
    if not (1 <= a.rounds <= 1000 and 2 <= a.copies <= 1000):
        ap.error("--rounds 1-1000, --copies 2-1000")
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.harness.torch_trainer import trainer_for_probe_model
    from thor_sdk.probes.build import Probe

    with HostDevice(threads=1).measuring():  # as the host measures; torch's settings restored after
        p = Probe("conv2d", CONFIG, 16, "hidden")
        head, hidden = trainer_for_probe_model(p.build("head")), trainer_for_probe_model(p.build("hidden"))
        xs = [head.x.detach().clone().requires_grad_(True) for _ in range(a.copies)]
        turn = [0]

        def rotated():
            head.x = xs[turn[0] % len(xs)]
            turn[0] += 1
            head.step()

        def fixed():
            head.x = xs[0]
            head.step()

        res = {"head, one input": [], "head, rotated inputs": [], "hidden probe": []}
        fns = list(zip(res, (fixed, rotated, hidden.step), (40, 40, 8)))
        for r in range(a.rounds):
            for name, fn, n in (fns if r % 2 == 0 else fns[::-1]):
                res[name].append(_per_step(fn, n))
    med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
    diffs = [(x - y) * 1e3 for x, y in zip(res["head, rotated inputs"], res["head, one input"])]
    for k, v in med.items():
        print(f"{k:22s} {v:8.3f} ms (median of {a.rounds} rounds)")
    print(f"rotated - one input, per round: {', '.join(f'{d:.3f}' for d in diffs)} ms; median {statistics.median(diffs):.3f} ms"
          f" = {100 * statistics.median(diffs) / (med['hidden probe'] - med['head, one input']):.1f}% of the probe difference")
    print("command: python bench/bench_head_cache.py " + " ".join(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
