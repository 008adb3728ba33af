"""The slate tables: folders, files, entries, evictions, skipped writes, applied writes.

A folder row holds its logical ``clock`` and token ``usage``; files and entries hang off it
(deleted with it). Evictions and skipped writes are the slate's history, and applied writes
the claims that make a ladder run's write happen at most once (``cairn.store.slates``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from cairn.core.scope import DEFAULT_RUNTIME
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


__all__ = [
    "CLAIM_RETENTION",
    "slate_applied_writes",
    "slate_entries",
    "slate_evictions",
    "slate_files",
    "slate_folders",
    "slate_skips",
]
