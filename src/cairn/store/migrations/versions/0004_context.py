"""Context: documents, their chunks, and the chunks' full-text index; a conversation index.

Revision ID: 0004_context
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, SeqType, UTCDateTime

revision = "0004_context"
down_revision = "0001_foundation"
branch_labels = ("context",)
depends_on = None


def _scope() -> list[sa.Column[Any]]:
    return [
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("runtime_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("agent_id", sa.String(256), nullable=False, server_default=""),
    ]


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        *_scope(),
        sa.Column("dataset_id", sa.String(256), nullable=False),
        sa.Column("document_id", sa.String(256), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=False),
        sa.Column("title", sa.Text(), nullable=False, server_default=""),
        sa.Column("metadata", JsonType, nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint(
            "tenant_id",
            "runtime_id",
            "user_id",
            "agent_id",
            "dataset_id",
            "idempotency_key",
            name="uq_documents_key",
        ),
    )
    op.create_table(
        "document_chunks",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        *_scope(),
        sa.Column("dataset_id", sa.String(256), nullable=False),
        sa.Column("document_uid", sa.Uuid(), nullable=False),
        sa.Column("document_id", sa.String(256), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("char_start", sa.Integer(), nullable=False),
        sa.Column("char_end", sa.Integer(), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index(
        "ix_document_chunks_scope_dataset",
        "document_chunks",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "dataset_id"],
    )
    # The recent lane reads a conversation's newest episodes.
    op.create_index(
        "ix_episodes_session_time",
        "episodes",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "session_id", "occurred_at"],
    )
    if op.get_bind().dialect.name == "sqlite":
        # An external-content FTS5 index over chunk text, kept in step by triggers.
        op.execute(
            "CREATE VIRTUAL TABLE document_chunks_fts USING fts5("
            "content, content='document_chunks', content_rowid='seq', "
            "tokenize='porter unicode61')"
        )
        op.execute(
            "CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN "
            "INSERT INTO document_chunks_fts(rowid, content) VALUES (new.seq, new.content); END"
        )
        op.execute(
            "CREATE TRIGGER document_chunks_ad AFTER DELETE ON document_chunks BEGIN "
            "INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content) "
            "VALUES ('delete', old.seq, old.content); END"
        )
    else:
        op.execute(
            "ALTER TABLE document_chunks ADD COLUMN tsv tsvector "
            "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
        )
        op.execute("CREATE INDEX ix_document_chunks_tsv ON document_chunks USING GIN (tsv)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS document_chunks_ad")
        op.execute("DROP TRIGGER IF EXISTS document_chunks_ai")
        op.execute("DROP TABLE IF EXISTS document_chunks_fts")
    op.drop_index("ix_episodes_session_time", table_name="episodes")
    op.drop_table("document_chunks")
    op.drop_table("documents")
