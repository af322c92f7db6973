"""A synthetic campaign that stands in for a profile in the cross-validation tests: 60 relu probes on a smooth law."""

import math

from thor_sdk.probes import Probe
from thor_sdk.store import Campaign


def relu_campaign(path, negative=(7, 31), speed=None, canary_s=None, linear=0):
    """A campaign file at ``path`` of 60 relu probes (numel 256-15,360, batch 1, 4 and 16 in turn) costing
    ``2e-5 + 1e-9 x numel x batch`` s with a 5% wiggle and a 2% standard error; the probes ``negative`` read -1e-6 (a
    subtraction within its noise). ``speed(i)``: the machine's speed at probe i (every cost times it), read by a
    canary of ``canary_s x speed`` where ``canary_s`` is given; ``linear``: that many linear probes besides."""
    c = Campaign.create(str(path), {"metric": "time", "protocol": {}, "device": {"name": "synthetic"},
                                    "runtime": "torch"})
    probes = [Probe("relu", {"numel": 256 * (i + 1)}, (1, 4, 16)[i % 3], "hidden") for i in range(60)]
    probes += [Probe("linear", {"in_features": 16 * (i + 1), "out_features": 32, "tokens": 1, "bias": 1}, 8, "hidden")
               for i in range(linear)]
    for i, p in enumerate(probes):
        c.plan(p)
        s = speed(i) if speed else 1.0
        value = s * (2e-5 + 1e-9 * p.config.get("numel", 4096) * p.batch_size * (1.0 + 0.05 * math.sin(i)))
        if i in negative:
            value = -1e-6
        sample = {"metric": "time", "value": value, "std": 0.02 * abs(value), "n": 5, "flagged": False,
                  "flag_reason": None, "parts": {}}
        if canary_s:
            sample["canary_s"] = canary_s * s
        c.complete(p.id, [sample])
    c.close()
    return str(path)
