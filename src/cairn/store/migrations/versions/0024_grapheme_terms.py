"""Text analysis: unspaced scripts paired by grapheme, every script's digits as ASCII digits.

``cairn.core.analysis`` now pairs the characters of a Thai, Lao, Khmer or Myanmar run by
grapheme (a letter with its vowel and tone marks), so no indexed term is a lone mark (``กุ้ง``,
"shrimp", matched ``ยุ้งฉาง``, "granary", on ``ุ้`` and ``้ง``), and folds the decimal digits of
every script to ASCII (``११००१`` is found by ``11001``; only NFKC's were folded). This revision
analyses again the rows whose text holds such marks or digits (``search_text``, and on SQLite
``search_stems``); the full-text indexes follow (the SQLite triggers, PostgreSQL's generated
``tsv``). Other rows analyse as before and are not touched.

Revision ID: 0024_grapheme_terms
"""

import re

import sqlalchemy as sa
from alembic import op

from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text

revision = "0024_grapheme_terms"
down_revision = "0023_tombstone_text"
branch_labels = None
depends_on = None

BATCH = 1_000
# Marks of the unspaced scripts, and non-ASCII decimal digits (some code points of these
# ranges are neither: they analyse as before, so re-analysing them changes nothing).
_AFFECTED = re.compile(
    r"[\u0e31\u0e34-\u0e3a\u0e47-\u0e4e\u0eb1\u0eb4-\u0ebc\u0ec8-\u0ecd\u102b-\u103e"
    r"\u17b4-\u17d3\u0660-\u0669\u06f0-\u06f9\u07c0-\u07c9\u0966-\u096f\u09e6-\u09ef"
    r"\u0a66-\u0a6f\u0ae6-\u0aef\u0b66-\u0b6f\u0be6-\u0bef\u0c66-\u0c6f\u0ce6-\u0cef"
    r"\u0d66-\u0d6f\u0de6-\u0def\u0e50-\u0e59\u0ed0-\u0ed9\u0f20-\u0f29\u1040-\u1049"
    r"\u1090-\u1099\u17e0-\u17e9\u1810-\u1819\u1946-\u194f\u19d0-\u19d9\ua620-\ua629"
    r"\ua8d0-\ua8d9\ua900-\ua909\ua9d0-\ua9d9\uaa50-\uaa59\uabf0-\uabf9]"
)


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    _memories(conn, sqlite)
    _chunks(conn)


def _memories(conn: sa.Connection, sqlite: bool) -> None:
    m = sa.table(
        "memories",
        sa.column("seq"),
        sa.column("content"),
        sa.column("metadata", sa.JSON()),
        sa.column("status"),
        sa.column("search_text"),
    )
    after = 0
    while True:
        rows = conn.execute(
            sa.select(m.c.seq, m.c.content, m.c.metadata)
            .where(m.c.seq > after, m.c.status != "deleted")
            .order_by(m.c.seq)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        changed = []
        for seq, content, metadata in rows:
            meta = metadata if isinstance(metadata, dict) else {}
            if _AFFECTED.search(f"{content} {meta.get('keywords') or ''}"):
                analysed = memory_search_text(content or "", meta)
                context = meta.get("context_terms") or ""
                stems = indexed_stems(f"{analysed} {context}") if sqlite else None
                changed.append({"q": seq, "x": analysed, "s": stems})
        if not changed:
            continue
        sets = "search_text = :x" + (", search_stems = :s" if sqlite else "")
        conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), changed)


def _chunks(conn: sa.Connection) -> None:
    from cairn.core.analysis import index_text

    c = sa.table("document_chunks", sa.column("seq"), sa.column("content"))
    after = 0
    while True:
        rows = conn.execute(
            sa.select(c.c.seq, c.c.content).where(c.c.seq > after).order_by(c.c.seq).limit(BATCH)
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        changed = [
            {"q": seq, "x": index_text(content)}
            for seq, content in rows
            if _AFFECTED.search(content or "")
        ]
        if changed:
            conn.execute(
                sa.text("UPDATE document_chunks SET search_text = :x WHERE seq = :q"), changed
            )


def downgrade() -> None:
    """Nothing to undo: the older analysis reads these rows as it did."""
