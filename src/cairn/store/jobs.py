"""Compile jobs: rows that workers claim, one at a time, in creation order.

PostgreSQL claims with ``FOR UPDATE SKIP LOCKED`` so any number of workers share the queue
without two taking one job; SQLite serializes writers, so a plain select-and-update inside the
write transaction is already exclusive.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    Integer,
    Row,
    String,
    Table,
    Text,
    Uuid,
    func,
    select,
    text,
    update,
)

from cairn.core.episodes import Episode
from cairn.core.ids import utcnow, uuid7
from cairn.core.scope import Scope
from cairn.store.database import Database
from cairn.store.episodes import row_to_episode, scope_filter
from cairn.store.repository import Repository
from cairn.store.schema import JsonType, UTCDateTime, episodes, metadata

compile_jobs = Table(
    "compile_jobs",
    metadata,
    Column("id", Uuid(), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("runtime_id", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    Column("agent_id", String(256), nullable=False, server_default=""),
    Column("status", String(16), nullable=False),
    Column("memories_created", Integer(), nullable=False, server_default="0"),
    Column("memory_ids", JsonType, nullable=False),
    Column("error", Text(), nullable=True),
    Column("attempts", Integer(), nullable=False, server_default="0"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=True),
    Column("finished_at", UTCDateTime(), nullable=True),
    # Until when the claiming worker holds the job; it renews the lease while it works, so a
    # job whose lease ran out belongs to a worker that died and may be claimed again.
    Column("lease_until", UTCDateTime(), nullable=True),
)

# A running job without a lease (claimed before leases existed) is stale after this long.
STALE_AFTER = timedelta(minutes=10)
DEFAULT_LEASE_SECONDS = 30


# A memory a job created: ``(seq, created_at)``, or its id in jobs of earlier versions.
JobMemory = tuple[int, datetime] | uuid.UUID


@dataclass(frozen=True, slots=True)
class CompileJob:
    id: uuid.UUID
    tenant_id: str
    scope: Scope
    status: str  # queued | running | succeeded | failed
    memories_created: int
    # The memories the job created, as ``(seq, created_at)``: a seq is stable while a
    # memory's id may change (a rewrite without a deleted name derives a new one), and its
    # creation time tells it from a later memory SQLite gave a deleted one's seq (a rowid is
    # reused). Jobs recorded by earlier versions list ids.
    memories: list[JobMemory]
    error: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


def _job(row: Row[Any]) -> CompileJob:
    m = row._mapping
    return CompileJob(
        id=m["id"],
        tenant_id=m["tenant_id"],
        scope=Scope.model_construct(
            runtime_id=m["runtime_id"], user_id=m["user_id"], agent_id=m["agent_id"]
        ),
        status=m["status"],
        memories_created=m["memories_created"],
        memories=[_job_memory(x) for x in m["memory_ids"]],
        error=m["error"],
        attempts=m["attempts"],
        created_at=m["created_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
    )


def _job_memory(value: Any) -> JobMemory:
    """An entry of a job's JSON list: ``[seq, created_at]``, or an id (earlier versions)."""
    if isinstance(value, list) and len(value) == 2:
        return (int(value[0]), datetime.fromisoformat(str(value[1])))
    return uuid.UUID(str(value))


def _stored(memories: list[JobMemory]) -> list[Any]:
    """A job's memories as its JSON column holds them."""
    return [[m[0], m[1].isoformat()] if isinstance(m, tuple) else str(m) for m in memories]


class JobRepository(Repository):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.compiling = CompileQueries(db)

    def enqueue(self, tenant_id: str, scope: Scope) -> CompileJob:
        row = {
            "id": uuid7(),
            "tenant_id": tenant_id,
            "runtime_id": scope.runtime_id,
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
            "status": "queued",
            "memories_created": 0,
            "memory_ids": [],
            "error": None,
            "attempts": 0,
            "created_at": utcnow(),
        }
        with self._writing() as conn:
            got = conn.execute(compile_jobs.insert().values(row).returning(compile_jobs)).one()
        return _job(got)

    def get(self, tenant_id: str, job_id: uuid.UUID) -> CompileJob | None:
        """The job, only if it belongs to ``tenant_id``."""
        with self._reading() as conn:
            row = conn.execute(
                select(compile_jobs).where(
                    compile_jobs.c.id == job_id, compile_jobs.c.tenant_id == tenant_id
                )
            ).first()
        return _job(row) if row else None

    def claim(self, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> CompileJob | None:
        """Take the oldest queued job, or a running one whose lease ran out (its worker died),
        mark it running under a lease of ``lease_seconds``. ``attempts`` of the returned job
        is the claim's token for ``renew`` and ``finish``."""
        now = utcnow()
        running = compile_jobs.c.status == "running"
        lease = compile_jobs.c.lease_until
        claimable = (
            (compile_jobs.c.status == "queued")
            | (running & lease.is_not(None) & (lease < now))
            | (running & lease.is_(None) & (compile_jobs.c.started_at < now - STALE_AFTER))
        )
        stmt = (
            select(compile_jobs.c.id)
            .where(claimable)
            .order_by(compile_jobs.c.created_at, compile_jobs.c.id)
            .limit(1)
        )
        # An idle poll only reads: no write transaction (and, on SQLite, no writer lock)
        # unless there is something to claim.
        with self._reading() as conn:
            if conn.execute(stmt).scalar() is None:
                return None
        if not self.db.is_sqlite:
            stmt = stmt.with_for_update(skip_locked=True)
        with self._writing() as conn:
            job_id = conn.execute(stmt).scalar()
            if job_id is None:
                return None
            row = conn.execute(
                update(compile_jobs)
                .where(compile_jobs.c.id == job_id)
                .values(
                    status="running",
                    started_at=now,
                    lease_until=now + timedelta(seconds=lease_seconds),
                    attempts=compile_jobs.c.attempts + 1,
                )
                .returning(compile_jobs)
            ).one()
        return _job(row)

    def renew(self, job_id: uuid.UUID, attempt: int, lease_seconds: float) -> bool:
        """Extend the lease of the claim ``attempt``; False when the job is no longer this
        claim's (finished, or taken again after the lease ran out)."""
        return self._while_claimed(
            job_id, attempt, lease_until=utcnow() + timedelta(seconds=lease_seconds)
        )

    def progress(self, job_id: uuid.UUID, attempt: int, memories: list[JobMemory]) -> bool:
        """Record the memories the running claim ``attempt`` has created so far (a claim
        that takes the job over after this one died goes on from them, and the job's status
        shows them meanwhile); False when the job is no longer this claim's."""
        listed = _stored(memories)
        return self._while_claimed(job_id, attempt, memory_ids=listed, memories_created=len(listed))

    def _while_claimed(self, job_id: uuid.UUID, attempt: int, **values: Any) -> bool:
        """Update the job while it is running under the claim ``attempt``."""
        with self._writing() as conn:
            result = conn.execute(
                update(compile_jobs)
                .where(
                    compile_jobs.c.id == job_id,
                    compile_jobs.c.status == "running",
                    compile_jobs.c.attempts == attempt,
                )
                .values(**values)
            )
        return bool(result.rowcount)

    def finish(
        self,
        job_id: uuid.UUID,
        *,
        memories: list[JobMemory] | None = None,
        error: str | None = None,
        attempt: int | None = None,
    ) -> bool:
        """Record the outcome. With ``attempt``, only while the job is still that claim's: a
        worker whose job was taken over cannot overwrite the newer claim's outcome."""
        values: dict[str, Any] = {"finished_at": utcnow(), "lease_until": None}
        if error is None:
            ids = _stored(memories or [])
            values.update(status="succeeded", memory_ids=ids, memories_created=len(ids))
        else:
            values.update(status="failed", error=error[:2000])
        stmt = update(compile_jobs).where(compile_jobs.c.id == job_id)
        if attempt is not None:
            stmt = stmt.where(
                compile_jobs.c.status == "running", compile_jobs.c.attempts == attempt
            )
        with self._writing() as conn:
            result = conn.execute(stmt.values(values))
        return bool(result.rowcount)


class CompileQueries(Repository):
    """The episode-side queries of compiling one partition."""

    def lock_scope(self, tenant_id: str, scope: Scope) -> None:
        """Serialize compiles of one partition (SQLite's writer lock already does)."""
        conn = self._tx_write
        if not self.db.is_sqlite:
            key = "\x1f".join(
                ("compile", tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
            )
            conn.execute(text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": key})

    def uncompiled(self, tenant_id: str, scope: Scope, limit: int) -> list[Episode]:
        conn = self._tx_read
        stmt = (
            select(episodes)
            .where(scope_filter(episodes, tenant_id, scope), episodes.c.compiled.is_(False))
            .order_by(episodes.c.occurred_at, episodes.c.seq)
            .limit(limit)
        )
        return [row_to_episode(r) for r in conn.execute(stmt)]

    def still_uncompiled(self, ids: list[uuid.UUID]) -> set[uuid.UUID]:
        conn = self._tx_read
        if not ids:
            return set()
        stmt = select(episodes.c.id).where(episodes.c.id.in_(ids), episodes.c.compiled.is_(False))
        return {r[0] for r in conn.execute(stmt)}

    def count_present(self, ids: list[uuid.UUID]) -> int:
        """How many of the episodes ``ids`` are stored."""
        conn = self._tx_read
        total = 0
        for start in range(0, len(ids), 500):
            stmt = select(func.count()).where(episodes.c.id.in_(ids[start : start + 500]))
            total += int(conn.execute(stmt).scalar_one())
        return total

    def count_uncompiled(self, tenant_id: str, scope: Scope) -> int:
        conn = self._tx_read
        stmt = (
            select(func.count())
            .select_from(episodes)
            .where(scope_filter(episodes, tenant_id, scope), episodes.c.compiled.is_(False))
        )
        return int(conn.execute(stmt).scalar_one())

    def any_uncompiled(self, tenant_id: str, scope: Scope) -> bool:
        """Whether an episode of the partition waits (one probe of the uncompiled index,
        where ``count_uncompiled`` reads every waiting row)."""
        conn = self._tx_read
        stmt = (
            select(episodes.c.seq)
            .where(scope_filter(episodes, tenant_id, scope), episodes.c.compiled.is_(False))
            .limit(1)
        )
        return conn.execute(stmt).first() is not None

    def sessions(
        self, tenant_id: str, scope: Scope, batch: list[Episode]
    ) -> dict[str, list[Episode]]:
        """Every episode of the sessions ``batch`` touches, in time order: the batch's own
        plus those compiled before (only those are read)."""
        conn = self._tx_read
        out: dict[str, list[Episode]] = {}
        for ep in batch:
            if ep.session_id:
                out.setdefault(ep.session_id, []).append(ep)
        if not out:
            return {}
        stmt = select(episodes).where(
            scope_filter(episodes, tenant_id, scope),
            episodes.c.session_id.in_(sorted(out)),
            episodes.c.compiled.is_(True),
        )
        for r in conn.execute(stmt):
            ep = row_to_episode(r)
            out[ep.session_id or ""].append(ep)
        for eps in out.values():
            eps.sort(key=lambda e: (e.occurred_at, e.seq))
        return out

    def mark_compiled(self, ids: list[uuid.UUID], compiled: bool = True) -> None:
        """Mark the episodes compiled; ``compiled=False`` has the next compile of the
        partition take them (and their sessions) again: what was made of them is found by
        content, and what is new is added."""
        conn = self._tx_write
        for start in range(0, len(ids), 500):
            conn.execute(
                update(episodes)
                .where(episodes.c.id.in_(ids[start : start + 500]))
                .values(compiled=compiled)
            )
