"""PostgreSQL: a memory's ``fts`` stays in its row (storage MAIN instead of EXTENDED).

A memory row with its neighbour words, metadata and vector often passes PostgreSQL's 2 KB
TOAST threshold, and the biggest column of such a row, the ``tsvector``, was the one moved
out of line: ranking then fetched it from the TOAST table once for each term's ``ts_rank``
and again for the row's length, for every candidate (about a sixth of the rows of the
benchmark's 10,000-memory subject; the ranking query 20-30 % slower). With MAIN the other
columns (the vector, metadata, the texts) are compressed or moved out first, and ``fts`` only
if the row still does not fit.

A storage change applies to rows written after it. Rows stored before keep their
out-of-line ``fts`` until rewritten: ``VACUUM FULL memories`` (which locks the table while it
runs) rewrites them all (docs/deployment.md, "Upgrades"). SQLite has no such storage: nothing
to do there.

Revision ID: 0019_inline_fts
"""

from alembic import op

revision = "0019_inline_fts"
down_revision = "0018_vector_rewrites"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE memories ALTER COLUMN fts SET STORAGE MAIN")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE memories ALTER COLUMN fts SET STORAGE EXTENDED")
