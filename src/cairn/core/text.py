"""Checks on text that every backend must be able to store."""

from __future__ import annotations

from typing import Any


def nul_path(value: Any, path: str = "") -> str | None:
    """Where a NUL character occurs in ``value`` (strings, and keys and items of nested
    dicts and lists), as a dotted path ('' for the value itself); None if nowhere."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and "\x00" in key:
                return here
            found = nul_path(item, here)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = nul_path(item, f"{path}.{i}" if path else str(i))
            if found is not None:
                return found
    return None
