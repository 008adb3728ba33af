"""Tombstones keep no vector: a forgotten memory's vector, and its wait for one, are removed.

Forgetting a memory wipes its text and removes its vector. An older release could still write
the vector of a memory forgotten while its background pass was embedding it, into the row
(``memories.embedding``, before ``0020_memory_embeddings``), and ``0020`` copied every row's
vector, a tombstone's too: a vector made from forgotten text stayed until the subject was
erased. This removes the vectors of tombstones, and their waits (a tombstone is never
embedded). Nothing to restore going down (the text is gone).

Revision ID: 0035_tombstone_vectors
"""

import sqlalchemy as sa
from alembic import op

revision = "0035_tombstone_vectors"
down_revision = "0034_zero_width_joiners"
branch_labels = None
depends_on = None

_TOMBSTONES = "SELECT seq FROM memories WHERE status = 'deleted'"


def upgrade() -> None:
    op.execute(sa.text(f"DELETE FROM memory_embeddings WHERE seq IN ({_TOMBSTONES})"))
    op.execute(sa.text(f"DELETE FROM memory_vector_waits WHERE seq IN ({_TOMBSTONES})"))


def downgrade() -> None:
    pass
