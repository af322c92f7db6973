"""Device base: where training steps run and how they are measured.

A device runs THOR probes and whole models through the shared measurement protocol
(``thor_sdk.harness.protocol``) and reports per-round time (and energy, when it has a readable
meter) for each probe part. The host runs them in-process; remote devices (Android, Jetson, iOS)
push a probe bundle through a transport and ingest the harness's results.
"""

from thor_sdk.errors import NoMeterError


class Device:
    name = "device"

    def info(self):
        """Plain-data description stored with every campaign (model, OS, clocks, meters...)."""
        return {"name": self.name}

    def meters(self):
        """All meters this device knows about, available or not."""
        return []

    def energy_meter(self):
        """The first available meter, or None."""
        for m in self.meters():
            if m.is_available():
                return m
        return None

    def require_meter(self, metric):
        """The meter to use for ``metric``: None for time; for energy a meter or NoMeterError."""
        if metric == "time":
            return None
        meter = self.energy_meter()
        if meter is None:
            why = "; ".join(f"{m.name}: {m.why_unavailable()}" for m in self.meters()) or "no meter is known"
            raise NoMeterError(f"no energy meter is readable on {self.name} ({why}); use --metric time, "
                               "or give a bench meter's log with --meter external:FILE.csv")
        return meter

    def measure_probe(self, probe, metric="time", settings=None, runtime="torch", on_round=None):
        """Measure every part of ``probe``; returns {part: PartResult}."""
        raise NotImplementedError

    def own_threads(self):
        """Intra-op threads a measurement here runs with, where known (the host); None elsewhere."""
        return None

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="torch", on_round=None):
        """Measure one whole model's training step; returns a PartResult (part "model"). ``model`` is a
        reference-network name; the host also takes any other form (``thor_sdk.harness.whole_model``)."""
        raise NotImplementedError
