"""Jetson AGX Thor's INA238 (mainline hwmon driver) on a fake Thor tree; the host registry on that board."""

import pytest

from fixtures.sysfs import FakeClock, drive, plant, trapezoid, wave, write
from thor_sdk.errors import MeasurementError, NoMeterError
from thor_sdk.meters.base import ManualSampler
from thor_sdk.meters.ina238 import Ina238Meter

VIN = "sys/class/hwmon/hwmon1"


def _meter(root, **kw):
    clock = FakeClock()
    sampler = ManualSampler(clock)
    return Ina238Meter(root, sampler=sampler, **kw), sampler, clock


def test_thor_system_input_power_in_microwatts(tmp_path):
    plant(tmp_path, "thor")
    m, sampler, clock = _meter(tmp_path)
    assert m.is_available(), m.why_unavailable()
    assert [r.to_dict() for r in m.selected_rails()] == [{"name": "hwmon1", "hwmon": "hwmon1", "form": "power"}]
    samples = wave(n=41, duration_s=4.0, base_w=45.0, amp_w=20.0)   # a Thor board under training load

    def setter(k, t, p):
        write(tmp_path, f"{VIN}/power1_input", round(p * 1e6))        # uW
        write(tmp_path, f"{VIN}/curr1_input", 1)                      # ignored: power1_input exists
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    assert m.power_w() == pytest.approx(samples[-1][1], rel=1e-6)


def test_labelled_channels_voltage_times_current_and_selection(tmp_path):
    plant(tmp_path, "thor")
    # a second INA238 with a device-tree label and no power node: bus voltage (mV) x current (mA)
    write(tmp_path, "sys/class/hwmon/hwmon12/name", "ina238")
    write(tmp_path, "sys/class/hwmon/hwmon12/label", "VDD_GPU")
    write(tmp_path, "sys/class/hwmon/hwmon12/in1_input", 12000)
    m, sampler, clock = _meter(tmp_path)
    assert [r.name for r in m.selected_rails()] == ["hwmon1", "VDD_GPU"]   # hwmon order, not text order
    samples = wave(n=21, duration_s=2.0, base_w=30.0, amp_w=10.0)

    def setter(k, t, p):
        write(tmp_path, f"{VIN}/power1_input", round(0.6 * p * 1e6))
        write(tmp_path, "sys/class/hwmon/hwmon12/curr1_input", round(0.4 * p / 12.0 * 1000))
    w = drive(m, sampler, clock, samples, setter)
    assert w.energy_j == pytest.approx(trapezoid(samples), rel=0.005)
    g, gs, gc = _meter(tmp_path, rails="VDD_GPU")
    assert g.selected_rails()[0].to_dict()["form"] == "voltage x current"
    w = drive(g, gs, gc, samples, setter)
    assert w.energy_j == pytest.approx(0.4 * trapezoid(samples), rel=0.005)
    assert "present: hwmon1, VDD_GPU" in Ina238Meter(tmp_path, rails="VDD_CPU").why_unavailable()


def test_absent_unreadable_and_garbled(tmp_path):
    empty = Ina238Meter(tmp_path / "nothing")
    assert "no INA238" in empty.why_unavailable()
    with pytest.raises(NoMeterError):
        empty.start()
    plant(tmp_path, "thor")
    write(tmp_path, f"{VIN}/power1_input", "n/a")
    with pytest.raises(MeasurementError, match="not a number"):
        Ina238Meter(tmp_path).power_w()


def test_host_registry_on_a_thor_board(tmp_path):
    """On the board itself: the INA238 first, for CPU and GPU steps alike; for GPU steps NVML is listed but
    unavailable because this is a Tegra, for CPU steps RAPL follows."""
    from thor_sdk.meters.registry import host_meters

    plant(tmp_path, "thor")
    assert [m.name for m in host_meters(str(tmp_path))] == ["ina238", "rapl"]
    meters = host_meters(str(tmp_path), "cuda")
    names = [m.name for m in meters]
    assert names[0] == "ina238" and meters[0].is_available(), meters[0].why_unavailable()
    assert "rapl" not in names
    nv = [m for m in meters if m.name.startswith("nvml")]
    assert len(nv) == 1 and not nv[0].is_available() and "Tegra" in nv[0].why_unavailable()
    # an ordinary host lists no board sensor
    assert [m.name for m in host_meters(str(tmp_path / "plain"))][:1] == ["rapl"]


def test_thor_gpu_devfreq_is_found(tmp_path):
    """Thor's GPU clock domain (devfreq ``gpu-gpc-0``) is found by the devfreq discovery and its frequencies read."""
    try:
        from thor_sdk.devices.devfreq import GpuFrequencyController, find_gpu_devfreq
    except ImportError:  # before the power/ -> devices/ move
        from thor_sdk.power.devfreq import GpuFrequencyController, find_gpu_devfreq

    plant(tmp_path, "thor")
    assert find_gpu_devfreq(str(tmp_path)).endswith("sys/class/devfreq/gpu-gpc-0")
    assert GpuFrequencyController(str(tmp_path)).available_frequencies()[-1] == 1575000000
