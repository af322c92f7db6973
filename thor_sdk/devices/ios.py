"""iPhones and iPads through Xcode's devicectl (macOS only): ``ios:UDID``.

The harness app (``ios_harness/``) runs the bundle's training steps; iOS exposes no energy
counter to apps, so energy needs a bench meter's log (``--meter external:FILE.csv``); the app
records battery level and thermal state with each window.
"""

from thor_sdk.transports.xcode import XcodeTransport

from .remote import IosHarness, RemoteDevice


class _NoEnergy:
    name = "ios"
    sample_period_s = 0.0

    def is_available(self):
        return False

    def why_unavailable(self):
        return "iOS gives apps no energy counter: measure with a bench meter (--meter external:FILE.csv)"

    def describe(self):
        return {"name": self.name, "available": False, "why_unavailable": self.why_unavailable(),
                "sample_period_s": 0.0}


class IosDevice(RemoteDevice):
    kind = "ios"

    def __init__(self, udid=None, meter=None, transport=None, **kw):
        transport = transport or XcodeTransport(udid)
        super().__init__(transport, IosHarness(), meter=meter, name=f"ios:{udid}" if udid else "ios", **kw)

    def device_meters(self):
        return [_NoEnergy()]
