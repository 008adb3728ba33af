"""Identifiers and clocks: time-ordered UUIDv7 ids and timezone-aware UTC times."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

# Process-wide by definition: ids made by one process must increase, whichever part makes
# them. The only state is the last millisecond and counter; no thread, no cache.
_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then a counter and randomness.

    Ids made by one process are strictly increasing, so they sort in creation order.
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                ms += 1
                _counter = 0
        else:
            _counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        _last_ms = ms
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    return uuid.UUID(int=value)


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Treat a naive datetime as UTC and convert an aware one to UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _iso_text_only(value: object) -> object:
    # A bare number would be read as Unix seconds (``0`` -> 1970), which no client means by an
    # ISO 8601 field; only text (or a datetime from Python callers) is a time here.
    if isinstance(value, int | float):
        raise ValueError("must be an ISO 8601 date-time string, not a number")
    return value


def _checked_utc(value: datetime) -> datetime:
    try:
        return as_utc(value)
    except OverflowError:
        raise ValueError("is outside the representable range once converted to UTC") from None


# An ISO 8601 time from a request, stored in UTC: a number is refused, and a time whose UTC
# conversion leaves years 1-9999 (``9999-12-31T23:59:59-14:00``) is a validation error.
UtcDateTime = Annotated[datetime, BeforeValidator(_iso_text_only), AfterValidator(_checked_utc)]


def iso(value: datetime) -> str:
    """ISO 8601 in UTC with a ``Z`` suffix and microseconds, so strings sort like times."""
    # (``isoformat``, not ``strftime("%Y")``: a year before 1000 keeps its four digits)
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")
