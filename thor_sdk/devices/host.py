"""The host: this machine, running training steps in-process (eager PyTorch or onnxruntime), on its CPU or a CUDA GPU."""

import contextlib
import os
import platform

from thor_sdk.errors import DeviceUnavailableError, UsageError
from thor_sdk.harness.denormals import flushed_denormals

from .allocator import describe as allocator_policy
from .base import Device
from .state import cpu_identity

RUNTIMES = ("torch", "onnxruntime")


class HostDevice(Device):
    """``accelerator``: ``"cpu"`` (spec ``host``) or ``"cuda"`` (spec ``host:cuda[:N]``: eager torch on GPU
    ``gpu_index``, each step ending in a CUDA synchronize so its time is the GPU's, energy from NVML). The
    two are different devices: their campaigns never merge into one estimator. ``nvml``: the pynvml module
    or a fake (tests)."""

    kind = "host"

    def __init__(self, meter=None, root="/", threads=None, accelerator="cpu", gpu_index=0, nvml=None):
        from thor_sdk.meters.registry import ACCELERATORS

        if accelerator not in ACCELERATORS:
            raise UsageError(f"unknown accelerator {accelerator!r} (known: {', '.join(ACCELERATORS)})")
        if isinstance(gpu_index, bool) or not isinstance(gpu_index, int) or not 0 <= gpu_index < 64:
            raise UsageError(f"GPU index must be an integer in [0, 63], got {gpu_index!r}")
        self.root = root
        self._meter = meter  # an explicit meter (e.g. external:log.csv) overrides discovery
        self.threads = threads
        self.accelerator = accelerator
        self.gpu_index = gpu_index
        self._nvml = nvml
        self._gpu = None  # the NVML handle that reads the GPU's identity and state (cuda only)
        self._allocator = None  # the allocator policy measurements run under, once set (devices.allocator)
        self._idle = {}  # meter name -> IdleBaseline: measured once per campaign, again when the state changes

    @property
    def name(self):
        return "host" if self.accelerator == "cpu" else f"host:cuda:{self.gpu_index}"

    def meters(self):
        if self._meter is not None:
            return [self._meter]
        from thor_sdk.meters.registry import host_meters

        return host_meters(self.root, self.accelerator, self.gpu_index, self._nvml)

    def _nv(self):
        if self._gpu is None:
            from thor_sdk.meters.nvml import NvmlGpu

            self._gpu = NvmlGpu(self.gpu_index, self._nvml, self.root)
        return self._gpu

    def torch_device(self):
        """The torch device steps run on: ``"cpu"``, or ``"cuda:N"`` once torch is seen to have that GPU
        (DeviceUnavailableError otherwise: a CPU build of torch, no driver, too few GPUs)."""
        if self.accelerator == "cpu":
            return "cpu"
        import torch

        if not torch.cuda.is_available():
            raise DeviceUnavailableError(f"{self.name}: torch sees no CUDA GPU (torch.cuda.is_available() is False: "
                                         f"a CPU build of torch {torch.__version__}, or no NVIDIA driver)")
        n = torch.cuda.device_count()
        if self.gpu_index >= n:
            raise DeviceUnavailableError(f"{self.name}: torch sees {n} CUDA GPU(s), indices 0-{n - 1}")
        return f"cuda:{self.gpu_index}"

    @contextlib.contextmanager
    def measuring(self):
        """A context in which code runs as this device measures (benchmarks time their own code under it):
        ``threads`` intra-op threads (when set) and denormal floats flushed to zero, torch's settings restored
        after, and the allocator holding freed memory (``devices.allocator``: no step pays page faults that
        depend on the process's allocation history; kept for the process).

        Flushing denormals (values below 1.2e-38) is part of measuring honestly on x86: a probe trains on
        one fixed batch for hundreds of steps, and some configs drift into denormal values, where x86 runs
        30-100x slower (a transformer block at 25 ms measured 740-900 ms). That is an artefact of the
        probe's data, not a cost of the layer; probes and whole models are measured alike, flushed."""
        import torch

        from .allocator import hold_freed_memory

        if self._allocator is None:  # once per device: the policy then holds for the process
            self._allocator = hold_freed_memory()
        before = torch.get_num_threads()
        if self.threads:
            torch.set_num_threads(int(self.threads))
        try:
            with flushed_denormals():  # not where the CPU cannot (no SSE3): said in info()
                yield
        finally:
            torch.set_num_threads(before)

    def info(self):
        import torch

        gpu = {}
        if self.accelerator == "cuda":
            gpu = dict(self._nv().info(), accelerator="cuda")
            if torch.cuda.is_available() and self.gpu_index < torch.cuda.device_count():
                gpu["torch_gpu_name"] = torch.cuda.get_device_name(self.gpu_index)
                gpu["cuda_version"] = torch.version.cuda
        return {
            "name": self.name,
            "kind": self.kind,
            **gpu,
            "hostname": platform.node(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            **cpu_identity(self.root),
            "cpu_count": os.cpu_count(),
            "torch_version": torch.__version__,
            "torch_threads": int(self.threads) if self.threads else torch.get_num_threads(),
            "flush_denormal": _can_flush_denormal(),
            "allocator": self._allocator or allocator_policy(),
            "meters": [m.describe() for m in self.meters()],
        }

    def _idle_for(self, meter):
        """The idle baseline this device keeps for ``meter`` across probes (None without a meter)."""
        if meter is None:
            return None
        from thor_sdk.harness.protocol import IdleBaseline

        return self._idle.setdefault(meter.name, IdleBaseline())

    def _state(self):
        """Clocks, temperatures and battery read from sysfs, and the machine's load from /proc (other
        runnable threads beside ours, 1-minute load average), recorded with every window."""
        from .state import load_state, sysfs_state

        gpu = self._nv().state() if self.accelerator == "cuda" else {}
        return dict(sysfs_state(self.root), **load_state(self.root, self.own_threads()), **gpu)

    def _canary(self):
        """The canary read beside every window (``harness.canary``) where the work runs on this CPU; None on a GPU
        (a CPU workload does not read the GPU's speed)."""
        if self.accelerator != "cpu":
            return None
        from thor_sdk.harness.canary import Canary

        return Canary()

    def load_average_means_busy(self):
        """Not on a GPU: the load average counts threads waiting on the driver, not only running ones. On a lent
        H100 (``bench/results/gpu-profile-h100-20261127-1014``) it read 0.53-3.33 (median 1.41) while the runnable
        threads were ours alone in 4,105 of 4,130 windows, and called 94 of 286 probes busy."""
        return self.accelerator == "cpu"

    def own_threads(self):
        """The intra-op threads a measurement here runs with (what the load beside it is compared to)."""
        if self.threads:
            return int(self.threads)
        import torch

        return torch.get_num_threads()

    def _check_runtime(self, runtime):
        if runtime == "onnxruntime" and self.accelerator != "cpu":
            raise UsageError(f"{self.name}: the onnxruntime runtime trains on the CPU here; use --runtime torch on a GPU")

    def _trainer(self, probe_model, runtime):
        if runtime == "torch":
            from thor_sdk.harness.torch_trainer import trainer_for_probe_model

            return trainer_for_probe_model(probe_model, device=self.torch_device())
        if runtime == "onnxruntime":
            from thor_sdk.harness.ort_trainer import trainer_for_probe_model as ort_trainer

            return ort_trainer(probe_model)
        raise UsageError(f"unknown runtime {runtime!r} (known: {', '.join(RUNTIMES)})")

    def measure_probe(self, probe, metric="time", settings=None, runtime="torch", on_round=None):
        from thor_sdk.harness.protocol import measure_parts

        self._check_runtime(runtime)
        meter = self.require_meter(metric)
        with self.measuring():
            trainers = {part: self._trainer(probe.build(part), runtime) for part in probe.parts()}
            try:
                return measure_parts(trainers, settings, meter=meter, metric=metric, on_round=on_round,
                                     idle=self._idle_for(meter), state_fn=self._state, canary=self._canary())
            finally:
                for t in trainers.values():
                    t.close()

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="torch", on_round=None):
        """One whole model's training step. ``model``: a reference-network name, or any form
        ``thor_sdk.harness.whole_model.resolve_model`` takes (a ``ModelSource`` as ``thor_sdk.measure``
        passes it, a layer-list JSON or ONNX path, ...), under either runtime."""
        self._check_runtime(runtime)
        meter = self.require_meter(metric)
        with self.measuring():
            return self._measure_model(model, batch_size, metric, settings, runtime, on_round, meter)

    def _measure_model(self, model, batch_size, metric, settings, runtime, on_round, meter):
        from thor_sdk.harness.protocol import measure_parts

        if runtime == "torch":
            from thor_sdk.harness.torch_trainer import trainer_for_model

            trainer = trainer_for_model(model, batch_size, device=self.torch_device())
        elif runtime == "onnxruntime":
            from thor_sdk.harness.ort_trainer import trainer_for_model as ort_trainer_for_model

            trainer = ort_trainer_for_model(model, batch_size)
        else:
            raise UsageError(f"unknown runtime {runtime!r} (known: {', '.join(RUNTIMES)})")
        try:
            return measure_parts({"model": trainer}, settings, meter=meter, metric=metric, on_round=on_round,
                                 idle=self._idle_for(meter), state_fn=self._state, canary=self._canary())["model"]
        finally:
            trainer.close()


def _can_flush_denormal():
    """Whether measurements here flush denormal floats to zero (``HostDevice.measuring``)."""
    with flushed_denormals() as on:
        return on
