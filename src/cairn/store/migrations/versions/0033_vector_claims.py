"""Claims on the memories waiting for a vector: ``memory_vector_waits.claimed_until``.

Every process of a fleet (servers and workers on one database) runs the background pass that
writes vectors, and each read the oldest waiting memories and embedded them: all of them the
same batch, so extra processes added CPU and no speed (an outside run measured 17 vectors a
second with three processes against 21 with one). A process now claims a batch for a while
before embedding it (``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and the others take the next.
Adding a nullable column changes no row and no release before this one reads it.

Revision ID: 0033_vector_claims
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.schema import UTCDateTime

revision = "0033_vector_claims"
down_revision = "0032_erasure_log"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memory_vector_waits", sa.Column("claimed_until", UTCDateTime(), nullable=True))


def downgrade() -> None:
    # (Not a batch rebuild on SQLite: the memories' trigger names this table.)
    op.execute("ALTER TABLE memory_vector_waits DROP COLUMN claimed_until")
