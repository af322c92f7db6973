"""SQLite campaign store."""

from .campaign import Campaign

__all__ = ["Campaign"]
