"""The OpenAPI description lists every status an operation can answer, not only its success.

Routes declare their success model; the errors come from shared layers (auth, the Host and
open-mode rules, body limits, validation, the store), so they are added here once, per
operation, with the one error shape every one of them has.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

ERROR_SCHEMA: dict[str, Any] = {
    "title": "ErrorResponse",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details", "request_id"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {},
                "request_id": {"type": ["string", "null"]},
            },
        }
    },
}
DESCRIPTIONS = {
    "400": "The Host header is not allowed (`host_not_allowed`).",
    "401": "No API key was sent and the server requires one (`missing_api_key`).",
    "403": "The key is unknown or revoked, the tenant header differs, or open mode refuses a "
    "non-loopback peer.",
    "404": "No such resource or route.",
    "405": "The path exists, the method does not.",
    "409": "The request conflicts with stored state.",
    "413": "The body is over `CAIRN_MAX_BODY_BYTES`.",
    "422": "The path, query or body is invalid; `details` names each field.",
    "429": "The key's request rate is over its limit; see `Retry-After`.",
    "503": "The database does not answer.",
}
# Needs no key (see docs/api.md): no 401/403 from auth, no per-key rate limit.
PUBLIC = {"/healthz", "/readyz", "/v1/version", "/metrics"}


def statuses(path: str, method: str) -> list[str]:
    found = ["400", "404", "405", "422", "503"]
    if path not in PUBLIC:
        found += ["401", "403", "429"]
    else:
        found.append("403")  # open mode refuses a non-loopback peer on every path
    if method not in ("get", "head"):
        found += ["409", "413"]
    return sorted(set(found))


def install_openapi(app: FastAPI) -> None:
    """Replace ``app.openapi`` with one that adds the shared error responses."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        spec.setdefault("components", {}).setdefault("schemas", {})["ErrorResponse"] = ERROR_SCHEMA
        ref = {"$ref": "#/components/schemas/ErrorResponse"}
        for path, operations in spec.get("paths", {}).items():
            for method, operation in operations.items():
                responses = operation.setdefault("responses", {})
                for status in statuses(path, method):
                    described = responses.setdefault(status, {"description": DESCRIPTIONS[status]})
                    # Replace FastAPI's default 422 model: our validation errors have our shape.
                    described["content"] = {"application/json": {"schema": ref}}
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
