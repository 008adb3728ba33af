"""One JSON error shape for every failure: ``{"error": {code, message, details, request_id}}``.

Under ``/v1/local`` (the OpenAI-compatible routes) the same object also carries OpenAI's
``type`` and ``param``, and a wrong key is a 401 like OpenAI's, so OpenAI clients raise their
usual exceptions (``AuthenticationError``, ``NotFoundError``, ...)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from cairn.core.validation import validation_details
from cairn.errors import CairnError

log = logging.getLogger("cairn.api")
M = TypeVar("M", bound=BaseModel)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
}


def request_id_of(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


OPENAI_PREFIX = "/v1/local"
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def openai_error(status: int, code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The error object in OpenAI's shape (``message, type, param, code``) plus Cairn's
    ``details``. ``param`` is the offending field when one is known."""
    param = None
    if isinstance(details, dict):
        param = details.get("param")
    elif isinstance(details, list) and details and isinstance(details[0], dict):
        param = details[0].get("field") or None
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"message": message, "type": kind, "param": param, "code": code, "details": details}


def error_response(
    request: Request,
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message, "details": details}
    if is_openai_path(request.url.path):
        if code == "invalid_api_key":
            status = 401  # OpenAI answers a wrong key with 401, and its clients expect it
        error = openai_error(status, code, message, details)
    error["request_id"] = request_id_of(request)
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def validate_input(model: type[M], data: Any) -> M:
    """Build a domain model from request data: invalid data is the caller's 422, like an invalid
    body. (A ``ValidationError`` anywhere else is a server bug: a 500, never blamed on input.)"""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors()) from exc


async def _cairn_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CairnError)
    if exc.status >= 500:
        log.error("request failed: %s", exc.message)
    headers = getattr(exc, "headers", None)  # e.g. Retry-After of a rate limit
    return error_response(request, exc.status, exc.code, exc.message, exc.details, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = validation_details(list(exc.errors()))
    kind = request.headers.get("content-type", "")
    if details and details[0]["field"] == "body" and "json" not in kind.lower():
        # A body sent as a form (``curl -d``) or without a type is never read as JSON.
        shown = kind.split(";")[0].strip() or "none"
        details[0]["message"] = (
            f"send the body as JSON with Content-Type: application/json (it was {shown})"
        )
    first = details[0] if details else {"field": "", "message": "invalid request"}
    where = f" at '{first['field']}'" if first["field"] else ""
    more = f" (and {len(details) - 1} more: see details)" if len(details) > 1 else ""
    message = f"invalid request{where}: {first['message']}{more}"
    return error_response(request, 422, "validation_error", message, details)


def _page_without_slash(request: Request) -> str | None:
    """For a page (not the API under ``/v1/``) asked for with a trailing slash, the URL
    without it when that routes: the inspector's ``/ui/`` still opens."""
    path = request.url.path
    if request.method not in ("GET", "HEAD") or not path.endswith("/") or path == "/":
        return None
    if path.startswith("/v1/"):
        return None
    scope = {**request.scope, "path": path.rstrip("/") or "/"}
    for route in request.app.router.routes:
        if route.matches(scope)[0] == Match.FULL:
            query = request.url.query
            return scope["path"] + (f"?{query}" if query else "")
    return None


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    if exc.status_code == 404 and message == "Not Found":
        page = _page_without_slash(request)
        if page is not None:
            return RedirectResponse(page, status_code=307)
        message = f"no route for {request.method} {request.url.path}"
    kind = request.headers.get("content-type", "").lower()
    if exc.status_code == 400 and message == _UNPARSED and ("json" in kind or not kind):
        # FastAPI's answer to a JSON body its parser gives up on other than by a syntax error
        # (one nested thousands of levels deep, bytes that are not UTF-8): a body that is not
        # valid JSON, as a syntax error is reported.
        message = "the body could not be parsed as JSON (not UTF-8 text, or nested too deeply)"
        details = [{"field": "body", "type": "json_invalid", "message": message}]
        message = f"invalid request at 'body': {message}"
        return error_response(request, 422, "validation_error", message, details)
    return error_response(request, exc.status_code, code, message, headers=exc.headers)


_UNPARSED = "There was an error parsing the body"


async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
    # Starlette answers this one outside the request middleware: name the request here.
    request_id = request_id_of(request)
    tenant = request.scope.get("state", {}).get("tenant")
    fields = {k: v for k, v in (("request_id", request_id), ("tenant", tenant)) if v}
    log.exception("unhandled error", exc_info=exc, extra=fields)
    headers = {"x-request-id": request_id} if request_id else None
    return error_response(request, 500, "internal_error", "internal server error", headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(CairnError, _cairn_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unhandled)
