"""The one schema both backends share, as SQLAlchemy Core tables.

Migrations (``store/migrations``) create and change these tables; this module is what queries
are written against. Keep the two in step: a test migrates a fresh database and compares.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    false,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator

metadata = MetaData()

# SQLite only autoincrements an INTEGER PRIMARY KEY; PostgreSQL gets a BIGINT identity.
SeqType = BigInteger().with_variant(Integer(), "sqlite")
JsonType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on both backends (SQLite stores naive UTC text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        when: datetime = value
        if when.tzinfo is None:
            return when.replace(tzinfo=UTC)
        return when.astimezone(UTC)


def scope_columns() -> list[Column[Any]]:
    """The partition columns every scoped table starts with (fresh objects per table)."""
    return [
        Column("tenant_id", String(128), nullable=False),
        Column("runtime_id", String(256), nullable=False),
        Column("user_id", String(256), nullable=False, server_default=""),
        Column("agent_id", String(256), nullable=False, server_default=""),
    ]


tenants = Table(
    "tenants",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("created_at", UTCDateTime(), nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("tenant_id", String(128), nullable=False, index=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("prefix", String(16), nullable=False),
    Column("name", String(256), nullable=False, server_default=""),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("revoked_at", UTCDateTime(), nullable=True),
)

# Per-key request counts of the rate limit (``store.rates``), one row per key and window.
rate_counters = Table(
    "rate_counters",
    metadata,
    Column("bucket", String(64), primary_key=True),
    Column("minute", BigInteger(), primary_key=True),
    Column("count", Integer(), nullable=False),
)

# Inspector sign-ins: ``id`` is the SHA-256 of the random cookie token, so the table never
# holds anything a browser could present; a session ends at ``expires_at``, at sign-out
# (``revoked_at``), or as soon as its key is revoked (checked by a join on every request).
ui_sessions = Table(
    "ui_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant_id", String(128), nullable=False),
    Column("key_id", String(36), nullable=False, index=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("expires_at", UTCDateTime(), nullable=False, index=True),
    Column("revoked_at", UTCDateTime(), nullable=True),
)

episodes = Table(
    "episodes",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", Uuid(), nullable=False, unique=True),
    *scope_columns(),
    Column("session_id", String(256), nullable=True),
    Column("source", String(256), nullable=False),
    Column("type", String(128), nullable=False),
    Column("payload", JsonType, nullable=False),
    Column("metadata", JsonType, nullable=False),
    Column("provenance", JsonType, nullable=False),
    Column("idempotency_key", String(256), nullable=True),
    Column("occurred_at", UTCDateTime(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("compiled", Boolean(), nullable=False, server_default=false()),
    UniqueConstraint(
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "idempotency_key",
        name="uq_episodes_idempotency",
    ),
    Index(
        "ix_episodes_scope_time", "tenant_id", "runtime_id", "user_id", "agent_id", "occurred_at"
    ),
    # The compile's reads (migration 0014): the partition's uncompiled episodes in compile
    # order, and the episodes of given sessions.
    Index(
        "ix_episodes_uncompiled",
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "occurred_at",
        "seq",
        sqlite_where=text("compiled IS 0"),
        postgresql_where=text("compiled IS false"),
    ),
    Index(
        "ix_episodes_session",
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "session_id",
        "occurred_at",
        "seq",
    ),
)

memories = Table(
    "memories",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", Uuid(), nullable=False, unique=True),
    *scope_columns(),
    Column("session_id", String(256), nullable=True),
    Column("kind", String(64), nullable=False),
    Column("content", Text(), nullable=False),
    Column("summary", Text(), nullable=False, server_default=""),
    Column("confidence", Float(), nullable=False),
    Column("valid_from", UTCDateTime(), nullable=True),
    Column("valid_to", UTCDateTime(), nullable=True),
    Column("status", String(16), nullable=False),
    Column("source_episode_ids", JsonType, nullable=False),
    Column("metadata", JsonType, nullable=False),
    Column("content_hash", String(64), nullable=False),
    # ``content`` and its date keywords as ``cairn.core.analysis`` cuts them: what full-text
    # indexes read (migration 0009).
    Column("search_text", Text(), nullable=False, server_default=""),
    # SQLite: the distinct stems of ``search_text`` and the neighbour words, as hybrid
    # ranking compares them with a query's (``fts5_rank.indexed_stems``; migration 0021).
    # NULL on PostgreSQL, which weighs them in SQL, and where a writer did not know them.
    Column("search_stems", Text(), nullable=True),
    Column("superseded_by", Uuid(), nullable=True),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    UniqueConstraint(
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "kind",
        "content_hash",
        name="uq_memories_content",
    ),
    Index("ix_memories_scope_status", "tenant_id", "runtime_id", "user_id", "agent_id", "status"),
)


# Each memory's vector, out of its row (migration 0020): a vector of the default embedder is
# 3.6 KB, and kept in the row it pushed the columns every read wants onto SQLite's overflow
# pages. Only the vector lane reads these, a partition at a time.
def _memory_seq() -> Column[Any]:
    """The key of a table of one row per memory, gone with its memory."""
    return Column(
        "seq",
        SeqType,
        ForeignKey("memories.seq", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    )


memory_embeddings = Table(
    "memory_embeddings",
    metadata,
    _memory_seq(),
    Column("embedding", LargeBinary(), nullable=False),
)

# The memories waiting for a vector, by partition (migration 0030): the background embedding
# pass finds its work here. A trigger adds each memory stored (not as a tombstone); writing
# its vector deletes the row; a text change adds it again. Kept out of ``memories`` so that a
# vector written never rewrites its memory's row (on PostgreSQL a new row version, with
# entries in every index of ``memories``, its full-text GIN index among them).
memory_vector_waits = Table(
    "memory_vector_waits",
    metadata,
    _memory_seq(),
    *scope_columns(),
    # Until when a process embedding it has it (``MemoryVectors.claim_waiting``): the other
    # processes of a fleet embed other memories meanwhile. NULL: nobody.
    Column("claimed_until", UTCDateTime(), nullable=True),
    Index("ix_memory_vector_waits_part", "tenant_id", "runtime_id", "user_id", "agent_id", "seq"),
)

# Which tables hold a partition's data (and how it is erased) is listed in one place:
# ``cairn.store.partitions``.
