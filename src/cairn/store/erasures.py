"""The erasure log: which tenants had data erased, so every process drops its caches of them.

A deletion or erasure clears the caches of the process that served it at once. Other
processes on the same database (``cairn serve --workers N``, several servers, ``cairn worker``)
hold caches of their own: partition matrices of vectors, cached query embeddings, token
counts, memos of texts' words. Each erasure adds a row here (the tenant and the time only:
nothing of what was erased), and every process reads the rows after the last it saw about
once a second and empties its caches of those tenants (``cairn.engine.erasure_watch``). Rows
older than ``KEEP`` are removed as new ones are added.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Column, Index, String, Table, delete, func, insert, select, text

from cairn.store.repository import Repository
from cairn.store.schema import SeqType, UTCDateTime, metadata

erasure_log = Table(
    "erasure_log",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("erased_at", UTCDateTime(), nullable=False),
    Index("ix_erasure_log_erased_at", "erased_at"),
    # SQLite: never reuse a seq once the rows before it are removed (readers go by seq).
    sqlite_autoincrement=True,
)

# How long a row is kept: far longer than any process goes without reading the log.
KEEP = timedelta(hours=1)


# PostgreSQL: the transaction-level advisory lock every ``record`` takes, so rows commit in
# the order of their seqs (a sequence hands seqs out at insert, not at commit: a reader that
# saw seq 11 committed would otherwise never read a seq 10 committed after it).
_ORDER_LOCK_KEY = 0x6361_6972_6E65


class ErasureLog(Repository):
    def record(self, tenant_id: str, now: datetime) -> int:
        """Log an erasure in ``tenant_id``: in the erasure's own transaction when bound to it
        (the row commits with the erasure or not at all), else in one of its own. The new
        row's seq; rows older than ``KEEP`` go."""
        with self._writing() as conn:
            if not self.db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ORDER_LOCK_KEY})
            conn.execute(delete(erasure_log).where(erasure_log.c.erased_at < now - KEEP))
            seq = conn.execute(
                insert(erasure_log)
                .values(tenant_id=tenant_id, erased_at=now)
                .returning(erasure_log.c.seq)
            ).scalar_one()
        return int(seq)

    def latest(self) -> int:
        """The seq of the newest row (0 when none)."""
        with self._reading() as conn:
            return int(
                conn.execute(select(func.coalesce(func.max(erasure_log.c.seq), 0))).scalar_one()
            )

    def since(self, seq: int) -> tuple[int, set[str]]:
        """``(newest seq, tenants erased after seq)``."""
        with self._reading() as conn:
            rows = conn.execute(
                select(erasure_log.c.seq, erasure_log.c.tenant_id)
                .where(erasure_log.c.seq > seq)
                .order_by(erasure_log.c.seq)
            ).all()
        return (int(rows[-1][0]) if rows else seq), {str(r[1]) for r in rows}


__all__ = ["KEEP", "ErasureLog", "erasure_log"]
