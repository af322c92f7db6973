"""The Android device's meters through a fake adb: ODPM sysfs, then the power-stats HAL dump, then the battery.

adb's `devices -l` and `dumpsys android.hardware.power.stats.IPowerStats/default` replay canned output (the
dump in the AIDL power-stats HAL's energy-meter layout, as in tests/test_meters_odpm.py, not recorded from a
phone); other shell commands run in a real `sh` over a planted Pixel 6 tree.
"""

import os
import subprocess

import pytest

from fixtures.sysfs import FakeClock, drive, plant, trapezoid, wave
from thor_sdk.devices.android import AndroidDevice
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.odpm import PowerStatsDumpMeter, dumpsys_reader
from thor_sdk.transports.adb import AdbTransport
from thor_sdk.transports.base import RunOutput

DEVICES = "List of devices attached\nSER1        device product:oriole model:Pixel_6 device:oriole transport_id:4\n"
DUMP = """
============= PowerStats HAL 2.0 state residencies ==============
            Entity                State         Total time     Total entries   Last entry tstamp
========== End of PowerStats HAL 2.0 state residencies ==========

============= PowerStats HAL 2.0 energy meter ==============
                           Channel    Cumulative Energy
          [S4M_VDD_CPUCL0]:CPU(LITTLE)        {little:14.2f} mWs
             [S2M_VDD_CPUCL2]:CPU(BIG)        {big:14.2f} mWs
                [S2S_VDD_G3D]:GPU        {gpu:14.2f} mWs
========== End of PowerStats HAL 2.0 energy meter ==========
"""
NO_SERVICE = "Can't find service: android.hardware.power.stats.IPowerStats/default\n"


class PhoneAdb:
    """A fake adb client: replays `devices -l` and the power-stats dump (``dump()`` gives its text)."""

    def __init__(self, dump):
        self.dump = dump
        self.dumpsys_calls = 0

    def __call__(self, argv, timeout_s=None, input=None, env=None):
        if argv[1:] == ["devices", "-l"]:
            return RunOutput(0, DEVICES.encode())
        assert argv[1:4] == ["-s", "SER1", "shell"], argv
        cmd = argv[-1]
        if cmd.startswith("dumpsys"):
            assert cmd == "dumpsys android.hardware.power.stats.IPowerStats/default"
            self.dumpsys_calls += 1
            return RunOutput(0, self.dump().encode())
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, input=input)
        return RunOutput(p.returncode, p.stdout, p.stderr)


def _device(root, dump):
    adb = PhoneAdb(dump)
    return AndroidDevice("SER1", transport=AdbTransport("SER1", runner=adb), device_root=str(root)), adb


def _dump_text(e_j=0.0):
    mws = e_j * 1000
    return DUMP.format(little=123456.78 + 0.5 * mws, big=50.0 + 0.25 * mws, gpu=9.5 + 0.25 * mws)


def test_preference_order_odpm_then_power_stats_then_battery(tmp_path):
    plant(tmp_path, "pixel6")
    dev, adb = _device(tmp_path, _dump_text)
    meters = dev.meters()
    assert [m.name for m in meters] == ["odpm", "power-stats", "android-battery"]
    assert all(m.is_available() for m in meters), [m.why_unavailable() for m in meters]
    assert dev.energy_meter().name == "odpm"
    # ODPM sysfs out of reach (the usual case for an app): the power-stats dump is next
    for d in ("iio:device0", "iio:device1"):
        os.remove(tmp_path / "sys/bus/iio/devices" / d / "energy_value")
    dev, adb = _device(tmp_path, _dump_text)
    assert dev.energy_meter().name == "power-stats"
    d = {m.name: m.describe() for m in dev.meters()}["power-stats"]
    assert d["available"] and d["measured_by"] == "the harness on the device"
    # a phone whose power-stats HAL has no energy meter: the battery, with each reason said
    dev, adb = _device(tmp_path, lambda: NO_SERVICE)
    meters = {m.name: m for m in dev.meters()}
    assert "no 'PowerStats HAL" in meters["power-stats"].why_unavailable()
    assert dev.energy_meter().name == "android-battery"


def test_one_dumpsys_per_listing(tmp_path):
    plant(tmp_path, "pixel6")
    dev, adb = _device(tmp_path, _dump_text)
    ps = {m.name: m for m in dev.meters()}["power-stats"]
    ps.describe()
    ps.is_available()
    assert adb.dumpsys_calls == 1                  # a snapshot: one adb round trip for availability


def test_dumpsys_failure_is_a_reason_not_a_crash(tmp_path):
    plant(tmp_path, "pixel6")

    class Broken(PhoneAdb):
        def __call__(self, argv, timeout_s=None, input=None, env=None):
            if argv[-1].startswith("dumpsys"):
                return RunOutput(255, b"", b"cmd: Failure calling service: Permission denial\n")
            return super().__call__(argv, timeout_s, input, env)

    dev = AndroidDevice("SER1", transport=AdbTransport("SER1", runner=Broken(_dump_text)), device_root=str(tmp_path))
    why = {m.name: m for m in dev.meters()}["power-stats"].why_unavailable()
    assert "exit 255" in why and "Permission denial" in why


def test_power_stats_through_adb_within_half_a_percent(tmp_path):
    """Read through the transport window by window, the dump's counters give the planted trapezoid."""
    samples = wave(n=11, duration_s=20.0, base_w=1.5, amp_w=0.5)
    cum, e = [0.0], 0.0
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
        e += (t1 - t0) * (p0 + p1) / 2
        cum.append(e)
    state = {"k": 0}
    adb = PhoneAdb(lambda: _dump_text(cum[state["k"]]))
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = PowerStatsDumpMeter(dumpsys_reader(AdbTransport("SER1", runner=adb)), sampler=sampler)
    w = drive(m, sampler, clock, samples, lambda k, t, p: state.update(k=k))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert adb.dumpsys_calls >= len(samples)       # live: every read asks the phone again
