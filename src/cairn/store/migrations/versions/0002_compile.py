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


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5("
            "body, context, content='', tokenize='porter unicode61 remove_diacritics 2')"
        )
        op.execute(
            "CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN "
            "INSERT INTO memories_fts(rowid, body, context) VALUES "
            f"(new.seq, {_SQLITE_BODY.format(r='new')}, {_SQLITE_CONTEXT.format(r='new')});"
            " END"
        )
        op.execute(
            "CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN "
            "INSERT INTO memories_fts(memories_fts, rowid, body, context) VALUES ('delete', "
            f"old.seq, {_SQLITE_BODY.format(r='old')}, {_SQLITE_CONTEXT.format(r='old')}); END"
        )
        op.execute(
            "CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, metadata ON memories BEGIN "
            "INSERT INTO memories_fts(memories_fts, rowid, body, context) VALUES ('delete', "
            f"old.seq, {_SQLITE_BODY.format(r='old')}, {_SQLITE_CONTEXT.format(r='old')}); "
            "INSERT INTO memories_fts(rowid, body, context) VALUES "
            f"(new.seq, {_SQLITE_BODY.format(r='new')}, {_SQLITE_CONTEXT.format(r='new')});"
            " END"
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
        "ix_memories_scope_kind", "memories",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "kind", "status"],
    )
    op.create_index(
        "ix_episodes_uncompiled", "episodes",
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


def downgrade() -> None:
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
