"""NVIDIA GPU energy through NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

Three sources, chosen per GPU in this order (``nvml_meter()``), the one used named in every window
(``EnergyWindow.source``) and in ``describe()["reads"]``:

1. ``"total-energy"``: ``nvmlDeviceGetTotalEnergyConsumption``, millijoules since the driver was
   loaded (Volta and newer), the GPU's own accumulator. Read at the window's ends (and polled); a counter
   meter. First because an accumulator cannot alias: on an H100 (driver 580) a load switching on and off
   every 100 ms read 0.34x the counter through the sampled instantaneous field, and 0.94x through the
   1 s average (``bench/results/nvml-h100-*.md``).
2. ``"power-instant"``: ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)`` (field 186, mW),
   the instantaneous board power of recent GPUs and drivers (Ampere+ with R525+ drivers; where the GPU
   lacks it the field's own return code says NotSupported), sampled on a background thread and
   integrated; 0.1 s sensor period. A training loop whose step period is commensurate with the field's
   refresh reads one phase of its steps again and again; used only where the GPU has no counter.
3. ``"power-average"``: ``nvmlDeviceGetPowerUsage`` (mW), only as a last resort: on recent drivers it
   is a ~1 s moving average (hence the 1 s sensor period, 20 s windows), which smears short windows.

Never on Tegra (Jetson): NVML initialises there but answers NotSupported for power, so the meter says
so before loading NVML (``/etc/nv_tegra_release``, or ``nvidia,tegra`` in
``/proc/device-tree/compatible``, under the meter's ``root``); the board's INA3221/INA238 rails measure.

Every NVML error becomes a ``ThorError``: no driver / no library -> ``is_available()`` is False
with the reason; failures while measuring -> ``MeasurementError``.
"""

from thor_sdk.errors import MeasurementError, UsageError

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


#: pynvml's NVML_FI_DEV_POWER_INSTANT (nvml.h), for bindings that predate the name
FI_DEV_POWER_INSTANT = 186


def tegra_reason(root="/"):
    """'' off Tegra; on a Jetson, why NVML is not used for power (what shows it is a Tegra)."""
    from .base import as_fs

    fs = as_fs(root)
    if fs.exists("etc/nv_tegra_release"):
        evidence = fs.path("etc/nv_tegra_release") + " exists"
    else:
        try:
            compat = fs.read_text("proc/device-tree/compatible")
        except OSError:
            return ""
        if "nvidia,tegra" not in compat:
            return ""
        evidence = fs.path("proc/device-tree/compatible") + " says nvidia,tegra"
    return (f"this is a Jetson (Tegra: {evidence}): NVML initialises there but reports no GPU power "
            "(NotSupported); the board's INA3221/INA238 rails measure it")


class NvmlGpu:
    """Holds an initialised NVML handle for one GPU (``nvml``: the pynvml module or a fake)."""

    def __init__(self, index=0, nvml=None, root="/"):
        self.index = index
        self._lib = nvml
        self._initialised = False
        self._handle = None
        self._why = None
        self.root = root

    def lib(self):
        if self._lib is None:
            import pynvml

            self._lib = pynvml
        return self._lib

    def initialised(self):
        """The NVML library, initialised; None (``why()`` says why) on a Jetson, without the bindings or a driver."""
        if not self._initialised and self._why is None:
            self._why = tegra_reason(self.root) or None  # never load NVML for power on a Jetson
            if self._why:
                return None
            try:
                lib = self.lib()
            except ImportError:
                self._why = "nvidia-ml-py (pynvml) is not installed"
                return None
            try:
                lib.nvmlInit()
                self._initialised = True
            except lib.NVMLError as e:
                self._why = _nvml_reason(e)
        return self.lib() if self._initialised else None

    def handle(self):
        if self._handle is None and self._why is None:
            lib = self.initialised()
            if lib is None:
                return None
            try:
                self._handle = lib.nvmlDeviceGetHandleByIndex(self.index)
            except lib.NVMLError as e:
                self._why = _nvml_reason(e)
        return self._handle

    def why(self):
        self.handle()
        return self._why or ""

    def call(self, fn_name, what):
        h = self.handle()
        if h is None:
            raise MeasurementError(f"NVML: {self._why}")
        lib = self.lib()
        try:
            return getattr(lib, fn_name)(h)
        except lib.NVMLError as e:
            raise MeasurementError(f"NVML {what} failed: {_nvml_reason(e)}") from e

    def supports(self, fn_name):
        h = self.handle()
        if h is None:
            return False
        lib = self.lib()
        fn = getattr(lib, fn_name, None)
        if fn is None:  # an nvidia-ml-py too old to bind it
            return False
        try:
            fn(h)
        except lib.NVMLError:
            return False
        return True

    def field_mw(self, field_id):
        """One field value (``nvmlDeviceGetFieldValues``) as a number; MeasurementError with NVML's reason."""

        h = self.handle()
        if h is None:
            raise MeasurementError(f"NVML: {self._why}")
        lib = self.lib()
        try:
            (v,) = lib.nvmlDeviceGetFieldValues(h, [field_id])
        except lib.NVMLError as e:
            raise MeasurementError(f"NVML field {field_id} failed: {_nvml_reason(e)}") from e
        if v.nvmlReturn != 0:  # NVML_SUCCESS; each field carries its own return code
            e = lib.NVMLError(v.nvmlReturn)  # pynvml maps the code to its error class
            raise MeasurementError(f"NVML field {field_id} failed: {_nvml_reason(e)}") from e
        member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(v.valueType)
        if member is None:
            raise MeasurementError(f"NVML field {field_id} has an unknown value type {v.valueType}")
        return getattr(v.value, member)

    def instant_field(self):
        return getattr(self.lib(), "NVML_FI_DEV_POWER_INSTANT", FI_DEV_POWER_INSTANT)

    def supports_instant(self):
        """True when the GPU answers NVML_FI_DEV_POWER_INSTANT (the field's own return code is success)."""

        if self.handle() is None or not hasattr(self.lib(), "nvmlDeviceGetFieldValues"):
            return False
        try:
            self.field_mw(self.instant_field())
        except MeasurementError:
            return False
        return True

    def _quiet(self, fn_name, *args):
        """``fn_name(handle, *args)``, or None where the GPU or the bindings do not answer it."""
        h = self.handle()
        lib = self.lib()
        fn = getattr(lib, fn_name, None)
        if h is None or fn is None:
            return None
        try:
            return fn(h, *args)
        except lib.NVMLError:
            return None

    def state(self):
        """What the GPU is doing, read-only (never a setting changed): SM and memory clocks (MHz), temperature
        (C), performance state; each only where the GPU answers it. Recorded with every window."""
        lib = self.lib() if self.handle() is not None else None
        if lib is None:
            return {}
        out = {}
        for key, fn, args in (
                ("gpu_sm_mhz", "nvmlDeviceGetClockInfo", (getattr(lib, "NVML_CLOCK_SM", 1),)),
                ("gpu_mem_mhz", "nvmlDeviceGetClockInfo", (getattr(lib, "NVML_CLOCK_MEM", 2),)),
                ("gpu_temp_c", "nvmlDeviceGetTemperature", (getattr(lib, "NVML_TEMPERATURE_GPU", 0),)),
                ("gpu_pstate", "nvmlDeviceGetPerformanceState", ())):
            v = self._quiet(fn, *args)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[key] = v
        return out

    def info(self):
        """The GPU's identity for a campaign's device record: name, driver, memory, power limit (read-only)."""
        if self.handle() is None:
            return {"gpu_index": self.index, "why_unavailable": self._why}
        lib = self.lib()
        out = {"gpu_index": self.index}
        name = self._quiet("nvmlDeviceGetName")
        if name is not None:
            out["gpu_name"] = name.decode() if isinstance(name, bytes) else str(name)
        try:
            drv = lib.nvmlSystemGetDriverVersion()
            out["gpu_driver"] = drv.decode() if isinstance(drv, bytes) else str(drv)
        except (lib.NVMLError, AttributeError):
            pass
        mem = self._quiet("nvmlDeviceGetMemoryInfo")
        if mem is not None and isinstance(getattr(mem, "total", None), int):
            out["gpu_memory_mib"] = mem.total // 2 ** 20
        limit = self._quiet("nvmlDeviceGetPowerManagementLimit")
        if isinstance(limit, int):
            out["gpu_power_limit_w"] = limit / 1000.0
        return out


def nvml_gpu_count(nvml=None, root="/"):
    """``(count, why)``: how many GPUs NVML sees, or 0 and why none (no driver, no bindings, a Jetson)."""
    nv = NvmlGpu(0, nvml, root)
    lib = nv.initialised()
    if lib is None:
        return 0, nv.why()
    try:
        return int(lib.nvmlDeviceGetCount()), ""
    except lib.NVMLError as e:
        return 0, _nvml_reason(e)


class NvmlEnergyMeter(CounterMeter):
    """GPU energy from NVML's total-energy counter (mJ)."""

    name = "nvml-energy"

    def __init__(self, index=0, nvml=None, poll_period_s=5.0, clock=None, sampler=None, root="/", _shared=None):
        super().__init__(sample_period_s=0.1, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.nv = _shared or NvmlGpu(index, nvml, root)

    def window_source(self):
        return "total-energy"

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
    """GPU energy by integrating sampled power (mW): the instantaneous field, or the averaged power usage.

    ``source``: ``"power-instant"`` (``NVML_FI_DEV_POWER_INSTANT`` through ``nvmlDeviceGetFieldValues``)
    or ``"power-average"`` (``nvmlDeviceGetPowerUsage``, a ~1 s moving average on recent drivers).
    """

    name = "nvml-power"
    SOURCES = {"power-instant": 0.1, "power-average": 1.0}  # source -> sensor period, s

    def __init__(self, index=0, nvml=None, source="power-average", sample_period_s=None, poll_period_s=0.1,
                 clock=None, sampler=None, root="/", _shared=None):

        if source not in self.SOURCES:
            raise UsageError(f"NVML power source must be one of {', '.join(self.SOURCES)}, got {source!r}")
        super().__init__(sample_period_s=sample_period_s or self.SOURCES[source],
                         poll_period_s=min(poll_period_s, sample_period_s or self.SOURCES[source]),
                         clock=clock, sampler=sampler)
        self.source = source
        self.nv = _shared or NvmlGpu(index, nvml, root)

    def window_source(self):
        return self.source

    def why_unavailable(self):
        why = self.nv.why()
        if why:
            return why
        if self.source == "power-instant":
            if not self.nv.supports_instant():
                return "this GPU or driver has no instantaneous power field (NVML_FI_DEV_POWER_INSTANT)"
        elif not self.nv.supports("nvmlDeviceGetPowerUsage"):
            return "this GPU does not report its power draw"
        return ""

    def power_w(self):
        if self.source == "power-instant":
            return self.nv.field_mw(self.nv.instant_field()) / 1000.0
        return self.nv.call("nvmlDeviceGetPowerUsage", "power usage") / 1000.0


def nvml_meter(index=0, nvml=None, clock=None, sampler=None, root="/"):
    """The GPU's best NVML meter: the total-energy counter, else the instantaneous power field, else the averaged power.

    Without a driver, or on a Jetson (Tegra), the energy meter is returned, unavailable, with the reason.
    """
    shared = NvmlGpu(index, nvml, root)
    energy = NvmlEnergyMeter(index, clock=clock, sampler=sampler, _shared=shared)
    if shared.why() or energy.is_available():
        return energy
    if shared.supports_instant():
        return NvmlPowerMeter(index, source="power-instant", clock=clock, sampler=sampler, _shared=shared)
    return NvmlPowerMeter(index, source="power-average", clock=clock, sampler=sampler, _shared=shared)
