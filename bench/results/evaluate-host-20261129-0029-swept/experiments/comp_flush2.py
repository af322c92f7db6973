# Throwaway experiment (2026-11-29), kept as run: bench_composition with the probe parts wrapped (see ../NOTES.md).
import sys, torch
from torch import nn
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # bench/
import thor_sdk.probes.torch_build as tb
N = int(float(sys.argv[1]) * 2**20) // 4
class Flushed(nn.Module):
    def __init__(self, body):
        super().__init__(); self.body = body
    def forward(self, x):
        s = x.reshape(-1)[:1].repeat(N).sum()
        return self.body(x) * (1.0 + 0.0 * s)
orig = tb.build_part
def build_part(probe, part, seed=0):
    pm = orig(probe, part, seed)
    from thor_sdk.layers.kinds import get_kind
    if probe.role == "input" and not get_kind(probe.kind).trains(probe.config):
        pm.module = Flushed(pm.module)
    return pm
tb.build_part = build_part
import bench_composition
bench_composition.main(sys.argv[2:])
