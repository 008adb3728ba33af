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

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import INVISIBLE, index_text
from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text

revision = "0031_invisible_marks"
down_revision = "0030_vector_waits"
branch_labels = None
depends_on = None

_HOLDS = " OR ".join(f"content LIKE :c{i}" for i in range(len(INVISIBLE)))
_ARGS = {f"c{i}": f"%{c}%" for i, c in enumerate(INVISIBLE)}


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    rows = conn.execute(
        sa.text(
            f"SELECT seq, content, metadata FROM memories WHERE status != 'deleted' AND ({_HOLDS})"
        ),
        _ARGS,
    ).all()
    for seq, content, raw in rows:
        meta: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        analysed = memory_search_text(content or "", meta)
        change: dict[str, Any] = {"q": seq, "x": analysed}
        sets = "search_text = :x"
        if sqlite:
            change["s"] = indexed_stems(f"{analysed} {meta.get('context_terms') or ''}")
            sets += ", search_stems = :s"
        conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), change)
    chunks = conn.execute(
        sa.text(f"SELECT seq, content FROM document_chunks WHERE {_HOLDS}"), _ARGS
    ).all()
    for seq, content in chunks:
        conn.execute(
            sa.text("UPDATE document_chunks SET search_text = :x WHERE seq = :q"),
            {"q": seq, "x": index_text(content or "")},
        )


def downgrade() -> None:
    """Nothing to undo: an older release reads the joined words as any other (its queries
    split a typed soft hyphen, which no one types)."""
