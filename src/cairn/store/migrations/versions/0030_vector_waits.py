"""The memories waiting for a vector in a table of their own, ``memory_vector_waits``.

Until now a memory's row said whether it had a vector (``vector_size``, NULL: none yet, with a
partial index over the NULLs for the background embedding pass), so writing a vector updated
the memory's row. On PostgreSQL an update is a new row version: every vector written left a
dead copy of its memory (some 2 KB) and new entries in every index of ``memories``, its
full-text GIN index among them, until a VACUUM. Right after the pass, a partition's lexical
search read twice the rows (docs/benchmarks.md, session 37).

Now a memory waits in ``memory_vector_waits`` (its seq and partition): a trigger adds each
memory stored other than as a tombstone, writing its vector deletes that row, and a change
that clears its vector adds it again. Which embedder wrote a vector is told by its byte
length in ``memory_embeddings``, as ``vector_size`` told it. Going down restores the column
and its index from the two tables.

Revision ID: 0030_vector_waits
"""

import sqlalchemy as sa
from alembic import op

revision = "0030_vector_waits"
down_revision = "0029_slate_reads"
branch_labels = None
depends_on = None

SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PART = "tenant_id, runtime_id, user_id, agent_id"

_SQLITE_TRIGGER = f"""
CREATE TRIGGER memories_vector_wait AFTER INSERT ON memories WHEN new.status <> 'deleted'
BEGIN
    INSERT OR IGNORE INTO memory_vector_waits (seq, {PART})
    VALUES (new.seq, new.tenant_id, new.runtime_id, new.user_id, new.agent_id);
END
"""

# One statement-level trigger (a transition table): a compile's 1,000-row insert is one
# insert here, not a thousand.
_PG_FUNCTION = f"""
CREATE FUNCTION memories_vector_wait() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memory_vector_waits (seq, {PART})
    SELECT seq, {PART} FROM new_memories WHERE status <> 'deleted'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$
"""
_PG_TRIGGER = """
CREATE TRIGGER memories_vector_wait AFTER INSERT ON memories
REFERENCING NEW TABLE AS new_memories FOR EACH STATEMENT
EXECUTE FUNCTION memories_vector_wait()
"""


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if not sqlite:
        # A process of the release before may be compiling: no memory may land between the
        # copy below and the trigger (the trigger is seen by others only once this commits).
        # The strongest lock at once: dropping the column needs it, and taking a weaker one
        # first could deadlock with an older process's read-then-write.
        op.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
    op.create_table(
        "memory_vector_waits",
        sa.Column(
            "seq",
            SEQ,
            sa.ForeignKey("memories.seq", ondelete="CASCADE"),
            primary_key=True,
            autoincrement=False,
        ),
        sa.Column("tenant_id", sa.String(128), nullable=False),
        sa.Column("runtime_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("agent_id", sa.String(256), nullable=False, server_default=""),
    )
    op.execute(
        f"INSERT INTO memory_vector_waits (seq, {PART}) SELECT seq, {PART} FROM memories "
        "WHERE vector_size IS NULL AND status <> 'deleted'"
    )
    op.create_index(
        "ix_memory_vector_waits_part",
        "memory_vector_waits",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "seq"],
    )
    if sqlite:
        op.execute(_SQLITE_TRIGGER)
    else:
        op.execute(_PG_FUNCTION)
        op.execute(_PG_TRIGGER)
    op.drop_index("ix_memories_unembedded", table_name="memories")
    # (Plain ALTER TABLE on SQLite too: a batch operation would rebuild the table and lose
    # its full-text triggers.)
    op.execute("ALTER TABLE memories DROP COLUMN vector_size")


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    op.execute("ALTER TABLE memories ADD COLUMN vector_size INTEGER")
    length = "length" if sqlite else "octet_length"
    op.execute(
        f"UPDATE memories SET vector_size = (SELECT {length}(e.embedding) "
        "FROM memory_embeddings e WHERE e.seq = memories.seq) "
        "WHERE EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.seq = memories.seq)"
    )
    where = sa.text("vector_size IS NULL")
    op.create_index(
        "ix_memories_unembedded",
        "memories",
        ["tenant_id", "runtime_id", "user_id", "agent_id", "seq"],
        sqlite_where=where,
        postgresql_where=where,
    )
    op.execute("DROP TRIGGER memories_vector_wait" + ("" if sqlite else " ON memories"))
    if not sqlite:
        op.execute("DROP FUNCTION memories_vector_wait()")
    op.drop_table("memory_vector_waits")
