"""Ladder runs: one row per run id and tenant, holding the run's status, response and trace.

The row doubles as the idempotency record: ``begin`` inserts it (or finds the one a previous
attempt made), so a retried request with the same run id can be answered from the stored
response instead of running, and writing, again. ``effects`` lists the writes a run has applied,
so a run taken over after a failure skips what was already written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Float,
    Index,
    String,
    Table,
    Text,
    UniqueConstraint,
    delete,
    func,
    or_,
    select,
    text,
    update,
)

from cairn.core.ids import utcnow
from cairn.store.repository import Repository
from cairn.store.schema import JsonType, SeqType, UTCDateTime, metadata
from cairn.store.slate_reads import item_rows

ladder_runs = Table(
    "ladder_runs",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", String(256), nullable=False),
    Column("tenant_id", String(128), nullable=False),
    Column("ladder", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    Column("status", String(16), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("model", String(256), nullable=False, server_default=""),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime(), nullable=True),
    Column("duration_ms", Float(), nullable=True),
    Column("effects", JsonType, nullable=False),
    Column("response", JsonType, nullable=True),
    Column("trace", JsonType, nullable=True),
    Column("error", Text(), nullable=True),
    UniqueConstraint("tenant_id", "id", name="uq_ladder_runs_id"),
    Index("ix_ladder_runs_tenant_seq", "tenant_id", "seq"),
)

# What each run read (``cairn.store.run_reads`` says why and erases with it).
ladder_run_reads = Table(
    "ladder_run_reads",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("run_id", String(256), primary_key=True),
    Column("item_id", String(256), primary_key=True),
    Column("runtime_id", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    Column("agent_id", String(256), nullable=False, server_default=""),
    Index("ix_ladder_run_reads_item", "tenant_id", "item_id"),
    Index("ix_ladder_run_reads_partition", "tenant_id", "user_id", "runtime_id", "agent_id"),
)

# Ids a statement names at most (SQLite's bound-parameter limit is far above).
_PAGE = 500

# The ``item_id`` of the row a run holds while its hooks read, before what they read is
# recorded (no item's id is empty): a deletion meanwhile takes the run (``cairn.store.run_reads``).
READING = ""


def lock_reads(conn: Connection, tenant_id: str, *, marking: bool) -> None:
    """PostgreSQL: the tenant's lock between a run marking itself as reading (``marking``:
    exclusive) and deletions dropping the runs that read what they delete (shared: deletions
    never wait on one another here, only on a mark, whose transaction is one insert), held
    to the end of the transaction. A deletion that has dropped the runs holds it to its
    commit, so no run can start reading in between and see what it deleted still
    uncommitted; a mark committed first is seen by the drop. SQLite needs none: its writes
    take turns."""
    if conn.dialect.name == "postgresql":
        fn = "pg_advisory_xact_lock" if marking else "pg_advisory_xact_lock_shared"
        conn.execute(text(f"SELECT {fn}(hashtextextended(:k, 0))"), {"k": _lock_key(tenant_id)})


def _lock_key(tenant_id: str) -> str:
    """The tenant's run-reads lock (``lock_reads``, ``_LOCKED_ITEMS``)."""
    return f"cairn-run-reads:{tenant_id}"


# PostgreSQL: ``lock_reads(marking=True)``, then a run's items (no partition), in one statement
# (the lock is taken before any row is produced).
_LOCKED_ITEMS = text(
    "INSERT INTO ladder_run_reads (tenant_id, run_id, item_id, runtime_id, user_id, agent_id) "
    "SELECT :t, :r, i.item, '', '', '' "
    "FROM (SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))) AS l, "
    "unnest(CAST(:items AS text[])) AS i(item) ON CONFLICT DO NOTHING"
)


def trace_reads(trace: Any, unnamed: dict[str, str] | None = None) -> list[dict[str, str]]:
    """``{item_id, runtime_id, user_id, agent_id}`` of each item a run's trace says its
    context hooks recalled (each item once); a hook whose entry names no scope (a trace
    recorded before they did) is taken to have read the partition ``unnamed``, else skipped."""
    hooks = trace.get("prepare") if isinstance(trace, dict) else None
    out: dict[str, dict[str, str]] = {}
    for hook in hooks if isinstance(hooks, list) else []:
        scope = hook.get("scope") if isinstance(hook, dict) else None
        listed = hook.get("items") if isinstance(hook, dict) else None
        scope = scope if isinstance(scope, dict) else unnamed
        if scope is None or not isinstance(listed, list):
            continue
        where = {k: str(scope.get(k) or "") for k in ("runtime_id", "user_id", "agent_id")}
        for item in listed:
            item_id = item.get("id") if isinstance(item, dict) else None
            if item_id and str(item_id) not in out:
                out[str(item_id)] = {"item_id": str(item_id), **where}
    return list(out.values())


def record_reads(
    conn: Connection, insert: Any, tenant_id: str, run_id: str, reads: list[dict[str, str]]
) -> None:
    """Store ``reads`` (as ``trace_reads`` gives them) for the run (``insert``: the backend's
    INSERT of ``ladder_run_reads``, with ``on_conflict_do_nothing``); a later attempt's reads
    add to an earlier one's."""
    rows = [{"tenant_id": tenant_id, "run_id": run_id, **r} for r in reads]
    for start in range(0, len(rows), _PAGE):
        conn.execute(insert.on_conflict_do_nothing(), rows[start : start + _PAGE])


RUNNING, COMPLETED, FAILED = "running", "completed", "failed"


@dataclass
class RunRecord:
    id: str
    tenant_id: str
    ladder: str
    user_id: str
    status: str
    request_hash: str
    model: str
    created_at: datetime
    started_at: datetime
    finished_at: datetime | None
    duration_ms: float | None
    effects: list[str]
    response: dict[str, Any] | None
    trace: dict[str, Any] | None
    error: str | None


def _record(row: Any) -> RunRecord:
    """The one mapper of the runs table: a stored row, or the values of a row just inserted
    (columns it does not name are empty)."""
    m = row._mapping if hasattr(row, "_mapping") else row
    return RunRecord(**{k: m.get(k) for k in RunRecord.__dataclass_fields__})


class RunRepository(Repository):
    def begin(
        self,
        tenant_id: str,
        run_id: str,
        *,
        ladder: str,
        request_hash: str,
        model: str,
        user_id: str = "",
        reads: Sequence[str] = (),
    ) -> tuple[RunRecord, bool]:
        """Insert the run as ``running``; returns the row and True, or the existing row and
        False when this run id is already known to the tenant. A new run is stored with
        ``reads``: the slate items its steps read and may write (``cairn.store.slate_reads``),
        recorded before it touches them, after the deletions in flight in the tenant commit
        (as a mark waits): a deletion either sees them and takes the run, or committed first.
        (A run taken over records them with ``add_items``.)"""
        now = utcnow()
        values = {
            "id": run_id,
            "tenant_id": tenant_id,
            "ladder": ladder,
            "user_id": user_id,
            "status": RUNNING,
            "request_hash": request_hash,
            "model": model,
            "created_at": now,
            "started_at": now,
            "effects": [],
        }
        with self._writing() as conn:
            seq = conn.execute(
                self.db.insert(ladder_runs)
                .values(**values)
                .on_conflict_do_nothing(index_elements=["tenant_id", "id"])
                .returning(ladder_runs.c.seq)
            ).scalar()
            if seq is not None:  # new: no second statement needed
                if reads:  # (the lock after the insert: no deleter can wait on this row)
                    self._lock_and_add(conn, tenant_id, run_id, reads)
                return _record(values), True
            row = conn.execute(
                select(ladder_runs).where(
                    ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id == run_id
                )
            ).one()
        return _record(row), False

    def take_over(self, tenant_id: str, run_id: str, *, stale_before: datetime) -> datetime | None:
        """Restart a failed run, or a running one not heard of since ``stale_before``
        (its process died). The new attempt's start (its ownership token: see ``finish``)
        when this caller now owns the run, else None."""
        started = utcnow()
        with self._writing() as conn:
            owned = (
                conn.execute(
                    update(ladder_runs)
                    .where(
                        ladder_runs.c.tenant_id == tenant_id,
                        ladder_runs.c.id == run_id,
                        or_(
                            ladder_runs.c.status == FAILED,
                            (ladder_runs.c.status == RUNNING)
                            & (ladder_runs.c.started_at < stale_before),
                        ),
                    )
                    .values(status=RUNNING, started_at=started, error=None)
                ).rowcount
                == 1
            )
        return started if owned else None

    def add_items(self, tenant_id: str, run_id: str, items: Sequence[str]) -> None:
        """Record, before the run reads them, the slate items ``items`` (a run taken over:
        ``begin`` records a new run's), while the run is still stored: in a transaction of
        its own that takes the tenant's lock first (as ``mark_reading``), holding no run row
        a deleter could wait on."""
        if not items:
            return
        with self._writing() as conn:
            lock_reads(conn, tenant_id, marking=True)
            if self._held(conn, tenant_id, run_id):
                self._add_items(conn, tenant_id, run_id, items)

    def _lock_and_add(
        self, conn: Connection, tenant_id: str, run_id: str, items: Sequence[str]
    ) -> None:
        """``lock_reads`` (marking), then ``_add_items``: on PostgreSQL in one statement."""
        if conn.dialect.name != "postgresql":
            self._add_items(conn, tenant_id, run_id, items)
            return
        params = {"k": _lock_key(tenant_id), "t": tenant_id, "r": run_id, "items": list(items)}
        conn.execute(_LOCKED_ITEMS, params)

    def _add_items(
        self, conn: Connection, tenant_id: str, run_id: str, items: Sequence[str]
    ) -> None:
        if items:
            insert = self.db.insert(ladder_run_reads)
            record_reads(conn, insert, tenant_id, run_id, item_rows(list(items)))

    def _owned(self, tenant_id: str, run_id: str, attempt: datetime | None) -> list[Any]:
        where = [ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id == run_id]
        if attempt is not None:  # only while no later attempt has taken the run over
            where += [ladder_runs.c.started_at == attempt, ladder_runs.c.status == RUNNING]
        return where

    def add_effect(
        self, tenant_id: str, run_id: str, effects: list[str], *, attempt: datetime | None = None
    ) -> None:
        """Record the writes applied so far (the whole list, in order)."""
        with self._writing() as conn:
            conn.execute(
                update(ladder_runs)
                .where(*self._owned(tenant_id, run_id, attempt))
                .values(effects=list(effects))
            )

    def _record_reads(self, conn: Connection, tenant_id: str, run_id: str, trace: Any) -> None:
        reads = trace_reads(trace)
        record_reads(conn, self.db.insert(ladder_run_reads), tenant_id, run_id, reads)
        conn.execute(
            delete(ladder_run_reads).where(
                ladder_run_reads.c.tenant_id == tenant_id,
                ladder_run_reads.c.run_id == run_id,
                ladder_run_reads.c.item_id == READING,
            )
        )

    def mark_reading(self, tenant_id: str, run_id: str) -> None:
        """Before the run's hooks read: a deletion of anything in the tenant from now until
        their reads are recorded (``add_reads``, ``finish``) deletes the run, as the deletion
        cannot know yet whether the run read what it deletes."""
        with self._writing() as conn:
            lock_reads(conn, tenant_id, marking=True)
            if self._held(conn, tenant_id, run_id):
                marker = {"item_id": READING, "runtime_id": "", "user_id": "", "agent_id": ""}
                record_reads(conn, self.db.insert(ladder_run_reads), tenant_id, run_id, [marker])

    @staticmethod
    def _held(conn: Connection, tenant_id: str, run_id: str) -> bool:
        """Whether the run is still stored (a deletion may have taken it)."""
        found = conn.execute(
            select(ladder_runs.c.seq).where(
                ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id == run_id
            )
        ).first()
        return found is not None

    def add_reads(self, tenant_id: str, run_id: str, trace: dict[str, Any]) -> None:
        """Record what ``trace`` says the run has read so far (its prepare hooks), while the
        run is still stored (a deletion may have taken it)."""
        with self._writing() as conn:
            if self._held(conn, tenant_id, run_id):
                self._record_reads(conn, tenant_id, run_id, trace)

    def finish(
        self,
        tenant_id: str,
        run_id: str,
        *,
        status: str,
        duration_ms: float,
        trace: dict[str, Any],
        response: dict[str, Any] | None = None,
        error: str | None = None,
        effects: list[str] | None = None,
        attempt: datetime | None = None,
    ) -> bool:
        """Record the run's end. With ``attempt`` (the start ``begin`` or ``take_over`` gave
        this attempt), only while this attempt still owns the run: False if a later attempt
        took it over (this one's end is then not recorded)."""
        values: dict[str, Any] = {
            "status": status,
            "finished_at": utcnow(),
            "duration_ms": duration_ms,
            "trace": trace,
            "response": response,
            "error": error,
        }
        if effects is not None:
            values["effects"] = list(effects)
        with self._writing() as conn:
            owned = (
                conn.execute(
                    update(ladder_runs)
                    .where(*self._owned(tenant_id, run_id, attempt))
                    .values(**values)
                ).rowcount
                == 1
            )
            if owned:  # in the same transaction: no run is stored without its reads
                self._record_reads(conn, tenant_id, run_id, trace)
            return owned

    def get(self, tenant_id: str, run_id: str) -> RunRecord | None:
        with self._reading() as conn:
            row = conn.execute(
                select(ladder_runs).where(
                    ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id == run_id
                )
            ).first()
        return _record(row) if row is not None else None

    def list(
        self,
        tenant_id: str,
        *,
        ladder: str | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[RunRecord], int]:
        """The tenant's runs, newest first, and how many there are in all."""
        where = [ladder_runs.c.tenant_id == tenant_id]
        if ladder is not None:
            where.append(ladder_runs.c.ladder == ladder)
        if status is not None:
            where.append(ladder_runs.c.status == status)
        with self._reading() as conn:
            total = conn.execute(
                select(func.count()).select_from(ladder_runs).where(*where)
            ).scalar_one()
            rows = conn.execute(
                select(ladder_runs)
                .where(*where)
                .order_by(ladder_runs.c.seq.desc())
                .limit(limit)
                .offset(offset)
            ).all()
        return [_record(r) for r in rows], int(total)


__all__ = [
    "COMPLETED",
    "FAILED",
    "RUNNING",
    "RunRecord",
    "RunRepository",
    "ladder_run_reads",
    "ladder_runs",
    "record_reads",
    "trace_reads",
]
