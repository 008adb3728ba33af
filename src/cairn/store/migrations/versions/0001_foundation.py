"""Foundation: tenants, API keys, episodes, memories.

Revision ID: 0001_foundation
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, SeqType, UTCDateTime

revision = "0001_foundation"
down_revision = None
branch_labels = ("foundation",)
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
        "tenants",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("tenant_id", sa.String(128), nullable=False, index=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("name", sa.String(256), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("revoked_at", UTCDateTime(), nullable=True),
    )
    op.create_table(
        "episodes",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        *_scope(),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("source", sa.String(256), nullable=False),
        sa.Column("type", sa.String(128), nullable=False),
        sa.Column("payload", JsonType, nullable=False),
        sa.Column("metadata", JsonType, nullable=False),
        sa.Column("provenance", JsonType, nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("occurred_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("compiled", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.UniqueConstraint(
            "tenant_id",
            "runtime_id",
            "user_id",
            "agent_id",
            "idempotency_key",
            name="uq_episodes_idempotency",
        ),
    )
    op.create_index(
        "ix_episodes_scope_time",
        "episodes",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "occurred_at"],
    )
    op.create_table(
        "memories",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        *_scope(),
        sa.Column("session_id", sa.String(256), nullable=True),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False, server_default=""),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("valid_from", UTCDateTime(), nullable=True),
        sa.Column("valid_to", UTCDateTime(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("source_episode_ids", JsonType, nullable=False),
        sa.Column("metadata", JsonType, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("superseded_by", sa.Uuid(), nullable=True),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint(
            "tenant_id",
            "runtime_id",
            "user_id",
            "agent_id",
            "kind",
            "content_hash",
            name="uq_memories_content",
        ),
    )
    op.create_index(
        "ix_memories_scope_status",
        "memories",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "status"],
    )


def downgrade() -> None:
    op.drop_table("memories")
    op.drop_table("episodes")
    op.drop_table("api_keys")
    op.drop_table("tenants")
