"""Slates: the writes each ladder run applied, recorded in the write's own transaction.

Revision ID: 0008_slate_applied_writes
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import UTCDateTime

revision = "0008_slate_applied_writes"
down_revision = "0003a_slates_subjects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "slate_applied_writes",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("run_id", sa.String(256), primary_key=True),
        sa.Column("effect", sa.String(512), primary_key=True),
        sa.Column("applied_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slate_applied_writes")
