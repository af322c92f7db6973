"""Fleets: one campaign per device, run in parallel threads (one per device), each device's outcome on its own.

The work is on the devices (a harness run takes seconds to minutes); the host only writes bundles and waits,
so one thread per device is enough. Nothing is shared between the threads but what is passed in: each
thread opens its own campaign (its own SQLite connection and one-writer lock) and drives its own device
object; bundle exports, which go through torch's exporter (process-wide state, not thread-safe), are
serialised through one lock that the fleet run owns (``SerialCodec``). A device that fails (it
disconnects and stays away, say) ends its own campaign where it stands, resumable, and the others go on.
"""

import re
import threading

from thor_sdk.errors import DeviceError, DeviceUnavailableError, ThorError, TransportDisconnected, UsageError


def campaign_name(spec):
    """The campaign file name of a device spec: ``android:R58M12`` -> ``android-R58M12.db``, ``stf://h:7401`` ->
    ``stf-h-7401.db`` (letters, digits, ``.``, ``_`` and ``-`` only)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(spec)).strip("-.") or "device"
    return name + ".db"


class SerialCodec:
    """A bundle codec whose bundle writes hold ``lock``: several devices' threads never export at once."""

    def __init__(self, inner, lock):
        self.inner, self.lock = inner, lock

    def write_probe(self, *args, **kw):
        with self.lock:
            return self.inner.write_probe(*args, **kw)

    def write_model(self, *args, **kw):
        with self.lock:
            return self.inner.write_model(*args, **kw)

    def read_parts(self, *args, **kw):
        return self.inner.read_parts(*args, **kw)

    def window_times(self, *args, **kw):
        return self.inner.window_times(*args, **kw)


def outcome_of(error):
    """``(status, reason)`` of a device whose campaign stopped on ``error``: ``disconnected`` (the device went
    away: ``--resume`` continues), ``unavailable`` (never reached) or ``failed``."""
    text = f"{type(error).__name__}: {error}" if not isinstance(error, ThorError) else str(error)
    if isinstance(error, TransportDisconnected):
        return "disconnected", text
    if isinstance(error, DeviceUnavailableError):
        return "unavailable", text
    if isinstance(error, DeviceError):
        return "disconnected" if "lost the" in text or "did not come back" in text else "failed", text
    return "failed", text


def run_fleet(jobs, join_poll_s=0.2):
    """Run ``jobs`` (``[(name, fn)]``; ``fn()`` returns a summary dict) in one thread each; returns one dict per
    job, in order: ``{"device": name, "status": "done", **summary}`` or ``{"device": name, "status":
    "disconnected" | "unavailable" | "failed", "error": reason}``. Whatever a job raises ends only that job; KeyboardInterrupt in the waiting thread leaves the others to finish their current probe
    (daemon threads: the campaigns are resume-safe)."""
    names = [n for n, _ in jobs]
    if len(set(names)) != len(names):
        raise UsageError("the same device is named twice: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    results = [None] * len(jobs)

    def work(i, name, fn):
        try:
            summary = fn() or {}
            results[i] = {"device": name, "status": "done"}
            results[i].update((k, v) for k, v in summary.items() if k not in ("device", "status"))
        except BaseException as e:  # noqa: B036  this device's outcome (whatever its thread raised); the others go on
            status, reason = outcome_of(e)
            results[i] = {"device": name, "status": status, "error": reason}

    threads = [threading.Thread(target=work, args=(i, n, fn), name=f"thor-fleet-{n}", daemon=True)
               for i, (n, fn) in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(join_poll_s)
    return results
