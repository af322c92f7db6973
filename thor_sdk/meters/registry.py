"""Which meters a device kind can have. Each meter module decides its own availability."""

#: where the host runs a training step: the CPU, or an NVIDIA GPU through CUDA
ACCELERATORS = ("cpu", "cuda")


def host_meters(root="/", accelerator="cpu", gpu_index=0, nvml=None):
    """Meters that measure training on this host's ``accelerator``; each reports whether it is readable.

    A meter is listed only where it measures the part that runs the training step:

    - ``"cpu"`` (the host's default): RAPL (CPU packages). NVML is not listed: it measures a GPU, and
      a step on the CPU leaves the GPU idle, so its "energy" would be the GPU's idle draw.
    - ``"cuda"``: NVML for GPU ``gpu_index`` (unavailable, with the reason, on a Jetson, where NVML
      reports no power). RAPL is not listed: it measures the CPU packages, not the GPU.

    On a board that runs thor-sdk itself, the board's own sensors come first for either, only when present
    under ``root`` (so an ordinary host lists just RAPL or NVML): an INA238 system-input monitor (Jetson
    AGX Thor's VIN: the board's whole input, CPU and GPU alike, preferred as INA3221's input rail is), then
    INA3221 rails. ``nvml``: the pynvml module or a fake (tests).
    """
    from thor_sdk.errors import UsageError

    from .base import as_fs
    from .ina238 import Ina238Meter, discover_ina238
    from .ina3221 import HWMON_BASE, IIO_BASE, Ina3221Meter
    from .nvml import nvml_meter
    from .rapl import RaplMeter

    if accelerator not in ACCELERATORS:
        raise UsageError(f"unknown accelerator {accelerator!r} (known: {', '.join(ACCELERATORS)})")
    fs = as_fs(root)
    meters = []
    if discover_ina238(fs):
        meters.append(Ina238Meter(root))
    if fs.is_dir(IIO_BASE) or fs.is_dir(HWMON_BASE):
        meters.append(Ina3221Meter(root))
    if accelerator == "cpu":
        meters.append(RaplMeter(root))
    else:
        meters.append(nvml_meter(gpu_index, nvml=nvml, root=root))
    return meters
