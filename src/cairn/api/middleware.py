"""ASGI middleware: request ids, the body-size limit, request logs, Prometheus metrics,
(when configured) trace spans, and the count of requests in flight that background work
steps aside for.

Written as plain ASGI callables (not ``BaseHTTPMiddleware``) to keep the per-request cost low.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
import time
import uuid
from typing import Any
from urllib.parse import unquote_to_bytes

import numpy as np
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.api.allow import RouteTable
from cairn.api.error_page import is_page, send_page
from cairn.api.errors import is_openai_path, openai_error
from cairn.core.text import MAX_JSON_DEPTH, NUL, has_lone_surrogate, nul_path
from cairn.engine.yielding import RequestGate
from cairn.logs import REQUEST_STATE
from cairn.metrics import Metrics

log = logging.getLogger("cairn.access")

_SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,128}$")


class RequestContextMiddleware:
    """Gives each request an id (``X-Request-ID``), logs one line for it, records metrics, and
    counts it in flight in ``gate`` while it runs, so background compiles and the embedding
    pass step aside for it (:mod:`cairn.engine.yielding`)."""

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        json_logs: bool = False,
        gate: RequestGate | None = None,
        routes: RouteTable | None = None,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.json_logs = json_logs
        self.gate = gate or RequestGate()
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if incoming and _SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        request_state = REQUEST_STATE.set(scope["state"])  # (JSON log lines name the request)
        status_holder = [500]
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder[0] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        method = scope.get("method", "")
        with self.metrics.tracing.request_span(method) as span, self.gate.request():
            try:
                await self.app(scope, receive, send_wrapper)
            finally:
                elapsed = time.perf_counter() - started
                status = status_holder[0]
                route_path = self._route_path(scope, method, status)
                self.metrics.requests.labels(method, route_path, str(status)).inc()
                self.metrics.latency.labels(method, route_path).observe(elapsed)
                tenant = scope.get("state", {}).get("tenant", "-")
                path = scope.get("path", "")
                try:
                    self.metrics.tracing.finish_request(
                        span, method, route_path, path, status, tenant
                    )
                    self._log(request_id, tenant, method, path, route_path, status, elapsed)
                finally:
                    # A thread started during the request may hold this context for life: it
                    # names no request once the request is over.
                    scope["state"]["request_finished"] = True
                    REQUEST_STATE.reset(request_state)

    def _route_path(self, scope: Scope, method: str, status: int) -> str:
        """The template of the route the request reached; for one answered before the router
        (refused for its size, its body or a missing key) the template it was for, so metrics
        and logs name the endpoint; ``<unmatched>`` when the path has none."""
        route = getattr(scope.get("route"), "path", None)
        if route:
            return str(route)
        if self.routes is not None and status != 404:
            return self.routes.template_for(method, scope.get("path", "")) or "<unmatched>"
        return "<unmatched>"

    def _log(
        self,
        request_id: str,
        tenant: str,
        method: str,
        path: str,
        route: str,
        status: int,
        elapsed: float,
    ) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        ms = round(elapsed * 1000, 2)
        if self.json_logs:
            # The fields travel as the record's extras; cairn.logs.JsonFormatter writes them.
            log.info(
                "%s %s -> %d",
                method,
                path,
                status,
                extra={
                    "request_id": request_id,
                    "tenant": tenant,
                    "method": method,
                    "path": path,
                    "route": route,
                    "status": status,
                    "duration_ms": ms,
                },
            )
        else:
            log.info(
                "%s %s %s %s -> %d %.2fms tenant=%s",
                request_id,
                method,
                path,
                route,
                status,
                ms,
                tenant,
            )


# An import takes records of what the server stored: a memory of a message as long as a body
# may be, with its summary and metadata, is longer than that body was.
IMPORT_PATH = re.compile(r"/v1/subjects/[^/]+/import$")  # (behind any root path)
IMPORT_BODY_FACTOR = 4


class BodyLimitMiddleware:
    """Refuses request bodies over ``max_bytes`` (an import's: ``IMPORT_BODY_FACTOR`` times
    that) with 413, declared or streamed."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes
        if IMPORT_PATH.search(scope.get("path", "")):
            limit *= IMPORT_BODY_FACTOR
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _send_too_large(scope, send, limit)
            return
        seen = 0
        too_large = False
        replaced = False

        async def limited_receive() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # The framework may turn the aborted read into its own error response; whatever
            # it answers, an over-limit body gets our 413.
            nonlocal replaced
            if too_large:
                if not replaced:
                    replaced = True
                    await _send_too_large(scope, send, limit)
                return
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _BodyTooLarge:
            if not replaced:
                await _send_too_large(scope, send, limit)


class RejectNulMiddleware:
    """Refuses a NUL character in the path or query string with 422 ``validation_error``:
    neither backend can store or compare it, so it can only ever be a bad request. Refuses
    percent-encoded bytes that are not UTF-8 text (``%FF``, a surrogate's ``%ED%A0%80``) with
    422 ``invalid_text``: the framework would decode them to U+FFFD, so ``DELETE
    /v1/subjects/%FF`` would act on the subject named "\ufffd"."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # (Without the raw path, the decoded one: a lone surrogate in it fails as text.)
            raw = scope.get("raw_path") or scope.get("path", "").encode("utf-8", "surrogatepass")
            query = scope.get("query_string", b"")
            fields = _nul_fields(raw, query)
            if fields:
                details = [
                    {
                        "field": f,
                        "message": "must not contain a NUL character",
                        "type": "nul_character",
                    }
                    for f in fields
                ]
                await _send_error(
                    scope,
                    send,
                    422,
                    "validation_error",
                    f"invalid request at '{fields[0]}': must not contain a NUL character",
                    details,
                )
                return
            if not (_utf8_text(raw) and _utf8_text(query)):
                message = "the path or query string is not UTF-8 text once percent-decoded"
                await _send_error(scope, send, 422, "invalid_text", message, None)
                return
            # A compressed body would be parsed as it is (a gzip body read as bad JSON).
            encoding = (_header(scope, b"content-encoding") or "identity").strip().lower()
            if encoding != "identity":
                message = (
                    f"request bodies are read as sent: Content-Encoding {encoding!r} "
                    "is not supported"
                )
                await _send_error(scope, send, 415, "unsupported_media_type", message, None)
                return
        await self.app(scope, receive, send)


_NULS = (b"%00", NUL.encode())


def _nul_fields(raw_path: bytes, query: bytes) -> list[str]:
    """Where a request's NUL is, as the API names fields: ``path``, and ``query.NAME`` for
    each query parameter whose name or value holds one; empty when there is none."""
    fields = ["path"] if any(nul in raw_path for nul in _NULS) else []
    if any(nul in query for nul in _NULS):
        for pair in query.split(b"&"):
            if any(nul in pair for nul in _NULS):
                name = unquote_to_bytes(pair.split(b"=", 1)[0].replace(b"+", b" "))
                text = name.replace(NUL.encode(), b"").decode("utf-8", "replace")
                fields.append(f"query.{text}")
    return fields


def _utf8_text(part: bytes) -> bool:
    """Whether a raw path or query string percent-decodes to UTF-8 text (ASCII without an
    escape, nearly every request, is decided without decoding)."""
    if b"%" not in part and part.isascii():
        return True
    try:
        unquote_to_bytes(part).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# What can make a parsed body hold text or numbers no backend stores: a JSON escape of a
# UTF-16 surrogate or of NUL, raw UTF-8 bytes of a surrogate (``\xed\xa0\x80``: invalid UTF-8,
# yet Python's JSON parser decodes them into a lone surrogate), the non-JSON constants
# ``NaN``/``Infinity`` that the parser accepts, and numbers too large for a double, which it
# reads as infinity. Bodies without one skip all checks.
_SUSPECT_ESCAPE = re.compile(
    rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)|\xed[\xa0-\xbf]|NaN|Infinity"
    # A number that may not fit a double: an exponent of three digits or more, or an integer
    # part of 200 digits or more (with at most a two-digit exponent, fewer cannot pass 1e308).
    # Not inside a word: hex ids such as ``…-5e123…`` do not make a body parsed twice.
    rb"|(?<![\w.-])-?[0-9]+(?:\.[0-9]*)?[eE][+]?0*[1-9][0-9]{2,}(?![\w.])"
    rb"|(?<![\w.-])-?[0-9]{200}"
)


# A body nested deeper than ``MAX_JSON_DEPTH`` is refused: stored JSON (an episode's payload,
# an item's value, metadata) deeper than that would be stored, then fail every read of it.
# A JSON string; one never closed runs to the end of the body (so every match succeeds and
# the scan is linear: a failing match would be retried from every later quote).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
# Objects' braces as brackets: in JSON they nest alike.
_AS_BRACKETS = bytes.maketrans(b"{}", b"[]")


def too_deep(body: bytes) -> bool:
    """Whether JSON ``body`` nests arrays and objects more than ``MAX_JSON_DEPTH`` deep (a
    body with fewer brackets than that is decided by counting them). Its strings removed and
    only brackets kept, the depth is the largest running sum of +1 per opening and -1 per
    closing bracket: linear in the body (some 0.3 ms for a 100-episode batch, a few ms a
    megabyte), as it runs before any route, for any caller."""
    if body.count(b"{") + body.count(b"[") <= MAX_JSON_DEPTH:
        return False
    brackets = _JSON_STRING.sub(b"", body).translate(_AS_BRACKETS, _NOT_BRACKETS)
    if len(brackets) <= MAX_JSON_DEPTH:
        return False
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where(codes == ord("["), 1, -1)
    return int(np.cumsum(steps).max()) > MAX_JSON_DEPTH


class _NonFiniteNumber(ValueError):
    kind = "non_finite_number"


class _NumberTooLong(_NonFiniteNumber):
    kind = "number_too_long"


def _refuse_constant(name: str) -> Any:
    raise _NonFiniteNumber(f"{name}, which is not a JSON number")


def _finite_float(literal: str) -> float:
    """A JSON number as Python's parser reads it, refused when it overflows a double (``1e400``
    would be stored as infinity, which no JSON reply or export can carry)."""
    value = float(literal)
    if math.isinf(value):
        shown = literal if len(literal) <= 40 else literal[:37] + "..."
        raise _NonFiniteNumber(f"{shown}, a number too large for a 64-bit float")
    return value


def _bounded_int(literal: str) -> int:
    """An integer as the parser reads it; one longer than Python reads
    (``sys.get_int_max_str_digits``, 4,300 digits by default; 0: no limit) made the parser give
    up, reported as a body that is not JSON."""
    digits, limit = len(literal.lstrip("-")), sys.get_int_max_str_digits()
    if limit and digits > limit:
        raise _NumberTooLong(f"an integer of {digits} digits (at most {limit})")
    return int(literal)


class RejectLoneSurrogateMiddleware:
    """Refuses a JSON body holding a lone surrogate (e.g. ``"\\ud800"``) with 422
    ``invalid_text`` — such text cannot be encoded as UTF-8, so no store, tokenizer or file
    can take it — and one holding a NUL character with 422 ``validation_error`` naming where
    (neither backend stores NUL in text). One regex over the raw body decides whether the body
    needs parsing at all, so ordinary requests pay almost nothing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        first: Message | None = None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                first = message
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        kind = (_header(scope, b"content-type") or "").lower()
        # (No type counts: some framework versions read such a body as JSON.)
        if ("json" in kind or not kind) and too_deep(body):
            text = f"the body is JSON nested more than {MAX_JSON_DEPTH} levels deep"
            detail = {"field": "body", "message": text, "type": "json_too_deep"}
            await _send_error(scope, send, 422, "validation_error", text, [detail])
            return
        if _SUSPECT_ESCAPE.search(body):
            try:
                parsed = json.loads(
                    body,
                    parse_constant=_refuse_constant,
                    parse_float=_finite_float,
                    parse_int=_bounded_int,
                )
            except _NonFiniteNumber as exc:
                text = f"the body contains {exc}"
                detail = {"field": "body", "message": text, "type": exc.kind}
                await _send_error(scope, send, 422, "validation_error", text, [detail])
                return
            except (ValueError, RecursionError):
                parsed = None  # not JSON: the route's own parsing reports it
            if has_lone_surrogate(parsed):
                text = "the body contains a lone UTF-16 surrogate (not valid text)"
                await _send_error(scope, send, 422, "invalid_text", text, None)
                return
            where = nul_path(parsed)
            if where is not None:
                field = where or "body"
                detail = {
                    "field": field,
                    "message": "must not contain a NUL character",
                    "type": "nul_character",
                }
                text = f"invalid request at '{field}': must not contain a NUL character"
                await _send_error(scope, send, 422, "validation_error", text, [detail])
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first or {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class _BodyTooLarge(Exception):
    pass


async def _send_too_large(scope: Scope, send: Send, limit: int) -> None:
    message = f"request body is larger than {limit} bytes"
    await _send_error(scope, send, 413, "payload_too_large", message, {"max_bytes": limit})


async def _send_error(
    scope: Scope, send: Send, status: int, code: str, message: str, details: Any
) -> None:
    """The API's error shape, sent from middleware (outside the framework's handlers); an
    inspector page (``/ui``) gets an error page instead, as its routes' errors do."""
    if is_page(scope.get("path", "")):
        await send_page(send, status, code, message)
        return
    error: dict[str, Any] = {"code": code, "message": message, "details": details}
    if is_openai_path(scope.get("path", "")):
        error = openai_error(status, code, message, details)
    error["request_id"] = scope.get("state", {}).get("request_id")
    body = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


__all__: list[Any] = [
    "BodyLimitMiddleware",
    "RejectLoneSurrogateMiddleware",
    "RejectNulMiddleware",
    "RequestContextMiddleware",
]
