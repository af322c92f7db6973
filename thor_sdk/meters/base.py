"""Energy meter base class.

A meter reads one energy source (a RAPL package counter, an NVML GPU, an INA3221 rail, the
Android battery, a bench meter's log) over a *window*: ``start()``, run the work, ``stop()`` returns
an ``EnergyWindow`` with joules and the samples behind them. Meters read from a ``root`` path
(``/`` on a real device) so tests run the real code on fake sysfs trees under ``tmp_path``.
"""

from dataclasses import dataclass, field

from thor_sdk.errors import MeasurementError, NoMeterError, UsageError


@dataclass
class EnergyWindow:
    """Energy over one measurement window.

    ``energy_j`` is gross energy over the window; ``idle_power_w`` (when the protocol measured an
    idle baseline) gives ``net_energy_j = energy_j - idle_power_w * duration_s``. ``samples`` are
    ``(t_s, power_w)`` pairs relative to the window start (empty for pure counters). ``source`` says
    which reading of the meter gave the energy where a meter has several (NVML: the instantaneous power
    field, the total-energy counter or the averaged power; a Perfetto trace: its rails or the battery).
    """

    energy_j: float
    duration_s: float
    meter: str
    samples: list = field(default_factory=list)
    idle_power_w: float = None
    source: str = None

    @property
    def net_energy_j(self):
        if self.idle_power_w is None:
            return None
        return self.energy_j - self.idle_power_w * self.duration_s

    @property
    def mean_power_w(self):
        return self.energy_j / self.duration_s if self.duration_s > 0 else float("nan")

    def to_dict(self):
        d = {"energy_j": self.energy_j, "net_energy_j": self.net_energy_j, "duration_s": self.duration_s,
             "meter": self.meter, "idle_power_w": self.idle_power_w, "n_samples": len(self.samples)}
        if self.source is not None:
            d["source"] = self.source
        return d


class Meter:
    """Base class: one file per vendor subclasses it."""

    name = "meter"
    #: seconds between the sensor's updates; windows should be many times longer
    sample_period_s = 0.0

    def is_available(self):
        """True when this meter can be read here (files present and readable): ``why_unavailable()`` is empty."""
        return self.why_unavailable() == ""

    def why_unavailable(self):
        """One sentence saying why this meter cannot be read here (empty when it can). Subclasses say it."""
        return f"{self.name} does not say how it is read"

    def window_source(self):
        """Which reading this meter's windows come from (``EnergyWindow.source``); None for single-source meters."""
        return None

    def start(self):
        raise NotImplementedError

    def stop(self):
        """End the window started by ``start()`` and return its ``EnergyWindow``."""
        raise NotImplementedError

    def _check(self):
        """Raise NoMeterError (with the reason) unless the meter is readable."""

        if not self.is_available():
            raise NoMeterError(f"{self.name}: {self.why_unavailable()}")

    def describe(self):
        d = {"name": self.name, "available": self.is_available(), "why_unavailable": self.why_unavailable(),
             "sample_period_s": self.sample_period_s}
        if self.window_source() is not None:
            d["reads"] = self.window_source()
        return d


# ---------------------------------------------------------------------------------------------
# Shared machinery for the meters in this package
# ---------------------------------------------------------------------------------------------

def trapezoid_j(samples):
    """Energy (J) of ``(t_s, power_w)`` samples by the trapezoid rule."""
    e = 0.0
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
        e += (t1 - t0) * (p0 + p1) / 2.0
    return e


class LocalFs:
    """Files under a ``root`` folder (``/`` on a real device, a fake tree under ``tmp_path`` in tests).

    Paths given to it are relative to the root (``sys/class/powercap/...``). Permission errors are
    left as ``PermissionError`` for the meter to explain.
    """

    def __init__(self, root="/"):
        import os

        self.root = os.fspath(root)

    def path(self, rel):
        import os

        return os.path.join(self.root, rel)

    def read_text(self, rel):
        with open(self.path(rel), encoding="utf-8", errors="replace") as f:
            return f.read()

    def exists(self, rel):
        import os

        return os.path.exists(self.path(rel))

    def is_dir(self, rel):
        import os

        return os.path.isdir(self.path(rel))

    def glob(self, pattern):
        """Relative paths matching ``pattern`` (sorted)."""
        import glob as _glob
        import os

        # glob.escape the root only: sysfs names such as ``iio:device0`` contain no glob magic but
        # a tmp_path might contain ``[``.
        base = _glob.escape(self.root)
        hits = _glob.glob(os.path.join(base, pattern))
        return sorted(os.path.relpath(h, self.root) for h in hits)

    def describe(self):
        return self.root


class SnapshotFs:
    """The same interface over a dict ``{relative path: text or OSError}`` copied from a device.

    Used to decide, on the host, whether a remote device's meter files exist and are readable
    (the real meter classes run on the snapshot). Directories are implied by the file paths.
    """

    def __init__(self, files, origin="device"):
        self.files = dict(files)
        self.origin = origin

    def path(self, rel):
        return f"{self.origin}:/{rel}"

    def read_text(self, rel):
        v = self.files.get(rel)
        if v is None:
            raise FileNotFoundError(2, "No such file or directory", self.path(rel))
        if isinstance(v, OSError):
            raise v
        return v

    def exists(self, rel):
        return rel in self.files or self.is_dir(rel)

    def is_dir(self, rel):
        prefix = rel.rstrip("/") + "/"
        return any(k.startswith(prefix) for k in self.files)

    def glob(self, pattern):
        import fnmatch

        parts = pattern.split("/")
        names = set()
        for k in self.files:
            kp = k.split("/")
            for n in range(1, len(kp) + 1):
                if n == len(parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(kp[:n], parts)):
                    names.add("/".join(kp[:n]))
        return sorted(names)

    def describe(self):
        return self.origin


def as_fs(root):
    """``root`` as a file-system object: a path becomes ``LocalFs``; LocalFs/SnapshotFs pass through."""
    import os

    if isinstance(root, (str, bytes, os.PathLike)):
        return LocalFs(root)
    return root


def read_number(fs, rel, what="value"):
    """An integer (or float) read from a sysfs file; unreadable or garbled files raise MeasurementError."""

    try:
        text = fs.read_text(rel).strip()
    except PermissionError as e:
        raise MeasurementError(f"permission denied reading {fs.path(rel)} ({what})") from e
    except OSError as e:
        raise MeasurementError(f"cannot read {fs.path(rel)} ({what}): {e.strerror or e}") from e
    try:
        return int(text)
    except ValueError:
        try:
            return float(text.split()[0])
        except (ValueError, IndexError):
            raise MeasurementError(f"{fs.path(rel)} ({what}) holds {text[:40]!r}, not a number") from None


def probe_readable(fs, rel):
    """'' when ``rel`` can be read, else one sentence saying why not."""
    try:
        fs.read_text(rel)
    except FileNotFoundError:
        return f"{fs.path(rel)} does not exist"
    except PermissionError:
        return f"{fs.path(rel)} is not readable by this user (permission denied)"
    except OSError as e:
        return f"{fs.path(rel)} cannot be read ({e.strerror or e})"
    return ""


class ThreadSampler:
    """Calls ``read_fn()`` every ``period_s`` on a background thread between ``start`` and ``stop``.

    The first and last samples are taken synchronously in ``start()``/``stop()``, so a window always
    has at least two samples spanning it exactly. Samples are ``(clock() seconds, value)``. An error
    in ``read_fn`` on the thread ends sampling and is re-raised by ``stop()``.
    """

    def __init__(self, period_s=0.05, clock=None):
        import time

        if period_s <= 0:

            raise UsageError(f"sampling period must be > 0 s, got {period_s}")
        self.period_s = float(period_s)
        self.clock = clock or time.monotonic
        self._thread = None
        self._stop = None
        self._samples = []
        self._error = None
        self._read = None

    def _take(self):
        v = self._read()
        self._samples.append((self.clock(), v))

    def _loop(self):
        import time

        # deadlines on a fixed grid (not "period after the last read"), so reading time does not add drift
        nxt = time.monotonic() + self.period_s
        while not self._stop.wait(max(0.0, nxt - time.monotonic())):
            try:
                self._take()
            except Exception as e:  # noqa: BLE001 -- handed to stop(), which re-raises it
                self._error = e
                return
            nxt += self.period_s
            now = time.monotonic()
            if nxt < now:  # fell behind (a long stall): skip the missed slots rather than burst
                nxt = now + self.period_s

    def start(self, read_fn):
        import threading

        self._read = read_fn
        self._samples = []
        self._error = None
        self._take()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="thor-meter-sampler", daemon=True)
        self._thread.start()

    def stop(self):
        if self._thread is None:

            raise MeasurementError("meter sampler stopped before it was started")
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise self._error
        self._take()
        return list(self._samples)


class ManualSampler:
    """A sampler that samples only when told: ``start``, any number of ``tick()``, ``stop``.

    Deterministic stand-in for ``ThreadSampler`` in tests and simulations: the test sets its fake
    clock and sysfs values, then calls ``tick()``.
    """

    def __init__(self, clock):
        self.clock = clock
        self._read = None
        self._samples = []

    def start(self, read_fn):
        self._read = read_fn
        self._samples = [(self.clock(), read_fn())]

    def tick(self):
        self._samples.append((self.clock(), self._read()))

    def stop(self):
        self.tick()
        out, self._samples, self._read = self._samples, [], None
        return out


class SamplingMeter(Meter):
    """A meter that samples instantaneous power (``power_w()``) and integrates it (trapezoid rule).

    ``sample_period_s``: how often the sensor updates (windows are sized from it);
    ``poll_period_s``: how often the background sampler reads it (default: the sensor period).
    ``sampler``: a ``ThreadSampler``/``ManualSampler``-like object (injectable for tests).
    """

    def __init__(self, sample_period_s, poll_period_s=None, clock=None, sampler=None):
        self.sample_period_s = float(sample_period_s)
        self.poll_period_s = float(poll_period_s or sample_period_s)
        self.clock = clock
        self.sampler = sampler
        self._active = None

    def power_w(self):
        raise NotImplementedError

    def read_sample(self):
        """What the sampler records each period (default: ``power_w()``)."""
        return self.power_w()

    def samples_to_power(self, samples):
        """``[(t_s, raw sample)]`` -> ``[(t_s, power_w)]`` (meters that decide units per window override it)."""
        return [(t, float(v)) for t, v in samples]

    def start(self):
        self._check()
        self._active = self.sampler or ThreadSampler(self.poll_period_s, self.clock)
        self._active.start(self.read_sample)

    def stop(self):
        if self._active is None:
            raise MeasurementError(f"{self.name}: stop() without start()")
        raw, self._active = self._active.stop(), None
        samples = self.samples_to_power(raw)
        t0 = samples[0][0]
        rel = [(t - t0, p) for t, p in samples]
        return EnergyWindow(energy_j=trapezoid_j(rel), duration_s=rel[-1][0], meter=self.name, samples=rel,
                            source=self.window_source())

class RailSamplingMeter(SamplingMeter):
    """A ``SamplingMeter`` over named rails (INA3221 channels, INA238 monitors): power is the sum of the
    selected rails' ``rail_power_w(rail)``; the rails are discovered once per window, not once per sample.
    Subclasses give ``selected_rails()`` and ``rail_power_w(rail)``; a rail has ``name`` and ``to_dict()``."""

    _cached = None

    def __init__(self, root="/", rails=None, sample_period_s=0.05, poll_period_s=None, clock=None, sampler=None):
        """``root``: the sysfs root (a fake tree in tests); ``rails``: a rail name or names to sum (all when None)."""
        super().__init__(sample_period_s=sample_period_s, poll_period_s=poll_period_s, clock=clock, sampler=sampler)
        self.fs = as_fs(root)
        self.rails = [rails] if isinstance(rails, str) else (list(rails) if rails else None)

    def selected_rails(self):
        raise NotImplementedError

    def rail_power_w(self, rail):
        raise NotImplementedError

    def rail_powers_w(self):
        return {r.name: self.rail_power_w(r) for r in self.selected_rails()}

    def power_w(self):
        """Instantaneous power of the selected rails, W."""
        rails = self._cached if self._cached is not None else self.selected_rails()
        return sum(self.rail_power_w(r) for r in rails)

    def start(self):
        self._cached = self.selected_rails()
        try:
            super().start()
        except BaseException:
            self._cached = None
            raise

    def stop(self):
        try:
            return super().stop()
        finally:
            self._cached = None

    def describe(self):
        d = super().describe()
        d["rails"] = [r.to_dict() for r in self.selected_rails()] if self.is_available() else []
        return d



class CounterMeter(Meter):
    """A meter over cumulative energy counters (RAPL, ODPM, NVML total energy).

    ``read_counters()`` returns ``{name: (energy_j, wrap_j)}`` (``wrap_j`` None for counters that do
    not wrap). A background sampler polls the counters every ``poll_period_s`` so that a counter
    wrapping more than once per window is still counted; energy is the sum of the wrap-corrected
    increments. Samples are ``(t_s, mean power over the preceding poll interval)``.
    """

    def __init__(self, sample_period_s, poll_period_s=1.0, clock=None, sampler=None):
        self.sample_period_s = float(sample_period_s)
        self.poll_period_s = float(poll_period_s)
        self.clock = clock
        self.sampler = sampler
        self._active = None

    def read_counters(self):
        raise NotImplementedError

    def start(self):
        self._check()
        self._active = self.sampler or ThreadSampler(self.poll_period_s, self.clock)
        self._active.start(self.read_counters)

    @staticmethod
    def increment(e0, e1, wrap_j):
        """Counter increment from ``e0`` to ``e1``; a decrease means the counter wrapped once."""

        if e1 >= e0:
            return e1 - e0
        if wrap_j is None:
            raise MeasurementError(f"energy counter went backwards ({e0} -> {e1}) and is not known to wrap "
                                   "(counter reset or device reboot?)")
        return e1 + (wrap_j - e0)

    def stop(self):
        if self._active is None:
            raise MeasurementError(f"{self.name}: stop() without start()")
        readings, self._active = self._active.stop(), None
        t0 = readings[0][0]
        energy, samples = 0.0, []
        for (ta, ca), (tb, cb) in zip(readings, readings[1:]):
            if set(ca) != set(cb):
                raise MeasurementError(f"{self.name}: the set of counters changed during the window "
                                       f"({sorted(ca)} -> {sorted(cb)})")
            de = sum(self.increment(ca[k][0], cb[k][0], cb[k][1]) for k in cb)
            energy += de
            if tb > ta:
                samples.append((tb - t0, de / (tb - ta)))
        return EnergyWindow(energy_j=energy, duration_s=readings[-1][0] - t0, meter=self.name, samples=samples,
                            source=self.window_source())
