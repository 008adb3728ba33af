"""Memories' vectors move out of their rows, into ``memory_embeddings``.

A vector of the default embedder is 3,584 bytes. Kept in the memory's row it made the row
larger than a SQLite page, so the columns every read wants (the analysed text, metadata) sat
on overflow pages behind it, and every row a search or a context request read cost two more
page reads (on PostgreSQL the vector went to the TOAST table, but a row still carried it
through every rewrite). The vector lane, the only reader of vectors, reads them a partition at
a time from their own table; the row keeps the vector's byte length (``vector_size``, NULL
while the memory has none), which the background embedding pass looks for through
``ix_memories_unembedded`` as it looked for a NULL ``embedding``.

SQLite drops the column in place (``ALTER TABLE … DROP COLUMN``, which rewrites each row);
the file keeps its size until ``VACUUM`` (docs/deployment.md, "Upgrades"). On PostgreSQL
dropping the column only marks it dropped; rows shrink as they are rewritten.

Revision ID: 0020_memory_embeddings
"""

import sqlalchemy as sa
from alembic import op

revision = "0020_memory_embeddings"
down_revision = "0019_inline_fts"
branch_labels = None
depends_on = "0010_memories_unembedded"

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
COLUMNS = ["tenant_id", "runtime_id", "user_id", "agent_id", "seq"]


def _unembedded_index(where: str) -> None:
    op.create_index(
        "ix_memories_unembedded",
        "memories",
        COLUMNS,
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    op.create_table(
        "memory_embeddings",
        sa.Column(
            "seq",
            SEQ,
            sa.ForeignKey("memories.seq", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
    )
    op.execute(
        "INSERT INTO memory_embeddings (seq, embedding) "
        "SELECT seq, embedding FROM memories WHERE embedding IS NOT NULL"
    )
    # (Plain ALTER TABLE on SQLite too: a batch operation would rebuild the table and lose
    # its full-text triggers.)
    op.execute("ALTER TABLE memories ADD COLUMN vector_size INTEGER")
    length = "length" if op.get_bind().dialect.name == "sqlite" else "octet_length"
    op.execute(f"UPDATE memories SET vector_size = {length}(embedding) WHERE embedding IS NOT NULL")
    op.drop_index("ix_memories_unembedded", table_name="memories")
    op.execute("ALTER TABLE memories DROP COLUMN embedding")
    _unembedded_index("vector_size IS NULL")


def downgrade() -> None:
    binary = "BLOB" if op.get_bind().dialect.name == "sqlite" else "BYTEA"
    op.execute(f"ALTER TABLE memories ADD COLUMN embedding {binary}")
    op.execute(
        "UPDATE memories SET embedding = (SELECT e.embedding FROM memory_embeddings e "
        "WHERE e.seq = memories.seq) WHERE vector_size IS NOT NULL"
    )
    op.drop_index("ix_memories_unembedded", table_name="memories")
    op.execute("ALTER TABLE memories DROP COLUMN vector_size")
    _unembedded_index("embedding IS NULL")
    op.drop_table("memory_embeddings")
