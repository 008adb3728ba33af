"""Memory repository: the reads the foundation needs (timeline, counts).

The compiler adds writes, supersession and search on top of these tables.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, func, select

from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.store.database import Database
from cairn.store.episodes import scope_filter
from cairn.store.schema import memories as t


def row_to_memory(row: Row[Any]) -> Memory:
    m = row._mapping
    return Memory.model_construct(
        id=m["id"],
        tenant_id=m["tenant_id"],
        scope=Scope.model_construct(
            runtime_id=m["runtime_id"], user_id=m["user_id"], agent_id=m["agent_id"]
        ),
        kind=m["kind"],
        content=m["content"],
        summary=m["summary"],
        confidence=m["confidence"],
        valid_from=m["valid_from"],
        valid_to=m["valid_to"],
        status=m["status"],
        source_episode_ids=list(m["source_episode_ids"]),
        metadata=m["metadata"],
        session_id=m["session_id"],
        superseded_by=m["superseded_by"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        seq=m["seq"],
    )


class MemoryRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def list(
        self,
        tenant_id: str,
        scope: Scope,
        *,
        limit: int = 100,
        offset: int = 0,
        include_superseded: bool = True,
        kind: str | None = None,
        conn: Connection | None = None,
    ) -> list[Memory]:
        """Memories of one partition in time order (``valid_from``, then creation)."""
        stmt = select(t).where(scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        if not include_superseded:
            stmt = stmt.where(t.c.status == "active")
        if kind is not None:
            stmt = stmt.where(t.c.kind == kind)
        stmt = stmt.order_by(t.c.valid_from, t.c.seq).limit(limit).offset(offset)
        if conn is not None:
            return [row_to_memory(r) for r in conn.execute(stmt)]
        with self.db.read() as own:
            return [row_to_memory(r) for r in own.execute(stmt)]

    def count(self, tenant_id: str, scope: Scope, conn: Connection | None = None) -> int:
        stmt = (
            select(func.count())
            .select_from(t)
            .where(scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        )
        if conn is not None:
            return int(conn.execute(stmt).scalar_one())
        with self.db.read() as own:
            return int(own.execute(stmt).scalar_one())
