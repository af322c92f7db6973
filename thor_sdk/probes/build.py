"""THOR probe models: the 1-, 2- and 3-layer networks whose costs give one layer's cost by subtraction.

For a layer of kind K at config c, batch size b and role r (see ``thor_sdk.layers.kinds``):

- ``head`` (1-layer): the output head alone -- flatten + Linear(numel(K's output) -> 10) + cross-entropy --
  fed a tensor of K's output shape. Its input requires a gradient exactly when the head's input
  would in the 2- or 3-layer probe, so the head's own input-gradient work cancels in the subtraction.
- ``input`` (2-layer): K as the network's input layer, then the head. cost_input(K) = T(input) - T(head).
- ``hidden`` (3-layer): an identity input layer (the data tensor with ``requires_grad``, which costs
  nothing itself but makes K compute its input gradient as inside a network), then K, then the head.
  cost_hidden(K) = T(hidden) - T(head).
- kind ``output`` (a model's own head): the ``head`` probe of that Linear alone is its cost.

The head in each pair is identical (same input size), so no correction term is needed.

**Swept caches** (``cache`` ``swept``): an input-role probe of a layer that does no backward (frozen, or without
weights: a fine-tuned net's backbone) starts every step of both parts by writing and reading ``SWEEP_BYTES`` (made
from the head's bias, so no runtime folds it away), then runs a small frozen conv block (3x3 conv 16->16, batch norm,
ReLU), then the layer (2-layer part) and the head; the sums scale the logits by exactly 1, and all of it cancels in
the difference. Warm, the 1-layer part's small working set (the head, the loss, the backward, the update, the
interpreter's own data) stayed in the caches from step to step while the layer evicted it in the 2-layer part, and
the difference charged that to the layer (``bench/bench_probe_tail.py``: the tail 0.22 ms alone, 0.38-0.40 ms after
a layer); swept alone, the layer ran colder than in a net, straight after the sweep; after the block it runs as
after the layers before it. The exact probes of MobileNetV3-small's classifier-only fine-tune sum to 0.99-1.00x its
measured step (1.38x warm, 1.26x swept without the block; ``bench/bench_composition.py --trainable``); layers that
train keep their probes (their nets compose to 0.98-1.05x as they were). Probes stored before this (no ``cache``)
ran warm and keep doing so.
"""

import hashlib
import json
from dataclasses import dataclass, field

from thor_sdk.errors import UsageError
from thor_sdk.layers.kinds import get_kind, minimal_config, model_key

PROBE_CLASSES = 10
PARTS = ("head", "input", "hidden")
CACHE_STATES = ("warm", "swept")
#: bytes a swept probe writes and reads before its step (beyond a phone's or a server core's L2)
SWEEP_BYTES = 4 * 2 ** 20


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def forward_only(kind, config, role):
    """Whether a layer of ``kind`` at ``config`` in ``role`` runs forward only (role input, no weights that train):
    the layers whose probes are swept, and whose warm samples ``fit`` counts."""
    return role == "input" and not get_kind(kind).trains(config)


def canonical_config(config):
    """Config with ints where the value is integral (stable JSON / ids)."""
    out = {}
    for k in sorted(config):
        v = config[k]
        out[k] = int(v) if float(v).is_integer() else float(v)
    return out


@dataclass(frozen=True)
class Probe:
    """One point of a kind's config space to measure: kind, config, batch size, role."""

    kind: str
    config: dict = field(hash=False)
    batch_size: int = 32
    role: str = "hidden"
    #: ``swept`` (every step starts by sweeping the caches, ``SWEEP_BYTES``) or ``warm``; None: swept where that
    #: applies (``sweep_applies``), warm elsewhere
    cache: str = None

    def __post_init__(self):
        k = get_kind(self.kind)
        k.check_config(self.config)
        if self.batch_size < 1:
            raise UsageError(f"batch size must be >= 1, got {self.batch_size}")
        if self.kind == "output":
            object.__setattr__(self, "role", "output")
        elif self.role not in k.roles:
            raise UsageError(f"kind {self.kind} cannot have role {self.role!r} (roles: {', '.join(k.roles)})")
        if self.config.get("inplace") and self.role != "input":
            raise UsageError(f"an in-place {self.kind} is probed forward only (role input): behind a layer that needs "
                             "a gradient its input is the probe's leaf, which torch cannot overwrite")
        object.__setattr__(self, "config", canonical_config(minimal_config(self.kind, self.config)))
        sweep = self.sweep_applies()
        if self.cache is None:
            object.__setattr__(self, "cache", "swept" if sweep else "warm")
        elif self.cache not in CACHE_STATES:
            raise UsageError(f"probe cache state must be one of {', '.join(CACHE_STATES)}, got {self.cache!r}")
        elif self.cache == "swept" and not sweep:
            raise UsageError(f"a swept cache applies to a forward-only probe (role input, no weights that train), "
                             f"not {self.kind} in role {self.role}")

    def sweep_applies(self):
        """Whether this probe's steps start with a cache sweep: role input and no backward (frozen, or no
        weights)."""
        return forward_only(self.kind, self.config, self.role)

    @property
    def key(self):
        d = {"kind": self.kind, "role": self.role, "batch_size": self.batch_size, "config": self.config}
        if self.cache == "swept":  # warm probes keep the ids they had before swept ones existed
            d["cache"] = "swept"
        return json.dumps(d, sort_keys=True)

    @property
    def model_key(self):
        """The estimator entry that costs this probe's layer at its batch size (its kind, or its structural
        variant: ``conv2d:grouped``, ``conv2d:gemm``)."""
        return model_key(self.kind, self.config, self.batch_size)

    @property
    def id(self):
        return f"{self.kind}-{self.role}-b{self.batch_size}-" + hashlib.sha256(self.key.encode()).hexdigest()[:12]

    def parts(self):
        """Probe models to measure, in order; cost = T(parts[-1]) - T(head) (or T(head) for output)."""
        if self.role == "output":
            return ["head"]
        return ["head", self.role]

    def head_config(self):
        if self.role == "output":
            return dict(self.config)
        return {"in_features": _prod(get_kind(self.kind).out_shape(self.config)), "out_features": PROBE_CLASSES,
                "tokens": 1}

    def head_input_requires_grad(self):
        """Whether the head's input needs a gradient in the 2-layer probe: behind a hidden layer, or behind an
        input layer that trains (a frozen one's backward does not run)."""
        if self.role in ("output", "hidden"):
            return True
        return get_kind(self.kind).trains(self.config)

    def head_probe(self):
        """The output probe whose one part is this probe's 1-layer part, or None where none is: the same head
        (``head_config``, its input needing a gradient) fed a tensor of the same size, so every layer probe's
        ``head`` measurement is also a sample of the ``output`` kind (``fitting.pipeline.head_part_samples``).
        None for an output probe (its head is its sample), a swept one (its 1-layer part sweeps first) and one
        whose head input needs no gradient (behind a forward-only layer: no input-gradient GEMM)."""
        if self.role == "output" or self.cache == "swept" or not self.head_input_requires_grad():
            return None
        return Probe("output", self.head_config(), self.batch_size, "output")

    def to_dict(self):
        return {"id": self.id, "kind": self.kind, "role": self.role, "batch_size": self.batch_size,
                "config": self.config, "cache": self.cache}

    @classmethod
    def from_dict(cls, d):
        """A probe as written by ``to_dict``; one written before swept probes existed (no ``cache``) is warm."""
        return cls(d["kind"], d["config"], int(d["batch_size"]), d["role"], d.get("cache", "warm"))

    def build(self, part, seed=0):
        """The ``ProbeModel`` for one part (imports torch)."""
        if part not in self.parts():
            raise UsageError(f"probe {self.id} has no part {part!r} (parts: {', '.join(self.parts())})")
        from . import torch_build

        return torch_build.build_part(self, part, seed)
