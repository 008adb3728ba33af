"""Items: JSON values under a namespace and a key, inside one scope partition.

The key-value store that framework stores (LangGraph's ``BaseStore``) sit on. An item is
addressed by ``(tenant, scope, namespace, key)``; its ``namespace`` is a path of labels kept
as one string, each label followed by a dot (``("users", "ada")`` is ``users.ada.``), so the
items under a namespace prefix are one ``LIKE 'users.%'`` over the partition's index, and the
namespaces of a partition are one ``DISTINCT`` over it. Labels never hold a dot (the engine
checks), so the path is unambiguous. The unique ``address`` (SHA-256 of path and key) keeps
long keys out of the index.

``search_text`` is the value's text as ``cairn.core.analysis`` cuts it (every script), and
``embedding`` the vector(s) of that text: the server's embedder's (``embedding_source`` its
name) or the caller's own (``client``, one row per indexed field). Expired items
(``expires_at`` in the past) are never returned and are deleted by the next write of the
tenant.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    and_,
    delete,
    or_,
    select,
    update,
)

from cairn.core.scope import Scope
from cairn.store.database import Database
from cairn.store.episodes import scope_filter
from cairn.store.schema import JsonType, SeqType, UTCDateTime, metadata, scope_columns

items = Table(
    "items",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", Uuid(), nullable=False, unique=True),
    *scope_columns(),
    Column("namespace", Text(), nullable=False),
    Column("depth", Integer(), nullable=False),
    Column("key", Text(), nullable=False),
    Column("address", String(64), nullable=False),
    Column("value", JsonType, nullable=False),
    Column("search_text", Text(), nullable=False, server_default=""),
    Column("embedding", LargeBinary(), nullable=True),
    Column("embedding_dims", Integer(), nullable=False, server_default="0"),
    Column("embedding_source", String(160), nullable=False, server_default=""),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    Column("ttl_seconds", Float(), nullable=True),
    Column("expires_at", UTCDateTime(), nullable=True),
    UniqueConstraint(
        "tenant_id", "runtime_id", "user_id", "agent_id", "address", name="uq_items_address"
    ),
    Index(
        "ix_items_scope_namespace", "tenant_id", "runtime_id", "user_id", "agent_id", "namespace"
    ),
    Index("ix_items_expiry", "tenant_id", "expires_at"),
)

CLIENT_VECTORS = "client"


def namespace_path(labels: Sequence[str]) -> str:
    """The stored form of a namespace: every label followed by a dot."""
    return "".join(f"{label}." for label in labels)


def namespace_labels(path: str) -> tuple[str, ...]:
    return tuple(path.split(".")[:-1])


def item_address(path: str, key: str) -> str:
    return hashlib.sha256(f"{path}\x00{key}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredItem:
    seq: int
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    search_text: str = ""
    embedding: bytes | None = None
    embedding_dims: int = 0
    embedding_source: str = ""


@dataclass(frozen=True, slots=True)
class ItemWrite:
    """Everything stored for one item; the engine computes the text and vectors."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    search_text: str
    embedding: bytes | None
    embedding_dims: int
    embedding_source: str
    ttl_seconds: float | None


_LIGHT = [
    items.c.seq,
    items.c.namespace,
    items.c.key,
    items.c.value,
    items.c.created_at,
    items.c.updated_at,
    items.c.expires_at,
]
_FULL = [
    *_LIGHT,
    items.c.search_text,
    items.c.embedding,
    items.c.embedding_dims,
    items.c.embedding_source,
]


def _row(row: Any) -> StoredItem:
    m = row._mapping
    return StoredItem(
        seq=int(m["seq"]),
        namespace=namespace_labels(m["namespace"]),
        key=m["key"],
        value=dict(m["value"]),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        expires_at=m["expires_at"],
        search_text=m.get("search_text", "") or "",
        embedding=m.get("embedding"),
        embedding_dims=int(m.get("embedding_dims") or 0),
        embedding_source=m.get("embedding_source", "") or "",
    )


def live_items(now: datetime) -> Any:
    """Items not expired at ``now`` (expired items are never returned)."""
    return or_(items.c.expires_at.is_(None), items.c.expires_at > now)


class ItemRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, tenant_id: str, scope: Scope, item: ItemWrite, now: datetime) -> StoredItem:
        """Insert or replace the item (its ``created_at`` and order are kept on replace; an
        expired one counts as new). The tenant's expired items are deleted first."""
        path = namespace_path(item.namespace)
        expires = now + timedelta(seconds=item.ttl_seconds) if item.ttl_seconds else None
        fields = {
            "value": item.value,
            "search_text": item.search_text,
            "embedding": item.embedding,
            "embedding_dims": item.embedding_dims,
            "embedding_source": item.embedding_source,
            "updated_at": now,
            "ttl_seconds": item.ttl_seconds,
            "expires_at": expires,
        }
        stmt = self.db.insert(items).values(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            runtime_id=scope.runtime_id,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            namespace=path,
            depth=len(item.namespace),
            key=item.key,
            address=item_address(path, item.key),
            created_at=now,
            **fields,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["tenant_id", "runtime_id", "user_id", "agent_id", "address"],
            set_=fields,
        )
        with self.db.write() as conn:
            self.sweep(conn, tenant_id, now)
            conn.execute(stmt)
            row = conn.execute(
                select(*_LIGHT).where(self._at(tenant_id, scope, path, item.key))
            ).one()
        return _row(row)

    def _at(self, tenant_id: str, scope: Scope, path: str, key: str) -> Any:
        return and_(
            scope_filter(items, tenant_id, scope),
            items.c.address == item_address(path, key),
        )

    def sweep(self, conn: Connection, tenant_id: str, now: datetime) -> int:
        """Delete the tenant's expired items."""
        res = conn.execute(
            delete(items).where(items.c.tenant_id == tenant_id, items.c.expires_at <= now)
        )
        return int(res.rowcount or 0)

    def get(
        self, tenant_id: str, scope: Scope, namespace: Sequence[str], key: str, now: datetime
    ) -> StoredItem | None:
        """The live item, or None."""
        where = self._at(tenant_id, scope, namespace_path(namespace), key)
        with self.db.read() as conn:
            row = conn.execute(select(*_LIGHT).where(where, live_items(now))).first()
        return _row(row) if row else None

    def refresh(self, tenant_id: str, scope: Scope, seqs: Sequence[int], now: datetime) -> None:
        """Start the TTL of the live items ``seqs`` again from ``now`` (items without one are
        left alone). Done in Python, per distinct TTL, to stay portable."""
        if not seqs:
            return
        base = and_(
            scope_filter(items, tenant_id, scope), items.c.seq.in_(list(seqs)), live_items(now)
        )
        with self.db.write() as conn:
            ttls = conn.execute(
                select(items.c.ttl_seconds).where(base, items.c.ttl_seconds.is_not(None)).distinct()
            ).all()
            for (ttl,) in ttls:
                conn.execute(
                    update(items)
                    .where(base, items.c.ttl_seconds == ttl)
                    .values(expires_at=now + timedelta(seconds=float(ttl)))
                )

    def delete(self, tenant_id: str, scope: Scope, namespace: Sequence[str], key: str) -> bool:
        """Remove the item; True when a live or expired row was there."""
        where = self._at(tenant_id, scope, namespace_path(namespace), key)
        with self.db.write() as conn:
            return bool(conn.execute(delete(items).where(where)).rowcount)

    def under(
        self,
        tenant_id: str,
        scope: Scope,
        prefix: Sequence[str],
        now: datetime,
        *,
        ranked: bool = True,
    ) -> list[StoredItem]:
        """The live items whose namespace starts with ``prefix``, in the order they were first
        stored (the candidates of a search), with their text and vectors when ``ranked``."""
        columns = _FULL if ranked else _LIGHT
        stmt = select(*columns).where(scope_filter(items, tenant_id, scope), live_items(now))
        if prefix:
            stmt = stmt.where(items.c.namespace.startswith(namespace_path(prefix), autoescape=True))
        with self.db.read() as conn:
            return [_row(r) for r in conn.execute(stmt.order_by(items.c.seq))]

    def namespaces(
        self, tenant_id: str, scope: Scope, prefix: Sequence[str], now: datetime
    ) -> list[tuple[str, ...]]:
        """The distinct namespaces holding live items, optionally under a literal prefix."""
        stmt = select(items.c.namespace).where(
            scope_filter(items, tenant_id, scope), live_items(now)
        )
        if prefix:
            stmt = stmt.where(items.c.namespace.startswith(namespace_path(prefix), autoescape=True))
        with self.db.read() as conn:
            paths = conn.execute(stmt.distinct()).scalars().all()
        return [namespace_labels(p) for p in paths]
