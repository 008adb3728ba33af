"""Memories: a partial index over the rows that have no vector yet.

The background embedding pass looks for them after every compile and in a sweep every minute;
without this index each look reads the whole table. The index holds only the rows waiting for a
vector, so it stays small and costs nothing once they are embedded.

Revision ID: 0010_memories_unembedded
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_memories_unembedded"
down_revision = "0008_slate_applied_writes"
branch_labels = None
depends_on = None

COLUMNS = ["tenant_id", "runtime_id", "user_id", "agent_id", "seq"]


def upgrade() -> None:
    op.create_index(
        "ix_memories_unembedded",
        "memories",
        COLUMNS,
        sqlite_where=sa.text("embedding IS NULL"),
        postgresql_where=sa.text("embedding IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_unembedded", table_name="memories")
