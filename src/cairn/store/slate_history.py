"""Slate history: the entries evicted from folders and the writes that did nothing.

Evictions are recorded in the write transaction that evicted them (a bound repository, see
``cairn.store.unit``); skipped writes in their own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select

from cairn.core.slates import Eviction, FolderKey
from cairn.store.repository import Repository
from cairn.store.slate_tables import slate_evictions, slate_skips


class SlateHistoryRepository(Repository):
    def record_evictions(self, key: FolderKey, evictions: list[Eviction]) -> list[int]:
        """Store the evictions; their ids, in order (as ``list_evictions`` shows them)."""
        conn = self._tx_write
        if not evictions:
            return []
        rows = conn.execute(
            slate_evictions.insert().returning(slate_evictions.c.id, sort_by_parameter_order=True),
            [
                {
                    "tenant_id": key.tenant,
                    "ladder": key.ladder,
                    "user_id": key.user_id,
                    "slate": ev.slate,
                    "folder": ev.folder,
                    "file": ev.file,
                    "preview": ev.preview,
                    "tokens": ev.tokens,
                    "policy": ev.policy,
                    "run_id": ev.run_id,
                    "evicted_at": ev.evicted_at,
                }
                for ev in evictions
            ],
        )
        return [int(i) for i in rows.scalars()]

    def forget_evictions(self, key: FolderKey, file: str | None = None) -> int:
        """Drop the recorded evictions of a folder (of one of its files), whose previews
        quote what was evicted: a deleted file or a reset folder leaves none of its text."""
        c = slate_evictions.c
        where = [
            c.tenant_id == key.tenant,
            c.ladder == key.ladder,
            c.user_id == key.user_id,
            c.slate == key.slate,
            c.folder == key.folder,
        ]
        if file is not None:
            where.append(c.file == file)
        return int(self._tx_write.execute(delete(slate_evictions).where(*where)).rowcount or 0)

    def list_evictions(
        self,
        tenant: str,
        ladder: str,
        slate: str,
        user_id: str | None,
        *,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Eviction]:
        c = slate_evictions.c
        stmt = select(slate_evictions).where(
            (c.tenant_id == tenant) & (c.ladder == ladder) & (c.slate == slate)
        )
        if user_id is not None:
            stmt = stmt.where(c.user_id == user_id)
        stmt = stmt.order_by(c.id.desc()).limit(limit).offset(offset)
        with self._reading() as conn:
            return [
                Eviction(
                    slate=m["slate"],
                    folder=m["folder"],
                    file=m["file"],
                    preview=m["preview"],
                    tokens=int(m["tokens"]),
                    policy=m["policy"],
                    evicted_at=m["evicted_at"],
                    run_id=m["run_id"],
                    ladder=m["ladder"],
                    user_id=m["user_id"],
                    id=int(m["id"]),
                )
                for m in (r._mapping for r in conn.execute(stmt))
            ]

    def record_skip(
        self, key: FolderKey, file: str, reason: str, detail: str, run_id: str | None, now: datetime
    ) -> None:
        with self._writing() as conn:
            conn.execute(
                slate_skips.insert().values(
                    tenant_id=key.tenant,
                    ladder=key.ladder,
                    user_id=key.user_id,
                    slate=key.slate,
                    folder=key.folder,
                    file=file,
                    reason=reason,
                    detail=detail[:2000].replace("\x00", "\\0"),
                    run_id=run_id,
                    created_at=now,
                )
            )

    def list_skips(
        self, tenant: str, ladder: str, slate: str, user_id: str | None, *, limit: int = 100
    ) -> list[dict[str, Any]]:
        c = slate_skips.c
        stmt = select(slate_skips).where(
            (c.tenant_id == tenant) & (c.ladder == ladder) & (c.slate == slate)
        )
        if user_id is not None:
            stmt = stmt.where(c.user_id == user_id)
        with self._reading() as conn:
            return [
                {
                    "folder": m["folder"],
                    "file": m["file"],
                    "reason": m["reason"],
                    "detail": m["detail"],
                    "run_id": m["run_id"],
                    "user_id": m["user_id"] or None,
                    "created_at": m["created_at"].isoformat().replace("+00:00", "Z"),
                }
                for m in (r._mapping for r in conn.execute(stmt.order_by(c.id.desc()).limit(limit)))
            ]


__all__ = ["SlateHistoryRepository"]
