"""The float state a measurement runs in: denormals flushed to zero on the measuring thread, then given back.

A probe trains on one fixed batch for hundreds of steps, and some configs drift into denormal values, where
x86 runs 30-100x slower (a transformer block at 25 ms measured 740-900 ms): an artefact of the probe's data,
not a cost of the layer. So the host device and the reference harness measure with denormals flushed (FTZ/DAZ,
set through torch), and give the thread back as they found it.
"""

import contextlib
import sys


def denormals_flushed():
    """Whether this thread flushes denormal floats to zero now: the smallest normal double over 4 is a denormal,
    and reads 0.0 only when flushed."""
    return sys.float_info.min / 4 == 0.0


def set_denormals_flushed(flushed):
    """Turn flushing on or off for this thread; False where the CPU cannot flush (no SSE3)."""
    import torch

    return bool(torch.set_flush_denormal(bool(flushed)))


@contextlib.contextmanager
def flushed_denormals():
    """Denormals flushed on this thread while the block runs, then the thread as it was. Yields whether
    flushing is on (False where the CPU cannot)."""
    before = denormals_flushed()
    on = set_denormals_flushed(True)
    try:
        yield on
    finally:
        if on and not before:
            set_denormals_flushed(False)
