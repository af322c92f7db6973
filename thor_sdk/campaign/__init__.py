"""Campaigns that measure a device: target-driven (``probe``) and over a model zoo's prior (``profile``)."""
