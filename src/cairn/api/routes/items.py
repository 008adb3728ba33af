"""Items: a key-value store of JSON objects per scope (``/v1/items``), searchable by text.

``PUT /v1/items`` stores one item, ``GET``/``DELETE /v1/items`` read and remove one (the scope,
namespace and key in the query), ``POST /v1/items/search`` ranks the items under a namespace
prefix, ``POST /v1/items/namespaces`` lists namespaces. See ``cairn.engine.items``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from cairn.api.errors import validate_input
from cairn.core.scope import MAX_ID_LENGTH, NewScope, Scope
from cairn.engine.items import (
    MAX_DEPTH,
    MAX_DIMS,
    MAX_KEY,
    MAX_LABEL,
    MAX_VECTORS,
    FoundItem,
    delete_item,
    get_item,
    list_namespaces,
    plan_item,
    put_item,
    search_items,
)
from cairn.errors import NotFound
from cairn.http.auth import require_tenant, services_of
from cairn.store.items import StoredItem

router = APIRouter(tags=["items"])

# Namespaces are checked by the engine, so every problem with one is ``invalid_namespace``.
NAMESPACE_RULES = (
    f"1 to {MAX_DEPTH} labels of 1 to {MAX_LABEL} characters without a '.' "
    "(at most 512 characters in all)"
)
# Lengths of keys and vectors, and the TTL, are checked by ``cairn.engine.items`` with the
# documented codes (``invalid_key``, ``invalid_vectors``, ``invalid_ttl``), not here.
Vector = list[float]


class ItemPut(BaseModel):
    """One item to store (replacing the one at the same namespace and key)."""

    model_config = ConfigDict(extra="forbid", strict=True)  # no bool for a number

    scope: NewScope
    namespace: list[str] = Field(description=f'e.g. ["users", "ada"]: {NAMESPACE_RULES}.')
    key: str = Field(description=f"At most {MAX_KEY} characters.")
    value: dict[str, Any] = Field(description="Any JSON object.")
    text: list[Annotated[str, Field(max_length=100_000)]] | None = Field(
        None,
        max_length=256,
        description="The strings to index for search (default: every string in value; "
        "[]: not searchable by text).",
    )
    vectors: list[Vector] | None = Field(
        None,
        description=f"The caller's own embeddings of the item's text (at most {MAX_VECTORS}, "
        f"each of 1 to {MAX_DIMS} numbers; searched with query_vector); without them the "
        "server's embedder, if any, embeds the text.",
    )
    ttl_seconds: float | None = Field(
        None,
        description="Delete the item this long after its last write (or read with refresh_ttl);"
        " above 0, at most ten years.",
    )


class ItemPublic(BaseModel):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    score: float | None = Field(None, description="Search only: larger is better.")

    @classmethod
    def of(cls, item: StoredItem, score: float | None = None) -> ItemPublic:
        return cls.model_construct(
            namespace=list(item.namespace),
            key=item.key,
            value=item.value,
            created_at=item.created_at,
            updated_at=item.updated_at,
            expires_at=item.expires_at,
            score=score,
        )


class ItemDeletedPublic(BaseModel):
    deleted: bool = Field(description="Whether an item was there.")


class ItemSearch(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no bool for a number

    scope: Scope
    namespace_prefix: list[str] = Field(
        default_factory=list, description="Leading labels of the namespaces searched."
    )
    filter: dict[str, Any] | None = Field(
        None, description="Field conditions: a value, or {$eq|$ne|$gt|$gte|$lt|$lte: value}."
    )
    query: str | None = Field(None, max_length=4000)
    query_vector: Vector | None = None
    limit: int = Field(10, ge=0, le=10_000)
    offset: int = Field(0, ge=0, le=1_000_000)
    refresh_ttl: bool = False


class ItemSearchPublic(BaseModel):
    items: list[ItemPublic]


class NamespaceQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no bool for a number

    scope: Scope
    prefix: list[str] | None = Field(None, description="Leading labels; '*' matches any one.")
    suffix: list[str] | None = Field(None, description="Trailing labels; '*' matches any one.")
    max_depth: int | None = Field(None, ge=0, le=MAX_DEPTH)
    limit: int = Field(100, ge=0, le=10_000)
    offset: int = Field(0, ge=0, le=1_000_000)


class NamespaceListPublic(BaseModel):
    namespaces: list[list[str]]


def _scope(runtime_id: str, user_id: str, agent_id: str) -> Scope:
    return validate_input(
        Scope, {"runtime_id": runtime_id, "user_id": user_id, "agent_id": agent_id}
    )


ScopeRuntime = Annotated[str, Query(min_length=1, max_length=MAX_ID_LENGTH)]
ScopeId = Annotated[str, Query(max_length=MAX_ID_LENGTH)]
NamespaceParam = Annotated[
    list[str], Query(description=f"One per label, in order: {NAMESPACE_RULES}.")
]
KeyParam = Annotated[str, Query(max_length=MAX_KEY)]


@router.put("/v1/items", response_model=ItemPublic)
def put(body: ItemPut, request: Request, tenant: str = Depends(require_tenant)) -> ItemPublic:
    """Store the item; a second put of the same namespace and key replaces its value (its
    ``created_at`` stays)."""
    services = services_of(request)
    plan = plan_item(
        body.namespace,
        body.key,
        body.value,
        index=body.text,
        vectors=body.vectors,
        ttl_seconds=body.ttl_seconds,
        embedder=services.embedder,
    )
    return ItemPublic.of(put_item(services.store, tenant, body.scope, plan))


@router.get("/v1/items", response_model=ItemPublic)
def get(
    request: Request,
    runtime_id: ScopeRuntime,
    namespace: NamespaceParam,
    key: KeyParam,
    user_id: ScopeId = "",
    agent_id: ScopeId = "",
    refresh_ttl: bool = False,
    tenant: str = Depends(require_tenant),
) -> ItemPublic:
    """The item (404 ``item_not_found`` when there is none, or it expired)."""
    scope = _scope(runtime_id, user_id, agent_id)
    found = get_item(services_of(request).store, tenant, scope, namespace, key, refresh_ttl)
    if found is None:
        raise NotFound("no item at this namespace and key", code="item_not_found")
    return ItemPublic.of(found)


@router.delete("/v1/items", response_model=ItemDeletedPublic)
def delete(
    request: Request,
    runtime_id: ScopeRuntime,
    namespace: NamespaceParam,
    key: KeyParam,
    user_id: ScopeId = "",
    agent_id: ScopeId = "",
    tenant: str = Depends(require_tenant),
) -> ItemDeletedPublic:
    """Remove the item (its text and vectors go with it); deleting nothing is not an error."""
    scope = _scope(runtime_id, user_id, agent_id)
    removed = delete_item(services_of(request).store, tenant, scope, namespace, key)
    return ItemDeletedPublic(deleted=removed)


@router.post("/v1/items/search", response_model=ItemSearchPublic)
def search(
    body: ItemSearch, request: Request, tenant: str = Depends(require_tenant)
) -> ItemSearchPublic:
    """The items under ``namespace_prefix`` that pass ``filter``, best first for a query
    (see the API docs for the ranking)."""
    services = services_of(request)
    found: list[FoundItem] = search_items(
        services.store,
        tenant,
        body.scope,
        body.namespace_prefix,
        filter=body.filter,
        query=body.query,
        query_vector=body.query_vector,
        limit=body.limit,
        offset=body.offset,
        refresh=body.refresh_ttl,
        embedder=services.embedder,
    )
    return ItemSearchPublic.model_construct(items=[ItemPublic.of(f.item, f.score) for f in found])


@router.post("/v1/items/namespaces", response_model=NamespaceListPublic)
def namespaces(
    body: NamespaceQuery, request: Request, tenant: str = Depends(require_tenant)
) -> NamespaceListPublic:
    """The namespaces that hold items, sorted, filtered by prefix/suffix, cut to max_depth."""
    found = list_namespaces(
        services_of(request).store,
        tenant,
        body.scope,
        prefix=body.prefix,
        suffix=body.suffix,
        max_depth=body.max_depth,
        limit=body.limit,
        offset=body.offset,
    )
    return NamespaceListPublic(namespaces=[list(ns) for ns in found])


__all__ = ["router"]
