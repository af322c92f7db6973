"""The canary: a fixed, tiny CPU workload timed beside every window, read as the machine's speed at that moment.

Why: this project's 2-core VMs switch between speed states every few seconds (``bench/results/
canary-host-20261130-*``: 90 s of back-to-back timings, the same matmul, conv and pure-Python loop each 1.4-1.5x
slower for 1-10 s at a time, no steal time reported). A reference probe re-measured every two minutes cannot
place such a switch; a canary timed right before and right after a window can. ``measure_parts(...,
canary=Canary())`` stores the geometric mean of the two readings with every window (``PartResult.canary_s``);
``thor_sdk.campaign.measure.probe_canary`` takes their median over a probe (one reading alone varies more than the
window beside it), and ``fit`` puts each probe at the campaign's median (``fitting.pipeline.at_campaign_level``).

A reading is the workload's second run of two back to back: the first run right after a window pays for what the
window left behind (``bench/bench_canary.py settle``: right after a gru_har window the first run took 0.51 ms and the
next three 0.30 ms; after cnn5 0.37 and 0.30), and timed alone it put every GRU probe 1.19-1.33x slower than its
neighbours in profiles 72-74 (LSTM and GRU cells 1.15-1.22x), so ``fit`` divided their costs by a speed state that
was not the machine's (version 1 timed the first run; version 2 the second).

The workload is the same in every version of this module that has the same ``harness.protocol.CANARY_VERSION``
(kept there, a base module, so ``fit`` reads it without importing this one; readings of two versions are not one
series). It uses no random numbers: the probes' seeded initialisation is untouched.
"""

import time

#: the workload: MATMULS products of two fixed SIZE x SIZE float32 matrices, then a pure-Python loop of
#: LOOP additions (about 0.25 ms on this project's 2-core VMs at one intra-op thread): torch's kernels and
#: the interpreter both, as a training step uses both
SIZE = 96
MATMULS = 8
LOOP = 3000


class Canary:
    """``canary()`` -> seconds the fixed workload took now. Built once per measurement (its matrices are
    allocated here, not in the timed call)."""

    def __init__(self, clock=time.perf_counter):
        import torch

        self._torch = torch
        self._a = torch.linspace(-1.0, 1.0, SIZE * SIZE).reshape(SIZE, SIZE)
        self._b = torch.linspace(1.0, -1.0, SIZE * SIZE).reshape(SIZE, SIZE).t().contiguous()
        self._clock = clock
        self()  # the first call pays for lazy initialisation in torch: not a reading

    def __call__(self):
        self._work()  # settles what the last window left behind: not timed
        t0 = self._clock()
        self._work()
        return self._clock() - t0

    def _work(self):
        mm, a, b = self._torch.mm, self._a, self._b
        with self._torch.no_grad():
            for _ in range(MATMULS):
                mm(a, b)
        s = 0
        for i in range(LOOP):
            s += i
        return s
