"""A compile step that costs the same at any subject size: episode indexes, cheaper term counts.

- ``ix_episodes_uncompiled`` becomes a partial index over the episodes not compiled yet, in
  compile order (partition, ``occurred_at``, ``seq``). Each compile step reads the partition's
  next 100 uncompiled episodes and counts what is left; the index of 0002 (partition,
  ``compiled``) found every uncompiled row of the partition and sorted them all for the first
  100, a step's cost growing with what waits. The index holds only the waiting rows, in order.
  Its predicate is written as the queries write it (``compiled IS false``; SQLite: ``IS 0``)
  so both planners match it to them.
- ``ix_episodes_session``: (partition, ``session_id``, ``occurred_at``, ``seq``): the earlier
  episodes of the sessions a step touches (and a session's latest turns) without a pass over
  the partition.
- PostgreSQL: the triggers of ``memory_term_stats`` (0013) keep their counts, cheaper. The
  insert trigger grouped a statement's lexemes by sorting them in the database's collation
  (the sort was half the trigger's time: 10 ms of 21 for 100 memories); it now groups by hash
  and orders the grouped rows by ``term COLLATE "C"`` (any fixed order keeps concurrent upserts
  from deadlocking). The delete and update triggers removed zero counts by reading every count
  of the partition (a pass per supersede or metadata refresh, growing with the partition's
  vocabulary); they now look at the keys they changed only. No count can be zero or less
  before a statement (each one removes its own), so the result is the same.
- PostgreSQL: ``ix_memories_part_fts`` takes new entries through GIN's pending list again,
  capped at its smallest size (``gin_pending_list_limit = 64`` kB, where 0013 had
  ``fastupdate = off``). An insert that fills the list merges it into the index in one sorted
  pass, which costs less than adding each row's entries one by one (the partition's key alone
  is one entry per row): a compile's database time fell by about 30%. A query reads the list
  whole, but 64 kB (about 40 memories) did not change the lexical query's time measurably at
  10,000 memories; 0013's figure (17 ms) was for the default 4 MB list.

Revision ID: 0014_compile_indexes
"""

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0014_compile_indexes"
down_revision = "0013_memory_term_stats"
branch_labels = None
depends_on = None

SCOPE = ["tenant_id", "runtime_id", "user_id", "agent_id"]

_0013 = importlib.import_module("cairn.store.migrations.versions.0013_memory_term_stats")
KEY = _0013.KEY
_COUNTS = _0013._COUNTS
_SUBTRACT = _0013._SUBTRACT

_ADD = f"""
    INSERT INTO memory_term_stats AS s ({KEY}, n)
    SELECT * FROM ({_COUNTS}) c
    ORDER BY tenant_id, runtime_id, user_id, agent_id, term COLLATE "C", kind, status
    ON CONFLICT ({KEY}) DO UPDATE SET n = s.n + excluded.n
"""

_PRUNE = f"""
    DELETE FROM memory_term_stats s USING ({_COUNTS}) c
    WHERE (s.tenant_id, s.runtime_id, s.user_id, s.agent_id, s.term, s.kind, s.status)
        = (c.tenant_id, c.runtime_id, c.user_id, c.agent_id, c.term, c.kind, c.status)
      AND s.n <= 0
"""


def functions(add: str, subtract: str, prune: str) -> str:
    """The three trigger functions of ``memory_term_stats`` from their statements (SQL over
    ``{rows}``); migration 0016 builds its own from the same frame."""
    old, new = "(SELECT OLD.*)", "(SELECT NEW.*)"
    return f"""
CREATE OR REPLACE FUNCTION cairn_memory_terms_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {add.format(rows="new_rows")};
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION cairn_memory_terms_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {subtract.format(rows="old_rows")};
    {prune.format(rows="old_rows")};
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION cairn_memory_terms_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    {subtract.format(rows=old)};
    {prune.format(rows=old)};
    {add.format(rows=new)};
    RETURN NULL;
END $$;
"""


FUNCTIONS = functions(_ADD, _SUBTRACT, _PRUNE)


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
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTIONS)
        op.execute(
            "ALTER INDEX ix_memories_part_fts SET (fastupdate = on, gin_pending_list_limit = 64)"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0013.FUNCTIONS.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"))
        # Turning fastupdate off leaves the pending entries where they are: merge them first.
        op.execute("SELECT gin_clean_pending_list('ix_memories_part_fts'::regclass)")
        op.execute("ALTER INDEX ix_memories_part_fts RESET (gin_pending_list_limit)")
        op.execute("ALTER INDEX ix_memories_part_fts SET (fastupdate = off)")
    op.drop_index("ix_episodes_session", table_name="episodes")
    op.drop_index("ix_episodes_uncompiled", table_name="episodes")
    op.create_index("ix_episodes_uncompiled", "episodes", [*SCOPE, "compiled"])
