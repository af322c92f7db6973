"""Where power-aware profiling and training run: the host, a Jetson (locally), or a SIMULATED Jetson.

A board answers three questions: can the GPU frequency be set (``controller()``), can power be read
(``meter_status()``), and how is one (batch size, frequency) measured (``measure``).

- ``HostBoard``: this machine. No GPU frequency control; energy only through a readable host meter
  (``thor_sdk.meters.registry.host_meters``); otherwise time only, said plainly.
- ``JetsonBoard``: run *on* the Jetson (``root`` ``/``): devfreq frequency control (root needed),
  INA3221 power, training steps with torch on the GPU (``cuda``) when torch sees one.
- ``SimJetsonBoard``: a SIMULATED Jetson tree (``thor_sdk.power.simjetson``): the same devfreq and
  INA3221 code reads and writes the fake sysfs; power follows the simulator's model, and so does the
  profiled time per sample (the host CPU's speed does not depend on the simulated frequency).

Remote Jetsons (``jetson://user@host[:port]``) are not a ``Board`` here: ``thor_sdk.power.remote``
(``profile_remote``, ``train_remote``; the CLI's ``--device jetson://...``) runs the same thor-sdk command
ON the board over ssh with ``--device jetson`` (``--remote-sudo`` for root), then pulls the profile
database or the run report back. Tested with the real ssh transport against a fake ``ssh`` that runs
commands in a local folder whose thor-sdk profiles a SIMULATED Jetson; not yet run against a real
Jetson (none was available).
"""

import os
import time

from thor_sdk.errors import DeviceUnavailableError, UsageError

from .devfreq import GpuFrequencyController
from .rails import PowerWindow, meter_status
from .simjetson import LABEL, SimulatedJetson


class Board:
    name = "board"
    simulated = False

    def controller(self):
        """A ``GpuFrequencyController`` or None when this board has no frequency control."""
        return None

    def frequencies(self):
        c = self.controller()
        return c.available_frequencies() if c is not None else []

    def meter_status(self):
        """``(available, why_unavailable, meter name)``."""
        return False, "no meter", None

    def energy_window(self):
        """An object with ``start()``/``stop() -> dict`` (energy_j, peak_power_w, ...), or None."""
        return None

    def begin_load(self, batch_size):
        """Training with ``batch_size`` starts (the simulator updates its rails; real boards: nothing)."""

    def end_load(self):
        """Training stopped."""

    def describe(self):
        ok, why, meter = self.meter_status()
        c = self.controller()
        return {"name": self.name, "simulated": self.simulated,
                "frequency_control": bool(c is not None and c.is_available()),
                "frequency_control_note": (c.why_unavailable() if c is not None else
                                           "no GPU frequency control on this device"),
                "meter": meter if ok else None, "meter_note": why}


class HostBoard(Board):
    name = "host"

    def __init__(self, root="/"):
        self.root = root

    def _meter(self):
        from thor_sdk.meters.registry import host_meters

        for m in host_meters(self.root):
            if m.is_available():
                return m
        return None

    def meter_status(self):
        m = self._meter()
        if m is None:
            return False, "no energy meter readable; time only", None
        return True, "", m.name

    def energy_window(self):
        m = self._meter()
        return None if m is None else _MeterWindow(m)


class _MeterWindow:
    """Adapts a project meter (start/stop -> EnergyWindow) to the dict the power code logs."""

    def __init__(self, meter):
        self.meter = meter

    def start(self):
        self.meter.start()
        return self

    def stop(self):
        w = self.meter.stop()
        ps = [p for _, p in w.samples]
        return {"energy_j": w.energy_j, "duration_s": w.duration_s, "mean_power_w": w.mean_power_w,
                "peak_power_w": max(ps) if ps else None, "n_samples": len(ps), "rails": [w.meter]}


class JetsonBoard(Board):
    name = "jetson"

    def __init__(self, root="/", poll_period_s=0.02):
        self.root = str(root)
        self.poll_period_s = poll_period_s
        self._controller = GpuFrequencyController(self.root)

    def controller(self):
        return self._controller

    def meter_status(self):
        ok, why, rails = meter_status(self.root)
        return ok, why, ("ina3221:" + "+".join(rails)) if ok else None

    def energy_window(self):
        ok, _, _ = meter_status(self.root)
        return PowerWindow(self.root, self.poll_period_s) if ok else None

    def measure(self, step, batch_size, n_steps=5, warmup=2, flops_per_sample=None):
        """Time ``n_steps`` calls of ``step()`` (after ``warmup``) and their power window."""
        for _ in range(warmup):
            step()
        win = self.energy_window()
        if win is None:
            raise DeviceUnavailableError(f"no power meter under {self.root}: {meter_status(self.root)[1]}")
        win.start()
        t0 = time.perf_counter()
        for _ in range(n_steps):
            step()
        elapsed = time.perf_counter() - t0
        w = win.stop()
        return {"time_per_sample_s": elapsed / (n_steps * batch_size), "peak_power_w": w["peak_power_w"],
                "mean_power_w": w["mean_power_w"], "n_steps": n_steps, "n_power_samples": w["n_samples"]}


class SimJetsonBoard(JetsonBoard):
    """A SIMULATED Jetson: real devfreq/INA3221 code on a fake tree, modelled power and time."""

    simulated = True

    def __init__(self, root, poll_period_s=0.02):
        super().__init__(root, poll_period_s)
        self.sim = SimulatedJetson.open(root)
        self.name = f"jetson-{self.sim.flavor} ({LABEL})"

    def begin_load(self, batch_size):
        self.sim.apply_load(batch_size)

    def end_load(self):
        self.sim.apply_load(None)

    def measure(self, step, batch_size, n_steps=5, warmup=2, flops_per_sample=None):
        """SIMULATED: time from the simulator's model; power read through the INA3221 meter code."""
        if flops_per_sample is None:
            raise UsageError("the simulated Jetson needs the model's FLOPs per sample for its time model")
        freq, _ = self.sim.apply_load(batch_size)
        try:
            win = PowerWindow(self.root, self.poll_period_s).start()
            w = win.stop()
        finally:
            self.sim.apply_load(None)
        return {"time_per_sample_s": self.sim.time_per_sample_s(batch_size, freq, flops_per_sample),
                "peak_power_w": w["peak_power_w"], "mean_power_w": w["peak_power_w"], "n_steps": 0,
                "n_power_samples": w["n_samples"], "simulated": True}

    def describe(self):
        d = super().describe()
        d.update(self.sim.describe())
        return d


def board_from(device, sysfs_root=None, sim_flavor="nano"):
    """``host`` | ``jetson`` (this machine is the Jetson) | ``sim`` (SIMULATED Jetson under ``sysfs_root``).

    ``jetson://user@host`` is refused here: see ``thor_sdk.power.remote``.

    A ``jetson`` whose ``sysfs_root`` holds a simulated tree is treated as simulated (and says so).
    """
    if device in (None, "host"):
        return HostBoard(sysfs_root or "/")
    if device.startswith("jetson://"):
        raise UsageError(
            f"{device}: a remote Jetson is not a local board; use thor_sdk.power.remote.profile_remote / "
            "train_remote (the CLI does for --device jetson://...)")
    if device == "jetson":
        root = sysfs_root or "/"
        if SimulatedJetson.is_simulated(root):
            return SimJetsonBoard(root)
        return JetsonBoard(root)
    if device in ("sim", "simjetson"):
        if not sysfs_root:
            raise UsageError("--device sim needs --sysfs-root DIR (created as a SIMULATED Jetson when missing)")
        if not SimulatedJetson.is_simulated(sysfs_root):
            if os.path.isdir(sysfs_root) and os.listdir(sysfs_root):
                raise UsageError(f"{sysfs_root} exists and is not a simulated Jetson tree; give an empty or new folder")
            SimulatedJetson.create(sysfs_root, sim_flavor)
        return SimJetsonBoard(sysfs_root)
    raise UsageError(f"unknown device {device!r}: host, jetson (run on the Jetson), or sim (SIMULATED Jetson)")


def flops_per_sample(model_name, n_features=None, n_classes=10):
    """Training FLOPs (forward + backward) per sample, counted by ``torch.utils.flop_counter``."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from .data import build_net, input_shape_for

    net = build_net(model_name, n_features or 64, n_classes, seed=0)
    x = torch.zeros((2, *input_shape_for(model_name, n_features or 64)))
    with FlopCounterMode(display=False) as fc:
        out = net(x)
        torch.nn.functional.cross_entropy(out, torch.zeros(2, dtype=torch.long)).backward()
    return max(fc.get_total_flops() / 2.0, 1.0)

