"""Response headers built from user text (which may be in any script)."""

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
