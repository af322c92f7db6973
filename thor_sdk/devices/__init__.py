"""Devices: ``get_device(spec)``, the one device-name grammar of every command.

probe, measure, profile, table and train all parse ``--device`` here: ``host`` (its CPU), ``host:cuda[:N]``
(eager torch on this machine's NVIDIA GPU N, default 0, energy from NVML), ``jetson`` (this machine
is a Jetson), ``jetson://user@host[:port]`` (a board over ssh), ``sim`` / ``simjetson`` (a SIMULATED
Jetson under a sysfs root), ``android[:SERIAL]`` (a ``HOST:PORT`` serial is reached with ``adb connect``),
``stf://HOST:PORT`` (a DeviceFarmer STF device's remote-debug address, through ``adb connect``), ``ios[:UDID]``.

``meter`` overrides the device's own meters: a ``Meter`` object, or ``external:FILE.csv[,offset=S]``
for a bench meter's log (any device). ``root`` is the sysfs root of a local device (``/``; a fake tree
in tests; the SIMULATED Jetson's folder), or of the board for ``jetson://``.
"""

from thor_sdk.errors import NotFoundError, UsageError

SPECS = ("host, host:cuda[:N], jetson, jetson://user@host[:port], sim (SIMULATED Jetson), android, android:SERIAL, "
         "android:HOST:PORT, stf://HOST:PORT, ios:UDID")
REMOTE_SCHEMES = ("jetson://", "ssh://")


def is_remote(spec):
    """True for a device reached over ssh (``jetson://user@host[:port]``)."""
    return isinstance(spec, str) and spec.startswith(REMOTE_SCHEMES)


def resolve_meter(meter):
    """A meter from ``None``, a Meter object, or an ``external:FILE.csv[,offset=S]`` string."""
    if meter is None or not isinstance(meter, str):
        return meter
    from thor_sdk.meters.external import parse_meter_spec

    return parse_meter_spec(meter)


def get_device(spec="host", meter=None, root=None, sim_flavor="nano", **kwargs):
    """A device from its spec string (see ``SPECS``); nothing is contacted until it is used.

    ``jetson`` whose ``root`` holds a SIMULATED tree is the simulated Jetson (and says so); ``sim`` needs
    ``root`` and writes a ``sim_flavor`` tree there when the folder is new or empty."""
    if not isinstance(spec, str) or not spec:
        raise UsageError(f"bad device spec {spec!r}; known: {SPECS}")
    meter = resolve_meter(meter)
    if spec == "host":
        from .host import HostDevice

        return HostDevice(meter=meter, root=root or "/", **kwargs)
    if spec == "host:cuda" or spec.startswith("host:cuda:"):
        from .host import HostDevice

        index = spec[len("host:cuda:"):] if spec.startswith("host:cuda:") else "0"
        if not (index.isascii() and index.isdigit()) or len(index) > 2:
            raise UsageError(f"{spec!r}: give the GPU's index as host:cuda:N (N an integer, 0 for the first GPU)")
        return HostDevice(meter=meter, root=root or "/", accelerator="cuda", gpu_index=int(index), **kwargs)
    if spec in ("jetson", "sim", "simjetson"):
        from .simjetson import SimJetsonDevice, SimulatedJetson

        if spec != "jetson":
            return SimJetsonDevice.at(root, sim_flavor, meter=meter, **kwargs)
        if SimulatedJetson.is_simulated(root or "/"):  # a simulated tree is never taken for a real board
            return SimJetsonDevice(root, meter=meter, **kwargs)
        from .jetson import LocalJetsonDevice

        return LocalJetsonDevice(root or "/", meter=meter, **kwargs)
    if spec == "android" or spec.startswith("android:"):
        from .android import AndroidDevice

        serial = spec[len("android:"):] if spec.startswith("android:") else None
        if serial == "":
            raise UsageError("android: needs a serial after the colon (see `adb devices`), or just `android`")
        return AndroidDevice(serial=serial, meter=meter, **kwargs)
    if spec.startswith("stf://"):
        from thor_sdk.transports.adb import is_network_serial

        from .android import AndroidDevice

        address = spec[len("stf://"):].rstrip("/")
        if not is_network_serial(address):
            raise UsageError(f"{spec!r}: give the STF device's remote-debug address, stf://HOST:PORT (the "
                             "`adb connect HOST:PORT` line STF shows once the device is yours; docs/device-farms.md)")
        return AndroidDevice(serial=address, meter=meter, connect=True, name=spec.rstrip("/"), **kwargs)
    if is_remote(spec):
        from .jetson import JetsonDevice

        target = spec.split("://", 1)[1].rstrip("/")
        if not target:
            raise UsageError(f"{spec!r} needs a target: jetson://user@host[:port]")
        if root:
            kwargs["device_root"] = root
        return JetsonDevice(target, meter=meter, **kwargs)
    if spec == "ios" or spec.startswith("ios:"):
        from .ios import IosDevice

        udid = spec[len("ios:"):] if spec.startswith("ios:") else None
        if udid == "":
            raise UsageError("ios: needs a UDID after the colon (see `thor-sdk devices`), or just `ios`")
        return IosDevice(udid=udid, meter=meter, **kwargs)
    raise NotFoundError(f"unknown device {spec!r}; known: {SPECS}")
