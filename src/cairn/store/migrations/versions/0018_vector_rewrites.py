"""Vector versions: a count of the times a partition's vectors were cleared.

The vector lane extends a cached matrix with the vectors written after its last row when the
partition's vector count adds up. A vector cleared and written again for the same row (an
embedder switch, a contentless turn re-embedded) leaves the count as it was, so the matrix
kept the old vector. Every clearing now also moves ``rewrites`` on, and a matrix is only
extended while it is unchanged.

Revision ID: 0018_vector_rewrites
"""

import sqlalchemy as sa
from alembic import op

revision = "0018_vector_rewrites"
down_revision = "0017_contentless_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memory_vector_versions") as batch:
        batch.add_column(sa.Column("rewrites", sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("memory_vector_versions") as batch:
        batch.drop_column("rewrites")
