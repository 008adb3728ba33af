"""What the sync and async clients share: request descriptions, retries, response parsing.

Each SDK method builds a ``Call`` (method, path, body, whether it is safe to repeat, the model
of the answer); ``Cairn`` and ``AsyncCairn`` only differ in how they send it.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from cairn import __version__
from cairn.client._errors import UnexpectedResponseError, error_from_response

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8100"
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
# Answers that mean "not processed, try again later"; only repeated for idempotent calls.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and the type its answer parses into."""

    method: str
    path: str
    response: Any  # a type (pydantic model, list[...], dict) for TypeAdapter; None: no body
    params: dict[str, Any] | None = None
    json: Any = None
    # POSTs that only read, or that carry an idempotency key, are safe to repeat too.
    idempotent: bool | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def retryable(self) -> bool:
        if self.idempotent is not None:
            return self.idempotent
        return self.method.upper() in IDEMPOTENT_METHODS


def body_of(value: Any) -> Any:
    """A request body as JSON-ready data (models dumped without unset optional fields)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [body_of(v) for v in value]
    return value


def check_call(call: Call[Any]) -> None:
    """``check_body`` of a call's JSON body and of its query parameters."""
    check_body(call.json)
    if call.params:
        check_body(call.params, "query")


def check_body(value: Any, where: str = "") -> None:
    """Raise the server's 422 (``InvalidRequestError``, nothing sent) for what no JSON body
    may carry to Cairn: NaN or an infinity (``validation_error``, ``non_finite_number``)
    and a lone UTF-16 surrogate (``invalid_text``), in a value or a key at any depth."""
    if isinstance(value, float):
        if not math.isfinite(value):
            _refuse(where, "validation_error", "non_finite_number", "must be a finite number")
    elif isinstance(value, str):
        _check_text(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if isinstance(key, str):
                _check_text(key, name)
            check_body(item, name)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_body(item, f"{where}.{i}" if where else str(i))


def _check_text(text: str, where: str) -> None:
    """The server's 422 ``invalid_text`` for a lone surrogate (no UTF-8 holds one)."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        _refuse(where, "invalid_text", "invalid_text", "must be text (a lone surrogate)")


def _refuse(where: str, code: str, kind: str, problem: str) -> None:
    from cairn.client._errors import InvalidRequestError

    field_name = where or "body"
    raise InvalidRequestError(
        f"invalid request at '{field_name}': {problem} (refused before sending)",
        code=code,
        status=422,
        details=[{"field": field_name, "message": problem, "type": kind}],
    )


def iso(value: Any) -> Any:
    """A date for a request body: a ``datetime`` in ISO 8601 (the server wants one with its
    time zone), a string as the caller wrote it (the server checks it)."""
    return value.isoformat() if hasattr(value, "isoformat") else value


def clean_params(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters without the ones left at None; booleans as true/false."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def path_segment(value: str) -> str:
    """One URL path segment; ``.`` and ``..`` are escaped so no client folds them away. A
    lone surrogate is refused as the server would (422 ``invalid_text``)."""
    _check_text(value, "path")
    quoted = quote(value, safe=":@")
    return quoted.replace(".", "%2E") if set(value) == {"."} else quoted


# A bounded memo of a pure function of a response type (a type's adapter never changes).
@lru_cache(maxsize=256)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


def parse_response(call: Call[T], response: httpx.Response) -> T:
    """The typed answer, or the ``APIError`` for an error status."""
    if response.status_code >= 400:
        raise error_from_response(response)
    if call.response is None or not response.content:
        return None  # type: ignore[return-value]
    if call.response is str:
        return response.text  # type: ignore[return-value]
    try:
        return _adapter(call.response).validate_python(response.json())
    except (ValueError, ValidationError) as exc:
        raise UnexpectedResponseError(
            f"{call.method} {call.path}: unexpected response body ({exc})"
        ) from exc


class RetryPolicy:
    """Exponential backoff with jitter; honours ``Retry-After`` (seconds) when sent."""

    def __init__(self, max_retries: int, backoff: float, max_backoff: float = 8.0) -> None:
        self.max_retries = max(0, max_retries)
        self.backoff = backoff
        self.max_backoff = max_backoff

    def should_retry_status(self, call: Call[Any], status: int, attempt: int) -> bool:
        return call.retryable and attempt < self.max_retries and status in RETRY_STATUSES

    def should_retry_error(self, call: Call[Any], attempt: int) -> bool:
        return call.retryable and attempt < self.max_retries

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        if response is not None:
            after = response.headers.get("retry-after")
            if after is not None:
                try:
                    return min(max(float(after), 0.0), self.max_backoff)
                except ValueError:
                    pass
        base = min(self.backoff * (2**attempt), self.max_backoff)
        return base * (0.5 + random.random() / 2)


def resolve_url(base_url: str | None) -> str:
    return (base_url or os.environ.get("CAIRN_URL") or DEFAULT_URL).rstrip("/")


def resolve_key(api_key: str | None) -> str | None:
    return api_key if api_key is not None else (os.environ.get("CAIRN_API_KEY") or None)


def default_headers(api_key: str | None, extra: dict[str, str] | None) -> dict[str, str]:
    headers = {"user-agent": f"cairn-python/{__version__}", "accept": "application/json"}
    if api_key:
        headers["x-api-key"] = api_key
    headers.update(extra or {})
    return headers
