"""Device base: where training steps run and how they are measured.

A device runs THOR probes and whole models through the shared measurement protocol
(``thor_sdk.harness.protocol``) and reports per-round time (and energy, when it has a readable
meter) for each probe part. The host runs them in-process; remote devices (Android, Jetson, iOS)
push a probe bundle through a transport and ingest the harness's results.

Power-aware training (``thor-sdk table``/``train``) asks a device two more things: can the GPU
frequency be set (``frequency_controller()``: a Jetson's devfreq, None elsewhere) and which meter
gives the peak power a cap is checked against (``power_meter()``), and has it time and peak power
measured over a few training steps (``measure_power_steps``). A SIMULATED device says so
(``simulated``, and ``SIMULATED`` in its name).
"""

from thor_sdk.errors import DeviceUnavailableError, NoMeterError

NO_POWER_METER = "no energy meter readable; time only"


class Device:
    name = "device"
    simulated = False

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

    def load_average_means_busy(self):
        """Whether a 1-minute load average above our own threads says other work competed with a measurement
        (``load_summary``); the runnable threads beside ours always do."""
        return True

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="torch", on_round=None):
        """Measure one whole model's training step; returns a PartResult (part "model"). ``model`` is a
        reference-network name; the host also takes any other form (``thor_sdk.harness.whole_model``)."""
        raise NotImplementedError

    # -- power-aware training ----------------------------------------------------------------------
    def frequency_controller(self):
        """A ``thor_sdk.devices.devfreq.GpuFrequencyController``, or None where this device has no GPU
        frequency control (the host, phones)."""
        return None

    def power_meter(self):
        """The meter whose peak a power cap is checked against, or None where none is readable."""
        return self.energy_meter()

    def power_status(self):
        """``(readable, why not, meter label)`` of ``power_meter()``."""
        m = self.power_meter()
        return (False, NO_POWER_METER, None) if m is None else (True, "", m.name)

    def power_window(self):
        """A ``thor_sdk.meters.peak.PowerWindow`` over ``power_meter()``, or None without one."""
        from thor_sdk.meters.peak import PowerWindow

        m = self.power_meter()
        return None if m is None else PowerWindow(m)

    def begin_load(self, batch_size):
        """Training with ``batch_size`` starts (a SIMULATED device updates its rails; real ones: nothing)."""

    def end_load(self):
        """Training stopped."""

    def measure_power_steps(self, step, batch_size, n_steps=5, warmup=2, flops_per_sample=None):
        """Time ``n_steps`` calls of ``step()`` (after ``warmup``) and their power window: time per sample,
        peak and mean power (what one (batch size, GPU frequency) pair of a power profile holds)."""
        import time

        for _ in range(warmup):
            step()
        win = self.power_window()
        if win is None:
            raise DeviceUnavailableError(f"no power meter on {self.name}: {self.power_status()[1]}")
        win.start()
        t0 = time.perf_counter()
        for _ in range(n_steps):
            step()
        elapsed = time.perf_counter() - t0
        w = win.stop()
        return {"time_per_sample_s": elapsed / (n_steps * batch_size), "peak_power_w": w["peak_power_w"],
                "mean_power_w": w["mean_power_w"], "n_steps": n_steps, "n_power_samples": w["n_samples"]}

    def power_info(self):
        """What a power profile, table and run report record of the device: its name, SIMULATED or not, its
        frequency control and its power meter (each with why not)."""
        ok, why, meter = self.power_status()
        c = self.frequency_controller()
        return {"name": self.name, "simulated": self.simulated,
                "frequency_control": bool(c is not None and c.is_available()),
                "frequency_control_note": (c.why_unavailable() if c is not None else
                                           "no GPU frequency control on this device"),
                "meter": meter if ok else None, "meter_note": why}
