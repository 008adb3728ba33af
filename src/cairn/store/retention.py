"""Retention: each tenant's time-to-live of episodes and memories, expiry, and its audit.

Expiry deletes rows (full-text entries follow by trigger, vectors live in the rows, and the
partitions' vector versions move on so no cached matrix keeps an expired vector) in batches,
each its own transaction, so a large backlog never holds the write lock for long.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Column, Integer, String, Table, delete, func, select

from cairn.core.scope import Scope
from cairn.store.lifecycle import LifecycleRepository
from cairn.store.partitions import drop_runs, turn_runs
from cairn.store.repository import Repository
from cairn.store.run_reads import drop_runs_reading
from cairn.store.schema import SeqType, UTCDateTime, episodes, memories, metadata

tenant_retention = Table(
    "tenant_retention",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("episode_ttl_days", Integer(), nullable=True),
    Column("memory_ttl_days", Integer(), nullable=True),
    Column("updated_at", UTCDateTime(), nullable=False),
)

retention_sweeps = Table(
    "retention_sweeps",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("swept_at", UTCDateTime(), nullable=False),
    Column("episodes_deleted", Integer(), nullable=False),
    Column("memories_deleted", Integer(), nullable=False),
)

BATCH = 1000


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    tenant_id: str
    episode_ttl_days: int | None = None
    memory_ttl_days: int | None = None


class RetentionRepository(Repository):
    def get(self, tenant_id: str) -> RetentionPolicy:
        with self._reading() as conn:
            row = conn.execute(
                select(tenant_retention).where(tenant_retention.c.tenant_id == tenant_id)
            ).first()
        if row is None:
            return RetentionPolicy(tenant_id)
        return RetentionPolicy(tenant_id, row.episode_ttl_days, row.memory_ttl_days)

    def set(self, policy: RetentionPolicy, now: datetime) -> None:
        values = {
            "tenant_id": policy.tenant_id,
            "episode_ttl_days": policy.episode_ttl_days,
            "memory_ttl_days": policy.memory_ttl_days,
            "updated_at": now,
        }
        stmt = self.db.insert(tenant_retention).values(**values)
        stmt = stmt.on_conflict_do_update(index_elements=["tenant_id"], set_=values)
        with self._writing() as conn:
            conn.execute(stmt)

    def policies(self) -> list[RetentionPolicy]:
        """Every tenant with a time-to-live set."""
        t = tenant_retention
        with self._reading() as conn:
            rows = conn.execute(
                select(t).where(
                    t.c.episode_ttl_days.is_not(None) | t.c.memory_ttl_days.is_not(None)
                )
            ).all()
        return [RetentionPolicy(r.tenant_id, r.episode_ttl_days, r.memory_ttl_days) for r in rows]

    def expire(self, tenant_id: str, kind: str, before: datetime) -> int:
        """Delete the tenant's episodes (by ``occurred_at``) or memories (by ``created_at``)
        older than ``before``; how many rows went."""
        table, when = (episodes, episodes.c.occurred_at)
        if kind == "memories":
            table, when = (memories, memories.c.created_at)
        lifecycle = LifecycleRepository(self.db)
        total = 0
        while True:
            with self._writing() as conn:
                rows = conn.execute(
                    select(
                        table.c.seq,
                        table.c.runtime_id,
                        table.c.user_id,
                        table.c.agent_id,
                        table.c.id,
                    )
                    .where(table.c.tenant_id == tenant_id, when < before)
                    .limit(BATCH)
                ).all()
                if not rows:
                    break
                seqs = [r[0] for r in rows]
                if table is episodes:  # a run that committed one of these turns quotes it
                    drop_runs(conn, tenant_id, turn_runs(episodes.c.seq.in_(seqs)))
                conn.execute(delete(table).where(table.c.seq.in_(seqs)))
                # Runs that read what expired quote it: they expire with it.
                drop_runs_reading(conn, tenant_id, [r[4] for r in rows])
                if table is memories:
                    for r, u, a in {(r[1], r[2], r[3]) for r in rows}:
                        scope = Scope.model_construct(runtime_id=r, user_id=u, agent_id=a)
                        lifecycle.bound(conn, writable=True).bump_vectors(tenant_id, scope)
            total += len(rows)
        return total

    def record(self, tenant_id: str, now: datetime, episodes_: int, memories_: int) -> None:
        with self._writing() as conn:
            conn.execute(
                retention_sweeps.insert().values(
                    tenant_id=tenant_id,
                    swept_at=now,
                    episodes_deleted=episodes_,
                    memories_deleted=memories_,
                )
            )

    def totals(self) -> tuple[int, int, int]:
        """Sweeps that deleted anything, and the episodes and memories they deleted."""
        s = retention_sweeps
        with self._reading() as conn:
            row = conn.execute(
                select(func.count(), func.sum(s.c.episodes_deleted), func.sum(s.c.memories_deleted))
            ).one()
        return int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)
