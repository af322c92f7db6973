# Throwaway experiment (2026-11-29), kept as run: bench_composition with the probe parts wrapped (see ../NOTES.md).
import sys, torch
from torch import nn
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # bench/
import thor_sdk.probes.torch_build as tb
MB = float(sys.argv[1]); ONLY_FWD = sys.argv[2] == "fwd"
class Flush(nn.Module):
    def __init__(self, mb):
        super().__init__(); self.buf = torch.zeros(int(mb * 2**20) // 4)
    def forward(self, x):
        self.buf.add_(1.0); return x
orig = tb.build_part
def build_part(probe, part, seed=0):
    pm = orig(probe, part, seed)
    from thor_sdk.layers.kinds import get_kind
    fwd = probe.role == "input" and not get_kind(probe.kind).trains(probe.config)
    if MB > 0 and (fwd or not ONLY_FWD):
        pm.module = nn.Sequential(Flush(MB), pm.module)
    return pm
tb.build_part = build_part
import bench_composition
bench_composition.main(sys.argv[3:])
