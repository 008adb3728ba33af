"""Slate state: folders, files, entries, evictions and skipped writes.

Writes to one folder are serialized: on PostgreSQL by a row lock on the folder row
(``SELECT … FOR UPDATE``), on SQLite by the database's single writer (an in-process lock and
``BEGIN IMMEDIATE`` across processes). The whole read-plan-commit of a write happens inside that
one transaction, so concurrent writers never lose an entry and never break the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)

from cairn.core.scope import DEFAULT_RUNTIME
from cairn.slates.model import Entry, Eviction, FileState, FolderKey, FolderState
from cairn.store.database import Database
from cairn.store.schema import JsonType, SeqType, UTCDateTime, metadata


def _subject_columns() -> list[Column[Any]]:
    # Constant today: they make per-user slate state part of the subject ``("default", user,
    # "")``, so ``DELETE /v1/subjects/{user}`` removes it with the rest of the user's data.
    return [
        Column("runtime_id", String(256), nullable=False, server_default=DEFAULT_RUNTIME),
        Column("agent_id", String(256), nullable=False, server_default=""),
    ]


slate_folders = Table(
    "slate_folders",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("ladder", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    *_subject_columns(),
    Column("slate", String(128), nullable=False),
    Column("folder", String(128), nullable=False),
    Column("clock", BigInteger(), nullable=False, server_default="0"),
    Column("usage", Integer(), nullable=False, server_default="0"),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    UniqueConstraint("tenant_id", "ladder", "user_id", "slate", "folder", name="uq_slate_folders"),
)

slate_files = Table(
    "slate_files",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column(
        "folder_id",
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("slate_folders.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("name", String(128), nullable=False),
    Column("kind", String(8), nullable=False, server_default="text"),
    Column("tags", JsonType, nullable=False),
    Column("last_used", BigInteger(), nullable=False, server_default="0"),
    Column("ordinal", Integer(), nullable=False, server_default="0"),
    Column("tokens", Integer(), nullable=False, server_default="0"),
    Column("bytes", Integer(), nullable=False, server_default="0"),
    Column("updated_at", UTCDateTime(), nullable=False),
    UniqueConstraint("folder_id", "name", name="uq_slate_files"),
)

slate_entries = Table(
    "slate_entries",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column(
        "folder_id",
        BigInteger().with_variant(Integer(), "sqlite"),
        ForeignKey("slate_folders.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("file", String(128), nullable=False),
    Column("seq", BigInteger(), nullable=False),
    Column("position", BigInteger(), nullable=False),
    Column("content", Text(), nullable=False),
    Column("tokens", Integer(), nullable=False),
    Column("run_id", String(256), nullable=True),
    Column("written_at", UTCDateTime(), nullable=False),
    Index("ix_slate_entries_folder", "folder_id", "file", "position"),
)

slate_evictions = Table(
    "slate_evictions",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("ladder", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    *_subject_columns(),
    Column("slate", String(128), nullable=False),
    Column("folder", String(128), nullable=False),
    Column("file", String(128), nullable=False),
    Column("preview", Text(), nullable=False),
    Column("tokens", Integer(), nullable=False),
    Column("policy", String(16), nullable=False),
    Column("run_id", String(256), nullable=True),
    Column("evicted_at", UTCDateTime(), nullable=False),
    Index("ix_slate_evictions_slate", "tenant_id", "ladder", "slate", "user_id", "id"),
)

# One row per write a ladder run applied (its effect key, e.g. ``final/if``), inserted in the
# write's own transaction: a retried run can never apply it twice, whenever its process died.
# Rows of a run are dropped when it completes (its stored response answers every retry).
CLAIM_RETENTION = timedelta(days=7)
slate_applied_writes = Table(
    "slate_applied_writes",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("run_id", String(256), primary_key=True),
    Column("effect", String(512), primary_key=True),
    Column("applied_at", UTCDateTime(), nullable=False),
)

slate_skips = Table(
    "slate_skips",
    metadata,
    Column("id", SeqType, primary_key=True, autoincrement=True),
    Column("tenant_id", String(128), nullable=False),
    Column("ladder", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    *_subject_columns(),
    Column("slate", String(128), nullable=False),
    Column("folder", String(128), nullable=False),
    Column("file", String(128), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("detail", Text(), nullable=False, server_default=""),
    Column("run_id", String(256), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Index("ix_slate_skips_slate", "tenant_id", "ladder", "slate", "user_id", "id"),
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


class SlateRepository:
    """Persistence of slate state; every method takes the open transaction's connection."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # --- folders --------------------------------------------------------------------------

    def lock_folder(self, conn: Connection, key: FolderKey, now: datetime) -> tuple[int, int, bool]:
        """Lock the folder row, creating it first if needed: ``(id, clock, created)``."""
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

    def find_folder(self, conn: Connection, key: FolderKey) -> tuple[int, int] | None:
        row = conn.execute(_SELECT_FOLDER, _key_params(key)).first()
        return None if row is None else (int(row[0]), int(row[1]))

    def load_files(self, conn: Connection, folder_id: int) -> dict[str, FileState]:
        """Every stored file of a folder with its entries, in ``ordinal`` order."""
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

    def add_file(self, conn: Connection, folder_id: int, f: FileState, now: datetime) -> int:
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
        conn: Connection,
        file_id: int,
        *,
        kind: str,
        tokens: int,
        bytes_: int,
        last_used: int,
        tags: list[str],
        now: datetime,
    ) -> None:
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

    def touch_file(self, conn: Connection, file_id: int, last_used: int) -> None:
        conn.execute(_TOUCH_FILE, {"file_id": file_id, "last_used": last_used})

    def drop_file(self, conn: Connection, folder_id: int, file_id: int, name: str) -> None:
        conn.execute(
            delete(slate_entries).where(
                (slate_entries.c.folder_id == folder_id) & (slate_entries.c.file == name)
            )
        )
        conn.execute(delete(slate_files).where(slate_files.c.id == file_id))

    def save_folder(
        self, conn: Connection, folder_id: int, *, clock: int, usage: int, now: datetime
    ) -> None:
        conn.execute(
            _SAVE_FOLDER, {"folder_id": folder_id, "clock": clock, "usage": usage, "now": now}
        )

    # --- entries ----------------------------------------------------------------------------

    def insert_entries(self, conn: Connection, folder_id: int, entries: Iterable[Entry]) -> None:
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

    def claim_write(
        self, conn: Connection, tenant: str, run_id: str, effect: str, now: datetime
    ) -> bool:
        """Record that run ``run_id`` applies ``effect``; False if it already had."""
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
        with self.db.write() as conn:
            conn.execute(
                delete(slate_applied_writes).where(
                    c.tenant_id == tenant,
                    or_(c.run_id == run_id, c.applied_at < now - CLAIM_RETENTION),
                )
            )

    def delete_entries(self, conn: Connection, ids: list[int]) -> None:
        if not ids:
            return
        for start in range(0, len(ids), 500):
            conn.execute(_DELETE_ENTRIES, {"ids": ids[start : start + 500]})

    def delete_file_entries(self, conn: Connection, folder_id: int, name: str) -> int:
        res = conn.execute(
            delete(slate_entries).where(
                (slate_entries.c.folder_id == folder_id) & (slate_entries.c.file == name)
            )
        )
        return int(res.rowcount or 0)

    # --- evictions and skipped writes ---------------------------------------------------------

    def record_evictions(self, conn: Connection, key: FolderKey, evictions: list[Eviction]) -> None:
        if evictions:
            conn.execute(
                slate_evictions.insert(),
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
        with self.db.read() as conn:
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
        with self.db.write() as conn:
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
        with self.db.read() as conn:
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

    # --- instances ----------------------------------------------------------------------------

    def list_folders(self, tenant: str, ladder: str | None = None) -> list[FolderRow]:
        c = slate_folders.c
        stmt = select(c.ladder, c.user_id, c.slate, c.folder, c.usage).where(c.tenant_id == tenant)
        if ladder is not None:
            stmt = stmt.where(c.ladder == ladder)
        with self.db.read() as conn:
            return [
                FolderRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]))
                for r in conn.execute(stmt.order_by(c.ladder, c.slate, c.user_id, c.folder))
            ]

    def count_entries(self, conn: Connection, folder_id: int) -> int:
        return int(
            conn.execute(
                select(func.count())
                .select_from(slate_entries)
                .where(slate_entries.c.folder_id == folder_id)
            ).scalar_one()
        )


def folder_state(
    key: FolderKey,
    token_limit: int,
    policy: str,
    folder_id: int | None,
    clock: int,
    files: dict[str, FileState],
) -> FolderState:
    return FolderState(key.slate, key.folder, token_limit, policy, clock, files, folder_id)
