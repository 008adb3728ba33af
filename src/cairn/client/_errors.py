"""Exceptions raised by the SDK.

    CairnClientError                 anything the SDK raises on purpose
    ├── APIConnectionError           the server could not be reached (after any retries)
    │   └── APITimeoutError          it did not answer in time
    ├── UnexpectedResponseError      a 2xx answer whose body is not what the SDK expects
    └── APIError                     the server answered with an error body
        ├── AuthenticationError      401 / 403 (missing_api_key, invalid_api_key, tenant_mismatch)
        ├── NotFoundError            404
        ├── ConflictError            409
        ├── InvalidRequestError      400 / 413 / 422 (validation_error and specific codes)
        ├── RateLimitError           429
        └── ServerError              5xx

Every ``APIError`` carries the server's stable ``code``, the HTTP ``status``, the ``message``,
the ``details`` and the ``request_id`` (from the body, else the ``X-Request-ID`` header).
"""

from __future__ import annotations

from typing import Any

import httpx


class CairnClientError(Exception):
    """Base of every exception the SDK raises."""


class APIConnectionError(CairnClientError):
    """The request did not get an answer: connection refused, reset, DNS failure..."""


class APITimeoutError(APIConnectionError):
    """The server did not answer within the timeout."""


class UnexpectedResponseError(CairnClientError):
    """A success answer whose body does not parse into the expected model (an SDK/server
    version mismatch, or something other than Cairn answering)."""


class APIError(CairnClientError):
    """The server answered with an error (``{"error": {code, message, details, request_id}}``)."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int,
        details: Any = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details = details
        self.request_id = request_id

    def __str__(self) -> str:
        rid = f", request {self.request_id}" if self.request_id else ""
        return f"{self.message} ({self.status} {self.code}{rid})"


class AuthenticationError(APIError):
    """401 or 403: the key is missing, unknown, revoked, or for another tenant."""


class NotFoundError(APIError):
    """404: no such resource (or route)."""


class ConflictError(APIError):
    """409: the request conflicts with the current state."""


class InvalidRequestError(APIError):
    """400, 413 or 422: the request was rejected as invalid; nothing was changed."""


class RateLimitError(APIError):
    """429: too many requests."""


class ServerError(APIError):
    """5xx: the server failed or is unavailable."""


def error_class(status: int) -> type[APIError]:
    """The ``APIError`` subclass for an HTTP status."""
    if status in (401, 403):
        return AuthenticationError
    if status == 404:
        return NotFoundError
    if status == 409:
        return ConflictError
    if status == 429:
        return RateLimitError
    if status >= 500:
        return ServerError
    if status in (400, 413, 422):
        return InvalidRequestError
    return APIError


def error_from_response(response: httpx.Response) -> APIError:
    """Build the exception for an error response, whatever its body looks like."""
    status = response.status_code
    header_id = response.headers.get("x-request-id")
    body: Any = None
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        code = str(error.get("code") or "http_error")
        message = str(error.get("message") or response.reason_phrase or code)
        details = error.get("details")
        request_id = error.get("request_id") or header_id
    else:
        # Not Cairn's shape (a proxy in between, or a plain text 502): keep what there is.
        code = "http_error"
        text = response.text.strip()
        message = text[:500] if text else (response.reason_phrase or f"HTTP {status}")
        details = body
        request_id = header_id
    return error_class(status)(
        message, code=code, status=status, details=details, request_id=request_id
    )
