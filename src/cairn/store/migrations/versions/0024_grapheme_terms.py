"""Text analysis: unspaced scripts paired by grapheme, every script's digits as ASCII digits.

``cairn.core.analysis`` now pairs the characters of a Thai, Lao, Khmer or Myanmar run by
grapheme (a letter with its vowel and tone marks), so no indexed term is a lone mark (``กุ้ง``,
"shrimp", matched ``ยุ้งฉาง``, "granary", on ``ุ้`` and ``้ง``), and folds the decimal digits of
every script to ASCII (``११००१`` is found by ``11001``; only NFKC's were folded). This revision
analyses again the stored text that holds a mark or a non-ASCII digit:

- memories: ``search_text`` from the content (and keywords), and the neighbour words
  (``metadata.context_terms``), whose source texts are not stored: their old terms are put
  back together (an unspaced run from its overlapping pairs) and analysed again; SQLite's
  ``search_stems`` follow;
- document chunks: ``search_text`` from the content;
- items: ``search_text`` from its old terms put back together (the fields an item was indexed
  by are not stored).

The full-text indexes follow (the SQLite triggers, PostgreSQL's generated ``tsv``). Rows
without such characters analyse as before and are not touched; rows with Arabic, Hebrew,
Devanagari or Greek letters are left to ``0027_light_stems``, which analyses them again anyway
(this revision uses the analysis of the running release, and ``0027`` after it would stem
their stems a second time).

Revision ID: 0024_grapheme_terms
"""

import json
from collections.abc import Iterator
from typing import Any

import regex
import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import content_terms, index_text
from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text
from cairn.store.migrations.reanalyse import reanalyse_rows

revision = "0024_grapheme_terms"
down_revision = "0023_tombstone_text"
branch_labels = None
depends_on = None

BATCH = 1_000
# A mark, or a decimal digit other than ASCII's: text whose analysis changed.
_AFFECTED = regex.compile(r"[\p{M}\p{Nd}--[0-9]]", regex.V1)
# Letters of the scripts ``0027_light_stems`` analyses again: rows holding them are left to it.
# This revision runs today's analysis, whose stems for them ``0027`` would stem a second time.
_LATER = regex.compile(
    r"[\u0600-\u06ff\u0750-\u077f\u05d0-\u05ea\u0370-\u03ff\u1f00-\u1fff]|[\u0900-\u0965\u0970-\u097f]"
)
_UNSPACED = regex.compile(
    r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\u30fc\u3005\u3006\u3007]"
)


def upgrade() -> None:
    conn = op.get_bind()
    _memories(conn, conn.dialect.name == "sqlite")
    reanalyse_rows(conn, "document_chunks", "content", index_text, _affected)
    reanalyse_rows(conn, "items", "search_text", _item_text, _affected)


def _affected(text: str) -> bool:
    """A chunk's or item's text this revision analyses again (not one left to ``0027``)."""
    return bool(_AFFECTED.search(text)) and not _LATER.search(text)


def _item_text(old: str) -> str:
    return index_text(" ".join(_rejoined(old, True)))


def _rejoined(old: str, unigrams: bool) -> Iterator[str]:
    """The texts behind old terms: words as they are, unspaced runs put back together from
    their overlapping pairs (``a ab b bc c`` with single characters, ``ab bc`` without)."""
    terms = old.split()
    i, n = 0, len(terms)
    while i < n:
        term = terms[i]
        if not _UNSPACED.match(term) or (unigrams and len(term) != 1):
            yield term
            i += 1
            continue
        run, i = term, i + 1
        step = 2 if unigrams else 1
        while i + step - 1 < n and len(terms[i]) == 2 and terms[i][0] == run[-1]:
            if unigrams and terms[i + 1] != terms[i][1]:
                break
            run += terms[i][1]
            i += step
        yield run


def _context(old: str) -> str:
    out: dict[str, None] = {}
    for text in _rejoined(old, False):
        out.update(dict.fromkeys(content_terms(text)))
    return " ".join(out)


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
            if not (_AFFECTED.search(text) or _AFFECTED.search(context)):
                continue
            if _LATER.search(text) or _LATER.search(context):
                continue
            if context:
                meta["context_terms"] = _context(context)
            analysed = memory_search_text(content or "", meta)
            change = {"q": seq, "x": analysed, "m": json.dumps(meta, ensure_ascii=False)}
            if sqlite:
                change["s"] = indexed_stems(f"{analysed} {meta.get('context_terms') or ''}")
            changed.append(change)
        if changed:
            sets = "search_text = :x, metadata = :m" + (", search_stems = :s" if sqlite else "")
            conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), changed)


def downgrade() -> None:
    """Nothing to undo: an older release reads the analysed text as it is."""
