"""Tombstones keep no text: a forgotten memory's analysed ``search_text`` is wiped.

Forgetting a memory (``DELETE /v1/memories/{id}``) wiped its content, summary and metadata but
left ``search_text``, the analysed copy of its words the full-text index is built from: still in
the row, and in every export of the subject. Forgetting now wipes it too; this wipes it in the
tombstones made before. Nothing to restore going down (the text is gone).

Revision ID: 0023_tombstone_text
"""

import sqlalchemy as sa
from alembic import op

revision = "0023_tombstone_text"
down_revision = "0022_question_turns"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE memories SET search_text = '' WHERE status = 'deleted' AND search_text <> ''"
        )
    )


def downgrade() -> None:
    pass
