"""NVIDIA GPU energy through NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

Two sources, chosen per GPU:

- ``nvmlDeviceGetTotalEnergyConsumption``: millijoules since the driver was loaded (Volta and
  newer). Read at the window's ends; a counter meter.
- otherwise ``nvmlDeviceGetPowerUsage`` (milliwatts), sampled on a background thread and
  integrated. On recent drivers this value is itself a ~1 s average, hence the 1 s sensor
  period (20 s windows).

Every NVML error becomes a ``ThorError``: no driver / no library -> ``is_available()`` is False
with the reason; failures while measuring -> ``MeasurementError``.
"""

from .base import CounterMeter, SamplingMeter


def _nvml_reason(e):
    """One sentence for an NVML exception (LibraryNotFound, DriverNotLoaded, ...)."""
    kind = type(e).__name__.replace("NVMLError_", "")
    hints = {
        "LibraryNotFound": "no NVIDIA driver here (libnvidia-ml.so not found)",
        "DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
        "NoPermission": "NVML denied access (permission)",
        "NotSupported": "this GPU does not support the query",
        "GpuIsLost": "the GPU has fallen off the bus",
        "InvalidArgument": "no such GPU index",
    }
    return hints.get(kind, f"NVML error {kind}: {e}")


class _Nvml:
    """Holds an initialised NVML handle for one GPU (``nvml``: the pynvml module or a fake)."""

    def __init__(self, index=0, nvml=None):
        self.index = index
        self._lib = nvml
        self._handle = None
        self._why = None

    def lib(self):
        if self._lib is None:
            import pynvml

            self._lib = pynvml
        return self._lib

    def handle(self):
        if self._handle is None and self._why is None:
            try:
                lib = self.lib()
            except ImportError:
                self._why = "nvidia-ml-py (pynvml) is not installed"
                return None
            try:
                lib.nvmlInit()
                self._handle = lib.nvmlDeviceGetHandleByIndex(self.index)
            except lib.NVMLError as e:
                self._why = _nvml_reason(e)
        return self._handle

    def why(self):
        self.handle()
        return self._why or ""

    def call(self, fn_name, what):
        from thor_sdk.errors import MeasurementError

        lib = self.lib()
        h = self.handle()
        if h is None:
            raise MeasurementError(f"NVML: {self._why}")
        try:
            return getattr(lib, fn_name)(h)
        except lib.NVMLError as e:
            raise MeasurementError(f"NVML {what} failed: {_nvml_reason(e)}") from e

    def supports(self, fn_name):
        lib = self.lib()
        h = self.handle()
        if h is None:
            return False
        try:
            getattr(lib, fn_name)(h)
        except lib.NVMLError:
            return False
        return True


class NvmlEnergyMeter(CounterMeter):
    """GPU energy from NVML's total-energy counter (mJ)."""

    name = "nvml-energy"

    def __init__(self, index=0, nvml=None, poll_period_s=5.0, clock=None, sampler=None, _shared=None):
        super().__init__(sample_period_s=0.1, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.nv = _shared or _Nvml(index, nvml)

    def why_unavailable(self):
        why = self.nv.why()
        if why:
            return why
        if not self.nv.supports("nvmlDeviceGetTotalEnergyConsumption"):
            return "this GPU has no total-energy counter (pre-Volta)"
        return ""

    def read_counters(self):
        mj = self.nv.call("nvmlDeviceGetTotalEnergyConsumption", "total energy")
        return {f"gpu{self.nv.index}": (mj / 1000.0, None)}


class NvmlPowerMeter(SamplingMeter):
    """GPU energy by integrating sampled ``nvmlDeviceGetPowerUsage`` (mW)."""

    name = "nvml-power"

    def __init__(self, index=0, nvml=None, sample_period_s=1.0, poll_period_s=0.1, clock=None, sampler=None,
                 _shared=None):
        super().__init__(sample_period_s=sample_period_s, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.nv = _shared or _Nvml(index, nvml)

    def why_unavailable(self):
        why = self.nv.why()
        if why:
            return why
        if not self.nv.supports("nvmlDeviceGetPowerUsage"):
            return "this GPU does not report its power draw"
        return ""

    def power_w(self):
        return self.nv.call("nvmlDeviceGetPowerUsage", "power usage") / 1000.0


def nvml_meter(index=0, nvml=None, clock=None, sampler=None):
    """The GPU's energy-counter meter where it has one, else its power-sampling meter.

    Without a driver the energy meter is returned, unavailable, with NVML's reason.
    """
    shared = _Nvml(index, nvml)
    energy = NvmlEnergyMeter(index, clock=clock, sampler=sampler, _shared=shared)
    if shared.why() or energy.is_available():
        return energy
    return NvmlPowerMeter(index, clock=clock, sampler=sampler, _shared=shared)
