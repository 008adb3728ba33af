"""Rows as export records hold them, and records' values checked back into rows."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Float, Integer, String, Uuid

from cairn.core.ids import as_utc, iso
from cairn.errors import InvalidInput
from cairn.store.schema import UTCDateTime

_OBJECTS = {"payload", "metadata", "provenance", "value"}  # JSON columns holding objects


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in row.items():
        if isinstance(v, datetime):
            out[k] = iso(v)  # as the API writes times: UTC, ``Z``
        elif isinstance(v, uuid.UUID):
            out[k] = str(v)
        else:
            out[k] = v
    return out


def decode_values(columns: dict[str, Any], row: dict[str, Any], index: int) -> dict[str, Any]:
    """Record ``index``'s ``row`` as values of ``columns`` (name → column): dates and UUIDs
    parsed, every value of its column's type, nothing unknown, nothing required missing."""
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise InvalidInput(
            f"record {index}: unknown field(s) {', '.join(unknown)}", code="invalid_import"
        )
    out: dict[str, Any] = {}
    for name, col in columns.items():
        if name not in row:
            if not col.nullable and col.server_default is None:
                raise InvalidInput(f"record {index}: missing {name}", code="invalid_import")
            continue
        value = _parsed(col, name, row[name], index)
        if value is None and not col.nullable:
            raise InvalidInput(f"record {index}: {name} must not be null", code="invalid_import")
        length = getattr(col.type, "length", None)
        if (
            isinstance(col.type, String)
            and isinstance(value, str)
            and length
            and len(value) > length
        ):
            raise InvalidInput(
                f"record {index}: {name} is longer than {length} characters", code="invalid_import"
            )
        if (value is not None and not _fits(col.type, value)) or (
            name in _OBJECTS and not isinstance(value, dict)
        ):
            raise InvalidInput(
                f"record {index}: {name} has the wrong type ({type(value).__name__})",
                code="invalid_import",
            )
        out[name] = value
    return out


def _parsed(col: Any, name: str, value: Any, index: int) -> Any:
    """Dates parsed and converted to UTC (a naive one is UTC, as the API reads it) and UUIDs
    parsed; any other value as it is."""
    if value is None:
        return None
    try:
        if isinstance(col.type, UTCDateTime):
            when = datetime.fromisoformat(str(value))
            try:
                # Converted here, not when the row is written: a time whose UTC conversion
                # leaves years 1-9999 (``9999-12-31T23:59:59-14:00``) is this record's error.
                return as_utc(when)
            except OverflowError:
                raise InvalidInput(
                    f"record {index}: {name} is outside the representable range once "
                    "converted to UTC",
                    code="invalid_import",
                ) from None
        if isinstance(col.type, Uuid):
            return uuid.UUID(str(value))
    except ValueError as exc:
        raise InvalidInput(f"record {index}: bad {name}: {exc}", code="invalid_import") from exc
    return value


def _fits(kind: Any, value: Any) -> bool:
    """Whether a JSON value is of the column's type (after dates and UUIDs are parsed)."""
    if isinstance(kind, UTCDateTime):
        return isinstance(value, datetime)
    if isinstance(kind, Uuid):
        return isinstance(value, uuid.UUID)
    if isinstance(kind, Boolean):
        return isinstance(value, bool)
    if isinstance(kind, Integer):
        # A plain INTEGER is 32 bits on PostgreSQL (SQLite's would take more): the smaller bound
        # for both, so a record fits either backend or neither.
        bound = 2**62 if isinstance(kind, BigInteger) else 2**31
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) < bound
    if isinstance(kind, Float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(kind, String):
        return isinstance(value, str)  # (its length is checked before, with its own message)
    if isinstance(kind, JSON):
        return isinstance(value, dict | list)
    return False


__all__ = ["decode_values", "jsonable"]
