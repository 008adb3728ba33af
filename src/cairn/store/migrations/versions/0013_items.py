"""Items: JSON values under a namespace and key in a scope partition (the LangGraph store).

Revision ID: 0013_items
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, SeqType, UTCDateTime

revision = "0013_items"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "items",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.Uuid(), nullable=False, unique=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("runtime_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("agent_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("address", sa.String(64), nullable=False),
        sa.Column("value", JsonType, nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False, server_default=""),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_dims", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("embedding_source", sa.String(160), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("ttl_seconds", sa.Float(), nullable=True),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.UniqueConstraint(
            "tenant_id", "runtime_id", "user_id", "agent_id", "address", name="uq_items_address"
        ),
    )
    op.create_index(
        "ix_items_scope_namespace",
        "items",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "namespace"],
    )
    op.create_index("ix_items_expiry", "items", ["tenant_id", "expires_at"])


def downgrade() -> None:
    op.drop_index("ix_items_expiry", "items")
    op.drop_index("ix_items_scope_namespace", "items")
    op.drop_table("items")
