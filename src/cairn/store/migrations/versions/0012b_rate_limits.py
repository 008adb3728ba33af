"""Per-key request counters of the rate limit, shared by every server process.

Revision ID: 0012b_rate_limits
"""

import sqlalchemy as sa
from alembic import op

revision = "0012b_rate_limits"
down_revision = "0001_foundation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_counters",
        sa.Column("bucket", sa.String(64), primary_key=True),
        sa.Column("minute", sa.BigInteger(), primary_key=True),
        sa.Column("count", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_counters")
