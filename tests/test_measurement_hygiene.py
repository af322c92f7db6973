"""Measurement hygiene: load recorded with every window, busy machines warned about, noisy probes flagged."""

import pytest

import thor_sdk
from thor_sdk.api import fit, probe
from thor_sdk.fitting.pipeline import head_part_samples
from thor_sdk.devices.host import HostDevice
from thor_sdk.devices.state import load_state, load_summary
from thor_sdk.harness.protocol import ProtocolSettings
from thor_sdk.probes import Probe
from thor_sdk.store import Campaign

from fake_device import FakeDevice

PROC_STAT = "cpu  1 2 3 4\nintr 5\nctxt 6\nprocs_running {n}\nprocs_blocked 0\n"


def fake_proc(root, load_1m, running):
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc" / "loadavg").write_text(f"{load_1m:.2f} 0.50 0.40 {running}/120 4242\n")
    (root / "proc" / "stat").write_text(PROC_STAT.format(n=running))
    return root


def test_load_state_reads_proc_under_a_root_and_takes_off_our_own_threads(tmp_path):
    fake_proc(tmp_path, 2.31, 3)
    assert load_state(tmp_path, own_threads=1) == {"load_1m": 2.31, "procs_running": 3, "other_runnable": 2}
    assert load_state(tmp_path, own_threads=4)["other_runnable"] == 0
    assert load_state(tmp_path / "nowhere") == {}  # unreadable: absent, never an error
    (tmp_path / "proc" / "loadavg").write_text("garbage")
    assert "load_1m" not in load_state(tmp_path)


def test_load_summary_says_busy_only_when_other_work_competed():
    quiet = [{"load_1m": 1.1, "other_runnable": 0}] * 5
    s = load_summary(quiet, cpu_count=2, own_threads=1)
    assert s["busy"] is False and s["warning"] is None
    busy = [{"load_1m": 2.2, "other_runnable": 1}] * 5
    s = load_summary(busy, cpu_count=2, own_threads=1)
    assert s["busy"] is True and "busy" in s["warning"] and "2 CPUs" in s["warning"]
    # one window caught a passing process: the median is still quiet
    assert load_summary(quiet + [{"load_1m": 1.1, "other_runnable": 3}], own_threads=1)["busy"] is False
    assert load_summary([{"cpu_khz": {}}])["busy"] is None  # nothing recorded: unknown, not quiet


def test_host_records_the_load_with_every_window_and_marks_probes_measured_busy(tmp_path):
    fake_proc(tmp_path, 3.0, 2)  # one other runnable thread beside our one
    dev = HostDevice(root=str(tmp_path), threads=1)
    assert dev.info()["torch_threads"] == 1
    db = str(tmp_path / "c.db")
    with Campaign.create(db, {"device": dev.info(), "metric": "time", "targets": []}) as c:
        from thor_sdk.campaign.measure import measure_and_store

        p = Probe("relu", {"numel": 256}, 4, "hidden")
        c.plan(p)
        settings = ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.002, warmup_steps=1)
        samples = measure_and_store(c, dev, p, "time", settings, "torch")
        assert samples[0]["noisy"] and "machine busy" in samples[0]["noise_reason"]
        states = [w["state"] for w in c.windows(p.id, detail=True)]
        assert states and all(s["other_runnable"] == 1 and s["load_1m"] == 3.0 for s in states)
        stored = c.samples("time")[0]
        assert stored["noisy"] is True and "machine busy" in stored["noise_reason"]
        done_utc = c.conn.execute("SELECT done_utc FROM probes WHERE id = ?", (p.id,)).fetchone()[0]
        assert stored["measured_utc"] == done_utc and done_utc.startswith("20")  # when it was measured


def test_noisy_probes_are_kept_flagged_and_fit_names_their_kinds(tmp_path):
    db = str(tmp_path / "c.db")
    settings = ProtocolSettings(min_rounds=5, max_rounds=5, cv_target=0.03)
    summary = probe(["har"], device=FakeDevice(noise=0.25), out=db, settings=settings, batch_sizes=[16])
    assert summary["noisy"] > 0
    with Campaign.open(db) as c:
        samples = c.samples("time")
    noisy = [s for s in samples if s["noisy"]]
    assert noisy and all("above the 3.0% target" in s["noise_reason"] for s in noisy)
    heads = [s for s in head_part_samples(samples) if s["noisy"]]  # the output kind's samples read off the heads
    assert all(s["noise_reason"].startswith("CV head") for s in heads)
    doc = fit(db)
    reported = doc["provenance"]["noisy_samples"]
    assert set(reported) == {s["kind"] for s in noisy + heads}
    assert sum(d["noisy"] for d in reported.values()) == len(noisy) + len(heads)
    # a quiet fake device: nothing noisy, nothing reported
    db2 = str(tmp_path / "quiet.db")
    assert probe(["har"], device=FakeDevice(noise=0.001), out=db2, batch_sizes=[16])["noisy"] == 0
    assert fit(db2)["provenance"]["noisy_samples"] == {}


def test_samples_of_a_campaign_made_before_the_noisy_column_read_as_unknown(tmp_path):
    import sqlite3

    db = str(tmp_path / "old.db")
    probe(["har"], device=FakeDevice(), out=db, max_probes=2)
    conn = sqlite3.connect(db)
    with conn:  # what a file from before this column looks like
        conn.execute("CREATE TABLE s2 AS SELECT probe_id, metric, value, std, n, flagged, flag_reason, parts FROM samples")
        conn.execute("DROP TABLE samples")
        conn.execute("ALTER TABLE s2 RENAME TO samples")
    conn.close()
    with Campaign.open(db) as c:
        assert all(s["noisy"] is None for s in c.samples())
    probe([], device=FakeDevice(), out=db, resume=True, max_probes=3)  # the next probe adds the columns
    with Campaign.open(db) as c:
        got = [s["noisy"] for s in c.samples()]
    assert got[:2] == [None, None] and got[2] is False


def test_the_host_probes_and_measures_with_one_thread_unless_told(tmp_path):
    from thor_sdk.api import _device

    assert _device("host").info()["torch_threads"] == 1
    assert _device("host", threads=2).info()["torch_threads"] == 2
    with pytest.raises(thor_sdk.errors.UsageError):
        _device("host", threads=0)
    with pytest.raises(thor_sdk.errors.UsageError):
        _device("host", threads=1.5)


def test_measure_reports_threads_load_and_noise_and_warns_when_the_machine_is_busy(tmp_path):
    from thor_sdk.api import measure

    settings = ProtocolSettings(min_rounds=3, max_rounds=3, min_window_s=0.002, warmup_steps=1)
    busy = measure("lenet5", device=HostDevice(root=str(fake_proc(tmp_path / "busy", 2.5, 2)), threads=1),
                   batch_size=2, settings=settings)
    assert busy["threads"] == 1 and busy["load"]["busy"] is True and busy["load"]["windows"] == 3
    assert any("busy" in w for w in busy["warnings"])
    quiet = measure("lenet5", device=HostDevice(root=str(fake_proc(tmp_path / "quiet", 1.0, 1)), threads=1),
                    batch_size=2, settings=settings)
    assert quiet["load"]["busy"] is False and not any("busy" in w for w in quiet["warnings"])
    assert quiet["noisy"] == (not quiet["cv"] <= settings.cv_target)


@pytest.mark.parametrize("kw", [{"min_rounds": 0}, {"min_rounds": 1}, {"max_rounds": 1}, {"min_window_s": float("nan")},
                                {"min_window_s": -1.0}, {"cv_target": float("inf")}, {"warmup_steps": 2.5},
                                {"min_rounds": 6, "max_rounds": 5}, {"max_steps_per_window": 0},
                                {"measure_idle": "yes"}, {"min_rounds": True}])
def test_protocol_settings_are_bounded_where_they_are_made(kw):
    with pytest.raises(thor_sdk.errors.UsageError):
        ProtocolSettings(**kw)


def test_json_output_is_strict_a_non_finite_result_is_one_error(capsys):
    from thor_sdk.cli.common import emit_json

    emit_json({"x": 1.5})
    assert '"x": 1.5' in capsys.readouterr().out
    with pytest.raises(thor_sdk.errors.FormatError, match="not finite"):
        emit_json({"x": float("nan")})
    assert capsys.readouterr().out == ""


def test_host_measures_with_denormals_flushed_and_restores_after():
    """A probe's fixed batch can drift into denormal floats, 30-100x slower on x86: the host flushes them
    while it measures (probes and whole models alike), says so in its info, and leaves torch as it was."""
    torch = pytest.importorskip("torch")
    from thor_sdk.devices.host import HostDevice

    dev = HostDevice(threads=1)
    if not dev.info()["flush_denormal"]:
        pytest.skip("this CPU cannot flush denormals")
    tiny = torch.tensor([1e-39], dtype=torch.float32)  # a denormal float32
    assert (tiny * 1.0).item() != 0.0
    with dev.measuring():
        assert (tiny * 1.0).item() == 0.0
    assert (tiny * 1.0).item() != 0.0


def test_flushed_denormals_nests_and_gives_the_thread_back():
    pytest.importorskip("torch")
    from thor_sdk.harness.denormals import denormals_flushed, flushed_denormals, set_denormals_flushed

    assert not denormals_flushed()
    with flushed_denormals() as on:
        if not on:
            pytest.skip("this CPU cannot flush denormals")
        assert denormals_flushed()
        with flushed_denormals():
            assert denormals_flushed()
        assert denormals_flushed()  # the inner block found it flushed and left it so
    assert not denormals_flushed()
    set_denormals_flushed(True)  # a caller that flushes on its own keeps it
    try:
        with flushed_denormals():
            pass
        assert denormals_flushed()
    finally:
        set_denormals_flushed(False)
    assert not denormals_flushed()


def test_host_measures_the_idle_baseline_once_per_campaign_not_per_probe(tmp_path):
    """docs/protocol.md: one idle baseline per campaign, re-measured only when the device state changes;
    two probes measured by one host device share it (a per-probe idle would cost minutes on a 1 Hz gauge)."""
    pytest.importorskip("torch")
    from thor_sdk.devices.host import HostDevice
    from thor_sdk.harness.protocol import ProtocolSettings
    from thor_sdk.probes import Probe

    from fake_device import ConstantPowerMeter

    meter = ConstantPowerMeter()
    dev = HostDevice(meter=meter, threads=1, root=str(tmp_path))  # no /proc or sysfs there: the state stays empty
    settings = ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.01)
    for width in (8, 16):
        r = dev.measure_probe(Probe("linear", {"in_features": 16, "out_features": width, "tokens": 1, "bias": 1},
                                    4, "hidden"), metric="energy", settings=settings)
        assert all(abs(v) < 1.0 for part in r.values() for v in part.values("net_energy"))  # idle taken off
    idle = dev._idle_for(meter)
    assert len(idle.measurements) == 1 and idle.power_w == pytest.approx(5.0, rel=0.05)


_FAULTS_SCRIPT = """
import resource, sys, torch
from thor_sdk.devices.host import HostDevice
from thor_sdk.harness.protocol import ProtocolSettings
from thor_sdk.harness.torch_trainer import trainer_for_probe_model
from thor_sdk.probes import Probe

torch.set_num_threads(1)
probe = Probe("relu", {"numel": 32768}, 16, "hidden")  # 2 MiB activations per step
dev = HostDevice(threads=1)
if sys.argv[1] == "measured":  # the host's real measuring path first: it sets the policy for the process
    dev.measure_probe(probe, settings=ProtocolSettings(min_rounds=2, max_rounds=2, min_window_s=0.01))
trainer = trainer_for_probe_model(probe.build("hidden"))
for _ in range(5):
    trainer.step()
per_step = []  # minor page faults per step, over 7 batches of 20 steps
for _ in range(7):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        trainer.step()
    per_step.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
print(sorted(per_step)[3], dev.info()["allocator"]["policy"])
"""


def _faults_per_step(how):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FAULTS_SCRIPT, how], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    faults, policy = out.stdout.split(maxsplit=1)
    return float(faults), policy.strip()


def test_host_measurements_hold_freed_memory_so_steps_pay_no_page_faults():
    """glibc returns freed megabyte blocks to the kernel, so a step can pay a page fault per 4 KiB page
    touched, depending on the process's allocation history; the host measures with freed memory held."""
    import platform

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("the allocator policy is glibc's (other C libraries are left alone)")
    plain, _ = _faults_per_step("plain")  # (medians over batches of steps: the odd fault elsewhere is not it)
    if plain < 20:
        pytest.skip(f"this glibc faulted {plain:.0f} times per step without the policy: nothing to show")
    measured, policy = _faults_per_step("measured")
    assert policy == "hold freed memory"
    assert measured < 5 < plain  # ~0 against hundreds: 2 MiB of untouched pages is 512 faults


def test_a_load_average_raised_by_our_own_waiting_is_not_busy_on_a_gpu_device(tmp_path):
    """On a GPU device the load average counts threads waiting on the driver: there only the runnable threads beside
    ours say busy (what a lent H100 showed: load 0.53-3.33, ours alone runnable in 4,105 of 4,130 windows). The CPU
    host keeps both signals."""
    high_load_alone = [{"load_1m": 3.3, "other_runnable": 0}] * 5
    assert load_summary(high_load_alone, own_threads=1)["busy"] is True
    s = load_summary(high_load_alone, own_threads=1, use_load_average=False)
    assert s["busy"] is False and s["warning"] is None and s["other_load_1m"] == 2.3  # still reported
    shared = [{"load_1m": 3.3, "other_runnable": 1}] * 5
    assert load_summary(shared, own_threads=1, use_load_average=False)["busy"] is True
    assert HostDevice().load_average_means_busy() is True
    assert HostDevice(accelerator="cuda").load_average_means_busy() is False

    class GpuLike(FakeDevice):  # records what the H100's windows recorded; the campaign's real code judges it
        def __init__(self, means_busy):
            super().__init__(noise=0.0)
            self.means_busy = means_busy

        def load_average_means_busy(self):
            return self.means_busy

        def own_threads(self):
            return 1

        def measure_probe(self, probe, metric="time", settings=None, runtime="torch", on_round=None):
            res = super().measure_probe(probe, metric, settings, runtime, on_round)
            for r in res.values():
                r.states = [dict(st, load_1m=3.3, procs_running=1, other_runnable=0) for st in r.states]
            return res

    from thor_sdk.campaign.measure import measure_and_store

    settings = ProtocolSettings(min_rounds=3, max_rounds=3)
    for means_busy in (True, False):
        with Campaign.create(str(tmp_path / f"c{means_busy}.db"), {"device": {"name": "fake"}, "metric": "time",
                                                                   "targets": []}) as c:
            p = Probe("relu", {"numel": 256}, 4, "hidden")
            c.plan(p)
            sample = measure_and_store(c, GpuLike(means_busy), p, "time", settings, "torch")[0]
            assert ("machine busy" in (sample.get("noise_reason") or "")) is means_busy
