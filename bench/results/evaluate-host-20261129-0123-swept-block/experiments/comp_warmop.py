# Throwaway experiment (2026-11-29, on the tree with the sweep only, aa6e88a), kept as run: a frozen conv block after the sweep (see ../NOTES.md).
import sys, os, torch
from torch import nn
import os; sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))  # bench/
import thor_sdk.probes.torch_build as tb
KIND = sys.argv[1]
class W(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(16, 16, 3, padding=1, bias=False).requires_grad_(False); self.bn = nn.BatchNorm2d(16).requires_grad_(False)
        self.z = torch.randn(16, 16, 8, 8)
    def forward(self):
        return torch.relu(self.bn(self.c(self.z)))
orig_fwd = tb.Swept.forward
def fwd(self, x):
    s = self[-1].fc.bias.detach()[:1].repeat(self.n).sum()
    if not hasattr(self, "_w"):
        object.__setattr__(self, "_w", W())
    if KIND == "w":
        s = s + 0.0 * self._w().sum()
    for m in self:
        x = m(x)
    return x * (1.0 + 0.0 * s)
tb.Swept.forward = fwd
import bench_composition
bench_composition.main(sys.argv[2:])
