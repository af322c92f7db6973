"""NVML meters against a fake NVML library object raising the real pynvml error classes and returning
pynvml's own field-value structs (``c_nvmlFieldValue_t``), so the real code path reads them."""

import time

import pynvml
import pytest

from fixtures.nvml import FakeNvml
from fixtures.sysfs import FakeClock, drive, trapezoid, wave
from thor_sdk.errors import MeasurementError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.nvml import NvmlEnergyMeter, NvmlPowerMeter, nvml_meter


def test_this_machine_reads_its_gpu_or_says_why_not():
    """Where no driver is (CI), unavailable with the reason; where a GPU is, readable and reading energy."""
    try:
        pynvml.nvmlInit()
        gpu = pynvml.nvmlDeviceGetCount() > 0
    except pynvml.NVMLError:
        gpu = False
    m = nvml_meter()
    if not gpu:
        assert not m.is_available()
        assert m.why_unavailable()  # e.g. "no NVIDIA driver here (libnvidia-ml.so not found)"
    else:
        assert m.is_available(), m.why_unavailable()
        m.start()
        time.sleep(0.5)
        w = m.stop()
        assert w.energy_j > 0 and 5.0 < w.mean_power_w < 2000.0


def test_factory_picks_counter_or_power():
    assert isinstance(nvml_meter(nvml=FakeNvml(energy=True)), NvmlEnergyMeter)
    avg = nvml_meter(nvml=FakeNvml(energy=False))
    assert isinstance(avg, NvmlPowerMeter) and avg.source == "power-average" and avg.sample_period_s == 1.0
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


def test_counter_first_then_instant_field_then_average():
    """The energy counter where the GPU has one (an accumulator cannot alias with a periodic load), else the
    instantaneous field, the 1 s average last; each window says which."""
    assert nvml_meter(nvml=FakeNvml(energy=True, instant=True)).window_source() == "total-energy"
    inst = nvml_meter(nvml=FakeNvml(energy=False, instant=True))
    assert isinstance(inst, NvmlPowerMeter) and inst.source == "power-instant" and inst.sample_period_s == 0.1
    assert inst.describe()["reads"] == "power-instant"
    assert nvml_meter(nvml=FakeNvml(energy=True, instant=False)).window_source() == "total-energy"
    assert nvml_meter(nvml=FakeNvml(energy=False, instant=False)).window_source() == "power-average"
    # a GPU without the field: asked for explicitly, the meter says why
    why = NvmlPowerMeter(nvml=FakeNvml(instant=False), source="power-instant").why_unavailable()
    assert "NVML_FI_DEV_POWER_INSTANT" in why


def test_instant_power_within_half_a_percent_and_recorded_per_window():
    lib = FakeNvml(energy=False, instant=True)  # a GPU without the counter: the field is the best source
    samples = wave(n=41, duration_s=4.0, base_w=300.0, amp_w=120.0)
    clock = FakeClock()
    sampler = ManualSampler(clock)
    m = nvml_meter(nvml=lib, clock=clock, sampler=sampler)
    w = drive(m, sampler, clock, samples, lambda k, t, p: setattr(lib, "instant_mw", round(p * 1000)))
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert w.source == "power-instant" and w.to_dict()["source"] == "power-instant"
    # the counter's and the average's windows say so too
    lib2 = FakeNvml(energy=False)
    c2 = FakeClock()
    s2 = ManualSampler(c2)
    avg = NvmlPowerMeter(nvml=lib2, sampler=s2)
    w2 = drive(avg, s2, c2, samples, lambda k, t, p: setattr(lib2, "mw", round(p * 1000)))
    assert w2.source == "power-average" and w2.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    # a field that fails while measuring: NVML's reason, chained
    m.start()
    lib.lost = True
    with pytest.raises(MeasurementError, match="fallen off the bus") as ei:
        sampler.tick()
    assert isinstance(ei.value.__cause__, pynvml.NVMLError)


@pytest.mark.parametrize("marker", ["release", "device-tree"])
def test_never_on_tegra(tmp_path, marker):
    """On a Jetson NVML initialises but reports no power: the meter says why without loading NVML."""
    from fixtures.sysfs import write

    if marker == "release":
        write(tmp_path, "etc/nv_tegra_release", "# R38 (release), REVISION: 2.0, GCID: 0, BOARD: generic, EABI: aarch64\n")
    else:  # Jetson AGX Thor's device tree
        write(tmp_path, "proc/device-tree/compatible", "nvidia,p3971-0080+p3834-0008\x00nvidia,tegra264\x00")
    lib = FakeNvml(energy=True, instant=True)
    m = nvml_meter(nvml=lib, root=tmp_path)
    assert not m.is_available() and "Jetson" in m.why_unavailable() and "Tegra" in m.why_unavailable()
    assert lib.inits == 0
    assert not NvmlPowerMeter(nvml=lib, source="power-instant", root=tmp_path).is_available()
    # an ordinary host's device tree (or none) is not Tegra
    write(tmp_path / "arm", "proc/device-tree/compatible", "raspberrypi,4-model-b\x00brcm,bcm2711\x00")
    assert nvml_meter(nvml=FakeNvml(instant=True), root=tmp_path / "arm").is_available()
