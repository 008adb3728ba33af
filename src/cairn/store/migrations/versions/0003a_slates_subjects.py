"""Slates: runtime_id/agent_id on the tables that carry a user, so that deleting a subject
removes that user's slate state.

Revision ID: 0003a_slates_subjects
"""

import sqlalchemy as sa
from alembic import op

revision = "0003a_slates_subjects"
down_revision = "0003_slates"
branch_labels = None
depends_on = None

TABLES = ("slate_folders", "slate_evictions", "slate_skips")


def upgrade() -> None:
    # Plain ADD COLUMN (no batch copy on SQLite: recreating slate_folders would cascade-delete
    # its files and entries).
    for table in TABLES:
        op.add_column(
            table, sa.Column("runtime_id", sa.String(256), nullable=False, server_default="default")
        )
        op.add_column(
            table, sa.Column("agent_id", sa.String(256), nullable=False, server_default="")
        )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("agent_id")
            batch.drop_column("runtime_id")
