"""Episode repository: append-only, idempotent per (scope, idempotency_key)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, and_, func, select, tuple_

from cairn.core.construct import construct
from cairn.core.episodes import Episode, NewEpisode
from cairn.core.ids import as_utc, utcnow, uuid7
from cairn.core.scope import Scope
from cairn.store.database import Database
from cairn.store.schema import episodes as t


def scope_filter(table: Any, tenant_id: str, scope: Scope) -> Any:
    """The WHERE clause of one partition: tenant + runtime + user + agent, all exact."""
    return and_(
        table.c.tenant_id == tenant_id,
        table.c.runtime_id == scope.runtime_id,
        table.c.user_id == scope.user_id,
        table.c.agent_id == scope.agent_id,
    )


def row_to_episode(row: Row[Any]) -> Episode:
    m = row._mapping
    scope = {"runtime_id": m["runtime_id"], "user_id": m["user_id"], "agent_id": m["agent_id"]}
    return construct(
        Episode,
        {
            "id": m["id"],
            "tenant_id": m["tenant_id"],
            "scope": construct(Scope, scope),
            "source": m["source"],
            "type": m["type"],
            "payload": m["payload"],
            "metadata": m["metadata"],
            "provenance": m["provenance"],
            "session_id": m["session_id"],
            "idempotency_key": m["idempotency_key"],
            "occurred_at": m["occurred_at"],
            "created_at": m["created_at"],
            "seq": m["seq"],
        },
    )


class EpisodeRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _row(self, tenant_id: str, item: NewEpisode, now: Any) -> dict[str, Any]:
        return {
            "id": uuid7(),
            "tenant_id": tenant_id,
            "runtime_id": item.scope.runtime_id,
            "user_id": item.scope.user_id,
            "agent_id": item.scope.agent_id,
            "session_id": item.session_id,
            "source": item.source,
            "type": item.type,
            "payload": item.payload,
            "metadata": item.metadata,
            "provenance": item.provenance,
            "idempotency_key": item.idempotency_key,
            "occurred_at": as_utc(item.occurred_at) if item.occurred_at else now,
            "created_at": now,
            "compiled": False,
        }

    def append(self, tenant_id: str, item: NewEpisode) -> tuple[Episode, bool]:
        """Store one episode; returns it and whether it is new (False: the key's original)."""
        episodes, created = self.append_many(tenant_id, [item])
        return episodes[0], created == 1

    def append_many(
        self, tenant_id: str, items: Sequence[NewEpisode], conn: Connection | None = None
    ) -> tuple[list[Episode], int]:
        """Store episodes in one transaction, all or nothing.

        A repeated idempotency key (already stored, or earlier in ``items``) yields the
        original episode instead of a new one. Returns the episodes in input order and how
        many were newly written.
        """
        if conn is None:
            with self.db.write() as own:
                return self._append_many(own, tenant_id, items)
        return self._append_many(conn, tenant_id, items)

    def _append_many(
        self, conn: Connection, tenant_id: str, items: Sequence[NewEpisode]
    ) -> tuple[list[Episode], int]:
        now = utcnow()
        result: list[Episode | None] = [None] * len(items)
        keyed: dict[tuple[str, str, str, str], list[int]] = {}
        rows: list[dict[str, Any]] = []
        row_index: list[int] = []
        for i, item in enumerate(items):
            if item.idempotency_key is not None:
                k = (*_scope_key(item.scope), item.idempotency_key)
                if k in keyed:
                    keyed[k].append(i)
                    continue
                keyed[k] = [i]
            rows.append(self._row(tenant_id, item, now))
            row_index.append(i)

        if keyed:
            for ep in self._by_keys(conn, tenant_id, list(keyed)):
                for i in keyed.pop(_episode_key(ep)):
                    result[i] = ep
            rows_left = [(r, i) for r, i in zip(rows, row_index, strict=True) if result[i] is None]
        else:
            rows_left = list(zip(rows, row_index, strict=True))

        created = 0
        if rows_left:
            stmt = (
                self.db.insert(t)
                .on_conflict_do_nothing(
                    index_elements=[
                        "tenant_id",
                        "runtime_id",
                        "user_id",
                        "agent_id",
                        "idempotency_key",
                    ]
                )
                .returning(t.c.id, t.c.seq)
            )
            # Only the generated columns come back; the episode is built from what we sent,
            # which saves decoding every JSON column again.
            inserted = {row.id: row.seq for row in conn.execute(stmt, [r for r, _ in rows_left])}
            created = len(inserted)
            lost: list[tuple[str, str, str, str]] = []
            for r, i in rows_left:
                seq = inserted.get(r["id"])
                if seq is None:  # a concurrent writer stored the same key first
                    lost.append(
                        (r["runtime_id"], r["user_id"], r["agent_id"], r["idempotency_key"])
                    )
                else:
                    result[i] = _episode_from_row(r, items[i].scope, seq)
            if lost:
                found = {_episode_key(ep): ep for ep in self._by_keys(conn, tenant_id, lost)}
                for r, i in rows_left:
                    if result[i] is None:
                        result[i] = found[
                            (r["runtime_id"], r["user_id"], r["agent_id"], r["idempotency_key"])
                        ]
        # Repeats inside the batch point at the episode their first occurrence got.
        for idxs in keyed.values():
            for i in idxs[1:]:
                result[i] = result[idxs[0]]
        return [ep for ep in result if ep is not None], created

    def _by_keys(
        self, conn: Connection, tenant_id: str, keys: list[tuple[str, str, str, str]]
    ) -> list[Episode]:
        stmt = select(t).where(
            t.c.tenant_id == tenant_id,
            tuple_(t.c.runtime_id, t.c.user_id, t.c.agent_id, t.c.idempotency_key).in_(keys),
        )
        return [row_to_episode(r) for r in conn.execute(stmt)]

    def get(self, tenant_id: str, episode_id: uuid.UUID) -> Episode | None:
        with self.db.read() as conn:
            row = conn.execute(
                select(t).where(t.c.tenant_id == tenant_id, t.c.id == episode_id)
            ).first()
        return row_to_episode(row) if row else None

    def list(
        self,
        tenant_id: str,
        scope: Scope,
        *,
        limit: int = 100,
        offset: int = 0,
        session_id: str | None = None,
        uncompiled_only: bool = False,
        newest_first: bool = False,
        conn: Connection | None = None,
    ) -> list[Episode]:
        """Episodes of one partition in time order (``occurred_at``, then insertion).

        ``newest_first`` takes the window from the newest end (``offset`` counts back from
        the newest row); the rows of the window are still returned oldest first.
        """
        stmt = select(t).where(scope_filter(t, tenant_id, scope))
        if session_id is not None:
            stmt = stmt.where(t.c.session_id == session_id)
        if uncompiled_only:
            stmt = stmt.where(t.c.compiled.is_(False))
        if newest_first:
            stmt = stmt.order_by(t.c.occurred_at.desc(), t.c.seq.desc())
        else:
            stmt = stmt.order_by(t.c.occurred_at, t.c.seq)
        stmt = stmt.limit(limit).offset(offset)
        if conn is not None:
            rows = [row_to_episode(r) for r in conn.execute(stmt)]
        else:
            with self.db.read() as own:
                rows = [row_to_episode(r) for r in own.execute(stmt)]
        return rows[::-1] if newest_first else rows

    def count(self, tenant_id: str, scope: Scope, conn: Connection | None = None) -> int:
        stmt = select(func.count()).select_from(t).where(scope_filter(t, tenant_id, scope))
        if conn is not None:
            return int(conn.execute(stmt).scalar_one())
        with self.db.read() as own:
            return int(own.execute(stmt).scalar_one())


def _episode_from_row(r: dict[str, Any], scope: Scope, seq: int) -> Episode:
    return construct(
        Episode,
        {
            "id": r["id"],
            "tenant_id": r["tenant_id"],
            "scope": scope,
            "source": r["source"],
            "type": r["type"],
            "payload": r["payload"],
            "metadata": r["metadata"],
            "provenance": r["provenance"],
            "session_id": r["session_id"],
            "idempotency_key": r["idempotency_key"],
            "occurred_at": r["occurred_at"],
            "created_at": r["created_at"],
            "seq": seq,
        },
    )


def _scope_key(scope: Scope) -> tuple[str, str, str]:
    return (scope.runtime_id, scope.user_id, scope.agent_id)


def _episode_key(ep: Episode) -> tuple[str, str, str, str]:
    return (*_scope_key(ep.scope), ep.idempotency_key or "")
