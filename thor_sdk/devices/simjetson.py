"""A SIMULATED Jetson: a fake sysfs tree (GPU devfreq + INA3221 rails) whose power follows a model, and its device.

The device on it is ``SimJetsonDevice`` (``--device sim --sysfs-root DIR``).

For tests and demos only; everything that uses it says SIMULATED. The tree uses the real layouts, so
the real code (``GpuFrequencyController``, INA3221 readers) runs on it unchanged:

- ``nano`` (Jetson Nano, JetPack 4): devfreq ``sys/devices/gpu.0/devfreq/57000000.gpu`` (symlinked from
  ``sys/class/devfreq/57000000.gpu``), 12 frequencies 76.8-921.6 MHz; INA3221 as the ``ina3221x`` iio
  driver: ``sys/bus/i2c/drivers/ina3221x/6-0040/iio:device0/{rail_name_N, in_power N_input (mW),
  in_current N_input (mA), in_voltage N_input (mV)}`` with rails POM_5V_IN, POM_5V_GPU, POM_5V_CPU;
- ``orin`` (Orin Nano, JetPack 5): devfreq ``sys/devices/17000000.ga10b/devfreq/17000000.ga10b``
  (``sys/class/devfreq/17000000.ga10b``), 306-624.75 MHz; INA3221 as the mainline ``ina3221`` hwmon
  driver: ``sys/class/hwmon/hwmon1/{name=ina3221, inN_label, inN_input (mV), currN_input (mA)}``
  (also reached as ``sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1``), rails VDD_IN,
  VDD_CPU_GPU_CV, VDD_SOC.

Power model (``power_w``), at GPU frequency f and a training load of batch size b:

    V(f)    = V_min + (V_max - V_min) * (f - f_min) / (f_max - f_min)      (linear V-f curve)
    util(b) = b / (b + b_half)                                             (GPU busy fraction)
    P_gpu   = P_gpu_static + C_eff * f * V(f)^2 * util(b)                  (dynamic CMOS power)
    P_cpu   = P_cpu_load while training, P_cpu_idle otherwise
    P_in    = P_base + P_gpu + P_cpu                                       (module input rail)

Time model (``time_per_sample_s``), for a model of F training FLOPs per sample:

    t(b, f) = F / (flops_per_cycle * f * util(b)) + mem_s_per_sample + launch_s / b

The constants (``FLAVORS``) are round illustrative numbers, not measurements of any board.
The GPU "governor" is emulated by ``apply_load``: under load the GPU runs at ``max_freq`` (clamped to
the available list and to ``min_freq``), idle at ``min_freq``; the rail files are rewritten then.
"""

import json
import os

from thor_sdk.errors import NotFoundError, UsageError

from .jetson import LocalJetsonDevice

MARKER = "SIMULATED-JETSON.json"
LABEL = "SIMULATED"

FLAVORS = {
    "nano": {
        "board": "Jetson Nano (SIMULATED)",
        "freqs_hz": [76800000, 153600000, 230400000, 307200000, 384000000, 460800000, 537600000,
                     614400000, 691200000, 768000000, 844800000, 921600000],
        "v_min": 0.60, "v_max": 1.00, "c_eff_f": 5.0e-9, "b_half": 8.0,
        "p_base_w": 1.0, "p_gpu_static_w": 0.2, "p_cpu_load_w": 1.0, "p_cpu_idle_w": 0.3,
        "flops_per_cycle": 90.0, "mem_s_per_sample": 2.0e-4, "launch_s": 4.0e-3,
    },
    "orin": {
        "board": "Jetson Orin Nano (SIMULATED)",
        "freqs_hz": [306000000, 408000000, 510000000, 612000000, 624750000],
        "v_min": 0.65, "v_max": 0.95, "c_eff_f": 1.4e-8, "b_half": 16.0,
        "p_base_w": 2.5, "p_gpu_static_w": 0.4, "p_cpu_load_w": 1.5, "p_cpu_idle_w": 0.5,
        "flops_per_cycle": 700.0, "mem_s_per_sample": 5.0e-5, "launch_s": 2.0e-3,
    },
}

_NANO = {
    "devfreq": "sys/devices/gpu.0/devfreq/57000000.gpu",
    "devfreq_link": "sys/class/devfreq/57000000.gpu",
    "ina_dev": "sys/devices/7000c400.i2c/i2c-6/6-0040",
    "ina_links": ["sys/bus/i2c/drivers/ina3221x/6-0040", "sys/bus/i2c/devices/6-0040"],
    "iio": "iio:device0",
    "rails": ["POM_5V_IN", "POM_5V_GPU", "POM_5V_CPU"],
}
_ORIN = {
    "devfreq": "sys/devices/17000000.ga10b/devfreq/17000000.ga10b",
    "devfreq_link": "sys/class/devfreq/17000000.ga10b",
    "ina_dev": "sys/devices/platform/c240000.i2c/i2c-1/1-0040",
    "ina_links": ["sys/bus/i2c/drivers/ina3221/1-0040", "sys/bus/i2c/devices/1-0040"],
    "hwmon": "hwmon/hwmon1",
    "hwmon_link": "sys/class/hwmon/hwmon1",
    "rails": ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"],
}
RAIL_VOLTAGE_MV = {"nano": [5000, 5000, 5000], "orin": [5000, 5000, 5000]}


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.chmod(path, 0o644)  # read-only sysfs nodes (0444) are rewritten by the simulator itself
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{text}\n")
    os.chmod(path, mode)


def _link(root, target_rel, link_rel):
    link = os.path.join(root, link_rel)
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(os.path.relpath(os.path.join(root, target_rel), os.path.dirname(link)), link)


class SimulatedJetson:
    """A SIMULATED Jetson sysfs tree under ``root`` (see the module docstring for the model)."""

    simulated = True

    def __init__(self, root, flavor="nano", params=None):
        if flavor not in FLAVORS:
            raise UsageError(f"unknown simulated Jetson flavor {flavor!r} (known: {', '.join(FLAVORS)})")
        self.root = str(root)
        self.flavor = flavor
        self.params = dict(FLAVORS[flavor], **(params or {}))
        self.layout = _NANO if flavor == "nano" else _ORIN

    # ------------------------------------------------------------------ tree
    @classmethod
    def create(cls, root, flavor="nano", params=None):
        """Write the SIMULATED tree under ``root`` (GPU idle at the lowest frequency) and return it."""
        sim = cls(root, flavor, params)
        os.makedirs(sim.root, exist_ok=True)
        p, lay = sim.params, sim.layout
        d = os.path.join(sim.root, lay["devfreq"])
        freqs = p["freqs_hz"]
        _write(os.path.join(d, "available_frequencies"), " ".join(map(str, freqs)), 0o444)
        _write(os.path.join(d, "min_freq"), freqs[0])
        _write(os.path.join(d, "max_freq"), freqs[-1])
        _write(os.path.join(d, "cur_freq"), freqs[0], 0o444)
        _write(os.path.join(d, "governor"), "nvhost_podgov")
        _link(sim.root, lay["devfreq"], lay["devfreq_link"])
        if flavor == "nano":
            iio = os.path.join(sim.root, lay["ina_dev"], lay["iio"])
            for i, name in enumerate(lay["rails"]):
                _write(os.path.join(iio, f"rail_name_{i}"), name, 0o444)
            _write(os.path.join(sim.root, lay["ina_dev"], "name"), "ina3221x", 0o444)
        else:
            hw = os.path.join(sim.root, lay["ina_dev"], lay["hwmon"])
            _write(os.path.join(hw, "name"), "ina3221", 0o444)
            for i, name in enumerate(lay["rails"], start=1):
                _write(os.path.join(hw, f"in{i}_label"), name, 0o444)
                _write(os.path.join(hw, f"shunt{i}_resistor"), 5000, 0o444)
            _link(sim.root, os.path.join(lay["ina_dev"], lay["hwmon"]), lay["hwmon_link"])
        for link in lay["ina_links"]:
            _link(sim.root, lay["ina_dev"], link)
        with open(os.path.join(sim.root, MARKER), "w", encoding="utf-8") as f:
            json.dump({"simulated": True, "label": LABEL, "flavor": flavor, "params": sim.params,
                       "note": "fake sysfs tree written by thor_sdk.devices.simjetson; power and time follow "
                               "a documented model, not a measurement"}, f, indent=1)
        sim.apply_load(None)
        return sim

    @staticmethod
    def is_simulated(root):
        return os.path.isfile(os.path.join(str(root), MARKER))

    @classmethod
    def open(cls, root):
        """The simulated Jetson already written under ``root``."""
        path = os.path.join(str(root), MARKER)
        if not os.path.isfile(path):
            raise NotFoundError(f"{root} is not a simulated Jetson tree (no {MARKER})")
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        return cls(root, meta["flavor"], meta.get("params"))

    @property
    def devfreq_path(self):
        return os.path.join(self.root, self.layout["devfreq"])

    # ------------------------------------------------------------------ model
    def voltage_v(self, freq_hz):
        p = self.params
        f0, f1 = p["freqs_hz"][0], p["freqs_hz"][-1]
        return p["v_min"] + (p["v_max"] - p["v_min"]) * (freq_hz - f0) / (f1 - f0)

    def util(self, batch_size):
        return 0.0 if not batch_size else batch_size / (batch_size + self.params["b_half"])

    def power_w(self, freq_hz, batch_size=None):
        """``{rail: watts}`` for the GPU at ``freq_hz`` training with ``batch_size`` (None: idle)."""
        p = self.params
        gpu = p["p_gpu_static_w"] + p["c_eff_f"] * freq_hz * self.voltage_v(freq_hz) ** 2 * self.util(batch_size)
        cpu = p["p_cpu_load_w"] if batch_size else p["p_cpu_idle_w"]
        total = p["p_base_w"] + gpu + cpu
        r = self.layout["rails"]
        if self.flavor == "nano":
            return {r[0]: total, r[1]: gpu, r[2]: cpu}
        return {r[0]: total, r[1]: gpu + cpu, r[2]: p["p_base_w"]}

    def time_per_sample_s(self, batch_size, freq_hz, flops_per_sample):
        p = self.params
        return (flops_per_sample / (p["flops_per_cycle"] * freq_hz * self.util(batch_size))
                + p["mem_s_per_sample"] + p["launch_s"] / batch_size)

    # ------------------------------------------------------------------ governor emulation
    def _read_int(self, name):
        with open(os.path.join(self.devfreq_path, name), encoding="ascii") as f:
            return int(f.read().strip())

    def current_frequency(self):
        """The frequency the emulated governor would run at under load: max_freq, clamped."""
        freqs = self.params["freqs_hz"]
        lo, hi = self._read_int("min_freq"), self._read_int("max_freq")
        allowed = [f for f in freqs if lo <= f <= hi]
        if allowed:
            return allowed[-1]
        return min(freqs, key=lambda f: abs(f - hi))

    def apply_load(self, batch_size):
        """Set cur_freq and rewrite the rail files for a training load of ``batch_size`` (None: idle)."""
        freq = self.current_frequency() if batch_size else self._read_int("min_freq")
        d = self.devfreq_path
        _write(os.path.join(d, "cur_freq"), freq, 0o444)
        rails = self.power_w(freq, batch_size)
        volts = RAIL_VOLTAGE_MV[self.flavor]
        if self.flavor == "nano":
            iio = os.path.join(self.root, self.layout["ina_dev"], self.layout["iio"])
            for i, (name, w) in enumerate(rails.items()):
                mw = int(round(w * 1000))
                _write(os.path.join(iio, f"in_power{i}_input"), mw, 0o444)
                _write(os.path.join(iio, f"in_voltage{i}_input"), volts[i], 0o444)
                _write(os.path.join(iio, f"in_current{i}_input"), int(round(mw * 1000 / volts[i])), 0o444)
        else:
            hw = os.path.join(self.root, self.layout["ina_dev"], self.layout["hwmon"])
            for i, (name, w) in enumerate(rails.items(), start=1):
                _write(os.path.join(hw, f"in{i}_input"), volts[i - 1], 0o444)
                _write(os.path.join(hw, f"curr{i}_input"), int(round(w * 1e6 / volts[i - 1])), 0o444)
        return freq, rails

    def describe(self):
        return {"simulated": True, "label": LABEL, "board": self.params["board"], "flavor": self.flavor,
                "root": self.root, "devfreq": self.devfreq_path}


class SimJetsonDevice(LocalJetsonDevice):
    """A SIMULATED Jetson: the real devfreq and INA3221 code on the fake tree under ``root``; power follows
    the simulator's model, and so does the profiled time per sample (the host CPU's speed does not depend
    on the simulated frequency). Training and probing really run on this machine's CPU."""

    simulated = True

    def __init__(self, root, meter=None, threads=None, poll_period_s=0.02):
        super().__init__(root, meter=meter, threads=threads, poll_period_s=poll_period_s)
        self.sim = SimulatedJetson.open(root)
        self.name = f"jetson-{self.sim.flavor} ({LABEL})"

    @classmethod
    def at(cls, root, flavor="nano", **kw):
        """The simulated Jetson under ``root``, its tree written first when ``root`` is new or empty."""
        if not root:
            raise UsageError("--device sim needs --sysfs-root DIR (created as a SIMULATED Jetson when missing)")
        if not SimulatedJetson.is_simulated(root):
            if os.path.isdir(root) and os.listdir(root):
                raise UsageError(f"{root} exists and is not a simulated Jetson tree; give an empty or new folder")
            SimulatedJetson.create(root, flavor)
        return cls(root, **kw)

    def begin_load(self, batch_size):
        self.sim.apply_load(batch_size)

    def end_load(self):
        self.sim.apply_load(None)

    def measure_power_steps(self, step, batch_size, n_steps=5, warmup=2, flops_per_sample=None):
        """SIMULATED: time from the simulator's model; power read through the INA3221 meter code."""
        from thor_sdk.meters.peak import PowerWindow

        if flops_per_sample is None:
            raise UsageError("the simulated Jetson needs the model's FLOPs per sample for its time model")
        freq, _ = self.sim.apply_load(batch_size)
        try:
            win = PowerWindow(self._ina3221(), require_peak=True).start()
            w = win.stop()
        finally:
            self.sim.apply_load(None)
        return {"time_per_sample_s": self.sim.time_per_sample_s(batch_size, freq, flops_per_sample),
                "peak_power_w": w["peak_power_w"], "mean_power_w": w["peak_power_w"], "n_steps": 0,
                "n_power_samples": w["n_samples"], "simulated": True}

    def power_info(self):
        d = super().power_info()
        d.update(self.sim.describe())
        return d

    def info(self):
        d = super().info()
        d.update(self.sim.describe())
        return d
