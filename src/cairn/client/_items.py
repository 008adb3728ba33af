"""Items: ``client.items`` (a key-value store of JSON objects per scope, searchable by text)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from cairn.client._base import Call, clean_params
from cairn.client._errors import NotFoundError
from cairn.client._feature_models import ScopeLike, scope_of
from cairn.client._models import Response

if TYPE_CHECKING:
    from cairn.client._client import AsyncCairn, Cairn


class Item(Response):
    """A stored item; ``score`` is set by ``search`` with a query (larger is better)."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    score: float | None = None


class ItemSearchResult(Response):
    items: list[Item]


class ItemDeleted(Response):
    deleted: bool


class NamespaceList(Response):
    namespaces: list[list[str]]


def _scope(scope: ScopeLike) -> dict[str, str]:
    return scope_of(scope).model_dump()


def _address(scope: ScopeLike, namespace: Sequence[str], key: str) -> dict[str, Any]:
    return {**_scope(scope), "namespace": list(namespace), "key": key}


def put_call(
    scope: ScopeLike,
    namespace: Sequence[str],
    key: str,
    value: dict[str, Any],
    text: Sequence[str] | None,
    vectors: Sequence[Sequence[float]] | None,
    ttl_seconds: float | None,
) -> Call[Item]:
    body: dict[str, Any] = {
        "scope": _scope(scope),
        "namespace": list(namespace),
        "key": key,
        "value": value,
    }
    if text is not None:
        body["text"] = list(text)
    if vectors is not None:
        body["vectors"] = [list(v) for v in vectors]
    if ttl_seconds is not None:
        body["ttl_seconds"] = ttl_seconds
    return Call("PUT", "/v1/items", Item, json=body)


def get_call(scope: ScopeLike, namespace: Sequence[str], key: str, refresh: bool) -> Call[Item]:
    params = clean_params({**_address(scope, namespace, key), "refresh_ttl": refresh or None})
    # A refresh moves the expiry on: repeating it is harmless.
    return Call("GET", "/v1/items", Item, params=params)


def delete_call(scope: ScopeLike, namespace: Sequence[str], key: str) -> Call[ItemDeleted]:
    return Call("DELETE", "/v1/items", ItemDeleted, params=_address(scope, namespace, key))


def search_call(
    scope: ScopeLike,
    namespace_prefix: Sequence[str],
    filter: dict[str, Any] | None,
    query: str | None,
    query_vector: Sequence[float] | None,
    limit: int,
    offset: int,
    refresh_ttl: bool,
) -> Call[ItemSearchResult]:
    body: dict[str, Any] = {
        "scope": _scope(scope),
        "namespace_prefix": list(namespace_prefix),
        "limit": limit,
        "offset": offset,
        "refresh_ttl": refresh_ttl,
    }
    if filter:
        body["filter"] = filter
    if query is not None:
        body["query"] = query
    if query_vector is not None:
        body["query_vector"] = list(query_vector)
    return Call("POST", "/v1/items/search", ItemSearchResult, json=body, idempotent=True)


def namespaces_call(
    scope: ScopeLike,
    prefix: Sequence[str] | None,
    suffix: Sequence[str] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> Call[NamespaceList]:
    body: dict[str, Any] = {"scope": _scope(scope), "limit": limit, "offset": offset}
    if prefix is not None:
        body["prefix"] = list(prefix)
    if suffix is not None:
        body["suffix"] = list(suffix)
    if max_depth is not None:
        body["max_depth"] = max_depth
    return Call("POST", "/v1/items/namespaces", NamespaceList, json=body, idempotent=True)


def _missing(exc: NotFoundError) -> bool:
    return exc.code == "item_not_found"


class Items:
    """``client.items``: JSON objects under a namespace and key in a scope."""

    def __init__(self, client: Cairn) -> None:
        self._client = client

    def put(
        self,
        scope: ScopeLike,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        text: Sequence[str] | None = None,
        vectors: Sequence[Sequence[float]] | None = None,
        ttl_seconds: float | None = None,
    ) -> Item:
        """Store (or replace) the item. ``text``: the strings to index (default: every string
        in ``value``); ``vectors``: your own embeddings, searched with ``query_vector``."""
        return self._client._send(
            put_call(scope, namespace, key, value, text, vectors, ttl_seconds)
        )

    def get(
        self, scope: ScopeLike, namespace: Sequence[str], key: str, *, refresh_ttl: bool = False
    ) -> Item | None:
        """The item, or None."""
        try:
            return self._client._send(get_call(scope, namespace, key, refresh_ttl))
        except NotFoundError as exc:
            if _missing(exc):
                return None
            raise

    def delete(self, scope: ScopeLike, namespace: Sequence[str], key: str) -> bool:
        """Remove the item; True when there was one."""
        return self._client._send(delete_call(scope, namespace, key)).deleted

    def search(
        self,
        scope: ScopeLike,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: dict[str, Any] | None = None,
        query: str | None = None,
        query_vector: Sequence[float] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
    ) -> list[Item]:
        """Items under the prefix that pass ``filter``, best first for a query."""
        call = search_call(
            scope, namespace_prefix, filter, query, query_vector, limit, offset, refresh_ttl
        )
        return self._client._send(call).items

    def namespaces(
        self,
        scope: ScopeLike,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Namespaces holding items, sorted (``*`` in prefix/suffix matches any label)."""
        call = namespaces_call(scope, prefix, suffix, max_depth, limit, offset)
        return [tuple(ns) for ns in self._client._send(call).namespaces]


class AsyncItems:
    """``client.items`` of ``AsyncCairn``."""

    def __init__(self, client: AsyncCairn) -> None:
        self._client = client

    async def put(
        self,
        scope: ScopeLike,
        namespace: Sequence[str],
        key: str,
        value: dict[str, Any],
        *,
        text: Sequence[str] | None = None,
        vectors: Sequence[Sequence[float]] | None = None,
        ttl_seconds: float | None = None,
    ) -> Item:
        """Store (or replace) the item (see ``Cairn.items.put``)."""
        return await self._client._send(
            put_call(scope, namespace, key, value, text, vectors, ttl_seconds)
        )

    async def get(
        self, scope: ScopeLike, namespace: Sequence[str], key: str, *, refresh_ttl: bool = False
    ) -> Item | None:
        """The item, or None."""
        try:
            return await self._client._send(get_call(scope, namespace, key, refresh_ttl))
        except NotFoundError as exc:
            if _missing(exc):
                return None
            raise

    async def delete(self, scope: ScopeLike, namespace: Sequence[str], key: str) -> bool:
        """Remove the item; True when there was one."""
        return (await self._client._send(delete_call(scope, namespace, key))).deleted

    async def search(
        self,
        scope: ScopeLike,
        namespace_prefix: Sequence[str] = (),
        *,
        filter: dict[str, Any] | None = None,
        query: str | None = None,
        query_vector: Sequence[float] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
    ) -> list[Item]:
        """Items under the prefix that pass ``filter``, best first for a query."""
        call = search_call(
            scope, namespace_prefix, filter, query, query_vector, limit, offset, refresh_ttl
        )
        return (await self._client._send(call)).items

    async def namespaces(
        self,
        scope: ScopeLike,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """Namespaces holding items, sorted (``*`` in prefix/suffix matches any label)."""
        call = namespaces_call(scope, prefix, suffix, max_depth, limit, offset)
        return [tuple(ns) for ns in (await self._client._send(call)).namespaces]
