"""NVML meters against a fake NVML library object raising the real pynvml error classes."""

import pynvml
import pytest

from fixtures.sysfs import FakeClock, drive, trapezoid, wave
from thor_sdk.errors import MeasurementError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.nvml import NvmlEnergyMeter, NvmlPowerMeter, nvml_meter


class FakeNvml:
    """Stands in for the pynvml module: same function names, real pynvml error classes."""

    NVMLError = pynvml.NVMLError

    def __init__(self, energy=True, init_error=None):
        self.energy = energy
        self.init_error = init_error
        self.mj = 5_000_000.0
        self.mw = 0.0
        self.lost = False

    def nvmlInit(self):
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlDeviceGetHandleByIndex(self, i):
        if i != 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return "gpu0"

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        if not self.energy:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(self.mj)

    def nvmlDeviceGetPowerUsage(self, h):
        if self.lost:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return int(self.mw)


def test_this_machine_has_no_driver():
    m = nvml_meter()
    assert not m.is_available()
    assert m.why_unavailable()  # e.g. "no NVIDIA driver here (libnvidia-ml.so not found)"


def test_factory_picks_counter_or_power():
    assert isinstance(nvml_meter(nvml=FakeNvml(energy=True)), NvmlEnergyMeter)
    assert isinstance(nvml_meter(nvml=FakeNvml(energy=False)), NvmlPowerMeter)
    lib = FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    m = nvml_meter(nvml=lib)
    assert not m.is_available() and "driver is not loaded" in m.why_unavailable()
    assert "no such GPU" in NvmlEnergyMeter(index=3, nvml=FakeNvml()).why_unavailable()


def test_total_energy_counter():
    lib = FakeNvml(energy=True)
    samples = wave(n=21, duration_s=5.0, base_w=250.0, amp_w=80.0)
    cum = [0.0]
    for (t0, p0), (t1, p1) in zip(samples, samples[1:]):
        cum.append(cum[-1] + (t1 - t0) * (p0 + p1) / 2)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = NvmlEnergyMeter(nvml=lib, sampler=sampler)
    start = lib.mj

    def setter(k, t, p):
        lib.mj = start + cum[k] * 1000.0
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)


def test_power_sampling_and_lost_gpu():
    lib = FakeNvml(energy=False)
    samples = wave(n=21, duration_s=10.0, base_w=70.0, amp_w=30.0)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = NvmlPowerMeter(nvml=lib, sampler=sampler)
    assert m.is_available()
    w = drive(m, sampler, clock, samples, lambda k, t, p: setattr(lib, "mw", round(p * 1000)))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    m.start()
    lib.lost = True
    with pytest.raises(MeasurementError, match="fallen off the bus") as ei:
        sampler.tick()
    assert isinstance(ei.value.__cause__, pynvml.NVMLError)
