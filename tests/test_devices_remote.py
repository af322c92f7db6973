"""A simulated remote device runs a whole THOR campaign through the real remote layer (push bundle, run
harness, pull results, ingest) and the real campaign loop and store; it survives a dropped connection
mid-campaign (and a reboot that wipes the device's files), and every probe ends in the campaign exactly once.

Bundles are the real ones (exported ONNX training steps, manifest, sha256) and results are read by the real
ingest checks. The transport is the real LocalTransport (files really copied into a 'board' folder) with one
simulated step: `thor-sdk harness run BUNDLE --out RESULTS` runs the host harness in-process
(``thor_sdk.devices.local_harness.run_harness``: onnxruntime, the shared protocol). Disconnects are injected there.
"""

import json
import os
import shutil

import pytest

from helpers import TINY
from thor_sdk.devices.remote import CliHarness, RemoteDevice, parse_instrument_output
from thor_sdk.errors import DeviceError
from thor_sdk.harness.protocol import ProtocolSettings
from thor_sdk.transports.base import TransportDisconnected
from thor_sdk.transports.local import LocalTransport

SETTINGS = ProtocolSettings(warmup_steps=1, min_window_s=0.002, min_rounds=2, max_rounds=2, max_steps_per_window=5)


@pytest.fixture(autouse=True, scope="module")
def export_cache(tmp_path_factory):
    """Exports are cached by content: one cache for this module, not the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("THOR_SDK_CACHE", str(tmp_path_factory.mktemp("export-cache")))
        yield


class SimBoard(LocalTransport):
    """A 'board' folder reached through the real LocalTransport; `thor-sdk harness run` is simulated in-process.

    ``drops``: harness-run numbers (1-based) at which the connection drops mid-run; a drop also wipes the
    board's work folder (as a reboot clearing /tmp would). ``down_for``: how many reconnect attempts fail after
    a drop (a device that stays away).
    """

    def __init__(self, root, drops=(), down_for=0):
        super().__init__(root=root)
        self.drops = set(drops)
        self.down_for = down_for
        self.harness_runs = 0
        self.measured = []
        self.reconnects = 0
        self.down = 0

    def workdir(self):
        return os.path.join(self.root, "work")

    def run(self, argv, timeout_s=None, check=True, input=None):
        if self.down:
            raise TransportDisconnected("simulated: device unreachable")
        if argv[:3] == ["thor-sdk", "harness", "run"]:
            bundle, out = argv[3], argv[argv.index("--out") + 1]
            self.harness_runs += 1
            if self.harness_runs in self.drops:
                shutil.rmtree(self.workdir(), ignore_errors=True)
                self.down = self.down_for
                raise TransportDisconnected("simulated: connection reset by peer during the harness run")
            return self._harness(bundle, out)
        return super().run(argv, timeout_s, check, input)

    def _harness(self, bundle, out):
        from thor_sdk.devices.local_harness import run_harness
        from thor_sdk.exporters.bundle import read_manifest
        from thor_sdk.transports.base import CommandResult

        run_harness(bundle, out)
        self.measured.append(read_manifest(bundle)["id"])
        return CommandResult(["thor-sdk"], 0, "", "")

    def reconnect(self, timeout_s=60.0):
        self.reconnects += 1
        if self.down:
            self.down -= 1
            raise TransportDisconnected("simulated: still unreachable")




def _campaign(tmp_path, board, out, resume=False, retries=2):
    from thor_sdk.api import probe

    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    dev = RemoteDevice(board, CliHarness(), retries=retries, reconnect_timeout_s=1, name="sim-board")
    return dev, probe([str(model)] if not resume else [], device=dev, batch_sizes=[4], out=str(out),
                      resume=resume, settings=SETTINGS, runtime="onnxruntime")


def _check_exactly_once(out):
    from thor_sdk.store import Campaign

    with Campaign.open(str(out)) as c:
        ids = [r[0] for r in c.conn.execute("SELECT id FROM probes")]
        done = [r[0] for r in c.conn.execute("SELECT probe_id FROM samples WHERE metric='time'")]
        assert len(ids) == len(set(ids))
        assert sorted(done) == sorted(ids)           # every planned probe measured, once
        n_of = dict(c.conn.execute("SELECT probe_id, n FROM samples WHERE metric='time'").fetchall())
        for pid in ids:
            by_part = {}
            for part, rnd, *_ in c.windows(pid):
                by_part.setdefault(part, []).append(rnd)
            # complete rounds only (no partial windows from a dropped run), as many as the sample used
            k = n_of[pid]
            assert all(sorted(r) == list(range(k)) for r in by_part.values()), (pid, by_part, k)
        return ids


def test_campaign_survives_a_drop_and_a_reboot(tmp_path):
    board = SimBoard(tmp_path / "board", drops={2})
    dev, summary = _campaign(tmp_path, board, tmp_path / "c.db")
    ids = _check_exactly_once(tmp_path / "c.db")
    assert len(ids) == summary["probes_done"] > 1
    assert board.reconnects == 1 and ("disconnected" in [e for e, _ in dev.log])
    # the dropped run was re-run from scratch; only completed runs reached the store (the campaign loop
    # may itself re-measure a probe whose difference came out implausibly negative: still one store entry)
    assert board.harness_runs == len(board.measured) + 1
    assert set(board.measured) == set(ids)
    assert not os.listdir(board.workdir())           # run folders cleaned up on the board


def test_device_that_stays_away_then_resume(tmp_path):
    out = tmp_path / "c.db"
    board = SimBoard(tmp_path / "board", drops={3}, down_for=5)
    with pytest.raises(DeviceError):
        _campaign(tmp_path, board, out, retries=1)
    from thor_sdk.store import Campaign

    with Campaign.open(str(out)) as c:
        counts = c.status_counts()
        done_ids = [r[0] for r in c.conn.execute("SELECT probe_id FROM samples WHERE metric='time'")]
    # the device went away at the third harness run: what was stored before it stays, the rest stays planned.
    # The third run is the third probe, or a re-measure of the second when the host's noise made its difference
    # implausible (then one probe is done and the second is still planned)
    assert set(counts) <= {"done", "planned"} and counts.get("done", 0) >= 1 and counts.get("planned", 0) >= 1, counts
    assert len(done_ids) == counts["done"] and set(done_ids) <= set(board.measured), (done_ids, board.measured)
    board.down, board.drops = 0, set()               # the device is back
    _, summary = _campaign(tmp_path, board, out, resume=True)
    ids = _check_exactly_once(out)
    assert summary["probes_done"] == len(ids) and set(board.measured) == set(ids)


def test_instrument_output_parsing():
    ok = "INSTRUMENTATION_RESULT: results=/sdcard/x/results.json\nINSTRUMENTATION_CODE: -1\n"
    assert parse_instrument_output(ok)["results"] == "/sdcard/x/results.json"
    with pytest.raises(DeviceError, match="not installed"):
        parse_instrument_output("INSTRUMENTATION_STATUS: Error=Unable to find instrumentation info for: "
                                "ComponentInfo{dev.thorsdk.harness/...}\nINSTRUMENTATION_STATUS_CODE: -1\n")
    with pytest.raises(DeviceError, match="USB power hides"):
        parse_instrument_output("INSTRUMENTATION_RESULT: error=IllegalStateException: the device is on external "
                                "power (usb): USB power hides the draw\nINSTRUMENTATION_CODE: 0\n")


class FakePhone:
    """Plays adb + a phone with the harness app: device paths live under a local folder; `am instrument`
    runs a fake app that checks its arguments and writes canned results where the real app would."""

    PKG_FILES = "/sdcard/Android/data/dev.thorsdk.harness/files/"

    def __init__(self, root, app_error=None):
        self.root = str(root)
        self.app_error = app_error
        self.instruments = []

    def local(self, device_path):
        assert device_path.startswith("/"), device_path
        return os.path.join(self.root, device_path.lstrip("/"))

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        import shlex

        from thor_sdk.transports.base import RunOutput

        if argv[1:] == ["devices", "-l"]:
            return RunOutput(0, b"List of devices attached\nPIXEL 6;x        device model:Pixel_6\n")
        assert argv[1:3] == ["-s", "PIXEL 6;x"]
        verb, rest = argv[3], argv[4:]
        if verb == "push":
            shutil.copytree(rest[0], self.local(rest[1]))
            return RunOutput(0)
        if verb == "pull":
            shutil.copyfile(self.local(rest[0]), rest[1])
            return RunOutput(0)
        words = shlex.split(rest[0])       # what the device's shell does with the command string
        if words[:2] == ["mkdir", "-p"]:
            os.makedirs(self.local(words[2]), exist_ok=True)
            return RunOutput(0)
        if words[:2] == ["rm", "-rf"]:
            shutil.rmtree(self.local(words[2]), ignore_errors=True)
            return RunOutput(0)
        if words[:3] == ["am", "instrument", "-w"]:
            self.instruments.append(words)
            args = dict(zip(words[4:-1:3], words[5:-1:3]))
            assert words[3::3][:2] == ["-e", "-e"] and words[-1] == (
                "dev.thorsdk.harness/dev.thorsdk.harness.android.HarnessInstrumentation")
            if self.app_error:
                return RunOutput(0, f"INSTRUMENTATION_RESULT: error={self.app_error}\nINSTRUMENTATION_CODE: 0\n"
                                 .encode())
            with open(os.path.join(self.local(args["bundle"]), "manifest.json")) as f:
                manifest = json.load(f)
            assert not args["out"].startswith("/")      # relative to the app's files folder
            out = self.local(self.PKG_FILES + args["out"])
            os.makedirs(os.path.dirname(out))
            # the app checks each part file's sha256 before running it; so does this fake
            from thor_sdk.exporters.bundle import sha256_file

            for part in manifest["parts"]:
                assert sha256_file(os.path.join(self.local(args["bundle"]), part["file"])) == part["sha256"]
            parts = [part["name"] for part in manifest["parts"]]
            with open(out, "w") as f:   # what HarnessInstrumentation writes (results schema)
                json.dump({"format": "thor-sdk/results", "version": 1, "harness": "android",
                           "bundle": manifest["id"], "metric": manifest["metric"],
                           "parts": {p: {"steps_per_window": 10, "time_s": [0.01 * (i + 1)] * 3, "energy_j": [],
                                         "windows": [{"t_start_s": 100.0 + k, "t_end_s": 100.5 + k,
                                                      "state": {"battery_pct": 80.0}} for k in range(3)]}
                                     for i, p in enumerate(parts)}}, f)
            return RunOutput(0, b"INSTRUMENTATION_RESULT: results=x\nINSTRUMENTATION_CODE: -1\n")
        raise AssertionError(words)


def test_android_device_runs_the_app_through_adb(tmp_path):
    from thor_sdk.devices.android import AndroidDevice
    from thor_sdk.probes import Probe
    from thor_sdk.transports.adb import AdbTransport

    phone = FakePhone(tmp_path / "phone")
    dev = AndroidDevice("PIXEL 6;x", transport=AdbTransport("PIXEL 6;x", runner=phone))
    probe = Probe("linear", {"in_features": 8, "out_features": 4, "tokens": 1, "bias": 1}, 4, "hidden")
    rounds = []
    res = dev.measure_probe(probe, settings=SETTINGS, on_round=lambda r, row: rounds.append(row))
    assert res["hidden"].time_s == [0.02] * 3 and len(rounds) == 3
    assert res["hidden"].states[0]["battery_pct"] == 80.0 and res["hidden"].window_times_s[1] == (101.0, 101.5)
    (words,) = phone.instruments
    assert words[words.index("bundle") + 1].startswith("/data/local/tmp/thor-sdk/run-")
    # everything cleaned up on the phone afterwards
    assert not os.listdir(phone.local("/data/local/tmp/thor-sdk"))
    assert not os.listdir(phone.local(FakePhone.PKG_FILES))

    charging = AndroidDevice("PIXEL 6;x", transport=AdbTransport(
        "PIXEL 6;x", runner=FakePhone(tmp_path / "p2", app_error="IllegalStateException: the device is on external "
                                                                "power (usb power is plugged in)")))
    with pytest.raises(DeviceError, match="external power"):
        charging.measure_probe(probe, settings=SETTINGS)
