"""Headers that carry user text (which may be in any script), read and written."""

from __future__ import annotations

import re
from urllib.parse import quote

_UNSAFE = re.compile(r"[^A-Za-z0-9._@+-]")


def attachment(filename: str) -> dict[str, str]:
    """A ``Content-Disposition`` for a download named ``filename``: an ASCII fallback for old
    clients and the exact name as RFC 6266 ``filename*`` (UTF-8, percent-encoded), so a name in
    any script, or with quotes, can neither break the header nor be refused by it."""
    fallback = _UNSAFE.sub("_", filename)
    encoded = quote(filename, safe="")
    return {
        "Content-Disposition": f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    }


def header_text(value: str | None) -> str | None:
    """A request header's value as the client wrote it: HTTP carries bytes, which Starlette
    decodes as Latin-1, so a value in another script (``会话-1``, sent as UTF-8) is read back
    as UTF-8 when its bytes are UTF-8 (else as they came)."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value
