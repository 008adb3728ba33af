"""Compile: full-text index over memories, compile jobs.

SQLite gets a contentless FTS5 table kept in step by triggers; PostgreSQL gets a GIN index on
the same text as a ``tsvector`` expression. Both index ``content`` plus the memory's
``metadata.keywords`` (speaker, absolute dates), so a query can match what the text implies.

Revision ID: 0002_compile
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, UTCDateTime

revision = "0002_compile"
down_revision = "0001_foundation"
branch_labels = ("compile",)
depends_on = None

_SQLITE_BODY = "{r}.content || ' ' || coalesce(json_extract({r}.metadata, '$.keywords'), '')"
_SQLITE_CONTEXT = "coalesce(json_extract({r}.metadata, '$.context_terms'), '')"
# One token naming the row's partition, so FTS5 itself can narrow a query to one partition
# and rank inside it (``ORDER BY rank LIMIT n`` without visiting other partitions' rows).
_SQLITE_PART = (
    "'p' || hex({r}.tenant_id || char(31) || {r}.runtime_id || char(31) || "
    "{r}.user_id || char(31) || {r}.agent_id)"
)
_SQLITE_VALUES = "{r}.seq, " + _SQLITE_BODY + ", " + _SQLITE_CONTEXT + ", " + _SQLITE_PART


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5("
            "body, context, part, content='', tokenize='porter unicode61 remove_diacritics 2')"
        )
        op.execute(
            "INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5, 0.0)')"
        )
        insert_new = (
            "INSERT INTO memories_fts(rowid, body, context, part) VALUES "
            f"({_SQLITE_VALUES.format(r='new')});"
        )
        delete_old = (
            "INSERT INTO memories_fts(memories_fts, rowid, body, context, part) "
            f"VALUES ('delete', {_SQLITE_VALUES.format(r='old')});"
        )
        op.execute(
            f"CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN {insert_new} END"
        )
        op.execute(
            f"CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN {delete_old} END"
        )
        op.execute(
            "CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, metadata ON memories "
            f"BEGIN {delete_old} {insert_new} END"
        )
    else:
        op.execute(
            "CREATE INDEX ix_memories_fts ON memories USING gin (("
            "setweight(to_tsvector('english'::regconfig, content || ' ' || "
            "coalesce(metadata->>'keywords', '')), 'A') || "
            "setweight(to_tsvector('english'::regconfig, "
            "coalesce(metadata->>'context_terms', '')), 'D')))"
        )
    op.create_index(
        "ix_memories_scope_kind",
        "memories",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "kind", "status"],
    )
    op.create_index(
        "ix_episodes_uncompiled",
        "episodes",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "compiled"],
    )
    op.create_table(
        "compile_jobs",
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("runtime_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("agent_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("memories_created", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("memory_ids", JsonType, nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
    )
    op.create_index("ix_compile_jobs_status", "compile_jobs", ["status", "created_at"])
    # Bumped whenever a partition's vectors change: the vector lane's cache key.
    op.create_table(
        "memory_vector_versions",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("runtime_id", sa.String(256), primary_key=True),
        sa.Column("user_id", sa.String(256), primary_key=True, server_default=""),
        sa.Column("agent_id", sa.String(256), primary_key=True, server_default=""),
        sa.Column("version", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_vector_versions")
    op.drop_table("compile_jobs")
    op.drop_index("ix_episodes_uncompiled", "episodes")
    op.drop_index("ix_memories_scope_kind", "memories")
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in ("memories_fts_ai", "memories_fts_ad", "memories_fts_au"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS memories_fts")
    else:
        op.execute("DROP INDEX IF EXISTS ix_memories_fts")
