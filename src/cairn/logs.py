"""Process logging for ``cairn serve`` and ``cairn worker``: plain lines or one JSON object a line.

With ``CAIRN_LOG_JSON=true`` every record — Cairn's, uvicorn's and the libraries' — is written as
one JSON object per line (``ts``, ``level``, ``logger``, ``message`` and whatever structured fields
the record carries, such as a request's ``request_id`` and ``tenant``), so a log shipper can parse
every line. Alembic's own chatter is silenced; ``cairn.migrations`` logs one line per migration
applied, and nothing when the database is up to date.
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

# The attributes every LogRecord has; anything else on a record came from ``extra=``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}
_QUIET = ("alembic", "alembic.runtime.migration", "alembic.runtime.plugins")

# The state of the HTTP request being served (its ``request_id``, and its ``tenant`` once
# authenticated: the ASGI scope's ``state``, one dict shared with the threads that run the
# route), so every JSON line logged while serving it names the request, not only the
# access line.
REQUEST_STATE: ContextVar[dict[str, Any] | None] = ContextVar("cairn_request", default=None)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object: fixed keys first, then the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        state = REQUEST_STATE.get()
        if state is not None and not state.get("request_finished"):
            for key in ("request_id", "tenant"):
                if key in state and key not in out:
                    out[key] = state[key]
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each record, not the stream that was
    current when logging was set up (which a test runner or an embedding program may close)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(level: str, *, json_lines: bool) -> None:
    """Route every logger to stderr at ``level``, as JSON lines or as ``LEVEL name message``."""
    handler = _StderrHandler()
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    # uvicorn's loggers keep their own handlers unless told otherwise; send them through ours.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uv = logging.getLogger(name)
        uv.handlers.clear()
        uv.propagate = True
