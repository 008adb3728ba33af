"""Who may reach the server at all: loopback-only open mode, the Host check, security headers.

Open mode (no API key anywhere) is for a developer's own machine, so it must not depend on how
the server was bound: a network peer that is not loopback is refused whatever the bind, and the
``Host`` header must name the loopback host, so a DNS-rebinding page (``evil.example`` resolving
to 127.0.0.1) cannot drive a local server from the developer's browser. Once keys exist,
``CAIRN_ALLOWED_HOSTS`` (when set) lists the host names the server answers to.

These rules apply to network peers only: in-process transports (the test client, the SDK's
in-process mode) name a host instead of a socket address and have no network to defend.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cairn.api.errors import is_openai_path, openai_error
from cairn.errors import MissingApiKey
from cairn.http.auth import MISSING_KEY_MESSAGE, auth_required
from cairn.services import Services

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

# The inspector renders on the server and loads one same-origin script; inline style
# attributes are used for bars and spacing (they cannot run code).
UI_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
UI_HEADERS = [
    (b"content-security-policy", UI_CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
]
ALL_HEADERS = [(b"x-content-type-options", b"nosniff")]


def _ip(value: object) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    if not isinstance(value, str):
        return None
    try:
        return ipaddress.ip_address(value.split("%", 1)[0])
    except ValueError:
        return None


def network_peer(scope: Scope) -> bool:
    """Whether the request came over a real socket: the server end is an IP address."""
    server = scope.get("server")
    return server is not None and _ip(server[0]) is not None


def peer_is_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    address = _ip(client[0]) if client else None
    if address is None:
        return True  # a Unix socket or an in-process call: local by construction
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def host_name(header: str | None) -> str:
    """The host part of a ``Host`` header, lower-case, without port or trailing dot."""
    value = (header or "").strip().lower()
    if value.startswith("["):
        value = value[1 : value.find("]")] if "]" in value else value[1:]
    elif value.count(":") == 1:
        value = value.split(":", 1)[0]
    return value.rstrip(".")


def is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    address = _ip(name)
    return address is not None and address.is_loopback


def host_allowed(name: str, allowed: list[str]) -> bool:
    """``allowed`` entries: an exact name, ``.example.com`` for it and its subdomains, ``*``."""
    for entry in allowed:
        entry = entry.strip().lower().rstrip(".")
        if entry == "*" or entry == name:
            return True
        if entry.startswith(".") and (name == entry[1:] or name.endswith(entry)):
            return True
    return False


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


class AccessMiddleware:
    """Applies the open-mode peer rule and the Host rule; adds security headers."""

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = None
        if network_peer(scope):
            refusal = self._refusal(scope, await auth_required(self.services))
        if refusal is None and self._no_key_for_a_body(scope):
            refusal = (401, MissingApiKey.code, MISSING_KEY_MESSAGE)
        if refusal is not None:
            await _send_refusal(scope, send, *refusal)
            return
        extra = ALL_HEADERS + (UI_HEADERS if scope.get("path", "").startswith("/ui") else [])

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + extra
            await send(message)

        await self.app(scope, receive, with_headers)

    def _no_key_for_a_body(self, scope: Scope) -> bool:
        """A request with a body to the API, without any key, to a server known to need one:
        refused before the body is read, so checks of the body (NUL, surrogates, numbers,
        encoding) never answer a caller who could not send one (401, as the route would)."""
        if scope["type"] != "http" or scope.get("method") not in _BODY_METHODS:
            return False
        if not str(scope.get("path", "")).startswith("/v1/"):
            return False
        if self.services.auth_required_known() is not True:
            return False
        for name, value in scope.get("headers", ()):
            if name == b"x-api-key" and value.strip():
                return False
            if name == b"authorization" and value.strip():
                return False  # (any scheme: the route tells a bad one apart)
        return True

    def _refusal(self, scope: Scope, keyed: bool) -> tuple[int, str, str] | None:
        """Why a network peer is refused (status, code, message), if it is; ``keyed``: the
        server needs keys (``auth_required``)."""
        name = host_name(_header(scope, b"host"))
        if not keyed:
            if not peer_is_loopback(scope):
                return (
                    403,
                    "loopback_only",
                    "this server has no API key (open mode) and answers only loopback clients; "
                    "create a key with 'cairn keys create --tenant NAME' to serve others",
                )
            if not is_loopback_name(name):
                return (
                    400,
                    "host_not_allowed",
                    "open mode answers only to a loopback host name (localhost, 127.0.0.1, "
                    "[::1]); this Host header names another host",
                )
            return None
        allowed = self.services.settings.allowed_hosts
        # A loopback client naming a loopback host is this machine's own (a container's or
        # systemd's health probe): no other site's page can send that Host.
        local = peer_is_loopback(scope) and is_loopback_name(name)
        if allowed and not local and not host_allowed(name, allowed):
            return (400, "host_not_allowed", "the Host header is not in CAIRN_ALLOWED_HOSTS")
        return None


async def _send_refusal(scope: Scope, send: Send, status: int, code: str, message: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    error: dict[str, Any] = {"code": code, "message": message, "details": None}
    if is_openai_path(str(scope.get("path", ""))):
        error = openai_error(status, code, message)
    error["request_id"] = scope.get("state", {}).get("request_id")
    body = json.dumps({"error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *ALL_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
