"""Read-only figures about the whole store for monitoring (``/metrics``): cheap, indexed queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from cairn.core.ids import utcnow
from cairn.store.database import Database
from cairn.store.jobs import compile_jobs


@dataclass(frozen=True)
class QueueStats:
    """Compile jobs waiting or running, and how long the oldest of each has waited."""

    queued: int
    running: int
    oldest_queued_s: float
    oldest_running_s: float


def _age(now: datetime, then: datetime | None) -> float:
    return max(0.0, (now - then).total_seconds()) if then is not None else 0.0


def queue_stats(db: Database) -> QueueStats:
    """The compile queue across every tenant (one grouped query)."""
    stmt = (
        select(
            compile_jobs.c.status,
            func.count(),
            func.min(compile_jobs.c.created_at),
            func.min(compile_jobs.c.started_at),
        )
        .where(compile_jobs.c.status.in_(("queued", "running")))
        .group_by(compile_jobs.c.status)
    )
    with db.read() as conn:
        rows = {r[0]: r for r in conn.execute(stmt)}
    now = utcnow()
    queued = rows.get("queued")
    running = rows.get("running")
    return QueueStats(
        queued=int(queued[1]) if queued else 0,
        running=int(running[1]) if running else 0,
        oldest_queued_s=_age(now, queued[2]) if queued else 0.0,
        oldest_running_s=_age(now, running[3]) if running else 0.0,
    )
