"""SQLite: each memory keeps the distinct stems of its indexed words (``search_stems``).

A hybrid request re-ranks its lexical window (some 340 rows) by the share of the query each
row holds (``cairn.store.fts5_rank.QueryShare``), which it read off the row's analysed text
and neighbour words: splitting some 18,000 words and stemming them took about 3 ms of each
request. The row now carries those words' stems, as FTS5's ``porter`` tokenizer makes them,
once each (``fts5_rank.indexed_stems``), written with the row; the window reads them instead
of the text. Rows without them (``NULL``: written by a writer that does not know them) are
read the old way. PostgreSQL weighs the share in SQL and leaves the column empty.

This revision fills the column for every stored SQLite row, 1,000 at a time (some seconds
per 100,000 memories).

Revision ID: 0021_search_stems
"""

import sqlalchemy as sa
from alembic import op

from cairn.store.fts5_rank import indexed_stems

revision = "0021_search_stems"
down_revision = "0020_memory_embeddings"
branch_labels = None
depends_on = None

BATCH = 1_000


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN search_stems TEXT")
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return
    after = 0
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT seq, search_text, JSON_EXTRACT(metadata, '$.context_terms') "
                "FROM memories WHERE seq > :after AND status != 'deleted' ORDER BY seq LIMIT :n"
            ),
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            return
        conn.execute(
            sa.text("UPDATE memories SET search_stems = :s WHERE seq = :q"),
            [{"q": r[0], "s": indexed_stems(f"{r[1] or ''} {r[2] or ''}")} for r in rows],
        )
        after = rows[-1][0]


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP COLUMN search_stems")
