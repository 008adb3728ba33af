"""Retention: per-tenant time-to-live of episodes and memories, and an audit of what expired.

Revision ID: 0011_retention
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import SeqType, UTCDateTime

revision = "0011_retention"
down_revision = "0008_slate_applied_writes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant_retention",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("episode_ttl_days", sa.Integer(), nullable=True),
        sa.Column("memory_ttl_days", sa.Integer(), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "retention_sweeps",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("swept_at", UTCDateTime(), nullable=False),
        sa.Column("episodes_deleted", sa.Integer(), nullable=False),
        sa.Column("memories_deleted", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("retention_sweeps")
    op.drop_table("tenant_retention")
