"""``OPTIONS`` and ``HEAD`` for every path, and the ``Allow`` header of a 405: the router alone
knows only the first route matching a path and declares no ``HEAD``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class RouteTable:
    """The app's endpoints by path template, built on first use (the routes are all added by
    then): which methods a path has, and which template a request was for."""

    def __init__(self, routes: Callable[[], list[Any]]) -> None:
        self.routes = routes
        self._table: list[tuple[re.Pattern[str], str, frozenset[str]]] | None = None

    def _entries(self) -> list[tuple[re.Pattern[str], str, frozenset[str]]]:
        if self._table is None:
            merged: dict[str, set[str]] = {}
            for method, route_path in _walk(self.routes()):
                merged.setdefault(route_path, set()).add(method)
            self._table = [(compile_path(p)[0], p, frozenset(m)) for p, m in merged.items()]
        return self._table

    def methods_for(self, path: str) -> set[str]:
        found: set[str] = set()
        for regex, _template, methods in self._entries():
            if regex.match(path):
                found |= methods
        if "GET" in found:
            found.add("HEAD")
        return found | {"OPTIONS"} if found else found

    def template_for(self, method: str, path: str) -> str | None:
        """The path template of the endpoint ``method path`` is for (None: none), for a
        request answered before the router saw it (a body refused, a key missing); for a
        method the path does not have (``OPTIONS``, a 405), the path's template."""
        method = "GET" if method == "HEAD" else method
        found = None
        for regex, template, methods in self._entries():
            if regex.match(path):
                if method in methods:
                    return template
                found = found or template
        return found


class AllowMiddleware:
    """``OPTIONS`` answers 204 with every method the path has, and a 405's ``Allow`` lists them
    all: the router alone reports only the methods of the first route matching the path (so
    ``OPTIONS`` on a slate file said only ``GET``). ``HEAD`` is answered as ``GET`` without
    the body wherever ``GET`` is (the routes declare only ``GET``)."""

    def __init__(self, app: ASGIApp, table: RouteTable) -> None:
        self.app = app
        self.methods_for = table.methods_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        # The route table is matched only for OPTIONS and a 405, never on the hot path.
        if scope.get("method") == "OPTIONS":
            methods = self.methods_for(path)
            if methods:
                allow = ", ".join(sorted(methods)).encode()
                headers = [(b"allow", allow), (b"content-length", b"0")]
                await send({"type": "http.response.start", "status": 204, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return

        if scope.get("method") == "HEAD" and "GET" in self.methods_for(path):
            # In place, so what the router notes in the scope (the route: metrics, logs) is
            # seen by the middleware around this one; the method is HEAD again afterwards.
            scope["method"] = "GET"
            try:
                await self.app(scope, receive, _without_body(scope, send))
            finally:
                scope["method"] = "HEAD"
            return

        async def fix_allow(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                methods = self.methods_for(path)
                if methods:
                    allow = ", ".join(sorted(methods)).encode()
                    kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
                    message["headers"] = [*kept, (b"allow", allow)]
            await send(message)

        await self.app(scope, receive, fix_allow)


def _without_body(scope: Scope, send: Send) -> Send:
    """``send`` for a ``HEAD`` answered as its ``GET``: the same status and headers (its
    ``content-length`` too), no body. The scope's method is ``HEAD`` again from the response's
    start (the route has been found by then): the server reads it to know that no body follows
    the ``content-length`` (as ``GET``, it logged every answer as shorter than announced)."""

    async def headers_only(message: Message) -> None:
        if message["type"] == "http.response.start":
            scope["method"] = "HEAD"
        elif message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return headers_only


def _walk(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(method, full path) of every endpoint, through included routers."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            ctx = getattr(route, "include_context", None)
            yield from _walk(inner.routes, prefix + getattr(ctx, "prefix", ""))
        elif getattr(route, "methods", None) and hasattr(route, "path"):
            for method in route.methods:
                yield method, prefix + route.path


__all__ = ["AllowMiddleware", "RouteTable"]
