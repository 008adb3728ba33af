"""Domain errors. Each carries a stable ``code`` and the HTTP ``status`` it maps to.

One handler in ``cairn.api.errors`` turns any ``CairnError`` into the JSON error shape
``{"error": {"code", "message", "details", "request_id"}}``. Raise these from the engine and the
store; never map a bare ``ValueError`` to a status.

    CairnError                      (500 internal_error)
    ├── InvalidInput                (422 validation_error and more specific codes)
    ├── AuthError
    │   ├── MissingApiKey           (401 missing_api_key)
    │   ├── InvalidApiKey           (403 invalid_api_key)
    │   └── TenantMismatch          (403 tenant_mismatch)
    ├── NotFound                    (404 not_found and resource-specific codes)
    ├── Conflict                    (409 conflict)
    ├── PayloadTooLarge             (413 payload_too_large)
    ├── RateLimited                 (429 rate_limited, with Retry-After)
    ├── Unavailable                 (503 unavailable)
    └── ConfigError                 (config files and settings; fatal at start)
"""

from __future__ import annotations

from typing import Any


class CairnError(Exception):
    """Base of every error Cairn raises on purpose."""

    code = "internal_error"
    status = 500

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        details: Any = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidInput(CairnError):
    code = "validation_error"
    status = 422


class AuthError(CairnError):
    status = 401


class MissingApiKey(AuthError):
    code = "missing_api_key"
    status = 401


class InvalidApiKey(AuthError):
    code = "invalid_api_key"
    status = 403


class TenantMismatch(AuthError):
    code = "tenant_mismatch"
    status = 403


class NotFound(CairnError):
    code = "not_found"
    status = 404


class Conflict(CairnError):
    code = "conflict"
    status = 409


class PayloadTooLarge(CairnError):
    code = "payload_too_large"
    status = 413


class RateLimited(CairnError):
    """The key's requests are over its per-minute limit; ``retry_after`` seconds to wait."""

    code = "rate_limited"
    status = 429

    def __init__(self, message: str, *, retry_after: int, limit: int) -> None:
        super().__init__(message, details={"limit_per_minute": limit, "retry_after": retry_after})
        self.headers = {"Retry-After": str(retry_after)}


class Unavailable(CairnError):
    code = "unavailable"
    status = 503


class ConfigError(CairnError):
    """A configuration file or setting is wrong; the message names the file and the problem."""

    code = "config_error"
    status = 500
