"""The host's memory-allocator policy while it measures: freed memory kept, so no step pays page faults.

glibc's malloc returns large freed blocks to the kernel (``munmap``, heap trimming) and moves its
mmap threshold with the process's allocation history. A training step that allocates megabyte-sized
activations then pays a first-touch page fault on every 4 KiB page of them in some states of that
history and none in others: measured on this project's 2-core host, the same ReLU probe's step read
1.3 ms or 5.5 ms in one process (0 vs 945 minor faults per step), and a whole VGG step paid about
2,300 faults per step. That is allocation history, not the layer's cost, and it made probes (short,
each with its own history) dearer than the same layers inside a whole model.

``hold_freed_memory`` fixes the policy for this process: freed memory up to 1 GiB stays mapped at the
heap's top, and blocks below 32 MiB (glibc's ceiling) come from the heap, so steady-state steps reuse
pages already touched. Probes and whole models are measured alike under it. glibc cannot go back to its
dynamic threshold, so the policy stays for the rest of the process (a measuring process); other C
libraries are left alone and said to be.
"""

import ctypes
import platform

#: glibc mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: the policy: keep up to 1 GiB of freed memory; serve blocks below 32 MiB (glibc's maximum) from the heap
TRIM_THRESHOLD_BYTES = 1 << 30
MMAP_THRESHOLD_BYTES = 32 << 20


def _is_glibc():
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


def _mallopt():
    """glibc's ``mallopt`` from the symbols already loaded in this process, or None on another C library."""
    if not _is_glibc():
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt


def hold_freed_memory():
    """Set the policy (idempotent); returns its description (``describe()``)."""
    mallopt = _mallopt()
    if mallopt is None:
        return describe()
    ok = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and ok
    return describe(applied=ok)


def describe(applied=None):
    """What a measurement here runs under, for ``HostDevice.info()`` and each campaign's device record."""
    if not _is_glibc():
        return {"library": platform.libc_ver()[0] or platform.system(), "policy": "default (not glibc: left alone)"}
    out = {"library": "glibc " + platform.libc_ver()[1], "policy": "hold freed memory",
           "trim_threshold_bytes": TRIM_THRESHOLD_BYTES, "mmap_threshold_bytes": MMAP_THRESHOLD_BYTES}
    if applied is False:
        out["policy"] = "default (mallopt refused the policy)"
    return out
