"""Jetson GPU frequency control through devfreq sysfs, always restored.

A Jetson GPU is a devfreq device; its node holds ``available_frequencies`` (Hz, space separated),
``cur_freq``, ``min_freq``, ``max_freq`` (and ``governor``). Pinning a frequency = writing it to both
``min_freq`` and ``max_freq`` (needs root). Known nodes (relative to ``root``, ``/`` on a device):

- Nano (JetPack 4): ``sys/devices/gpu.0/devfreq/57000000.gpu`` (``sys/class/devfreq/57000000.gpu``)
- TX2: ``sys/devices/17000000.gp10b/devfreq/17000000.gp10b``
- Xavier: ``sys/devices/17000000.gv11b/devfreq/17000000.gv11b``
- Orin (JetPack 5): ``sys/devices/17000000.ga10b/devfreq/17000000.ga10b`` (``sys/class/devfreq/17000000.ga10b``)
- Orin (JetPack 6): ``sys/class/devfreq/17000000.gpu``

``GpuFrequencyController`` remembers the original ``min_freq``/``max_freq`` when entered and writes
them back on exit -- normal, exception, Ctrl-C (SIGINT -> KeyboardInterrupt) and SIGTERM (turned
into ``SystemExit`` while the controller is active, in the main thread). SIGKILL cannot be caught:
after one, ``thor-sdk table profile --reset-frequency`` (``reset_full_range()``) or a reboot
reopens the whole range.
"""

import glob
import os
import signal
import threading

from thor_sdk.errors import DeviceError, DeviceUnavailableError, UsageError

KNOWN_GPU_DEVFREQ = (
    "sys/devices/gpu.0/devfreq/57000000.gpu",
    "sys/devices/57000000.gpu/devfreq/57000000.gpu",
    "sys/devices/17000000.gp10b/devfreq/17000000.gp10b",
    "sys/devices/17000000.gv11b/devfreq/17000000.gv11b",
    "sys/devices/17000000.ga10b/devfreq/17000000.ga10b",
    "sys/class/devfreq/57000000.gpu",
    "sys/class/devfreq/17000000.ga10b",
    "sys/class/devfreq/17000000.gv11b",
    "sys/class/devfreq/17000000.gp10b",
    "sys/class/devfreq/17000000.gpu",
)
NODES = ("available_frequencies", "cur_freq", "min_freq", "max_freq")


def find_gpu_devfreq(root="/"):
    """Path of the GPU devfreq node under ``root``, or None."""
    for rel in KNOWN_GPU_DEVFREQ:
        p = os.path.join(root, rel)
        if os.path.isfile(os.path.join(p, "available_frequencies")):
            return p
    for p in sorted(glob.glob(os.path.join(root, "sys/class/devfreq/*"))):
        name = os.path.basename(p)
        if ("gpu" in name or name.endswith(("ga10b", "gv11b", "gp10b"))) and os.path.isfile(
                os.path.join(p, "available_frequencies")):
            return p
    return None


class GpuFrequencyController:
    """Read and pin the GPU frequency of a Jetson (or of a simulated one under ``root``).

    Use as a context manager; ``set_frequency`` only works inside it, so a pinned frequency is never
    left behind::

        with GpuFrequencyController(root="/") as gpu:
            for f in gpu.available_frequencies():
                gpu.set_frequency(f)
                ...
    """

    def __init__(self, root="/", devfreq_path=None):
        self.root = root
        self.path = devfreq_path or find_gpu_devfreq(root)
        self._saved = None
        self._sigterm_installed = False
        self._old_sigterm = None

    # -------------------------------------------------------------- availability
    def is_available(self):
        """True when a GPU devfreq node exists and its min/max nodes can be written."""
        return not self.why_unavailable()

    def why_unavailable(self):
        if self.path is None:
            return f"no GPU devfreq node under {self.root} (looked for {', '.join(KNOWN_GPU_DEVFREQ[:5])}, ...)"
        missing = [n for n in NODES if not os.path.isfile(os.path.join(self.path, n))]
        if missing:
            return f"GPU devfreq node {self.path} lacks {', '.join(missing)}"
        for n in ("min_freq", "max_freq"):
            if not os.access(os.path.join(self.path, n), os.W_OK):
                return (f"cannot write {os.path.join(self.path, n)}: setting the GPU frequency needs root "
                        "(run with sudo)")
        return ""

    # -------------------------------------------------------------- reads
    def _read(self, name):
        p = os.path.join(self.path, name)
        try:
            with open(p, encoding="ascii") as f:
                return f.read().strip()
        except OSError as e:
            raise DeviceError(f"cannot read {p}: {e.strerror or e}") from e

    def _read_int(self, name):
        text = self._read(name)
        try:
            return int(text)
        except ValueError:
            raise DeviceError(f"{os.path.join(self.path, name)} holds {text!r}, not a frequency in Hz") from None

    def available_frequencies(self):
        """Sorted frequencies in Hz."""
        self._require_node()
        text = self._read("available_frequencies")
        try:
            return sorted({int(x) for x in text.split()})
        except ValueError:
            raise DeviceError(f"unreadable available_frequencies in {self.path}: {text[:80]!r}") from None

    def state(self):
        """``{"min_freq", "max_freq", "cur_freq"}`` in Hz."""
        self._require_node()
        return {n: self._read_int(n) for n in ("min_freq", "max_freq", "cur_freq")}

    def _require_node(self):
        if self.path is None:
            raise DeviceUnavailableError(self.why_unavailable())

    # -------------------------------------------------------------- writes
    def _write(self, name, value):
        p = os.path.join(self.path, name)
        try:
            with open(p, "w", encoding="ascii") as f:
                f.write(f"{int(value)}\n")
        except PermissionError as e:
            raise DeviceError(f"cannot write {p}: permission denied; setting the GPU frequency needs root "
                              "(run with sudo)") from e
        except OSError as e:
            raise DeviceError(f"cannot write {p}: {e.strerror or e}") from e

    def _set_range(self, lo, hi):
        # keep min <= max at every moment: raise max first when going up, lower min first when going down
        cur_max = self._read_int("max_freq")
        if lo > cur_max:
            self._write("max_freq", hi)
            self._write("min_freq", lo)
        else:
            self._write("min_freq", lo)
            self._write("max_freq", hi)

    def set_frequency(self, freq_hz):
        """Pin the GPU at ``freq_hz`` (one of ``available_frequencies()``)."""
        if self._saved is None:
            raise UsageError("set_frequency only inside `with GpuFrequencyController(...)` (so it is restored)")
        avail = self.available_frequencies()
        if int(freq_hz) not in avail:
            raise UsageError(f"{freq_hz} Hz is not an available GPU frequency ({', '.join(map(str, avail))})")
        self._set_range(int(freq_hz), int(freq_hz))

    def restore(self):
        """Write back the min/max frequencies saved on entry (no-op when nothing is saved)."""
        if self._saved is not None:
            self._set_range(self._saved["min_freq"], self._saved["max_freq"])

    # -------------------------------------------------------------- context
    def __enter__(self):
        why = self.why_unavailable()
        if why:
            raise DeviceUnavailableError(why) if self.path is None else DeviceError(why)
        st = self.state()
        self._saved = {"min_freq": st["min_freq"], "max_freq": st["max_freq"]}
        if threading.current_thread() is threading.main_thread():
            self._old_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _sigterm_to_exit)
            self._sigterm_installed = True
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self.restore()
        finally:
            self._saved = None
            if self._sigterm_installed:
                old = self._old_sigterm
                signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)
                self._sigterm_installed, self._old_sigterm = False, None
        return False

    def reset_full_range(self):
        """After an uncatchable kill (SIGKILL): let the GPU use its whole range again (lowest..highest)."""
        why = self.why_unavailable()
        if why:
            raise DeviceUnavailableError(why) if self.path is None else DeviceError(why)
        avail = self.available_frequencies()
        self._set_range(avail[0], avail[-1])
        return {"min_freq": avail[0], "max_freq": avail[-1]}

    def describe(self):
        return {"devfreq": self.path, "available": self.is_available(), "why_unavailable": self.why_unavailable()}


def _sigterm_to_exit(signum, frame):
    raise SystemExit(128 + signum)
