"""API-key authentication. The tenant always comes from the key, never from a header."""

from __future__ import annotations

from fastapi import Request

from cairn.core.tenants import DEFAULT_TENANT
from cairn.errors import InvalidApiKey, MissingApiKey, TenantMismatch
from cairn.services import Services


def services_of(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]


def api_key_of(request: Request) -> str | None:
    """The key from ``X-API-Key`` or ``Authorization: Bearer``, if any."""
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    auth = request.headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return None


def tenant_for_key(services: Services, key: str | None) -> str:
    """Resolve a tenant; raises MissingApiKey / InvalidApiKey."""
    if key is None:
        if services.auth_required():
            raise MissingApiKey(
                "an API key is required: send 'X-API-Key: <key>' or 'Authorization: Bearer <key>'"
            )
        return DEFAULT_TENANT
    tenant = services.store.keys.tenant_for(key)
    if tenant is None:
        raise InvalidApiKey("the API key is unknown or revoked")
    return tenant


def require_tenant(request: Request) -> str:
    """FastAPI dependency: the caller's tenant."""
    tenant = tenant_for_key(services_of(request), api_key_of(request))
    claimed = request.headers.get("x-tenant-id")
    if claimed is not None and claimed != tenant:
        raise TenantMismatch("X-Tenant-ID does not match the tenant of the API key")
    request.scope.setdefault("state", {})["tenant"] = tenant
    return tenant
