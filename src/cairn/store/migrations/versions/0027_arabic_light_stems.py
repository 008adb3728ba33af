"""Text analysis: Arabic words light-stemmed, more Arabic question words.

``cairn.core.analysis`` now stems Arabic words with a light stemmer (``cairn.core.arabic``)
instead of Snowball's, which stemmed a word differently with and without an attached particle
(``بلكونة`` / ``البلكونة``), and knows the question words and possessive particles of
Egyptian, Gulf, Iraqi and Maghrebi Arabic as function words. This revision analyses again the
stored text that holds an Arabic-script letter:

- memories: ``search_text`` from the content (and keywords); the neighbour words
  (``metadata.context_terms``), whose source texts are not stored, lose the article or
  conjunction Snowball left on an Arabic term (``وال``, ``ال``, ``و``: ``arabic.without_prefix``)
  and function words. A Snowball stem is not stemmed again (light stemming is not idempotent:
  ``بلكون`` would lose ``ون``), so where Snowball cut differently (``لكون`` for ``بلكونة``) the
  old term stays until the turn is compiled again; SQLite's ``search_stems`` follow;
- document chunks: ``search_text`` from the content;
- items: the same as neighbour words for each old Arabic term of ``search_text`` (the fields an
  item was indexed by are not stored).

The full-text indexes follow (the SQLite triggers, PostgreSQL's generated ``tsv`` and the
term statistics' triggers). A turn's confidence, which counts its content words, keeps the
value its compile gave it. Rows without Arabic-script letters analyse as before and are not
touched.

Revision ID: 0027_arabic_light_stems
"""

import json
from collections.abc import Callable
from typing import Any

import regex
import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import STOP_WORDS, index_text
from cairn.core.arabic import without_prefix
from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text

revision = "0027_arabic_light_stems"
down_revision = "0026_contentless_again"
branch_labels = None
depends_on = None

BATCH = 1_000
# A letter of the Arabic script (the blocks whose words the analysis stems).
_ARABIC = regex.compile(r"[\u0600-\u06ff\u0750-\u077f]")


def upgrade() -> None:
    conn = op.get_bind()
    _memories(conn, conn.dialect.name == "sqlite")
    _rows(conn, "document_chunks", "content", index_text)
    _rows(conn, "items", "search_text", _index_terms)


def _neighbour_terms(old: str) -> str:
    """Old neighbour words with the article or conjunction Snowball left on an Arabic one
    removed (``without_prefix``; a stem is never stemmed again: light stemming is not
    idempotent), the function words now known dropped, each once."""
    out: dict[str, None] = {}
    for term in old.split():
        if term not in STOP_WORDS:
            out.setdefault(without_prefix(term) if _ARABIC.match(term) else term)
    return " ".join(out)


def _index_terms(old: str) -> str:
    """Old analysed terms with the article or conjunction left on an Arabic one removed,
    repeats kept (what an index stores)."""
    return " ".join(without_prefix(t) if _ARABIC.match(t) else t for t in old.split())


def _memories(conn: sa.Connection, sqlite: bool) -> None:
    after = 0
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT seq, content, metadata FROM memories WHERE seq > :after "
                "AND status != 'deleted' ORDER BY seq LIMIT :n"
            ),
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        changed = []
        for seq, content, raw in rows:
            meta: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            context = str(meta.get("context_terms") or "")
            text = f"{content} {meta.get('keywords') or ''}"
            if not (_ARABIC.search(text) or _ARABIC.search(context)):
                continue
            if context:
                meta["context_terms"] = _neighbour_terms(context)
            analysed = memory_search_text(content or "", meta)
            change = {"q": seq, "x": analysed, "m": json.dumps(meta, ensure_ascii=False)}
            if sqlite:
                change["s"] = indexed_stems(f"{analysed} {meta.get('context_terms') or ''}")
            changed.append(change)
        if changed:
            sets = "search_text = :x, metadata = :m" + (", search_stems = :s" if sqlite else "")
            conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), changed)


def _rows(conn: sa.Connection, table: str, column: str, analyse: Callable[[str], str]) -> None:
    """``search_text`` of ``table``'s rows with Arabic letters, analysed again from
    ``column``."""
    after = 0
    while True:
        rows = conn.execute(
            sa.text(f"SELECT seq, {column} FROM {table} WHERE seq > :after ORDER BY seq LIMIT :n"),
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        changed = [
            {"q": seq, "x": analyse(text or "")} for seq, text in rows if _ARABIC.search(text or "")
        ]
        if changed:
            conn.execute(sa.text(f"UPDATE {table} SET search_text = :x WHERE seq = :q"), changed)


def downgrade() -> None:
    """Nothing to undo: an older release reads the analysed text as it is (its queries stem
    Arabic words the old way, so they match fewer of these rows until compiled again)."""
