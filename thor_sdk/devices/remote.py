"""Remote devices: push a probe bundle through a transport, run the harness there, pull the results.

A ``RemoteDevice`` is a transport (adb, ssh, devicectl, or local for tests) plus a ``Harness``
that knows how to start the on-device harness for that kind of device:

- ``CliHarness``: boards with thor-sdk installed run ``thor-sdk harness run BUNDLE --out RESULTS``;
- ``AndroidHarness``: the harness app's instrumentation (``am instrument -w -e bundle ... -e out ...``);
- ``IosHarness``: the harness app launched by devicectl, its results polled from the app container.

One probe = one bundle = one harness run; results come back only when the whole run finished, so
a dropped connection never leaves half a probe in the campaign: the device reconnects and runs
the probe again from scratch (``retries`` times), else the error propagates and ``--resume``
re-measures the probe later. Either way each probe lands in the campaign exactly once.

Bundles are the exporters' format (``thor_sdk.exporters.bundle``) and results the harness's
(``thor_sdk.harness.results``), reached through a ``BundleCodec`` so that this layer depends only on four
calls; neither imports this module.
"""

import os
import posixpath
import re
import secrets
import tempfile
import time
from thor_sdk.meters.base import Meter, SnapshotFs
from thor_sdk.transports.base import TransportDisconnected, validate_device_path

from thor_sdk.errors import DeviceError, FormatError, MeasurementError, NoMeterError, RemoteCommandError, RemoteSudoError, RemoteThorSdkMissing, ThorError, UsageError

from .base import Device


# ---------------------------------------------------------------------------------------------
# bundles and results
# ---------------------------------------------------------------------------------------------
class BundleCodec:
    """Probe/model -> bundle folder, results file -> {part: PartResult}. Default: the exporters' bundle."""

    def write_probe(self, probe, out_dir, settings, metric, runtime):
        from thor_sdk.exporters import bundle

        return bundle.write_probe_bundle(probe, out_dir, settings=settings, metric=metric, runtime=runtime)

    def write_model(self, model, batch_size, out_dir, settings, metric, runtime):
        from thor_sdk.exporters import bundle

        return bundle.write_model_bundle(model, batch_size, out_dir, settings=settings, metric=metric,
                                         runtime=runtime)

    def read_parts(self, results_path, bundle_dir):
        """{part: PartResult} from a harness's results file (checked against the bundle it ran)."""
        from thor_sdk.harness.results import read_probe_parts

        return read_probe_parts(results_path, bundle_dir)

    def window_times(self, results_path):
        """{part: [(t_start_s, t_end_s), ...]} on the device's wall clock (for a bench meter's log)."""
        from thor_sdk.store.files import read_json

        doc = read_json(results_path, "results file")
        out = {}
        for part, r in (doc.get("parts") or {}).items():
            if r.get("window_times_s"):  # the Python harness (PartResult.to_dict)
                out[part] = [(float(a), float(b)) for a, b in r["window_times_s"]]
                continue
            wins = r.get("windows") or []  # the Android / iOS apps
            out[part] = [(w["t_start_s"], w["t_end_s"]) for w in wins if "t_start_s" in w and "t_end_s" in w]
        return out


# ---------------------------------------------------------------------------------------------
# harness launchers
# ---------------------------------------------------------------------------------------------
class Harness:
    name = "harness"

    def prepare(self, transport, run_dir):
        transport.run(["mkdir", "-p", run_dir], timeout_s=60)

    def out_path(self, transport, run_dir):
        return posixpath.join(run_dir, "results.json")

    def run(self, transport, remote_bundle, remote_out, timeout_s):
        raise NotImplementedError

    def cleanup(self, transport, run_dir, remote_out):
        res = transport.run(["rm", "-rf", run_dir], timeout_s=60, check=False)
        return res.returncode == 0


class CliHarness(Harness):
    """``thor-sdk harness run BUNDLE --out RESULTS`` on a board that has thor-sdk installed."""

    name = "thor-sdk"

    def __init__(self, command=("thor-sdk",)):
        self.command = list(command)

    def run(self, transport, remote_bundle, remote_out, timeout_s):
        RemoteCommand(transport, self.command, timeout_s=timeout_s, what="the harness", where="the device").run(
            ["harness", "run", remote_bundle, "--out", remote_out, "--quiet"])


# ---------------------------------------------------------------------------------------------
# the one remote command runner
# ---------------------------------------------------------------------------------------------
class RemoteCommand:
    """``[sudo -n] COMMAND ARGS...`` run on a device through ``transport`` (an argument list: the transport
    quotes each word), its failures mapped to one line: ``RemoteSudoError`` (sudo wants a password, or the
    user may not use it), ``RemoteThorSdkMissing`` (exit 127 / ``command not found``), ``RemoteCommandError``
    (it ran and failed: its own ``Error: ...`` line and exit status). Used by the probe harness of boards
    (``CliHarness``) and by the power commands run on a Jetson (``thor_sdk.power.remote``).

    ``what`` and ``where`` name the command and the device in messages (default: the command's name and the
    transport's target); ``path_option`` is the option that gives the command's full path, named in hints.
    """

    def __init__(self, transport, command=("thor-sdk",), sudo=False, timeout_s=None, log=None, what=None,
                 where=None, path_option=None):
        if isinstance(command, str):
            command = (command,)
        if not command or not all(isinstance(c, str) and c for c in command):
            raise UsageError(f"bad remote command {command!r}")
        self.transport = transport
        self.command = list(command)
        self.sudo = bool(sudo)
        self.timeout_s = timeout_s
        self.log = log or (lambda line: None)
        self.what = what or posixpath.basename(self.command[0])
        self._where = where
        self.path_option = path_option

    @property
    def where(self):
        if self._where:
            return self._where
        t = self.transport
        return getattr(t, "target", None) or t.info().get("hostname") or t.name

    def argv(self, args):
        return (["sudo", "-n"] if self.sudo else []) + self.command + [str(a) for a in args]

    def run(self, args):
        """Run; relay the device's stderr lines to ``log``; return the transport's output (raises the mapped
        errors when it failed)."""
        res = self.transport.run(self.argv(args), timeout_s=self.timeout_s, check=False)
        for line in (res.stderr or "").splitlines():
            if line.strip():
                self.log(f"board: {line.rstrip()}")
        self.check(res)
        return res

    def check(self, res):
        """Map a failed run to ``RemoteSudoError`` / ``RemoteThorSdkMissing`` / ``RemoteCommandError``."""

        if res.returncode == 0:
            return
        text = (res.stderr or "") + "\n" + (res.stdout or "")
        name = posixpath.basename(self.command[0])
        if self.sudo:
            if "a password is required" in text or "a terminal is required" in text:
                raise RemoteSudoError(
                    f"sudo on {self.where} wants a password; allow it without one for thor-sdk (a NOPASSWD line in "
                    "sudoers, see docs/power-aware-training.md) or run without --remote-sudo as a user that may "
                    "write the GPU's devfreq files")
            if "not in the sudoers file" in text or "is not allowed to execute" in text:
                raise RemoteSudoError(f"the user on {self.where} may not run {name} through sudo (sudoers)")
            if re.search(r"(^|[\s:])sudo: (command )?not found", text):
                raise RemoteThorSdkMissing(f"sudo is not installed on {self.where}; run without --remote-sudo "
                                           "as a user that may write the GPU's devfreq files")
        missing = res.returncode == 127 or any(
            name in line and not line.startswith("Error:")
            and ("command not found" in line or line.rstrip().endswith("not found"))
            for line in text.splitlines())
        if missing:
            hint = ""
            if self.path_option:
                hint = (f" (sudo resets PATH: give its full path with {self.path_option})" if self.sudo else
                        f" (or give its full path with {self.path_option})")
            raise RemoteThorSdkMissing(f"`{self.command[0]}` is not installed on {self.where}: pip install thor-sdk "
                                       f"there (the same version as here){hint}")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        err = [ln for ln in lines if ln.startswith("Error:")]
        msg = (err or lines or ["no output"])[-1][:300]
        hint = " (give --remote-sudo)" if ("needs root" in msg and not self.sudo) else ""
        raise RemoteCommandError(f"{self.what} on {self.where} failed (exit {res.returncode}): {msg}{hint}",
                                 res.returncode)


class AndroidHarness(Harness):
    """The harness app (``android_harness/``), run as an instrumentation: blocks until it finishes."""

    name = "android-app"
    PACKAGE = "dev.thorsdk.harness"
    RUNNER = "dev.thorsdk.harness.android.HarnessInstrumentation"

    def out_path(self, transport, run_dir):
        # the app cannot write to /data/local/tmp; it writes into its external files folder, which adb reads
        return f"/sdcard/Android/data/{self.PACKAGE}/files/{posixpath.basename(run_dir)}/results.json"

    def run(self, transport, remote_bundle, remote_out, timeout_s):
        # the app resolves "out" inside its own external files folder (and refuses anything outside it)
        rel_out = remote_out.split(f"/{self.PACKAGE}/files/", 1)[1]
        res = transport.run(["am", "instrument", "-w", "-e", "bundle", remote_bundle, "-e", "out", rel_out,
                             f"{self.PACKAGE}/{self.RUNNER}"], timeout_s=timeout_s, check=False)
        if hasattr(transport, "raise_if_lost"):  # the phone vanished under the run: a disconnect (retried), not an app failure
            transport.raise_if_lost("the harness run", res)
        parse_instrument_output(res.stdout + res.stderr)

    def cleanup(self, transport, run_dir, remote_out):
        ok = super().cleanup(transport, run_dir, remote_out)
        res = transport.run(["rm", "-rf", posixpath.dirname(remote_out)], timeout_s=60, check=False)
        return ok and res.returncode == 0


def parse_instrument_output(text):
    """Check ``am instrument -w`` output; returns its INSTRUMENTATION_RESULT pairs, raises DeviceError on failure.

    Success is ``INSTRUMENTATION_CODE: -1`` (Activity.RESULT_OK); the harness reports a failure as
    code 0 with ``INSTRUMENTATION_RESULT: error=<reason>``.
    """
    if "Unable to find instrumentation info" in text:
        raise DeviceError("the thor-sdk harness app is not installed on the phone: build android_harness/ and "
                          "`adb install` it (see docs/devices.md)")
    results, codes = {}, []
    for line in text.splitlines():
        if line.startswith("INSTRUMENTATION_RESULT: "):
            key, _, value = line[len("INSTRUMENTATION_RESULT: "):].partition("=")
            results[key.strip()] = value.strip()
        elif line.startswith("INSTRUMENTATION_CODE:"):
            codes.append(line.split(":", 1)[1].strip())
    if "INSTRUMENTATION_FAILED" in text or not codes or codes[-1] != "-1":
        lines = text.strip().splitlines()
        why = results.get("error") or results.get("shortMsg") or (lines[-1] if lines else "no output")
        raise DeviceError(f"the harness app failed: {why[:300]}")
    return results


class IosHarness(Harness):
    """The harness app launched by devicectl; results are polled from the app's container."""

    name = "ios-app"

    def __init__(self, poll_s=2.0, sleep=time.sleep, clock=time.monotonic):
        self.poll_s, self.sleep, self.clock = poll_s, sleep, clock

    def prepare(self, transport, run_dir):
        return None  # devicectl creates folders on copy

    def run(self, transport, remote_bundle, remote_out, timeout_s):
        transport.run([transport.bundle_id, "--bundle", remote_bundle, "--out", remote_out], timeout_s=120)
        deadline = self.clock() + timeout_s
        with tempfile.TemporaryDirectory(prefix="thor-ios-poll-") as d:
            while True:
                try:
                    transport.pull(remote_out, os.path.join(d, "results.json"))
                    return
                except TransportDisconnected:
                    raise
                except DeviceError as e:
                    if self.clock() >= deadline:
                        raise DeviceError(f"the iOS harness wrote no results within {timeout_s:g} s") from e
                self.sleep(self.poll_s)

    def cleanup(self, transport, run_dir, remote_out):
        return True  # the app removes its run folders itself on its next launch


# ---------------------------------------------------------------------------------------------
# meters that live on the device
# ---------------------------------------------------------------------------------------------
def snapshot_files(transport, patterns, root="/", max_bytes=8192):
    """Copy small files matching shell globs on the device into a ``SnapshotFs`` (one command).

    ``patterns`` are absolute device paths (``/sys/...``) looked up under ``root``; the snapshot's
    paths are relative to ``root``. Unreadable files are recorded as ``PermissionError`` so the
    real meter classes explain them.
    """
    root = root.rstrip("/")
    patterns = [root + p for p in patterns]
    token = "THOR" + secrets.token_hex(8)
    script = ('t=$1; shift; for p in "$@"; do for f in $p; do [ -f "$f" ] || continue; '
              'if cat "$f" >/dev/null 2>&1; then printf "%s F %s\\n" "$t" "$f"; head -c ' + str(int(max_bytes))
              + ' "$f"; printf "\\n%s E\\n" "$t"; else printf "%s U %s\\n" "$t" "$f"; fi; done; done')
    res = transport.run(["sh", "-c", script, "sh", token, *patterns], timeout_s=60, check=False)
    files, cur, buf = {}, None, []
    for line in res.stdout.split("\n"):
        if line.startswith(token + " F "):
            cur, buf = line[len(token) + 3 + len(root):].lstrip("/"), []
        elif line.startswith(token + " U "):
            rel = line[len(token) + 3 + len(root):].lstrip("/")
            files[rel] = PermissionError(13, "Permission denied", "/" + rel)
        elif line == token + " E" and cur is not None:
            files[cur] = "\n".join(buf)
            cur = None
        elif cur is not None:
            buf.append(line)
    return SnapshotFs(files, origin=getattr(transport, "name", "device"))


class DeviceMeter(Meter):
    """A meter that lives on a remote device: availability from a snapshot of its files; the on-device
    harness does the measuring (``start``/``stop`` here are refused)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.sample_period_s = inner.sample_period_s

    def is_available(self):
        return self.inner.is_available()

    def why_unavailable(self):
        return self.inner.why_unavailable()

    def start(self):
        raise MeasurementError(f"{self.name} is read on the device by the harness, not from this machine")

    def stop(self):
        raise MeasurementError(f"{self.name} is read on the device by the harness, not from this machine")

    def describe(self):
        d = self.inner.describe()
        d["measured_by"] = "the harness on the device"
        return d


# ---------------------------------------------------------------------------------------------
# the device
# ---------------------------------------------------------------------------------------------
def _raise_harness_error(results_path):
    """A harness that failed on the device writes ``{"error": ...}`` instead of results: say why."""
    from thor_sdk.store.files import read_json

    try:
        doc = read_json(results_path, "results file")
    except ThorError as e:
        raise FormatError(f"the results the device sent are not readable: {e}") from e
    if isinstance(doc, dict) and doc.get("error"):
        raise DeviceError(f"the harness on the device failed: {str(doc['error'])[:300]}")


class RemoteDevice(Device):
    name = "remote"
    kind = "remote"

    def __init__(self, transport, harness, meter=None, codec=None, retries=2, reconnect_timeout_s=120.0,
                 harness_timeout_s=3600.0, name=None, device_root="/"):
        self.transport = transport
        self.device_root = device_root  # where the device's /sys is (tests: a planted tree)
        self.harness = harness
        self._meter = meter
        self.codec = codec or BundleCodec()
        self.retries = int(retries)
        self.reconnect_timeout_s = reconnect_timeout_s
        self.harness_timeout_s = harness_timeout_s
        if name:
            self.name = name
        self.log = []  # (event, detail) of reconnects and retries, for the report

    # -- meters ------------------------------------------------------------------------------------
    def device_meters(self):
        return []

    def meters(self):
        if self._meter is not None:
            return [self._meter]
        return self.device_meters()

    def info(self):
        d = {"name": self.name, "kind": self.kind}
        d.update(self.transport.info())
        d["meters"] = [m.describe() for m in self.meters()]
        return d

    # -- one harness run ---------------------------------------------------------------------------
    def _run_bundle(self, bundle_dir, local_results):
        t = self.transport
        run_dir = posixpath.join(t.workdir(), "run-" + secrets.token_hex(6))
        remote_bundle = posixpath.join(run_dir, "bundle")
        remote_out = self.harness.out_path(t, run_dir)
        self.harness.prepare(t, run_dir)
        t.push(bundle_dir, remote_bundle)
        self.harness.run(t, remote_bundle, remote_out, self.harness_timeout_s)
        t.pull(remote_out, local_results)
        if not self.harness.cleanup(t, run_dir, remote_out):
            self.log.append(("cleanup-failed", run_dir))

    def _with_retries(self, bundle_dir, local_results):
        attempt = 0
        while True:
            try:
                self._run_bundle(bundle_dir, local_results)
                return
            except TransportDisconnected as e:
                attempt += 1
                self.log.append(("disconnected", str(e)))
                if attempt > self.retries:
                    raise
                self.transport.reconnect(self.reconnect_timeout_s)
                self.log.append(("reconnected", attempt))

    def _apply_external_meter(self, parts, results_path):
        """Energy from a bench meter's log for each window the harness timed (device clock)."""
        meter = self._meter
        if meter is None or not hasattr(meter, "energy_between"):
            return
        times = self.codec.window_times(results_path)
        offset = self.clock_offset_s()
        for part, r in parts.items():
            wins = times.get(part) or []
            if len(wins) != len(r.time_s):
                raise FormatError(f"the harness's results give {len(wins)} window times for part {part!r} but "
                                  f"{len(r.time_s)} windows: cannot align the bench meter's log")
            r.energy_j = [meter.energy_between(a - offset, b - offset).energy_j / r.steps_per_window
                          for a, b in wins]

    def clock_offset_s(self):
        """Device wall clock minus this machine's (s), from one round trip (error: half its duration)."""
        t0 = time.time()
        res = self.transport.run(["date", "+%s.%N"], timeout_s=30, check=False)
        t1 = time.time()
        try:
            dev = float(res.stdout.strip())
        except ValueError:
            return 0.0  # no date on the device (iOS): assume synchronised clocks (NTP), as documented
        return dev - (t0 + t1) / 2

    def _measure(self, write_bundle, metric, on_round):
        self.require_meter(metric)
        with tempfile.TemporaryDirectory(prefix="thor-remote-") as tmp:
            bundle_dir = write_bundle(os.path.join(tmp, "bundle"))
            local_results = os.path.join(tmp, "results.json")
            self._with_retries(bundle_dir, local_results)
            _raise_harness_error(local_results)
            parts = self.codec.read_parts(local_results, bundle_dir)
            self._apply_external_meter(parts, local_results)
        if metric == "energy" and not all(r.energy_j for r in parts.values()):
            raise NoMeterError(f"{self.name}: the harness returned no energy (no meter readable on the device)")
        if on_round is not None:
            n = max(len(r.time_s) for r in parts.values())
            for rnd in range(n):
                row = {p: (r.time_s[rnd], r.energy_j[rnd] if rnd < len(r.energy_j) else None)
                       for p, r in parts.items() if rnd < len(r.time_s)}
                on_round(rnd, row)
        return parts

    @staticmethod
    def _check_runtime(runtime):
        # the device always runs the exported ONNX training step; the host's runtime choice does not apply
        if runtime not in ("onnxruntime", "torch", None):
            raise UsageError(f"unknown runtime {runtime!r}")

    def measure_probe(self, probe, metric="time", settings=None, runtime="onnxruntime", on_round=None):
        self._check_runtime(runtime)
        return self._measure(lambda d: self.codec.write_probe(probe, d, settings, metric, "onnxruntime"),
                             metric, on_round)

    def measure_model(self, model, batch_size, metric="time", settings=None, runtime="onnxruntime", on_round=None):
        if not isinstance(model, str) or model.endswith((".json", ".onnx")) or ".py:" in model:
            label = getattr(model, "label", None) or (model if isinstance(model, str) else type(model).__name__)
            raise UsageError(f"{self.name} measures whole models by reference-network name only (its bundle exports "
                             f"the network by name); measure {label} on the host (--device host)")
        self._check_runtime(runtime)
        parts = self._measure(lambda d: self.codec.write_model(model, batch_size, d, settings, metric, "onnxruntime"),
                              metric, on_round)
        return parts["model"]


__all__ = ["RemoteDevice", "Harness", "CliHarness", "RemoteCommand", "AndroidHarness", "IosHarness", "BundleCodec",
           "DeviceMeter", "snapshot_files", "validate_device_path", "parse_instrument_output"]
