"""PostgreSQL full-text ranking by BM25: the partition's lexemes, counted beside its memories.

PostgreSQL's lexical lane ranked with ``ts_rank`` (normalisation 1: divided by the log of a
row's length), which favours long rows more than SQLite's BM25 and fits fewer turns into a
budget. It now computes BM25 itself (``cairn.store.memory_search``), which needs the
partition's average row length: ``memory_term_stats`` gains ``lexemes``, on the row of term
``''`` (the one that counts a partition's memories per kind and status) the sum of those
memories' ``length(fts)`` (distinct lexemes), and 0 on every term's row. The triggers of
migration ``0013_memory_term_stats`` are replaced by the same ones adding that sum, and the
sums of the rows already stored are written. SQLite gets the column (the table is empty there:
FTS5 keeps its own statistics).

The SQL is written out here as it is when this runs (a later change of the search does not
change what this migration did); the downgrade restores 0013's functions.

Revision ID: 0016_memory_lengths
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_memory_lengths"
down_revision = "0015_turn_confidence"
branch_labels = None
depends_on = None

KEY = "tenant_id, runtime_id, user_id, agent_id, term, kind, status"


def _counts(rows: str, lengths: bool) -> str:
    """Rows of ``rows`` as (partition, term, kind, status, count[, lexemes]): every lexeme,
    and ``''`` per row (with the row's ``length(fts)`` when ``lengths``)."""
    size = ", 0 AS l" if lengths else ""
    row_size = ", length(r.fts) AS l" if lengths else ""
    total = ", sum(l) AS lexemes" if lengths else ""
    return f"""
    SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, count(*) AS n{total}
    FROM (
        SELECT r.tenant_id, r.runtime_id, r.user_id, r.agent_id, u.lexeme AS term, r.kind,
               r.status{size}
        FROM {rows} AS r CROSS JOIN LATERAL unnest(r.fts) u
        WHERE r.status IN ('active', 'superseded')
        UNION ALL
        SELECT r.tenant_id, r.runtime_id, r.user_id, r.agent_id, '', r.kind, r.status{row_size}
        FROM {rows} AS r WHERE r.status IN ('active', 'superseded')
    ) t
    GROUP BY tenant_id, runtime_id, user_id, agent_id, term, kind, status
"""


def _functions(lengths: bool) -> str:
    extra = ", lexemes" if lengths else ""
    add = f"""
    INSERT INTO memory_term_stats AS s ({KEY}, n{extra})
    SELECT * FROM ({_counts("{rows}", lengths)}) c ORDER BY {KEY}
    ON CONFLICT ({KEY}) DO UPDATE SET n = s.n + excluded.n"""
    add += ", lexemes = s.lexemes + excluded.lexemes" if lengths else ""
    less = ", lexemes = s.lexemes - c.lexemes" if lengths else ""
    subtract = f"""
    UPDATE memory_term_stats s SET n = s.n - c.n{less}
    FROM ({_counts("{rows}", lengths)}) c
    WHERE (s.tenant_id, s.runtime_id, s.user_id, s.agent_id, s.term, s.kind, s.status)
        = (c.tenant_id, c.runtime_id, c.user_id, c.agent_id, c.term, c.kind, c.status)"""
    prune = """
    DELETE FROM memory_term_stats s
    USING (SELECT DISTINCT r.tenant_id, r.runtime_id, r.user_id, r.agent_id FROM {rows} AS r) p
    WHERE (s.tenant_id, s.runtime_id, s.user_id, s.agent_id)
        = (p.tenant_id, p.runtime_id, p.user_id, p.agent_id)
      AND s.n <= 0"""
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
    op.execute(_functions(lengths=True))
    op.execute(_BACKFILL)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_functions(lengths=False))
    op.drop_column("memory_term_stats", "lexemes")
