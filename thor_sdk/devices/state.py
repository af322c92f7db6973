"""Device state recorded with every measurement window: clocks, temperatures, battery.

``sysfs_state(root)`` reads what Linux exposes (Android and Jetson included), from a ``root`` path so
tests run it on fake trees: CPU clocks (``cpufreq/scaling_cur_freq``, kHz), the GPU clock where a
devfreq node exists (Jetson ``17000000.gpu``/``57000000.gpu``, Hz), thermal zones (``temp``,
millidegrees C, with their ``type``), and the battery (``capacity`` %, ``temp`` tenths of a degree).
Missing or unreadable files are simply absent from the record. Pass it to the protocol as
``measure_parts(..., state_fn=lambda: sysfs_state(root))``.
"""

from thor_sdk.meters.base import as_fs


def _int(fs, rel):
    try:
        return int(fs.read_text(rel).strip())
    except (OSError, ValueError):
        return None


def sysfs_state(root="/"):
    fs = as_fs(root)
    out = {}
    cpus = {}
    for rel in fs.glob("sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_cur_freq"):
        v = _int(fs, rel)
        if v is not None:
            cpus[rel.split("/")[4]] = v
    if cpus:
        out["cpu_khz"] = dict(sorted(cpus.items(), key=lambda kv: int(kv[0][3:])))
    gpus = {}
    for rel in fs.glob("sys/class/devfreq/*/cur_freq"):
        name = rel.split("/")[3]
        if "gpu" in name:
            v = _int(fs, rel)
            if v is not None:
                gpus[name] = v
    if gpus:
        out["gpu_hz"] = gpus
    temps = {}
    for rel in fs.glob("sys/class/thermal/thermal_zone*/temp"):
        v = _int(fs, rel)
        if v is None:
            continue
        zone = rel.split("/")[3]
        try:
            ztype = fs.read_text(rel.rsplit("/", 1)[0] + "/type").strip()
        except OSError:
            ztype = ""  # no readable type: the zone's folder name is used
        temps[ztype or zone] = v / 1000.0
    if temps:
        out["temps_c"] = temps
    cap = _int(fs, "sys/class/power_supply/battery/capacity")
    if cap is not None:
        out["battery_pct"] = cap
    t = _int(fs, "sys/class/power_supply/battery/temp")
    if t is not None:
        out["battery_temp_c"] = t / 10.0
    return out
