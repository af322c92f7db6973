"""Devices: ``get_device("host")`` (more kinds: see ``thor-sdk devices``)."""

from thor_sdk.errors import NotFoundError


def get_device(spec="host", meter=None, **kwargs):
    """A device from its spec string: ``host`` (others are added by their modules)."""
    if spec == "host":
        from .host import HostDevice

        return HostDevice(meter=meter, **kwargs)
    raise NotFoundError(f"unknown device {spec!r}; known: host")
