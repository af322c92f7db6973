"""Transports: how commands and files reach a device (local, adb, ssh, xcrun devicectl), as argument lists."""
