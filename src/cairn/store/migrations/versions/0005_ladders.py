"""Ladders: run records (idempotency per run id, status, response and trace).

Revision ID: 0005_ladders
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import JsonType, SeqType, UTCDateTime

revision = "0005_ladders"
down_revision = "0001_foundation"
branch_labels = ("ladders",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ladder_runs",
        sa.Column("seq", SeqType, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(256), nullable=False),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("ladder", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("model", sa.String(256), nullable=False, server_default=""),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("effects", JsonType, nullable=False),
        sa.Column("response", JsonType, nullable=True),
        sa.Column("trace", JsonType, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.UniqueConstraint("tenant_id", "id", name="uq_ladder_runs_id"),
    )
    op.create_index("ix_ladder_runs_tenant_seq", "ladder_runs", ["tenant_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_ladder_runs_tenant_seq", table_name="ladder_runs")
    op.drop_table("ladder_runs")
