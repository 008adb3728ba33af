"""Checks on text that every backend must be able to store.

NUL (U+0000) means nothing in a prompt or a memory, and PostgreSQL can store it neither in
text nor in JSON, so every edge refuses it (both backends alike) with one of these: ``NoNul``
(a string field of a pydantic model), ``check_no_nul`` (a value, with what it is), ``has_nul``
and ``nul_path`` (nested request data).

A lone UTF-16 surrogate (``"\\ud800"`` is a valid JSON escape) is not text at all: it cannot be
encoded as UTF-8, so no store, tokenizer or file can take it. ``has_lone_surrogate`` and
``lone_surrogate_path`` find one in nested data (the API refuses such a body, ``cairn ingest``
such a record)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator

NUL = "\x00"
# How deep JSON sent to the server may nest (arrays and objects, the body's own included):
# stored JSON is served inside replies a few levels deep, and their serializer stops at
# about 255 levels.
MAX_JSON_DEPTH = 128
NUL_MESSAGE = "must not contain a NUL character"
LONE_SURROGATE_MESSAGE = "must not contain a lone UTF-16 surrogate (not valid text)"


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
    return _find(value, path, lambda text: NUL in text)


def has_lone_surrogate(value: Any) -> bool:
    """Whether a lone surrogate occurs anywhere in ``value`` (see ``lone_surrogate_path``)."""
    return lone_surrogate_path(value) is not None


def lone_surrogate_path(value: Any, path: str = "") -> str | None:
    """Where a lone surrogate occurs in ``value`` (strings, and keys and items of nested
    dicts and lists), as a dotted path ('' for the value itself); None if nowhere."""
    return _find(value, path, _has_surrogate)


def _has_surrogate(text: str) -> bool:
    # Python's strings hold a surrogate only unpaired (JSON's escaped pairs decode to one
    # character), and the UTF-8 codec refuses exactly those, at C speed.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _find(value: Any, path: str, bad: Callable[[str], bool]) -> str | None:
    if isinstance(value, str):
        return path if bad(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and bad(key):
                return here
            found = _find(item, here, bad)
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _find(item, f"{path}.{i}" if path else str(i), bad)
            if found is not None:
                return found
    return None
