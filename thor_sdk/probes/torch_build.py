"""torch side of probe building: modules, example batches and the training-step recipe."""

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from thor_sdk.layers.build import build_layer, example_input
from thor_sdk.layers.kinds import get_kind


class Head(nn.Module):
    """Output head of a probe: flatten to (B, in_features) (or keep (B, T, in) when tokens > 1) + Linear."""

    def __init__(self, in_features, out_features, tokens=1):
        super().__init__()
        self.tokens = int(tokens)
        self.fc = nn.Linear(int(in_features), int(out_features))

    def forward(self, x):
        if self.tokens > 1:
            return self.fc(x)
        return self.fc(x.reshape(x.shape[0], -1))


class _Context(nn.Module):
    """What a swept probe runs between the sweep and the layer: a small frozen conv block (3x3 conv 16->16, batch norm,
    ReLU on 16 x 16 x 8 x 8), so the layer runs after other layers' work as in a net, not straight after a sweep."""

    SHAPE = (16, 16, 8, 8)

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 16, 3, padding=1, bias=False).requires_grad_(False)
        self.bn = nn.BatchNorm2d(16).requires_grad_(False)

    def forward(self, z):
        return F.relu(self.bn(self.conv(z)))


class Swept(nn.Module):
    """A swept probe part (``Probe.cache``): ``sweep_bytes`` written and read (copies of the head's first bias, a
    trained parameter: an input of an exported step, so nothing folds them into a constant; not the data, which an
    in-place layer overwrites), then a small frozen conv block on the first of them (``_Context``), then the part's
    modules in order (indexed as the unswept part's: the layer first, the head last). The logits are scaled by
    ``1 + 0 * (sums)``, exactly 1, which keeps the sweep and the block in an exported graph."""

    def __init__(self, modules, sweep_bytes):
        super().__init__()
        self.part = nn.Sequential(*modules)
        self.context = _Context()
        self.n = max(int(sweep_bytes) // 4, math.prod(_Context.SHAPE))

    def __getitem__(self, i):
        return self.part[i]

    def __len__(self):
        return len(self.part)

    def __iter__(self):
        return iter(self.part)

    def forward(self, x):
        t = self.part[-1].fc.bias.detach()[:1].repeat(self.n)
        s = t.sum() + self.context(t[:math.prod(_Context.SHAPE)].view(_Context.SHAPE)).sum()
        return self.part(x) * (1.0 + 0.0 * s)


def cross_entropy(logits, y):
    """Cross-entropy for (B, C) logits with (B,) labels or (B, T, C) logits with (B, T) labels."""
    if logits.dim() == 3:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return F.cross_entropy(logits, y)


@dataclass
class ProbeModel:
    """A network to train, with one example batch.

    ``x_requires_grad``: the training step must compute the gradient of the loss with respect to
    ``x`` (the identity input layer of a 3-layer probe). Exporters must keep that gradient as a
    graph output so it is not optimised away.
    """

    module: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    x_requires_grad: bool
    num_classes: int

    def loss(self, logits, y):
        return cross_entropy(logits, y)


def build_part(probe, part, seed=0):
    pm = _build_part(probe, part, seed)
    if probe.cache == "swept":
        from .build import SWEEP_BYTES

        pm.module = Swept(list(pm.module) if isinstance(pm.module, nn.Sequential) else [pm.module], SWEEP_BYTES)
    return pm


def _build_part(probe, part, seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    b = probe.batch_size
    hc = probe.head_config()
    head = Head(hc["in_features"], hc["out_features"], hc["tokens"])
    classes = int(hc["out_features"])
    if probe.role == "output":
        shape = (b, hc["tokens"], hc["in_features"]) if hc["tokens"] > 1 else (b, hc["in_features"])
        x = torch.randn(shape, generator=g)
        y = torch.randint(0, classes, (b, hc["tokens"]) if hc["tokens"] > 1 else (b,), generator=g)
        return ProbeModel(head, x, y, True, classes)
    kind = get_kind(probe.kind)
    y = torch.randint(0, classes, (b,), generator=g)
    if part == "head":
        x = torch.randn((b, *[int(s) for s in kind.out_shape(probe.config)]), generator=g)
        return ProbeModel(head, x, y, probe.head_input_requires_grad(), classes)
    layer = build_layer(probe.kind, probe.config)
    x = example_input(kind, probe.config, b, generator=g)
    return ProbeModel(nn.Sequential(layer, head), x, y, part == "hidden", classes)
