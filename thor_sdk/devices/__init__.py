"""Devices: ``get_device(spec)`` for ``host``, ``android[:SERIAL]``, ``jetson://user@host[:port]``, ``ios[:UDID]``.

``meter`` overrides the device's own meters: a ``Meter`` object, or ``external:FILE.csv[,offset=S]``
for a bench meter's log (any device).
"""

from thor_sdk.errors import NotFoundError, UsageError

SPECS = "host, android, android:SERIAL, jetson://user@host[:port], ios:UDID"


def resolve_meter(meter):
    """A meter from ``None``, a Meter object, or an ``external:FILE.csv[,offset=S]`` string."""
    if meter is None or not isinstance(meter, str):
        return meter
    from thor_sdk.meters.external import parse_meter_spec

    return parse_meter_spec(meter)


def get_device(spec="host", meter=None, **kwargs):
    """A device from its spec string (see ``SPECS``); nothing is contacted until it is used."""
    if not isinstance(spec, str) or not spec:
        raise UsageError(f"bad device spec {spec!r}; known: {SPECS}")
    meter = resolve_meter(meter)
    if spec == "host":
        from .host import HostDevice

        return HostDevice(meter=meter, **kwargs)
    if spec == "android" or spec.startswith("android:"):
        from .android import AndroidDevice

        serial = spec[len("android:"):] if spec.startswith("android:") else None
        if serial == "":
            raise UsageError("android: needs a serial after the colon (see `adb devices`), or just `android`")
        return AndroidDevice(serial=serial, meter=meter, **kwargs)
    if spec.startswith("jetson://") or spec.startswith("ssh://"):
        from .jetson import JetsonDevice

        target = spec.split("://", 1)[1].rstrip("/")
        if not target:
            raise UsageError(f"{spec!r} needs a target: jetson://user@host[:port]")
        return JetsonDevice(target, meter=meter, **kwargs)
    if spec == "ios" or spec.startswith("ios:"):
        from .ios import IosDevice

        udid = spec[len("ios:"):] if spec.startswith("ios:") else None
        if udid == "":
            raise UsageError("ios: needs a UDID after the colon (see `thor-sdk devices`), or just `ios`")
        return IosDevice(udid=udid, meter=meter, **kwargs)
    raise NotFoundError(f"unknown device {spec!r}; known: {SPECS}")
