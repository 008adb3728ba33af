"""PostgreSQL full-text ranking by BM25: the partition's lexemes, counted beside its memories.

PostgreSQL's lexical lane ranked with ``ts_rank`` (normalisation 1: divided by the log of a
row's length), which favours long rows more than SQLite's BM25 and fits fewer turns into a
budget. It now computes BM25 itself (``cairn.store.memory_search``), which needs the
partition's average row length: ``memory_term_stats`` gains ``lexemes``, on the row of term
``''`` (the one that counts a partition's memories per kind and status) the sum of those
memories' ``length(fts)`` (distinct lexemes), and 0 on every term's row. The triggers (as
migration ``0014_compile_indexes`` left them) are replaced by the same ones adding that sum,
and the sums of the rows already stored are written; the downgrade puts 0014's functions back.
SQLite gets the column (the table is empty there: FTS5 keeps its own statistics).

Revision ID: 0016_memory_lengths
"""

import importlib

import sqlalchemy as sa
from alembic import op

revision = "0016_memory_lengths"
down_revision = "0015_turn_confidence"
branch_labels = None
depends_on = None

# 0014's triggers (grouped by hash, ordered by ``term COLLATE "C"``, pruning only the keys a
# statement changed) are the ones this extends, and the ones a downgrade puts back.
_0014 = importlib.import_module("cairn.store.migrations.versions.0014_compile_indexes")
KEY = _0014.KEY

# Rows of ``rows`` as (partition, term, kind, status, count, lexemes): every lexeme (0
# lexemes), and '' per row (its ``length(fts)``).
_COUNTS = """
    SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, count(*) AS n,
           sum(l) AS lexemes
    FROM (
        SELECT r.tenant_id, r.runtime_id, r.user_id, r.agent_id, u.lexeme AS term, r.kind,
               r.status, 0 AS l
        FROM {rows} AS r CROSS JOIN LATERAL unnest(r.fts) u
        WHERE r.status IN ('active', 'superseded')
        UNION ALL
        SELECT r.tenant_id, r.runtime_id, r.user_id, r.agent_id, '', r.kind, r.status,
               length(r.fts)
        FROM {rows} AS r WHERE r.status IN ('active', 'superseded')
    ) t
    GROUP BY tenant_id, runtime_id, user_id, agent_id, term, kind, status
"""

_ADD = f"""
    INSERT INTO memory_term_stats AS s ({KEY}, n, lexemes)
    SELECT * FROM ({_COUNTS}) c
    ORDER BY tenant_id, runtime_id, user_id, agent_id, term COLLATE "C", kind, status
    ON CONFLICT ({KEY}) DO UPDATE SET n = s.n + excluded.n, lexemes = s.lexemes + excluded.lexemes
"""

_SUBTRACT = f"""
    UPDATE memory_term_stats s SET n = s.n - c.n, lexemes = s.lexemes - c.lexemes
    FROM ({_COUNTS}) c
    WHERE (s.tenant_id, s.runtime_id, s.user_id, s.agent_id, s.term, s.kind, s.status)
        = (c.tenant_id, c.runtime_id, c.user_id, c.agent_id, c.term, c.kind, c.status)
"""

_PRUNE = _0014._PRUNE  # keys only: the same with or without the lengths

FUNCTIONS = _0014.functions(_ADD, _SUBTRACT, _PRUNE)


# The sums of the memories stored before this ran.
_BACKFILL = """
UPDATE memory_term_stats s SET lexemes = c.lexemes
FROM (
    SELECT tenant_id, runtime_id, user_id, agent_id, kind, status, sum(length(fts)) AS lexemes
    FROM memories WHERE status IN ('active', 'superseded')
    GROUP BY tenant_id, runtime_id, user_id, agent_id, kind, status
) c
WHERE s.term = '' AND (s.tenant_id, s.runtime_id, s.user_id, s.agent_id, s.kind, s.status)
    = (c.tenant_id, c.runtime_id, c.user_id, c.agent_id, c.kind, c.status)
"""


def upgrade() -> None:
    op.add_column(
        "memory_term_stats",
        sa.Column("lexemes", sa.BigInteger(), nullable=False, server_default="0"),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    # No write may run the old triggers after the backfill has read the rows: writers wait
    # (and those in flight finish first) until this commits.
    op.execute("LOCK TABLE memories IN SHARE ROW EXCLUSIVE MODE")
    op.execute(FUNCTIONS)
    op.execute(_BACKFILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0014.FUNCTIONS)
    with op.batch_alter_table("memory_term_stats") as batch:  # SQLite before 3.35 too
        batch.drop_column("lexemes")
