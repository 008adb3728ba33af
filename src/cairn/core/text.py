"""Checks on text that every backend must be able to store.

NUL (U+0000) means nothing in a prompt or a memory, and PostgreSQL can store it neither in
text nor in JSON, so every edge refuses it (both backends alike) with one of these: ``NoNul``
(a string field of a pydantic model), ``check_no_nul`` (a value, with what it is), ``has_nul``
and ``nul_path`` (nested request data)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator

NUL = "\x00"
NUL_MESSAGE = "must not contain a NUL character"


def check_no_nul(value: str, what: str = "") -> str:
    """``value`` unchanged; a ``ValueError`` naming ``what`` if it holds a NUL character."""
    if NUL in value:
        raise ValueError(f"{what} {NUL_MESSAGE}" if what else NUL_MESSAGE)
    return value


# A string without NUL: pydantic reports "must not contain a NUL character" at the field.
NoNul = Annotated[str, AfterValidator(check_no_nul)]


def has_nul(value: Any) -> bool:
    """Whether a NUL character occurs anywhere in ``value`` (see ``nul_path``)."""
    return nul_path(value) is not None


def nul_path(value: Any, path: str = "") -> str | None:
    """Where a NUL character occurs in ``value`` (strings, and keys and items of nested
    dicts and lists), as a dotted path ('' for the value itself); None if nowhere."""
    if isinstance(value, str):
        return path if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and NUL in key:
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
