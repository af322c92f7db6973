"""Which machine measured: the host's CPU model and instruction sets from /proc/cpuinfo (a fake tree under tmp_path
passed as the root), kept in its device info, and the warning when an estimator profiled on one machine is measured
or leveled on another (evaluate, measure_level) on fake devices that say they are other machines."""

import json

import pytest

from fake_device import FakeDevice
from thor_sdk.api import fit, measure_level, profile
from thor_sdk.campaign.prior import build_prior
from thor_sdk.devices.host import HostDevice
from thor_sdk.devices.state import cpu_identity, identity_changes, identity_warning

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R)   Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512_vnni amx_tile hypervisor

processor\t: 1
model name\t: Another CPU
flags\t\t: fpu avx
"""
ARM = """processor\t: 0
BogoMIPS\t: 38.40
Features\t: fp asimd evtstrm aes crc32 asimddp sve i8mm bf16
CPU implementer\t: 0x41
CPU part\t: 0xd40

Hardware\t: Qualcomm Technologies, Inc SM8450
"""


def _cpuinfo(root, text):
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "cpuinfo").write_text(text)
    return root


def test_cpu_identity_reads_the_first_processors_model_and_the_kernels_instruction_sets(tmp_path):
    got = cpu_identity(_cpuinfo(tmp_path / "x86", X86))
    assert got == {"cpu_model": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
                   "cpu_isa": ["amx_tile", "avx", "avx2", "avx512_vnni", "avx512f", "fma"]}
    got = cpu_identity(_cpuinfo(tmp_path / "arm", ARM))  # an Arm kernel: Features, and the SoC under Hardware
    assert got == {"cpu_model": "Qualcomm Technologies, Inc SM8450", "cpu_isa": ["asimd", "asimddp", "bf16", "i8mm", "sve"]}
    assert cpu_identity(tmp_path / "nowhere") == {}  # unreadable: absent, never an error
    assert cpu_identity(_cpuinfo(tmp_path / "odd", "garbage\n: no key\nflags\t: \n")) == {}
    long = cpu_identity(_cpuinfo(tmp_path / "long", "model name : " + "x" * 5000 + "\n"))
    assert len(long["cpu_model"]) == 200


def test_the_host_records_its_cpu_in_its_device_info(tmp_path):
    info = HostDevice(root=str(_cpuinfo(tmp_path, X86)), threads=1).info()
    assert info["cpu_model"].startswith("Intel(R) Xeon(R) Platinum") and "avx512f" in info["cpu_isa"]
    assert "cpu_model" not in HostDevice(root=str(tmp_path / "bare"), threads=1).info()


def test_identity_changes_names_what_both_records_hold_and_differ_on():
    a = {"cpu_model": "AMD EPYC", "cpu_isa": ["avx", "avx2"], "torch_version": "2.13.0+cpu", "torch_threads": 1}
    assert identity_changes(a, dict(a)) == [] and identity_warning(a, dict(a)) is None
    b = dict(a, cpu_model="Intel Xeon", torch_threads=2)
    assert identity_changes(a, b) == ["cpu_model: 'AMD EPYC' -> 'Intel Xeon'", "torch_threads: 1 -> 2"]
    assert "profiled on another machine" in identity_warning(a, b) and "Intel Xeon" in identity_warning(a, b)
    # an estimator fitted before the host recorded its CPU is not called another machine
    assert identity_changes({"torch_threads": 1}, b) == ["torch_threads: 1 -> 2"]
    assert identity_changes(None, b) == [] and identity_changes(a, None) == []


class OtherMachine(FakeDevice):
    """The fake device, saying it is another CPU than the one it was profiled as."""

    def __init__(self, cpu_model, **kw):
        super().__init__(**kw)
        self.cpu_model = cpu_model

    def info(self):
        return dict(super().info(), cpu_model=self.cpu_model)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    d = tmp_path_factory.mktemp("identity")
    prior = d / "prior.json"
    prior.write_text(json.dumps(build_prior(["lenet5", "har"])))
    profile(device=OtherMachine("CPU A", noise=0.01), out=str(d / "p.db"), max_probes=30, prior_path=str(prior),
            reference_every_s=1e-9, calibration_models=[])
    fit(str(d / "p.db"), out=str(d / "e.json"))
    return d / "e.json"


def test_the_estimator_keeps_the_profiled_cpu_and_a_level_on_another_says_so(profiled):
    assert json.loads(profiled.read_text())["device"]["cpu_model"] == "CPU A"
    same = measure_level(str(profiled), device=OtherMachine("CPU A", noise=0.0), readings=1)
    assert same["device_changes"] == []
    other = measure_level(str(profiled), device=OtherMachine("CPU B", noise=0.0), readings=1)
    assert other["device_changes"] == ["cpu_model: 'CPU A' -> 'CPU B'"]


def test_evaluate_warns_when_it_measures_another_machine_than_the_profiled_one(profiled):
    from thor_sdk.cli.evaluate import unseen_table
    from thor_sdk.evaluate import evaluate_unseen
    from thor_sdk.evaluate.report import _facts

    r = evaluate_unseen(str(profiled), ["har"], device=OtherMachine("CPU B", noise=0.0), batch_sizes=[8],
                        reference=None)
    assert "cpu_model: 'CPU A' -> 'CPU B'" in r["device_warning"]
    assert any("profiled on another machine" in line for line in _facts(r))
    assert "warning: the estimator was profiled on another machine" in unseen_table(r)
    r = evaluate_unseen(str(profiled), ["har"], device=OtherMachine("CPU A", noise=0.0), batch_sizes=[8],
                        reference=None)
    assert r["device_warning"] is None and "another machine" not in unseen_table(r)


def test_cli_estimate_relevel_on_the_host_warns_of_an_estimator_profiled_on_another_cpu(profiled, tmp_path, capsys):
    """The real host measures the level (one reading of the reference probe); the estimator says it was profiled on
    another CPU, so the warning line names both."""
    from thor_sdk.cli.main import main

    here = cpu_identity("/").get("cpu_model")
    if not here:
        pytest.skip("this machine's /proc/cpuinfo names no CPU model")
    doc = json.loads(profiled.read_text())
    doc["device"] = {"name": "host", "kind": "host", "cpu_model": "CPU A"}
    est = tmp_path / "elsewhere.json"
    est.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as ex:
        main(["estimate", "--estimator", str(est), "--model", "har", "--batch-size", "4", "--relevel",
              "--level-readings", "1", "--json"])
    out = capsys.readouterr()
    assert ex.value.code == 0, out.err
    assert json.loads(out.out)["level"]["device_changes"] == [f"cpu_model: 'CPU A' -> {here!r}"]
    assert f"Warning: the estimator was profiled on another machine than host (cpu_model: 'CPU A' -> {here!r})" in out.err


def test_fit_refuses_campaigns_of_two_cpus_and_merges_one_cpu_with_a_record_that_names_none(tmp_path):
    from thor_sdk.api import probe
    from thor_sdk.errors import UsageError

    def campaign(name, dev):
        out = str(tmp_path / f"{name}.db")
        probe(["har"], device=dev, batch_sizes=[4], out=out, max_probes=3)
        return out

    a, b = campaign("a", OtherMachine("CPU A", noise=0.0)), campaign("b", OtherMachine("CPU B", noise=0.0))
    old = campaign("old", FakeDevice(noise=0.0))  # measured before the device info named its CPU
    with pytest.raises(UsageError, match=r"different hardware \(cpu_model: 'CPU A' -> 'CPU B'\)"):
        fit([a, b], out=str(tmp_path / "ab.json"))
    assert not (tmp_path / "ab.json").exists()
    doc = fit([a, old], out=str(tmp_path / "a-old.json"))
    assert doc["device"]["cpu_model"] == "CPU A"
    # the estimator names the CPU whichever campaign comes first
    assert fit([old, a], out=str(tmp_path / "old-a.json"))["device"]["cpu_model"] == "CPU A"
    # a campaign that names no CPU first does not let two that name different ones through after it
    with pytest.raises(UsageError, match=r"campaigns a.db and b.db were measured on different hardware"):
        fit([old, a, b], out=str(tmp_path / "old-ab.json"))


def test_devices_names_the_hosts_cpu(tmp_path):
    from thor_sdk.devices.discover import host_entry

    e = host_entry(str(_cpuinfo(tmp_path, X86)))
    assert e["cpu_model"].startswith("Intel(R) Xeon(R) Platinum") and e["cpu_isa"][:2] == ["amx_tile", "avx"]
    assert "cpu_model" not in host_entry(str(tmp_path / "bare"))


def test_the_devices_command_prints_the_cpu_beside_the_host(capsys):
    from thor_sdk.cli.main import main

    here = cpu_identity("/")
    if not here.get("cpu_model"):
        pytest.skip("this machine's /proc/cpuinfo names no CPU model")
    with pytest.raises(SystemExit) as ex:
        main(["devices"])
    out = capsys.readouterr().out
    assert ex.value.code == 0 and f"host ({here['cpu_model']}" in out
    with pytest.raises(SystemExit):
        main(["devices", "--json"])
    host = next(d for d in json.loads(capsys.readouterr().out)["devices"] if d["spec"] == "host")
    assert host["cpu_model"] == here["cpu_model"] and host["cpu_isa"] == here.get("cpu_isa", host["cpu_isa"])
