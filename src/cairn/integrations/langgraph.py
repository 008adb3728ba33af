"""LangGraph on Cairn: ``CairnStore``, a long-term memory ``BaseStore``.

A drop-in for LangGraph's ``InMemoryStore`` or ``PostgresStore``: the same ``put``, ``get``,
``delete``, ``search`` and ``list_namespaces`` (sync and async, from ``BaseStore``), the same
namespace rules, filters, paging and TTLs, kept durably in Cairn's items
(``/v1/items``, ``cairn.engine.items``).

The mapping: the whole store is one Cairn **scope** (default ``("langgraph", "", "")``; pass
``scope=`` to give a user or an agent their own partition, which ``DELETE /v1/scopes`` then
erases); a LangGraph **namespace** is an item namespace inside it (a path of labels), its
**key** the item key, and its **value** the item's JSON object, whose text is indexed for
search in every script.

    store = CairnStore()                                         # embedded, SQLite
    store = CairnStore(url="http://127.0.0.1:8100", api_key=key)  # a Cairn server
    store = CairnStore(index={"dims": 384, "embed": embed, "fields": ["text"]})

With ``index``, the store embeds the indexed fields with your function (as ``InMemoryStore``
does: one vector per field text) and ``search(query=...)`` ranks by cosine similarity;
without it, ``search(query=...)`` ranks with Cairn's own search (lexical in every script,
plus the server's embedder when it has one) where ``InMemoryStore`` ignores the query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from cairn.integrations._extras import require_extra

require_extra("langgraph.store.base", "langgraph", "cairn.integrations.langgraph")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from cairn.client import AsyncCairn, Cairn, InvalidRequestError, Scope  # noqa: E402
from cairn.client import Item as CairnItem  # noqa: E402

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from cairn.config import Settings

DEFAULT_SCOPE = Scope(runtime_id="langgraph")


def to_item(found: CairnItem) -> Item:
    return Item(
        namespace=tuple(found.namespace),
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
    )


def to_search_item(found: CairnItem) -> SearchItem:
    return SearchItem(
        namespace=tuple(found.namespace),
        key=found.key,
        value=found.value,
        created_at=found.created_at,
        updated_at=found.updated_at,
        score=found.score,
    )


def check_labels(namespace: Sequence[Any]) -> None:
    """LangGraph's label rules (``BaseStore`` checks them in ``put``/``get``/...; ops handed to
    ``batch`` directly are checked here, as LangGraph asks of stores that keep namespaces as
    text): every label a non-empty string without a dot or a NUL."""
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {tuple(namespace)}: labels are "
                "non-empty strings without periods ('.') or NUL characters."
            )


def _op_labels(op: Op) -> Sequence[Any]:
    if isinstance(op, (GetOp, PutOp)):
        return op.namespace
    if isinstance(op, SearchOp):
        return op.namespace_prefix
    if isinstance(op, ListNamespacesOp):
        return [p for c in op.match_conditions or () for p in c.path if p != "*"]
    return ()


class _Plan:
    """A batch split as LangGraph stores execute it: the reads in their order, against the
    state before the batch, then the writes, one per item (the last op for it wins)."""

    def __init__(self, ops: Iterable[Op]) -> None:
        self.ops = list(ops)
        self.reads: list[tuple[int, GetOp | SearchOp | ListNamespacesOp]] = []
        writes: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(self.ops):
            check_labels(_op_labels(op))
            if isinstance(op, PutOp):
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                writes[(tuple(op.namespace), op.key)] = op
            elif isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                self.reads.append((i, op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        self.writes = list(writes.values())
        self.queries = sorted(
            {op.query for _, op in self.reads if isinstance(op, SearchOp) and op.query}
        )


class CairnStore(BaseStore):
    """LangGraph's ``BaseStore`` kept in Cairn (see the module docstring for the mapping).

    ``client`` / ``async_client``: SDK clients of a server (never closed by the store);
    ``url`` and ``api_key``: the store makes (and closes) a client of that server; neither:
    Cairn runs in this process on ``settings``' database (SQLite in the data directory by
    default). ``index``: LangGraph's ``{"dims", "embed", "fields"}``; ``ttl``: LangGraph's
    ``TTLConfig`` (minutes; expired items are never returned and are deleted by Cairn).
    """

    supports_ttl = True

    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        client: Cairn | None = None,
        async_client: AsyncCairn | None = None,
        scope: Scope | dict[str, str] | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        settings: Settings | None = None,
    ) -> None:
        self._owned: Cairn | None = None
        if client is None and async_client is None:
            client = Cairn(url, api_key=api_key) if url else Cairn.local(settings)
            self._owned = client
        self.client = client
        self.async_client = async_client
        if scope is None:
            scope = DEFAULT_SCOPE
        self.scope = Scope.model_validate(scope) if isinstance(scope, dict) else scope
        self.ttl_config = ttl
        self.index_config = dict(index) if index else None
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, Any]] = []
        if index:
            self.embeddings = ensure_embeddings(index.get("embed"))
            paths = index.get("fields") or ["$"]
            self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in paths]

    # -- what to send ---------------------------------------------------------------------

    def _texts(self, op: PutOp) -> list[str] | None:
        """The texts of a put to index: the fields of ``index`` (as InMemoryStore embeds
        them), none for ``index=False``; None without an index config (every string)."""
        if self.embeddings is None or op.value is None:
            return None
        if op.index is False:
            return []
        fields = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        return [t for _, path in fields for t in get_text_at_path(op.value, path)]

    def _put_args(
        self, op: PutOp, texts: list[str] | None, vectors: list[list[float]] | None
    ) -> dict[str, Any]:
        return {
            "text": texts,
            "vectors": vectors or None,
            "ttl_seconds": op.ttl * 60 if op.ttl else None,
        }

    def _search_args(self, op: SearchOp, vectors: dict[str, list[float]]) -> dict[str, Any]:
        query_vector = vectors.get(op.query) if op.query else None
        return {
            "filter": op.filter,
            "query": None if query_vector is not None else op.query,
            "query_vector": query_vector,
            "limit": op.limit,
            "offset": op.offset,
            "refresh_ttl": op.refresh_ttl,
        }

    @staticmethod
    def _namespace_args(op: ListNamespacesOp) -> dict[str, Any]:
        args: dict[str, Any] = {"max_depth": op.max_depth, "limit": op.limit, "offset": op.offset}
        for condition in op.match_conditions or ():
            args[condition.match_type] = list(condition.path)
        return args

    def _split(self, texts: list[list[str] | None]) -> list[str]:
        return [t for group in texts for t in (group or [])]

    @staticmethod
    def _regroup(
        texts: list[list[str] | None], flat: Sequence[list[float]]
    ) -> list[list[list[float]] | None]:
        out: list[list[list[float]] | None] = []
        at = 0
        for group in texts:
            out.append([list(v) for v in flat[at : at + len(group)]] if group else None)
            at += len(group or [])
        return out

    # -- sync -----------------------------------------------------------------------------

    def _sync(self) -> Cairn:
        if self.client is None:
            raise RuntimeError("CairnStore has only an async_client: use the a* methods")
        return self.client

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        plan = _Plan(ops)
        queries: dict[str, list[float]] = {}
        texts = [self._texts(op) for op in plan.writes]
        flat: list[list[float]] = []
        if self.embeddings is not None:
            queries = {q: self.embeddings.embed_query(q) for q in plan.queries}
            to_embed = self._split(texts)
            flat = self.embeddings.embed_documents(to_embed) if to_embed else []
        with _namespace_errors():
            return self._run(plan, queries, texts, self._regroup(texts, flat))

    def _run(
        self,
        plan: _Plan,
        queries: dict[str, list[float]],
        texts: list[list[str] | None],
        vectors: list[list[list[float]] | None],
    ) -> list[Result]:
        items = self._sync().items
        results: list[Result] = [None] * len(plan.ops)
        for i, op in plan.reads:
            if isinstance(op, GetOp):
                found = items.get(self.scope, op.namespace, op.key, refresh_ttl=op.refresh_ttl)
                results[i] = to_item(found) if found else None
            elif isinstance(op, SearchOp):
                hits = items.search(
                    self.scope, op.namespace_prefix, **self._search_args(op, queries)
                )
                results[i] = [to_search_item(h) for h in hits]
            else:
                results[i] = items.namespaces(self.scope, **self._namespace_args(op))
        for put, text, vecs in zip(plan.writes, texts, vectors, strict=True):
            if put.value is None:
                items.delete(self.scope, put.namespace, put.key)
            else:
                args = self._put_args(put, text, vecs)
                items.put(self.scope, put.namespace, put.key, dict(put.value), **args)
        return results

    # -- async ----------------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plan = _Plan(ops)
        queries: dict[str, list[float]] = {}
        texts = [self._texts(op) for op in plan.writes]
        flat: list[list[float]] = []
        if self.embeddings is not None:
            found = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in plan.queries))
            queries = dict(zip(plan.queries, found, strict=True))
            to_embed = self._split(texts)
            flat = await self.embeddings.aembed_documents(to_embed) if to_embed else []
        vectors = self._regroup(texts, flat)
        with _namespace_errors():
            if self.async_client is None:  # the sync client, on a worker thread
                return await asyncio.to_thread(self._run, plan, queries, texts, vectors)
            return await self._arun(self.async_client, plan, queries, texts, vectors)

    async def _arun(
        self,
        client: AsyncCairn,
        plan: _Plan,
        queries: dict[str, list[float]],
        texts: list[list[str] | None],
        vectors: list[list[list[float]] | None],
    ) -> list[Result]:
        items = client.items
        results: list[Result] = [None] * len(plan.ops)
        for i, op in plan.reads:
            if isinstance(op, GetOp):
                found = await items.get(
                    self.scope, op.namespace, op.key, refresh_ttl=op.refresh_ttl
                )
                results[i] = to_item(found) if found else None
            elif isinstance(op, SearchOp):
                args = self._search_args(op, queries)
                hits = await items.search(self.scope, op.namespace_prefix, **args)
                results[i] = [to_search_item(h) for h in hits]
            else:
                results[i] = await items.namespaces(self.scope, **self._namespace_args(op))
        for put, text, vecs in zip(plan.writes, texts, vectors, strict=True):
            if put.value is None:
                await items.delete(self.scope, put.namespace, put.key)
            else:
                args = self._put_args(put, text, vecs)
                await items.put(self.scope, put.namespace, put.key, dict(put.value), **args)
        return results

    def close(self) -> None:
        """Stop the client this store made (passed clients stay open)."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self) -> CairnStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def _namespace_errors() -> Iterator[None]:
    """Cairn's ``invalid_namespace`` (a label too long, too many labels) as LangGraph's
    ``InvalidNamespaceError``."""
    try:
        yield
    except InvalidRequestError as exc:
        if exc.code == "invalid_namespace":
            raise InvalidNamespaceError(exc.message) from exc
        raise


__all__ = ["CairnStore", "to_item", "to_search_item"]
