"""What is connected (``thor-sdk devices``): the host, its GPUs, phones, boards and iOS devices, their meters, or why absent.

The host's CPU, its NVIDIA GPUs (``host:cuda:N``, seen through NVML), Android phones (adb), Jetson boards
(given ssh targets), iOS devices (devicectl on macOS); for each, its meters, or why the kind is absent."""

from thor_sdk.errors import ThorError


def _meters(device):
    try:
        return [m.describe() for m in device.meters()], ""
    except ThorError as e:
        return [], f"could not read its meters: {e}"


def host_entry(root="/"):
    """The host: available, with its meters and, where /proc/cpuinfo says them, its CPU model and instruction sets."""
    from thor_sdk.meters.registry import host_meters

    from .state import cpu_identity

    return {"kind": "host", "spec": "host", "status": "available", "why": "", **cpu_identity(root),
            "meters": [m.describe() for m in host_meters(root)]}


def cuda_entries(root="/", nvml=None):
    """One entry per NVIDIA GPU NVML sees (``host:cuda:N`` with its NVML meter), or one saying why none."""
    from thor_sdk.meters.nvml import nvml_gpu_count
    from thor_sdk.meters.registry import host_meters

    n, why = nvml_gpu_count(nvml, root)
    if not n:
        return [{"kind": "host:cuda", "spec": None, "status": "absent", "why": why or "NVML sees no GPU",
                 "meters": []}]
    return [{"kind": "host:cuda", "spec": f"host:cuda:{i}", "status": "available", "why": "",
             "meters": [m.describe() for m in host_meters(root, "cuda", i, nvml)]} for i in range(n)]


def _listed(transport, none_why):
    """``(devices, why)``: the transport's devices, or an empty list and why there are none."""
    why = transport.why_unavailable()
    if why:
        return [], why
    try:
        devs = transport.devices()
    except ThorError as e:
        return [], str(e)
    return devs, ("" if devs else none_why)


def android_entries(transport=None):
    from thor_sdk.transports.adb import AdbTransport, state_problem

    from .android import AndroidDevice

    t = transport or AdbTransport()
    devs, why = _listed(t, "no adb device attached (adb devices lists none; USB debugging on? adb connect HOST:PORT?)")
    if why:
        return [{"kind": "android", "spec": None, "status": "absent", "why": why, "meters": []}]
    out = []
    for d in devs:
        e = {"kind": "android", "spec": f"android:{d['serial']}", "status": "available", "why": "",
             "model": d.get("model"), "meters": []}
        problem = state_problem(d["serial"], d["state"])
        if problem:
            e.update(status=d["state"], why=problem)
        else:
            sub = AdbTransport(serial=d["serial"], adb=t.adb, server_port=t.server_port,
                               runner=None if t._own_runner else t.runner)
            e["meters"], e["why"] = _meters(AndroidDevice(d["serial"], transport=sub))
        out.append(e)
    return out


def jetson_entries(targets=(), transport_factory=None):
    from .jetson import JetsonDevice

    if not targets:
        return [{"kind": "jetson", "spec": None, "status": "absent",
                 "why": "no ssh target given (boards are not discoverable: thor-sdk devices --jetson user@host)",
                 "meters": []}]
    out = []
    for target in targets:
        spec = f"jetson://{target}"
        try:
            dev = JetsonDevice(target, transport=transport_factory(target) if transport_factory else None)
            why = dev.transport.why_unavailable()
            if why:
                raise ThorError(why)
            dev.transport.run(["true"], timeout_s=30)
        except ThorError as e:
            out.append({"kind": "jetson", "spec": spec, "status": "unreachable", "why": str(e), "meters": []})
            continue
        meters, why = _meters(dev)
        out.append({"kind": "jetson", "spec": spec, "status": "available", "why": why, "meters": meters})
    return out


def ios_entries(transport=None):
    from thor_sdk.transports.xcode import XcodeTransport

    t = transport or XcodeTransport()
    devs, why = _listed(t, "no iOS device paired with this Mac")
    if why:
        return [{"kind": "ios", "spec": None, "status": "absent", "why": why, "meters": []}]
    from .ios import IosDevice

    return [{"kind": "ios", "spec": f"ios:{d['udid']}", "status": "available", "why": "", "model": d.get("model"),
             "meters": [m.describe() for m in IosDevice(d["udid"], transport=t).device_meters()]} for d in devs]


def discover(jetson_targets=(), root="/", adb=None, xcode=None, ssh_factory=None, nvml=None):
    """Every device kind with its devices (or why none): a list of plain dicts."""
    return (
        [host_entry(root)]
        + cuda_entries(root, nvml)
        + android_entries(adb)
        + jetson_entries(jetson_targets, ssh_factory)
        + ios_entries(xcode)
    )
