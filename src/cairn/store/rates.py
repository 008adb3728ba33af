"""Request counters of the per-key rate limit: one row per key and minute.

The count lives in the database, so every server process of a fleet counts against the same
limit; one upsert per request returns the new count atomically on both backends.
"""

from __future__ import annotations

from sqlalchemy import delete

from cairn.store.repository import Repository
from cairn.store.schema import rate_counters


class RateRepository(Repository):
    def hit(self, bucket: str, minute: int) -> int:
        """Count one request of ``bucket`` in ``minute`` (Unix time // 60); returns that
        minute's count so far."""
        insert = self.db.insert(rate_counters).values(bucket=bucket, minute=minute, count=1)
        upsert = insert.on_conflict_do_update(
            index_elements=["bucket", "minute"],
            set_={"count": rate_counters.c.count + 1},
        ).returning(rate_counters.c.count)
        with self._writing() as conn:
            count = int(conn.execute(upsert).scalar_one())
            if count == 1:
                # The key's first request of a new window: its older windows are done with.
                conn.execute(
                    delete(rate_counters).where(
                        rate_counters.c.bucket == bucket, rate_counters.c.minute < minute
                    )
                )
        return count
