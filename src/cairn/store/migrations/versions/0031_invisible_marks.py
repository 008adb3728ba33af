"""Text analysis: a word holding an invisible break hint is the word without it.

A soft hyphen (U+00AD, common in text copied from web pages), a word joiner or a zero-width
no-break space inside a word split it in two, so ``Kaffee\u00admaschine``
was never found by ``kaffeemaschine`` (``cairn.core.analysis.INVISIBLE``). This revision
analyses again the memories and document chunks whose content holds one (found by the
database, so no other row is read); SQLite's ``search_stems`` follow, and the full-text
indexes follow their columns (the SQLite triggers, PostgreSQL's generated ``tsv``). A memory's
neighbour words were cut from texts not stored, and an item's terms from fields not stored:
they keep their split terms until compiled or put again.

Revision ID: 0031_invisible_marks
"""

from __future__ import annotations

from alembic import op

from cairn.store.migrations.reanalyse import reanalyse_holding

revision = "0031_invisible_marks"
down_revision = "0030_vector_waits"
branch_labels = None
depends_on = None

# The hints this revision joined (``INVISIBLE`` has grown since: ``0034``).
_HINTS = "\u00ad\u2060\ufeff"


def upgrade() -> None:
    reanalyse_holding(op.get_bind(), _HINTS)


def downgrade() -> None:
    """Nothing to undo: an older release reads the joined words as any other (its queries
    split a typed soft hyphen, which no one types)."""
