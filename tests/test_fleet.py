"""Fleets: three fake Android phones probed in parallel through the real adb transport, remote layer, campaign loop and
store, one phone vanishing mid-campaign and resumed; the merged fit equals the fit of the union; STF / adb connect.

The phones sit behind one fake ``adb`` (a runner replaying what adb and the harness app print): bundles are the real
exported ones, pushed into a folder per phone; ``am instrument`` runs a fake app that checks the bundle and writes
planted per-part times (``fake_device.planted_cost`` with seeded noise) where the real app writes results.json.
"""

import json
import os
import random
import shlex
import shutil
import threading
import zlib

import pytest

from fake_device import planted_cost
from helpers import TINY
from thor_sdk.errors import DeviceUnavailableError, UsageError
from thor_sdk.harness.protocol import ProtocolSettings
from thor_sdk.transports.base import RunOutput

SETTINGS = ProtocolSettings(warmup_steps=1, min_window_s=0.002, min_rounds=2, max_rounds=2, max_steps_per_window=5)
PKG_FILES = "/sdcard/Android/data/dev.thorsdk.harness/files/"
RUNNER = "dev.thorsdk.harness/dev.thorsdk.harness.android.HarnessInstrumentation"
PROPS = {"ro.product.manufacturer": "Google", "ro.product.model": "Pixel 6", "ro.product.device": "oriole",
         "ro.build.version.release": "14", "ro.build.version.sdk": "34", "ro.soc.model": "Tensor",
         "ro.product.cpu.abi": "arm64-v8a"}



@pytest.fixture(autouse=True, scope="module")
def export_cache(tmp_path_factory):
    """Exports are cached by content: one cache for this module, not the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("THOR_SDK_CACHE", str(tmp_path_factory.mktemp("export-cache")))
        yield


class Phone:
    """One phone's files (a folder) and state: ``drop_at``: the harness run (1-based) during which it vanishes."""

    def __init__(self, root, serial, drop_at=None):
        self.root, self.serial, self.drop_at = str(root), serial, drop_at
        self.present = True
        self.instruments = 0
        self.measured = []          # bundle ids whose results the app wrote

    def local(self, device_path):
        assert device_path.startswith("/"), device_path
        return os.path.join(self.root, device_path.lstrip("/"))


class FakeAdb:
    """One adb server with several phones attached, called from several threads at once (one per phone)."""

    def __init__(self, phones, meet=0):
        self.phones = {p.serial: p for p in phones}
        self.lock = threading.Lock()
        self.meet = threading.Barrier(meet, timeout=20) if meet else None  # every phone's first run waits for the others
        self.met = []

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        assert isinstance(argv, list) and argv[0] == "adb"
        if argv[1:] == ["devices", "-l"]:
            with self.lock:
                lines = [f"{s}\tdevice product:oriole model:Pixel_6 device:oriole" for s, p in self.phones.items()
                         if p.present]
            return RunOutput(0, ("List of devices attached\n" + "\n".join(lines) + "\n\n").encode())
        assert argv[1] == "-s"
        phone, verb, rest = self.phones[argv[2]], argv[3], argv[4:]
        if verb == "wait-for-device":  # a phone that stays away: adb waits out its timeout
            return RunOutput(0) if phone.present else RunOutput(1, b"", b"error: timeout expired\n")
        if not phone.present:
            return RunOutput(1, b"", f"adb: device '{phone.serial}' not found\n".encode())
        if verb == "push":
            shutil.copytree(rest[0], phone.local(rest[1]))
            return RunOutput(0, b"1 file pushed.\n")
        if verb == "pull":
            shutil.copyfile(phone.local(rest[0]), rest[1])
            return RunOutput(0, b"1 file pulled.\n")
        assert verb == "shell" and len(rest) == 1
        words = shlex.split(rest[0])  # what the phone's shell does with adb's one command string
        if words == ["getprop"]:
            return RunOutput(0, "".join(f"[{k}]: [{v}]\n" for k, v in PROPS.items()).encode())
        if words[:2] == ["sh", "-c"]:  # the meters' sysfs snapshot: nothing readable on this phone
            return RunOutput(0)
        if words[:1] == ["dumpsys"]:
            return RunOutput(0, b"Can't find service: android.hardware.power.stats.IPowerStats/default\n")
        if words[:2] == ["mkdir", "-p"]:
            os.makedirs(phone.local(words[2]), exist_ok=True)
            return RunOutput(0)
        if words[:2] == ["rm", "-rf"]:
            shutil.rmtree(phone.local(words[2]), ignore_errors=True)
            return RunOutput(0)
        if words[:3] == ["am", "instrument", "-w"]:
            return self.instrument(phone, words)
        raise AssertionError(words)

    def instrument(self, phone, words):
        assert words[3::3][:2] == ["-e", "-e"] and words[-1] == RUNNER
        args = dict(zip(words[4:-1:3], words[5:-1:3]))
        with self.lock:
            phone.instruments += 1
            n = phone.instruments
        if self.meet is not None and n == 1:
            self.met.append(self.meet.wait())  # BrokenBarrierError unless all three run at once
        if n == phone.drop_at:  # the phone vanishes under the run: adb shell ends 255 with nothing printed
            with self.lock:
                phone.present = False
            return RunOutput(255)
        with open(os.path.join(phone.local(args["bundle"]), "manifest.json")) as f:
            manifest = json.load(f)
        from thor_sdk.exporters.bundle import sha256_file

        for part in manifest["parts"]:  # the app checks each part's sha256 before running it; so does this fake
            assert sha256_file(os.path.join(phone.local(args["bundle"]), part["file"])) == part["sha256"]
        (p,) = manifest["probes"]
        from thor_sdk.probes import Probe

        probe = Probe(p["kind"], p["config"], p["batch_size"], p["role"])
        head = planted_cost("output", probe.head_config(), probe.batch_size, "output")
        layer = planted_cost(probe.kind, probe.config, probe.batch_size, probe.role)
        value = {part["name"]: head if part["name"] == "head" else head + layer for part in manifest["parts"]}
        rng = random.Random(zlib.crc32(f"{phone.serial}/{manifest['id']}/{n}".encode()))
        out = phone.local(PKG_FILES + args["out"])
        os.makedirs(os.path.dirname(out))
        with open(out, "w") as f:  # what HarnessInstrumentation writes (results schema)
            json.dump({"format": "thor-sdk/results", "version": 1, "harness": "android", "bundle": manifest["id"],
                       "metric": manifest["metric"],
                       "parts": {name: {"steps_per_window": 10, "energy_j": [],
                                        "time_s": [v * (1 + rng.gauss(0, 0.01)) for _ in range(3)],
                                        "windows": [{"t_start_s": 100.0 + k, "t_end_s": 100.5 + k,
                                                     "state": {"battery_pct": 80.0}} for k in range(3)]}
                                 for name, v in value.items()}}, f)
        with self.lock:
            phone.measured.append(manifest["id"])
        return RunOutput(0, b"INSTRUMENTATION_RESULT: results=x\nINSTRUMENTATION_CODE: -1\n")


def _phones(tmp_path, adb):
    """The fleet's devices: the real AndroidDevice and AdbTransport, driven through ``adb`` (one fake server)."""
    from thor_sdk.devices.android import AndroidDevice
    from thor_sdk.transports.adb import AdbTransport

    return [AndroidDevice(s, transport=AdbTransport(s, runner=adb), retries=1, reconnect_timeout_s=1,
                          device_root=str(tmp_path / "no-sysfs")) for s in adb.phones]


def _exactly_once(path):
    """Each planned probe measured once (no duplicate ids, one time sample each, complete rounds); its ids."""
    from thor_sdk.store import Campaign

    with Campaign.open(str(path)) as c:
        ids = [r[0] for r in c.conn.execute("SELECT id FROM probes")]
        done = [r[0] for r in c.conn.execute("SELECT probe_id FROM samples WHERE metric='time'")]
        counts = c.status_counts()
        n_of = dict(c.conn.execute("SELECT probe_id, n FROM samples WHERE metric='time'").fetchall())
        for pid in done:
            by_part = {}
            for part, rnd, *_ in c.windows(pid):
                by_part.setdefault(part, []).append(rnd)
            assert all(sorted(r) == list(range(n_of[pid])) for r in by_part.values()), (pid, by_part)
    assert len(ids) == len(set(ids)) and len(done) == len(set(done)) and set(done) <= set(ids)
    return ids, done, counts


def test_three_phones_in_parallel_one_drops_then_resumes_and_the_merged_fit_is_the_fit_of_the_union(tmp_path):
    from thor_sdk.api import fit, probe_fleet
    from thor_sdk.fitting.pipeline import build
    from thor_sdk.store import Campaign

    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    serials = ["R58M12ABCDE", "1A2B3C4D5E6F7G", "192.168.1.20:5555"]
    phones = [Phone(tmp_path / f"phone{i}", s, drop_at=3 if i == 1 else None) for i, s in enumerate(serials)]
    adb = FakeAdb(phones, meet=3)
    events, threads = [], set()

    def progress(device, event, info):
        events.append((device, event))
        threads.add((device, threading.current_thread().name))

    out_dir = tmp_path / "fleet"
    results = probe_fleet([str(model)], _phones(tmp_path, adb), out_dir, batch_sizes=[4], settings=SETTINGS,
                          runtime="onnxruntime", progress=progress)
    assert sorted(adb.met) == [0, 1, 2]  # the three phones' first harness runs were under way at the same time
    assert [r["device"] for r in results] == [f"android:{s}" for s in serials]
    assert [r["status"] for r in results] == ["done", "disconnected", "done"]
    assert "did not come back" in results[1]["error"]
    assert [os.path.basename(r["campaign"]) for r in results] == [
        "android-R58M12ABCDE.db", "android-1A2B3C4D5E6F7G.db", "android-192.168.1.20-5555.db"]
    assert {d for d, _ in threads} == set(r["device"] for r in results)
    assert len({t for _, t in threads}) == 3 and ("android:R58M12ABCDE", "stop") in events

    complete = None
    for r, phone in zip(results, phones):
        ids, done, counts = _exactly_once(r["campaign"])
        if r["status"] == "done":
            assert sorted(done) == sorted(ids) and r["probes_done"] == len(ids) > 2
            assert sorted(phone.measured) == sorted(ids)  # every run of the healthy phones reached the store, once
            complete = complete or sorted(ids)
        else:  # the dropped phone: what finished is kept, the probe it was running is left planned
            assert counts == {"done": 2, "planned": 1} and sorted(done) == sorted(phone.measured)
    assert all(sorted(_exactly_once(r["campaign"])[0]) == complete for r in results if r["status"] == "done")

    phones[1].present = True  # the phone is back: resume the fleet (the healthy phones have nothing left)
    before = [list(p.measured) for p in phones]
    resumed = probe_fleet([], _phones(tmp_path, FakeAdb(phones)), out_dir, resume=True, runtime="onnxruntime")
    assert [r["status"] for r in resumed] == ["done"] * 3
    assert [r["probes_measured_now"] for r in resumed] == [0, len(complete) - 2, 0]  # the planned one, then the rest
    assert phones[0].measured == before[0] and phones[2].measured == before[2]
    for r in resumed:
        ids, done, counts = _exactly_once(r["campaign"])
        assert sorted(ids) == sorted(done) == complete and counts == {"done": len(ids)}
    assert sorted(phones[1].measured) == complete  # the dropped run's probe measured once more, completely

    paths = [r["campaign"] for r in resumed]
    merged = fit(paths)
    samples, runs = [], []
    for path in paths:
        with Campaign.open(path) as c:
            samples += c.samples()
            runs += c.model_runs()
            device = c.meta["device"]
    assert len(samples) == 3 * len(complete)
    union = build(samples, device=device, runtime="onnxruntime", metric="time", model_runs=runs,
                  sources=[os.path.basename(p) for p in paths])
    assert set(merged["kinds"]) == set(union["kinds"]) == {"linear", "relu", "output"}
    for kind in merged["kinds"]:
        assert merged["kinds"][kind] == union["kinds"][kind], kind
    assert merged["flops_baseline"] == union["flops_baseline"]


def test_a_fleet_is_refused_whole_before_any_device_starts(tmp_path):
    from thor_sdk.api import probe_fleet

    model = tmp_path / "tiny.json"
    model.write_text(json.dumps(TINY))
    adb = FakeAdb([Phone(tmp_path / "p", "A"), Phone(tmp_path / "q", "B")])
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "android-B.db").write_text("not ours")
    with pytest.raises(UsageError, match="exists"):
        probe_fleet([str(model)], _phones(tmp_path, adb), tmp_path / "fleet", batch_sizes=[4])
    assert not (tmp_path / "fleet" / "android-A.db").exists()
    with pytest.raises(UsageError, match="twice"):
        probe_fleet([str(model)], ["android:A", "android:A"], tmp_path / "f2", batch_sizes=[4])
    with pytest.raises(UsageError, match="this machine"):
        probe_fleet([str(model)], ["host", "jetson"], tmp_path / "f3", batch_sizes=[4])
    with pytest.raises(UsageError, match="nothing to resume"):
        probe_fleet([], ["android:A", "android:B"], tmp_path / "f4", resume=True)


def test_cli_fleet_options(tmp_path):
    from click.testing import CliRunner

    from thor_sdk.cli.main import cli

    runner = CliRunner()
    r = runner.invoke(cli, ["probe", "--device", "android:A", "--device", "android:B", "--out", str(tmp_path / "x.db"),
                            "--model", "lenet5"])
    assert r.exit_code != 0 and "--out-dir" in str(r.exception or r.output)
    r = runner.invoke(cli, ["probe", "--model", "lenet5"])
    assert r.exit_code != 0 and "--out FILE.db" in str(r.exception or r.output)
    for extra in (["--out", str(tmp_path / "x.db")], ["--out-dir", str(tmp_path / "d"), "--threads", "1"]):
        r = runner.invoke(cli, ["profile", "--device", "android:A", "--device", "android:B", "--max-probes", "2"] + extra)
        why = str(r.exception or r.output)
        assert r.exit_code != 0 and ("--out-dir" in why or "--threads" in why), why
    r = runner.invoke(cli, ["profile", "--max-probes", "2"])
    assert r.exit_code != 0 and "--out FILE.db" in str(r.exception or r.output)


def test_cli_profile_fleet_reports_each_device_and_how_to_resume(tmp_path, monkeypatch, capsys):
    """`thor-sdk profile --device A --device B --out-dir D`: one line per device, exit status 1 when any did not
    finish, and the command that resumes them all. Through a stand-in `adb` on PATH that lists no phone."""
    import subprocess

    from helpers import cli

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    adb = bin_dir / "adb"
    adb.write_text("#!/bin/sh\necho 'List of devices attached'\necho\n")
    adb.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert subprocess.run(["adb", "devices"], capture_output=True, text=True).stdout.startswith("List of devices")
    out_dir = tmp_path / "fleet"
    code, text, err = cli(["profile", "--device", "android:A1", "--device", "android:B2", "--out-dir", str(out_dir),
                           "--max-probes", "2"], capsys)
    lines = text.strip().splitlines()
    assert code == 1 and [ln.split(":")[0:2] for ln in lines] == [["android", "A1"], ["android", "B2"]]
    for ln in lines:
        assert "unavailable: no Android device" in ln
        assert f"thor-sdk profile --resume --out-dir {out_dir} --device android:A1 --device android:B2" in ln
    code, text, err = cli(["profile", "--device", "android:A1", "--device", "android:B2", "--out-dir", str(out_dir),
                           "--max-probes", "2", "--json"], capsys)
    doc = json.loads(text)
    assert code == 1 and [(d["device"], d["status"]) for d in doc["devices"]] == [("android:A1", "unavailable"),
                                                                                 ("android:B2", "unavailable")]


# -- DeviceFarmer STF / adb connect --------------------------------------------------------------------------
# `adb connect` as printed by Debian's adb 1.0.41 (29.0.6): failures go to stdout with exit status 0
REFUSED = b"failed to connect to '127.0.0.1:1': Connection refused\n"
UNRESOLVED = b"failed to resolve host: 'nosuchhost.invalid': Name or service not known\n"


class ConnectAdb:
    """``adb connect`` replayed: the address is listed by ``adb devices`` once a connect succeeded."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls, self.connected = [], False

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        self.calls.append(argv)
        if argv[1:] == ["devices", "-l"]:
            listed = "stf.example.com:7401\tdevice product:oriole model:Pixel_6 device:oriole\n" if self.connected else ""
            return RunOutput(0, ("List of devices attached\n" + listed).encode())
        if argv[1] == "connect":
            out = self.answers.pop(0)
            self.connected = out.startswith((b"connected", b"already"))
            return RunOutput(0, out)
        if argv[3:4] == ["wait-for-device"]:
            return RunOutput(0)
        if argv[3] == "shell":
            return RunOutput(0, b"ok\n")
        raise AssertionError(argv)


def test_stf_device_connects_through_adb_and_again_after_a_drop():
    from thor_sdk.devices import get_device
    from thor_sdk.transports.adb import AdbTransport

    dev = get_device("stf://stf.example.com:7401")
    assert dev.name == "stf://stf.example.com:7401" and dev.kind == "android"
    assert dev.transport.serial == "stf.example.com:7401" and dev.transport.connect_first
    assert get_device("android:192.168.1.20:5555").transport.connect_first
    assert not get_device("android:emulator-5554").transport.connect_first
    assert not get_device("android:R58M12ABCDE").transport.connect_first
    with pytest.raises(UsageError, match="remote-debug address"):
        get_device("stf://stf.example.com/R58M12ABCDE")

    adb = ConnectAdb([b"connected to stf.example.com:7401\n", b"already connected to stf.example.com:7401\n"])
    t = AdbTransport("stf.example.com:7401", runner=adb, connect=True)
    assert t.run(["echo", "hi"]).stdout == "ok\n"
    assert ["adb", "connect", "stf.example.com:7401"] in adb.calls  # an argument list, never a shell string
    assert adb.calls[-1][:4] == ["adb", "-s", "stf.example.com:7401", "shell"]
    t.reconnect(timeout_s=1)  # after a drop: adb connect again, then wait for it
    assert adb.calls[-2] == ["adb", "connect", "stf.example.com:7401"]
    assert adb.calls[-1] == ["adb", "-s", "stf.example.com:7401", "wait-for-device"]


@pytest.mark.parametrize("answer, why", [(REFUSED, "Connection refused"), (UNRESOLVED, "resolve host")])
def test_adb_connect_refused_says_why(answer, why):
    from thor_sdk.transports.adb import AdbTransport

    t = AdbTransport("stf.example.com:7401", runner=ConnectAdb([answer]), connect=True)
    with pytest.raises(DeviceUnavailableError, match=why):
        t.run(["echo", "hi"])


def test_profile_fleet_shares_the_fan_out(tmp_path):
    """``profile_fleet``: the same fan-out with ``profile`` per device (in-process fake devices, a two-net prior)."""
    from fake_device import FakeDevice
    from thor_sdk.api import profile_fleet
    from thor_sdk.campaign.prior import build_prior

    prior = tmp_path / "prior.json"
    prior.write_text(json.dumps(build_prior(["lenet5", "har"])))
    from thor_sdk.transports.base import TransportDisconnected

    class Dropping(FakeDevice):
        def measure_probe(self, probe, **kw):
            if self.away is not None and len(self.calls) >= self.away:
                raise TransportDisconnected("simulated: connection reset by peer")
            return super().measure_probe(probe, **kw)

    devs = [FakeDevice(), Dropping()]
    devs[0].name, devs[1].name, devs[1].away = "fake-a", "fake-b", 3
    results = profile_fleet(devs, tmp_path / "fleet", max_probes=6, prior_path=str(prior), reference_every_s=0,
                            calibration_models=[])
    assert [(r["device"], r["status"]) for r in results] == [("fake-a", "done"), ("fake-b", "disconnected")]
    assert results[0]["probes_done"] == 6 and "connection reset" in results[1]["error"]
    devs[1].away = None  # back
    (again,) = profile_fleet(devs[1:], tmp_path / "fleet", resume=True, max_probes=6, reference_every_s=0)
    assert again["status"] == "done" and again["probes_done"] == 6 and again["campaign"].endswith("fake-b.db")
