"""GPU frequency control on a (simulated) devfreq tree: pinning, restore on every exit path, root check."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from thor_sdk.devices.devfreq import GpuFrequencyController, find_gpu_devfreq
from thor_sdk.devices.simjetson import SimulatedJetson
from thor_sdk.errors import DeviceError, DeviceUnavailableError, UsageError

NANO_NODE = "sys/devices/gpu.0/devfreq/57000000.gpu"
ORIN_NODE = "sys/devices/17000000.ga10b/devfreq/17000000.ga10b"


def read(root, node, name):
    with open(os.path.join(root, node, name)) as f:
        return int(f.read())


@pytest.fixture
def nano(tmp_path):
    SimulatedJetson.create(tmp_path / "nano", "nano")
    return str(tmp_path / "nano")


@pytest.mark.parametrize("flavor,node,n", [("nano", NANO_NODE, 12), ("orin", ORIN_NODE, 5)])
def test_finds_the_real_devfreq_node_and_reads_it(tmp_path, flavor, node, n):
    root = str(tmp_path / flavor)
    SimulatedJetson.create(root, flavor)
    assert find_gpu_devfreq(root) == os.path.join(root, node)
    g = GpuFrequencyController(root)
    freqs = g.available_frequencies()
    assert len(freqs) == n and freqs == sorted(freqs)
    assert g.state()["min_freq"] == freqs[0] and g.state()["max_freq"] == freqs[-1]


def test_pins_inside_and_restores_after(nano):
    g = GpuFrequencyController(nano)
    freqs = g.available_frequencies()
    with g:
        g.set_frequency(freqs[3])
        assert read(nano, NANO_NODE, "min_freq") == read(nano, NANO_NODE, "max_freq") == freqs[3]
        g.set_frequency(freqs[9])  # going up: max is raised before min
        assert read(nano, NANO_NODE, "min_freq") == freqs[9]
        g.set_frequency(freqs[1])
        assert read(nano, NANO_NODE, "max_freq") == freqs[1]
    assert read(nano, NANO_NODE, "min_freq") == freqs[0] and read(nano, NANO_NODE, "max_freq") == freqs[-1]


def test_restores_a_custom_range_after_an_exception(nano):
    g = GpuFrequencyController(nano)
    freqs = g.available_frequencies()
    with g:
        g.set_frequency(freqs[2])
        g.set_frequency(freqs[8])
    # someone (nvpmodel, the user) had limited the range before we started
    with open(os.path.join(nano, NANO_NODE, "max_freq"), "w") as f:
        f.write(str(freqs[6]))
    with pytest.raises(RuntimeError):
        with g:
            g.set_frequency(freqs[4])
            raise RuntimeError("training crashed")
    assert read(nano, NANO_NODE, "min_freq") == freqs[0] and read(nano, NANO_NODE, "max_freq") == freqs[6]


def test_usage_errors(nano):
    g = GpuFrequencyController(nano)
    with pytest.raises(UsageError):
        g.set_frequency(g.available_frequencies()[0])  # outside the context: would not be restored
    with g:
        with pytest.raises(UsageError):
            g.set_frequency(123)


def test_no_devfreq_node_is_a_clear_error(tmp_path):
    g = GpuFrequencyController(str(tmp_path))
    assert not g.is_available() and "no GPU devfreq node" in g.why_unavailable()
    with pytest.raises(DeviceUnavailableError):
        with g:
            pass


# a run started from a terminal: Ctrl-C raises KeyboardInterrupt. A test runner started as a background job
# of a non-interactive shell inherits SIGINT ignored, and one started by some CI runners inherits it blocked
# (the signal mask survives fork and exec); either way the child would sleep through the signal, so it
# restores both to what a terminal gives it.
KILL_SCRIPT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
from thor_sdk.devices.devfreq import GpuFrequencyController
with GpuFrequencyController(sys.argv[1]) as g:
    g.set_frequency(int(sys.argv[2]))
    print("PINNED", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_restored_after_a_run_killed_mid_way(nano, sig):
    freqs = GpuFrequencyController(nano).available_frequencies()
    p = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, nano, str(freqs[5])], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "PINNED"
        assert read(nano, NANO_NODE, "max_freq") == freqs[5]  # really pinned mid-run
        p.send_signal(sig)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc != 0
    assert read(nano, NANO_NODE, "min_freq") == freqs[0]
    assert read(nano, NANO_NODE, "max_freq") == freqs[-1]


def test_reset_full_range_after_a_hard_kill(nano):
    freqs = GpuFrequencyController(nano).available_frequencies()
    for n in ("min_freq", "max_freq"):
        with open(os.path.join(nano, NANO_NODE, n), "w") as f:
            f.write(str(freqs[4]))  # what a SIGKILLed run leaves behind
    GpuFrequencyController(nano).reset_full_range()
    assert read(nano, NANO_NODE, "min_freq") == freqs[0] and read(nano, NANO_NODE, "max_freq") == freqs[-1]


NOT_ROOT_SCRIPT = """
import sys
from thor_sdk.errors import DeviceError
from thor_sdk.devices.devfreq import GpuFrequencyController
g = GpuFrequencyController(sys.argv[1])
print("AVAILABLE" if g.is_available() else "UNAVAILABLE:" + g.why_unavailable())
try:
    with g:
        pass
except DeviceError as e:
    print("ERROR:" + str(e))
"""


def test_needs_root_to_write_frequencies(tmp_path):
    SimulatedJetson.create(tmp_path / "t", "nano")
    root = str(tmp_path / "t")
    for n in ("min_freq", "max_freq"):
        os.chmod(os.path.join(root, NANO_NODE, n), 0o444)  # not writable by this process
    if os.geteuid() != 0:
        g = GpuFrequencyController(root)
        assert "needs root" in g.why_unavailable()
        with pytest.raises(DeviceError, match="needs root"):
            with g:
                pass
        return
    # root may write anything: run the check in a child without the DAC-override capabilities
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and util-linux setpriv is absent: cannot drop write privileges")
    out = subprocess.run([setpriv, "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-c",
                          NOT_ROOT_SCRIPT, root], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "UNAVAILABLE:" in out.stdout and "needs root" in out.stdout
    assert "ERROR:" in out.stdout and "needs root" in out.stdout.split("ERROR:")[1]
    assert read(root, NANO_NODE, "max_freq") == GpuFrequencyController(root).available_frequencies()[-1]
