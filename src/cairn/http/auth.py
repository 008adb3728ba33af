"""API-key authentication. The tenant always comes from the key, never from a header."""

from __future__ import annotations

import ipaddress
import time
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from cairn.core.tenants import DEFAULT_TENANT
from cairn.errors import InvalidApiKey, MissingApiKey, RateLimited, TenantMismatch
from cairn.http.headers import header_text
from cairn.services import Services
from cairn.store.keys import hash_key


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


MISSING_KEY_MESSAGE = (
    "an API key is required: send 'X-API-Key: <key>' or 'Authorization: Bearer <key>'"
)


def api_key_of(request: Request) -> str | None:
    """The key from ``X-API-Key`` or ``Authorization: Bearer``, if any. Two different keys
    (the headers repeated, or both sent) are refused: which one a request acts as must not
    depend on the order of its headers."""
    keys = {k.strip() for k in request.headers.getlist("x-api-key") if k.strip()}
    for auth in request.headers.getlist("authorization"):
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            keys.add(value.strip())
    if len(keys) > 1:
        raise InvalidApiKey("the request carries two different API keys")
    return keys.pop() if keys else None


def _claimed_tenant(request: Request) -> str | None:
    """``X-Tenant-ID``; sent twice with different values, a mismatch whatever the key."""
    claims = {header_text(v) for v in request.headers.getlist("x-tenant-id")}
    if len(claims) > 1:
        raise TenantMismatch("X-Tenant-ID is sent more than once with different values")
    return claims.pop() if claims else None


def tenant_for_key(
    services: Services,
    key: str | None,
    server_host: str | None = None,
    required: bool | None = None,
) -> str:
    """Resolve a tenant; raises MissingApiKey / InvalidApiKey.

    Without any key the server is open, but only to a server bound to loopback: however the
    app was started (``cairn serve`` checks this too), a non-loopback bind still needs a key.
    ``required``: ``services.auth_required()`` if the caller already has it (else asked here).
    """
    return _resolve(services, key, server_host, required)[0]


def _resolve(
    services: Services, key: str | None, server_host: str | None, required: bool | None
) -> tuple[str, bool]:
    """``tenant_for_key``'s tenant, and whether a stored key named it (False in open mode)."""
    tenant = services.store.keys.tenant_for(key) if key is not None else None
    if tenant is not None:
        return tenant, True
    if required is None:
        required = services.auth_required()
    if required or (server_host and _bound_beyond_loopback(server_host)):
        if key is not None:
            raise InvalidApiKey("the API key is unknown or revoked")
        raise MissingApiKey(MISSING_KEY_MESSAGE)
    # Open mode (no key exists, loopback) takes any key as no key: OpenAI clients must send
    # one, and it opens nothing a request without one could not reach.
    return DEFAULT_TENANT, False


async def require_tenant(request: Request) -> str:
    """FastAPI dependency: the caller's tenant.

    The database work (the key's lookup, its rate count, the open-mode check once a second)
    runs on a worker thread, never on the event loop: a lookup may wait for a pooled
    connection and a rate count for SQLite's write lock (held by a compile step), and either
    would stall every request of the process, ``/healthz`` included. A request without a key
    to a server whose mode is known (open, or keyed: refused) stays on the loop.
    """
    services = services_of(request)
    key = api_key_of(request)
    server = request.scope.get("server")
    host = server[0] if server else None
    claimed = _claimed_tenant(request)
    state = request.scope.setdefault("state", {})
    known = services.auth_required_known()
    if key is None and known is not None:  # no query, no rate count: see above
        return authenticate(services, None, host, claimed, state, known)
    return await run_in_threadpool(authenticate, services, key, host, claimed, state)


def authenticate(
    services: Services,
    key: str | None,
    host: str | None,
    claimed: str | None,
    state: dict[str, Any],
    required: bool | None = None,
) -> str:
    """The tenant of a request with API key ``key`` (None: none sent) on a server bound to
    ``host``, checked against the ``X-Tenant-ID`` it ``claimed``, recorded in the request's
    ``state`` (logs and traces name it, a refusal by the rate limit included) and counted
    against the key's rate limit; raises the errors of ``tenant_for_key``,
    ``TenantMismatch`` and ``RateLimited``. May query the database (``required``: whether
    keys are required, if known): call it from a worker thread."""
    tenant, stored = _resolve(services, key, host, required)
    if claimed is not None and claimed != tenant:
        raise TenantMismatch("X-Tenant-ID does not match the tenant of the API key")
    state["tenant"] = tenant
    _count_request(services, tenant, key if stored else None)  # open mode is not limited
    return tenant


async def auth_required(services: Services) -> bool:
    """``Services.auth_required`` for the event loop: when the answer needs a query, it runs
    on a worker thread."""
    known = services.auth_required_known()
    if known is None:
        known = await run_in_threadpool(services.auth_required)
    return known


# The rate limit's clock (minute windows of Unix time); tests pin it.
clock = time.time


def _count_request(services: Services, tenant: str, key: str | None) -> None:
    """Apply the tenant's per-key, per-minute limit (off unless configured). The counter is
    in the database, so all server processes share it. Open mode (no key) is not limited."""
    if key is None:
        return
    limit = services.settings.rate_limit_for(tenant)
    if not limit:
        return
    now = clock()
    count = services.store.rates.hit(hash_key(key)[:64], int(now // 60))
    if count > limit:
        retry_after = max(1, 60 - int(now % 60))
        raise RateLimited(
            f"this API key is over its limit of {limit} requests per minute; "
            f"retry in {retry_after} s",
            retry_after=retry_after,
            limit=limit,
        )


def _bound_beyond_loopback(host: str) -> bool:
    """Whether the server socket listens on a non-loopback IP (e.g. 0.0.0.0). In-process
    transports name a host instead of an address and are not network listeners."""
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
