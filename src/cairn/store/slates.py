"""Slate state: folders, their files and entries, and the write claims of ladder runs.

Writes to one folder are serialized: on PostgreSQL by a row lock on the folder row
(``SELECT … FOR UPDATE``), on SQLite by the database's single writer (an in-process lock and
``BEGIN IMMEDIATE`` across processes). The whole read-plan-commit of a write happens inside that
one transaction, so concurrent writers never lose an entry and never break the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, func, or_, select, text, update

from cairn.core.slates import Entry, FileState, FolderKey
from cairn.store.repository import Repository
from cairn.store.run_reads import drop_runs_reading
from cairn.store.schema import JsonType, UTCDateTime
from cairn.store.slate_reads import access_items, file_items, folder_items
from cairn.store.slate_tables import (
    CLAIM_RETENTION,
    slate_applied_writes,
    slate_entries,
    slate_files,
    slate_folders,
)


@dataclass(frozen=True, slots=True)
class FolderRow:
    ladder: str
    user_id: str
    slate: str
    folder: str
    usage: int


# The statements of every write, built once: building SQLAlchemy expressions per call costs
# more than running them on SQLite.
_F, _FI, _E = slate_folders.c, slate_files.c, slate_entries.c
_BY_KEY = (
    (_F.tenant_id == bindparam("k_tenant"))
    & (_F.ladder == bindparam("k_ladder"))
    & (_F.user_id == bindparam("k_user"))
    & (_F.slate == bindparam("k_slate"))
    & (_F.folder == bindparam("k_folder"))
)
_SELECT_FOLDER = select(_F.id, _F.clock).where(_BY_KEY)
_LOCK_FOLDER = _SELECT_FOLDER.with_for_update()
_SELECT_FILES = (
    select(slate_files).where(_FI.folder_id == bindparam("folder_id")).order_by(_FI.ordinal, _FI.id)
)
_SELECT_ENTRIES = (
    select(_E.id, _E.file, _E.seq, _E.position, _E.content, _E.tokens)
    .where(_E.folder_id == bindparam("folder_id"))
    .order_by(_E.position)
)
_SAVE_FILE = (
    update(slate_files)
    .where(_FI.id == bindparam("file_id"))
    .values(
        kind=bindparam("kind"),
        tokens=bindparam("tokens"),
        bytes=bindparam("bytes_"),
        last_used=bindparam("last_used"),
        tags=bindparam("tags", type_=JsonType),
        updated_at=bindparam("now", type_=UTCDateTime()),
    )
)
_DELETE_ENTRIES = delete(slate_entries).where(_E.id.in_(bindparam("ids", expanding=True)))
_TOUCH_FILE = (
    update(slate_files)
    .where(_FI.id == bindparam("file_id"))
    .values(last_used=bindparam("last_used"))
)
_SAVE_FOLDER = (
    update(slate_folders)
    .where(_F.id == bindparam("folder_id"))
    .values(
        clock=bindparam("clock"),
        usage=bindparam("usage"),
        updated_at=bindparam("now", type_=UTCDateTime()),
    )
)


def _key_params(key: FolderKey) -> dict[str, str]:
    return {
        "k_tenant": key.tenant,
        "k_ladder": key.ladder,
        "k_user": key.user_id,
        "k_slate": key.slate,
        "k_folder": key.folder,
    }


# The two items of a file a run evicted from (``note_run_write``), for a run that is stored;
# on PostgreSQL the run's row is share-locked, so a deletion of it in flight is waited for
# (and the run then not found): no row outlives the run.
_NOTE_RUN_WRITE = tuple(
    text(
        "INSERT INTO ladder_run_reads "
        "(tenant_id, run_id, item_id, runtime_id, user_id, agent_id) "
        "SELECT r.tenant_id, r.id, i.item, '', '', '' FROM ladder_runs r, "
        "(SELECT CAST(:a AS VARCHAR) AS item UNION ALL SELECT CAST(:b AS VARCHAR)) i "
        f"WHERE r.tenant_id = :t AND r.id = :r{lock} ON CONFLICT DO NOTHING"
    )
    for lock in ("", " FOR KEY SHARE OF r")
)


class SlateRepository(Repository):
    """Persistence of slate state; every method takes the open transaction's connection."""

    # --- folders --------------------------------------------------------------------------

    def lock_folder(self, key: FolderKey, now: datetime) -> tuple[int, int, bool]:
        """Lock the folder row, creating it first if needed: ``(id, clock, created)``."""
        conn = self._tx_write
        params = _key_params(key)
        row = conn.execute(_LOCK_FOLDER, params).first()
        if row is not None:
            return int(row[0]), int(row[1]), False
        conn.execute(
            self.db.insert(slate_folders)
            .values(
                tenant_id=key.tenant,
                ladder=key.ladder,
                user_id=key.user_id,
                slate=key.slate,
                folder=key.folder,
                clock=0,
                usage=0,
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing()
        )
        row = conn.execute(_LOCK_FOLDER, params).one()
        return int(row[0]), int(row[1]), True

    def find_folder(self, key: FolderKey) -> tuple[int, int] | None:
        conn = self._tx_read
        row = conn.execute(_SELECT_FOLDER, _key_params(key)).first()
        return None if row is None else (int(row[0]), int(row[1]))

    def load_files(self, folder_id: int) -> dict[str, FileState]:
        """Every stored file of a folder with its entries, in ``ordinal`` order."""
        conn = self._tx_read
        files: dict[str, FileState] = {}
        rows = conn.execute(_SELECT_FILES, {"folder_id": folder_id})
        for r in rows:
            m = r._mapping
            files[m["name"]] = FileState(
                name=m["name"],
                kind=m["kind"],
                tags=list(m["tags"] or []),
                last_used=int(m["last_used"]),
                ordinal=int(m["ordinal"]),
                tokens=int(m["tokens"]),
                id=int(m["id"]),
            )
        entries = conn.execute(_SELECT_ENTRIES, {"folder_id": folder_id})
        for entry_id, name, seq, position, content, tokens in entries:
            f = files.get(name)
            if f is not None:
                f.entries.append(
                    Entry(name, int(seq), int(position), content, int(tokens), id=int(entry_id))
                )
        return files

    def add_file(self, folder_id: int, f: FileState, now: datetime) -> int:
        conn = self._tx_write
        res = conn.execute(
            slate_files.insert().values(
                folder_id=folder_id,
                name=f.name,
                kind=f.kind,
                tags=f.tags,
                last_used=f.last_used,
                ordinal=f.ordinal,
                tokens=f.tokens,
                bytes=len(f.text.encode("utf-8")),
                updated_at=now,
            )
        )
        return int(res.inserted_primary_key[0])  # type: ignore[index]

    def save_file(
        self,
        file_id: int,
        *,
        kind: str,
        tokens: int,
        bytes_: int,
        last_used: int,
        tags: list[str],
        now: datetime,
    ) -> None:
        conn = self._tx_write
        conn.execute(
            _SAVE_FILE,
            {
                "file_id": file_id,
                "kind": kind,
                "tokens": tokens,
                "bytes_": bytes_,
                "last_used": last_used,
                "tags": tags,
                "now": now,
            },
        )

    def touch_file(self, file_id: int, last_used: int) -> None:
        conn = self._tx_write
        conn.execute(_TOUCH_FILE, {"file_id": file_id, "last_used": last_used})

    def drop_file(self, folder_id: int, file_id: int, name: str) -> None:
        conn = self._tx_write
        conn.execute(
            delete(slate_entries).where(
                (slate_entries.c.folder_id == folder_id) & (slate_entries.c.file == name)
            )
        )
        conn.execute(delete(slate_files).where(slate_files.c.id == file_id))

    def drop_runs_reading(self, key: FolderKey, file: str | None = None) -> int:
        """Delete the runs that read or wrote what deleting ``file`` (None: resetting the
        folder) removes (``cairn.store.slate_reads``), with their traces; how many."""
        where = (key.ladder, key.user_id, key.slate, key.folder)
        items = folder_items(*where) if file is None else file_items(*where, file)
        return drop_runs_reading(self._tx_write, key.tenant, items)

    def note_run_write(self, key: FolderKey, files: Iterable[str], run_id: str) -> None:
        """Record that the stored run ``run_id`` evicted entries of ``files``, other than the
        file it wrote (its trace previews them; the file it wrote was recorded when it was
        claimed), in this transaction, which holds the folder's lock as a deletion of a file
        does: deleting one deletes the run (``cairn.store.slate_reads``). Nothing if the run
        is not stored, nor (PostgreSQL) if a deletion of it in flight commits."""
        stmt = _NOTE_RUN_WRITE[0 if self.db.is_sqlite else 1]
        for file in sorted(files):
            the_file, its_folder = access_items(
                key.ladder, key.user_id, key.slate, key.folder, file
            )
            params = {"t": key.tenant, "r": run_id, "a": the_file, "b": its_folder}
            self._tx_write.execute(stmt, params)

    def save_folder(self, folder_id: int, *, clock: int, usage: int, now: datetime) -> None:
        conn = self._tx_write
        conn.execute(
            _SAVE_FOLDER, {"folder_id": folder_id, "clock": clock, "usage": usage, "now": now}
        )

    # --- entries ----------------------------------------------------------------------------

    def insert_entries(self, folder_id: int, entries: Iterable[Entry]) -> None:
        conn = self._tx_write
        rows = [
            {
                "folder_id": folder_id,
                "file": e.file,
                "seq": e.seq,
                "position": e.position,
                "content": e.content,
                "tokens": e.tokens,
                "run_id": e.run_id,
                "written_at": e.written_at,
            }
            for e in entries
        ]
        if rows:
            conn.execute(slate_entries.insert(), rows)

    def claim_write(self, tenant: str, run_id: str, effect: str, now: datetime) -> bool:
        """Record that run ``run_id`` applies ``effect``; False if it already had."""
        conn = self._tx_write
        stmt = (
            self.db.insert(slate_applied_writes)
            .values(
                tenant_id=tenant,
                run_id=run_id,
                effect=effect,
                applied_at=now,
            )
            .on_conflict_do_nothing()
        )
        return bool(conn.execute(stmt).rowcount)

    def forget_writes(self, tenant: str, run_id: str, now: datetime) -> None:
        """Drop a completed run's claims, and the tenant's claims older than
        ``CLAIM_RETENTION`` (runs that failed and were never retried)."""
        c = slate_applied_writes.c
        with self._writing() as conn:
            conn.execute(
                delete(slate_applied_writes).where(
                    c.tenant_id == tenant,
                    or_(c.run_id == run_id, c.applied_at < now - CLAIM_RETENTION),
                )
            )

    def delete_entries(self, ids: list[int]) -> None:
        conn = self._tx_write
        if not ids:
            return
        for start in range(0, len(ids), 500):
            conn.execute(_DELETE_ENTRIES, {"ids": ids[start : start + 500]})

    def delete_file_entries(self, folder_id: int, name: str) -> int:
        conn = self._tx_write
        res = conn.execute(
            delete(slate_entries).where(
                (slate_entries.c.folder_id == folder_id) & (slate_entries.c.file == name)
            )
        )
        return int(res.rowcount or 0)

    # --- instances ----------------------------------------------------------------------------

    def list_folders(self, tenant: str, ladder: str | None = None) -> list[FolderRow]:
        c = slate_folders.c
        stmt = select(c.ladder, c.user_id, c.slate, c.folder, c.usage).where(c.tenant_id == tenant)
        if ladder is not None:
            stmt = stmt.where(c.ladder == ladder)
        with self._reading() as conn:
            return [
                FolderRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]))
                for r in conn.execute(stmt.order_by(c.ladder, c.slate, c.user_id, c.folder))
            ]

    def count_entries(self, folder_id: int) -> int:
        conn = self._tx_read
        return int(
            conn.execute(
                select(func.count())
                .select_from(slate_entries)
                .where(slate_entries.c.folder_id == folder_id)
            ).scalar_one()
        )


__all__ = ["FolderRow", "SlateRepository"]
