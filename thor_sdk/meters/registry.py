"""Which meters a device kind can have. Each meter module decides its own availability."""


def host_meters(root="/"):
    """Meters a Linux/macOS host may have; each reports whether it is readable.

    Always RAPL (CPU packages) and NVML (NVIDIA GPU; unavailable, with the reason, on a Jetson). On a
    board that runs thor-sdk itself, the board's own sensors come first, only when present under
    ``root`` (so an ordinary host lists just RAPL and NVML): an INA238 system-input monitor (Jetson AGX
    Thor's VIN: the board's whole input, preferred as INA3221's input rail is), then INA3221 rails.
    """
    from .base import as_fs
    from .ina238 import Ina238Meter, discover_ina238
    from .ina3221 import HWMON_BASE, IIO_BASE, Ina3221Meter
    from .nvml import nvml_meter
    from .rapl import RaplMeter

    fs = as_fs(root)
    meters = []
    if discover_ina238(fs):
        meters.append(Ina238Meter(root))
    if fs.is_dir(IIO_BASE) or fs.is_dir(HWMON_BASE):
        meters.append(Ina3221Meter(root))
    meters.append(RaplMeter(root))
    meters.append(nvml_meter(root=root))
    return meters
