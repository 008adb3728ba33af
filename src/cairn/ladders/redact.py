"""Secret redaction for run traces: configured keys and secret-named values never reach storage."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
SECRET_KEY_RE = re.compile(r"(api[_-]?key|authorization|password|secret|token$)", re.I)
# Bearer tokens and Cairn keys that appear inside text (a user pasting a key into a message).
SECRET_TEXT_RE = re.compile(r"(Bearer\s+)[A-Za-z0-9._\-]{8,}|\bcairn_[A-Za-z0-9_\-]{16,}")


def redact(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` with secrets replaced by ``[redacted]``: values under secret-looking
    keys (``api_key``, ``authorization``, ``password``, ``secret``, ``*token``), the given secret
    strings wherever they occur, bearer tokens and Cairn keys in text. Token *counts*
    (``prompt_tokens`` and the like, which are numbers) are kept."""
    known = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)
    return _redact(value, known)


def _redact_text(text: str, known: list[str]) -> str:
    for secret in known:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return SECRET_TEXT_RE.sub(lambda m: (m.group(1) or "") + REDACTED, text)


def _redact(value: Any, known: list[str]) -> Any:
    if isinstance(value, str):
        return _redact_text(value, known)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and SECRET_KEY_RE.search(k) and isinstance(v, str) and v:
                out[k] = REDACTED
            else:
                out[k] = _redact(v, known)
        return out
    if isinstance(value, (list, tuple)):
        return [_redact(v, known) for v in value]
    return value


__all__ = ["REDACTED", "redact"]
