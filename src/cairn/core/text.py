"""Checks on text that every backend must be able to store."""

from __future__ import annotations

from typing import Any


def has_nul(value: Any) -> bool:
    """Whether a NUL character occurs anywhere in ``value`` (strings, dict keys, nested items).
    The cheap check on the hot path; ``nul_path`` then says where."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(("\x00" in k if isinstance(k, str) else False) or has_nul(v)
                   for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


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
            found = nul_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None
