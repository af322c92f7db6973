"""Device state recorded with every measurement window: clocks, temperatures, battery, machine load.

``sysfs_state(root)`` reads what Linux exposes (Android and Jetson included), from a ``root`` path so
tests run it on fake trees: CPU clocks (``cpufreq/scaling_cur_freq``, kHz), the GPU clock where a
devfreq node exists (Jetson ``17000000.gpu``/``57000000.gpu``, Hz), thermal zones (``temp``,
millidegrees C, with their ``type``), and the battery (``capacity`` %, ``temp`` tenths of a degree).
Missing or unreadable files are simply absent from the record. Pass it to the protocol as
``measure_parts(..., state_fn=lambda: sysfs_state(root))``.

``cpu_identity(root)`` reads which CPU measures (``/proc/cpuinfo``'s model and the instruction sets its kernels
choose between) for a device's info, which a campaign and its estimator keep; ``identity_changes(profiled, now)``
names what differs between the device an estimator was profiled on and the one measuring now (another CPU, another
torch, other threads): a profile describes one machine, and this project's 2-core VMs changed CPU between sessions
(``docs/evaluations.md``) without a record of it.

``load_state(root, own_threads)`` reads the machine's load (``/proc/loadavg``'s 1-minute average and
``/proc/stat``'s instantaneous ``procs_running``, minus the measuring process's own threads), and
``load_summary(states, cpu_count, own_threads, use_load_average)`` says whether other work competed with a
measurement: a busy machine makes time and energy unreliable, so it is recorded with every window and warned about.
On a GPU device the load average counts our own threads waiting on the driver, so there the runnable threads alone
decide (``Device.load_average_means_busy``).
"""

import statistics

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


def load_state(root="/", own_threads=1):
    """``{"load_1m", "procs_running", "other_runnable"}`` from /proc under ``root`` (absent where unreadable).

    ``procs_running`` counts runnable threads at this instant, the reader included; ``own_threads``
    (the measurement's intra-op threads) are taken off to give ``other_runnable``.
    """
    fs = as_fs(root)
    out = {}
    try:
        out["load_1m"] = float(fs.read_text("proc/loadavg").split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        for line in fs.read_text("proc/stat").splitlines():
            if line.startswith("procs_running "):
                n = int(line.split()[1])
                out["procs_running"] = n
                out["other_runnable"] = max(0, n - max(1, int(own_threads)))
                break
    except (OSError, ValueError, IndexError):
        pass
    return out


#: instruction sets a CPU's kernels choose between (x86 ``flags``, Arm ``Features`` in /proc/cpuinfo): oneDNN and the
#: Arm compute libraries pick their convolution and GEMM kernels by these, so two CPUs apart on them cost apart
CPU_ISA = ("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "asimd", "asimddp", "sve",
           "sve2", "i8mm", "bf16")
#: /proc/cpuinfo keys naming the CPU, in the order they are tried (x86, then Arm kernels' older fields)
CPU_MODEL_KEYS = ("model name", "Processor", "Hardware", "cpu model")
#: device-info keys whose change makes a profile's estimates describe another machine
IDENTITY_KEYS = ("cpu_model", "cpu_isa", "gpu_name", "torch_version", "torch_threads")
#: those of them that name the hardware: campaigns apart on one are another machine's, never fitted together
HARDWARE_KEYS = ("cpu_model", "cpu_isa", "gpu_name")


def cpu_identity(root="/"):
    """``{"cpu_model", "cpu_isa"}`` from ``proc/cpuinfo`` under ``root``: the first named model (the first processor's)
    and the sorted ``CPU_ISA`` flags the first processor lists; each key absent where the file does not say it."""
    fs = as_fs(root)
    try:
        text = fs.read_text("proc/cpuinfo")
    except (OSError, UnicodeDecodeError):
        return {}
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if sep and key and value and key not in fields:  # the first processor's (a big.LITTLE phone lists several)
            fields[key] = value
    out = {}
    model = next((fields[k] for k in CPU_MODEL_KEYS if k in fields), None)
    if model:
        out["cpu_model"] = " ".join(model.split())[:200]
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    if flags:
        out["cpu_isa"] = sorted(flags.intersection(CPU_ISA))
    return out


def identity_changes(profiled, now, keys=IDENTITY_KEYS):
    """``["cpu_model: 'A' -> 'B'", ...]`` for each of ``keys`` both device infos record and that differs (nothing for
    a key either lacks: an estimator fitted before the key existed is not called changed)."""
    profiled, now = profiled or {}, now or {}
    return [f"{k}: {profiled[k]!r} -> {now[k]!r}" for k in keys
            if profiled.get(k) is not None and now.get(k) is not None and profiled[k] != now[k]]


def identity_warning(profiled, now):
    """A sentence when ``identity_changes(profiled, now)`` finds any, else None."""
    changes = identity_changes(profiled, now)
    if not changes:
        return None
    return (f"the estimator was profiled on another machine than this one ({'; '.join(changes)}): its estimates and "
            "intervals describe that one; profile this device (thor-sdk profile) for its own")


#: other runnable work at or above this (threads, median over windows; or the median 1-minute load beyond
#: our own threads) means the measurement shared the CPU: its figures are flagged as unreliable
BUSY_OTHER = 1.0


def load_summary(states, cpu_count=None, own_threads=1, use_load_average=True):
    """What the windows' recorded load says: ``{"windows", "other_runnable_median", "load_1m_max",
    "other_load_1m", "busy", "warning"}`` (``busy`` None when no window recorded a load).
    ``use_load_average`` False: only the runnable threads beside ours say busy (the load average is still
    reported): a device whose own waiting raises it (``Device.load_average_means_busy``)."""
    states = [s for s in states or () if isinstance(s, dict)]
    runnable = [s["other_runnable"] for s in states if isinstance(s.get("other_runnable"), (int, float))]
    loads = [s["load_1m"] for s in states if isinstance(s.get("load_1m"), (int, float))]
    out = {"windows": len(states), "other_runnable_median": statistics.median(runnable) if runnable else None,
           "load_1m_max": max(loads) if loads else None, "other_load_1m": None, "busy": None, "warning": None}
    if not runnable and not loads:
        return out
    threads = max(1, int(own_threads or 1))
    other_load = max(0.0, statistics.median(loads) - threads) if loads else 0.0
    out["other_load_1m"] = round(other_load, 2)
    med = out["other_runnable_median"] or 0.0
    out["busy"] = med >= BUSY_OTHER or (use_load_average and other_load >= BUSY_OTHER)
    if out["busy"]:
        cpus = f" on {cpu_count} CPUs" if cpu_count else ""
        out["warning"] = (f"the machine was busy while measuring (other runnable threads: median {med:g}; "
                          f"1-minute load {statistics.median(loads) if loads else float('nan'):.2f}{cpus} with {threads} "
                          "thread(s) of ours): figures are unreliable; measure on a quiet machine")
    return out
