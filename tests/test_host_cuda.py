"""The host's GPU as its own device (``host:cuda[:N]``): spec, meters that measure where the step runs, the GPU's
identity and state read from NVML (a fake NVML library here; the real one where a GPU is), and a real CUDA run
where torch has one (skipped here)."""

import json
import os
import subprocess
import sys

import pytest

from fixtures.nvml import FakeNvml
from thor_sdk.devices import get_device
from thor_sdk.devices.discover import cuda_entries
from thor_sdk.devices.host import HostDevice
from thor_sdk.errors import DeviceUnavailableError, NoMeterError, UsageError


def test_spec_names_the_gpu():
    assert get_device("host:cuda").name == "host:cuda:0"
    d = get_device("host:cuda:3")
    assert (d.name, d.kind, d.accelerator, d.gpu_index) == ("host:cuda:3", "host", "cuda", 3)
    assert get_device("host").name == "host" and get_device("host").accelerator == "cpu"
    for bad in ("host:cuda:", "host:cuda:-1", "host:cuda:1x", "host:cuda:999", "host:cuda:٣"):
        with pytest.raises(UsageError, match="host:cuda:N"):
            get_device(bad)
    with pytest.raises(UsageError, match="accelerator"):
        HostDevice(accelerator="tpu")
    with pytest.raises(UsageError, match="GPU index"):
        HostDevice(accelerator="cuda", gpu_index=True)


def test_cpu_steps_are_never_measured_with_the_gpu_meter(tmp_path):
    """A readable NVML measures a GPU that a CPU step leaves idle: the CPU host neither lists nor uses it."""
    cpu = HostDevice(root=str(tmp_path), nvml=FakeNvml(energy=True))
    assert [m.name for m in cpu.meters()] == ["rapl"]
    with pytest.raises(NoMeterError, match="rapl"):
        cpu.require_meter("energy")
    gpu = HostDevice(root=str(tmp_path), nvml=FakeNvml(energy=True), accelerator="cuda")
    assert [m.name for m in gpu.meters()] == ["nvml-energy"]
    assert gpu.require_meter("energy").is_available()
    # a second GPU is read through its own index; a GPU the driver lacks says so
    assert HostDevice(root=str(tmp_path), nvml=FakeNvml(gpus=2), accelerator="cuda", gpu_index=1).energy_meter()
    lone = HostDevice(root=str(tmp_path), nvml=FakeNvml(gpus=1), accelerator="cuda", gpu_index=1)
    with pytest.raises(NoMeterError, match="no such GPU"):
        lone.require_meter("energy")


def test_gpu_identity_and_state_are_recorded_read_only(tmp_path):
    dev = HostDevice(root=str(tmp_path), nvml=FakeNvml(), accelerator="cuda")
    info = dev.info()
    assert info["name"] == "host:cuda:0" and info["accelerator"] == "cuda"
    assert (info["gpu_name"], info["gpu_driver"], info["gpu_memory_mib"], info["gpu_power_limit_w"]) == \
        ("NVIDIA H100 80GB HBM3", "580.159.04", 81559, 700.0)
    st = dev._state()
    assert (st["gpu_sm_mhz"], st["gpu_mem_mhz"], st["gpu_temp_c"], st["gpu_pstate"]) == (1980, 2619, 41, 0)
    # a GPU that answers none of it: the keys are absent, nothing raises
    mute = HostDevice(root=str(tmp_path), nvml=FakeNvml(state=False), accelerator="cuda")
    assert not any(k.startswith("gpu_") for k in mute._state())
    assert "gpu_name" not in mute.info()
    # the CPU host records no GPU at all
    assert not any(k.startswith("gpu_") for k in HostDevice(root=str(tmp_path), nvml=FakeNvml())._state())


def test_cpu_and_gpu_campaigns_are_different_devices(tmp_path):
    from thor_sdk.api import _device_key

    cpu = HostDevice(root=str(tmp_path), threads=1).info()
    gpu = HostDevice(root=str(tmp_path), threads=1, nvml=FakeNvml(), accelerator="cuda").info()
    assert _device_key(cpu) != _device_key(gpu)


def test_discovery_lists_each_gpu_or_why_none(tmp_path):
    two = cuda_entries(str(tmp_path), FakeNvml(gpus=2, instant=True))
    assert [e["spec"] for e in two] == ["host:cuda:0", "host:cuda:1"]
    assert all(e["status"] == "available" and e["meters"][0]["reads"] == "total-energy" for e in two)
    (none,) = cuda_entries(str(tmp_path), FakeNvml(gpus=0))
    assert none["status"] == "absent" and none["spec"] is None
    import pynvml

    (nodrv,) = cuda_entries(str(tmp_path), FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    assert "driver is not loaded" in nodrv["why"]


def test_host_and_its_gpu_are_not_one_fleet(tmp_path):
    from thor_sdk.api import probe_fleet

    with pytest.raises(UsageError, match="run on this machine"):
        probe_fleet(["lenet5"], devices=["host", "host:cuda"], out_dir=str(tmp_path))


def test_refused_before_any_work_without_a_cuda_torch(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    dev = HostDevice(root=str(tmp_path), accelerator="cuda")
    with pytest.raises(DeviceUnavailableError, match="torch sees no CUDA GPU"):
        dev.measure_model("lenet5", 4)
    with pytest.raises(UsageError, match="onnxruntime"):
        dev.measure_model("lenet5", 4, runtime="onnxruntime")
    p = subprocess.run([sys.executable, "-m", "thor_sdk.cli.main", "measure", "--device", "host:cuda", "--model",
                        "lenet5", "--batch-size", "4"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode != 0 and p.stderr.startswith("Error: host:cuda:0: torch sees no CUDA GPU")
    assert "Traceback" not in p.stderr


@pytest.mark.skipif(os.environ.get("THOR_NO_CUDA_TEST") == "1", reason="asked not to")
def test_a_training_step_on_a_real_gpu(tmp_path):
    """Where torch has a GPU: the step runs there, time per step is measured after the GPU is done, and
    with NVML readable the energy per step is measured too."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.harness.torch_trainer import trainer_for_model

    t = trainer_for_model("lenet5", 8, device="cuda:0")
    assert all(p.is_cuda for p in t.module.parameters()) and t.x.is_cuda
    t.step()
    assert torch.isfinite(t.last_loss).item()
    dev = HostDevice(threads=1, accelerator="cuda")
    r = dev.measure_model("lenet5", 16, settings=ProtocolSettings(min_rounds=3, max_rounds=4))
    assert all(v > 0 for v in r.time_s)
    assert any("gpu_sm_mhz" in s for s in r.states) or not dev._nv().handle()
    if dev.energy_meter() is not None:
        e = dev.measure_model("lenet5", 64, metric="energy", settings=ProtocolSettings(min_rounds=3, max_rounds=3))
        assert all(v > 0 for v in e.energy_j) and e.idle_power_w > 0
    out = subprocess.run([sys.executable, "-m", "thor_sdk.cli.main", "devices", "--json"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    entries = [d for d in json.loads(out.stdout)["devices"] if d["kind"] == "host:cuda"]
    assert entries[0]["spec"] == "host:cuda:0", entries


def test_a_cpu_profile_is_not_leveled_on_the_gpu(tmp_path):
    """The device level compares the profile's reference probe with a reading now: on the host's GPU, a CPU
    profile's reference means nothing, and is refused before anything runs (and the other way round)."""
    from pathlib import Path

    from thor_sdk.api import measure_level

    vectors = Path(__file__).resolve().parent / "vectors"
    doc = json.loads((vectors / "estimator_level.json").read_text())
    doc["device"] = {"name": "host", "kind": "host"}
    with pytest.raises(UsageError, match="profiles a host device, not a host/cuda one"):
        measure_level(doc, device=HostDevice(root=str(tmp_path), nvml=FakeNvml(), accelerator="cuda"))
    doc["device"] = {"name": "host:cuda:0", "kind": "host", "accelerator": "cuda"}
    with pytest.raises(UsageError, match="profiles a host/cuda device, not a host one"):
        measure_level(doc, device=HostDevice(root=str(tmp_path)))
