"""A device whose 'measurements' are planted costs plus seeded noise, run through the real campaign code.

The planted cost of a layer is ``1e-10 * train FLOPs + 20 us`` (a fixed per-layer overhead that a
FLOPs-proportional model cannot capture; a convolution or dense layer whose backward never runs pays its share of
it, ``thor_sdk.runtime.terms.FORWARD_ONLY_SHARED``, as it does on the host); a probe part's per-round value is
head + layer cost + noise. Everything downstream (subtraction, store, GP fit, runtime) is the project's real code.
"""

import random
import zlib

from thor_sdk.devices.base import Device
from thor_sdk.harness.protocol import PartResult, ProtocolSettings
from thor_sdk.layers.kinds import get_kind

OVERHEAD_S = 20e-6
S_PER_FLOP = 1e-10
CANARY_S = 2.5e-4  # the canary's reading at speed 1 (FakeDevice(speeds=...))


def planted_cost(kind, config, batch_size, role):
    from thor_sdk.runtime.terms import cost_terms

    share = min(1.0, cost_terms(kind, config, role)["launches"])  # below 1: a forward-only conv's share
    return S_PER_FLOP * get_kind(kind).train_flops(config, batch_size, role) + OVERHEAD_S * share


class FakeDevice(Device):
    name = "fake"

    def __init__(self, noise=0.01, negative_kinds=(), fail_after=None, speeds=None):
        self.noise = noise
        self.negative_kinds = set(negative_kinds)
        self.fail_after = fail_after  # raise KeyboardInterrupt on this call (simulated crash)
        self.calls = []
        #: the machine's speed state per measurement, in turn (``speeds[i % len]`` for the i-th call: every cost of
        #: that call times it), with a canary reading CANARY_S x speed beside every window; None: no canary
        self.speeds = tuple(speeds) if speeds else None

    def _speed(self):
        return self.speeds[(len(self.calls) - 1) % len(self.speeds)] if self.speeds else 1.0

    def _canary(self, r, speed):
        if self.speeds:
            r.canary_s = [CANARY_S * speed] * len(r.time_s)

    def info(self):
        return {"name": "fake", "kind": "fake (planted costs)"}

    def measure_probe(self, probe, metric="time", settings=None, runtime="torch", on_round=None):
        settings = settings or ProtocolSettings()
        self.calls.append(probe.id)
        if self.fail_after is not None and len(self.calls) > self.fail_after:
            raise KeyboardInterrupt("simulated crash")
        rng = random.Random(zlib.crc32(f"{probe.id}-{len(self.calls)}".encode()))
        hc = probe.head_config()
        head = planted_cost("output", hc, probe.batch_size, "output")
        values = {"head": head}
        if probe.role != "output":
            layer = planted_cost(probe.kind, probe.config, probe.batch_size, probe.role)
            if probe.kind in self.negative_kinds:
                layer = -5 * head
            values[probe.parts()[-1]] = head + layer
        results = {p: PartResult(p, 10) for p in values}
        speed = self._speed()
        for rnd in range(settings.min_rounds):
            row = {}
            for p, v in values.items():
                t = speed * v * (1 + rng.gauss(0, self.noise))
                r = results[p]
                r.time_s.append(t)
                # what a device records beside each window: wall-clock span and its state after it
                start = 1.7e9 + len(self.calls) * 100.0 + rnd * 10.0 + (5.0 if p == "head" else 0.0)
                r.window_times_s.append((start, start + 10 * abs(t)))
                r.states.append({"call": len(self.calls), "round": rnd, "part": p})
                row[p] = (t, None)
            if on_round:
                on_round(rnd, row)
        for r in results.values():
            self._canary(r, speed)
        return results

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="torch", on_round=None):
        """A whole model: the sum of its layers' planted costs (exactly what THOR's sum assumes), with noise."""
        from thor_sdk.layers import layers_of

        settings = settings or ProtocolSettings()
        self.calls.append(f"model:{model}:b{batch_size}")
        rng = random.Random(zlib.crc32(f"{model}-{batch_size}-{len(self.calls)}".encode()))
        total = sum(planted_cost(l["kind"], l["config"], batch_size, l["role"]) for l in layers_of(model).layers)
        r = PartResult("model", 10)
        speed = self._speed()
        r.time_s = [speed * total * (1 + rng.gauss(0, self.noise)) for _ in range(settings.min_rounds)]
        self._canary(r, speed)
        return r


class ConstantPowerMeter:
    """A meter reading a constant ``power_w`` over the windows of ``clock`` (wall-clock seconds by default),
    through the real protocol code path. ``source``: what each window says it read, a string or a function
    of the window's number (1, 2, ...), or None; ``windows`` counts the windows read."""

    sample_period_s = 0.0

    def __init__(self, power_w=5.0, clock=None, source=None, name="constant"):
        import time

        self.power_w, self.clock, self.source, self.name = power_w, clock or time.perf_counter, source, name
        self.windows = 0

    def is_available(self):
        return True

    def why_unavailable(self):
        return ""

    def describe(self):
        return {"name": self.name, "available": True, "why_unavailable": "", "sample_period_s": 0.0}

    def start(self):
        self.t0 = self.clock()

    def stop(self):
        from thor_sdk.meters.base import EnergyWindow

        self.windows += 1
        d = self.clock() - self.t0
        source = self.source(self.windows) if callable(self.source) else self.source
        return EnergyWindow(energy_j=self.power_w * d, duration_s=d, meter=self.name, source=source)
