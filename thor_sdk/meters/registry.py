"""Which meters a device kind can have. Each meter module decides its own availability."""


def host_meters(root="/"):
    """Meters a Linux/macOS host may have; each reports whether it is readable.

    Always RAPL (CPU packages) and NVML (NVIDIA GPU). On a board that runs thor-sdk itself, the
    board's own sensors come first: Jetson INA3221 rails, an Android-style battery fuel gauge
    (only when present under ``root``, so an ordinary host lists just RAPL and NVML).
    """
    from .base import as_fs
    from .ina3221 import HWMON_BASE, IIO_BASE, Ina3221Meter
    from .nvml import nvml_meter
    from .rapl import RaplMeter

    fs = as_fs(root)
    meters = []
    if fs.is_dir(IIO_BASE) or fs.is_dir(HWMON_BASE):
        meters.append(Ina3221Meter(root))
    meters.append(RaplMeter(root))
    meters.append(nvml_meter())
    return meters
