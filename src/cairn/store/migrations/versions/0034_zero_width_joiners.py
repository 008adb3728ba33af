"""Text analysis: a word holding a zero-width joiner or non-joiner is also indexed without it.

Persian writes a plural or a verb's prefix after a zero-width non-joiner (U+200C: *ketab*
U+200C *ha*, "books"), Indic scripts use it and the zero-width joiner (U+200D) to choose a
letter's shape (``कर्\u200dम``, Sinhala ``ශ්\u200dරී``). Both separated words, so such a word
was indexed as its parts only and not found when typed without the mark, as most keyboards
type it. It is now indexed as its parts (``کتاب``, "book", still finds "books") and as the
word without the mark (``cairn.core.analysis.JOINERS``); this revision analyses again the
memories and document chunks whose content holds one. A content hash keeps the marks (two
texts that differ by one are two memories).

Revision ID: 0034_zero_width_joiners
"""

from __future__ import annotations

from alembic import op

from cairn.store.migrations.reanalyse import reanalyse_holding

revision = "0034_zero_width_joiners"
down_revision = "0033_vector_claims"
branch_labels = None
depends_on = None


def upgrade() -> None:
    reanalyse_holding(op.get_bind(), "\u200c\u200d")


def downgrade() -> None:
    """Nothing to undo: an older release reads the joined words as any other (its queries
    split a typed joiner)."""
