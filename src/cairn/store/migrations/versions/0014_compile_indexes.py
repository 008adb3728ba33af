"""Episodes: the indexes a compile's reads need, so a compile step costs the same at any size.

- ``ix_episodes_uncompiled`` becomes a partial index over the episodes not compiled yet, in
  compile order (partition, ``occurred_at``, ``seq``). Each compile step reads the partition's
  next 100 uncompiled episodes and counts what is left; the index of 0002 (partition,
  ``compiled``) found every uncompiled row of the partition and sorted them all for the first
  100, a step's cost growing with what waits. The index holds only the waiting rows, in order.
- ``ix_episodes_session``: (partition, ``session_id``, ``occurred_at``, ``seq``): the earlier
  episodes of the sessions a step touches (and a session's latest turns) without a pass over
  the partition.

The predicate is written as the queries write it (``compiled IS false``; SQLite: ``IS 0``) so
both planners match the partial index to them.

Revision ID: 0014_compile_indexes
"""

import sqlalchemy as sa
from alembic import op

revision = "0014_compile_indexes"
down_revision = "0013_memory_term_stats"
branch_labels = None
depends_on = None

SCOPE = ["tenant_id", "runtime_id", "user_id", "agent_id"]


def upgrade() -> None:
    op.drop_index("ix_episodes_uncompiled", table_name="episodes")
    op.create_index(
        "ix_episodes_uncompiled",
        "episodes",
        [*SCOPE, "occurred_at", "seq"],
        sqlite_where=sa.text("compiled IS 0"),
        postgresql_where=sa.text("compiled IS false"),
    )
    op.create_index("ix_episodes_session", "episodes", [*SCOPE, "session_id", "occurred_at", "seq"])


def downgrade() -> None:
    op.drop_index("ix_episodes_session", table_name="episodes")
    op.drop_index("ix_episodes_uncompiled", table_name="episodes")
    op.create_index("ix_episodes_uncompiled", "episodes", [*SCOPE, "compiled"])
