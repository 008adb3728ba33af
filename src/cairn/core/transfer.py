"""The export format's name and version: the first line of every export says them."""

EXPORT_FORMAT = "cairn-export"
EXPORT_VERSION = 1

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION"]
