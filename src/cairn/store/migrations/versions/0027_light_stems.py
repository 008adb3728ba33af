"""Text analysis: Arabic, Hebrew, Hindi and Greek words stemmed, more languages' function words.

``cairn.core.analysis`` now stems Arabic words with a light stemmer (``cairn.core.arabic``)
instead of Snowball's, which stemmed a word differently with and without an attached particle
(``بلكونة`` / ``البلكونة``); takes Hebrew words' particle letters off (``cairn.core.hebrew``:
``הכלב`` is ``כלב``); stems Devanagari and Greek words with Snowball's Hindi and Greek; and
knows the function words of Ukrainian, Persian, Hebrew, Hindi and Greek and the question words
and possessive particles of Egyptian, Gulf, Iraqi and Maghrebi Arabic. This revision analyses
again the stored text that holds an Arabic, Hebrew, Devanagari or Greek letter
(``0024_grapheme_terms`` leaves such rows to it):

- memories: ``search_text`` from the content (and keywords). The neighbour words
  (``metadata.context_terms``), whose source texts are not stored: a Hebrew, Devanagari or
  Greek one was stored as written, so it is stemmed now, or dropped if it is a function word
  now; an Arabic one loses the article or conjunction Snowball left on (``وال``, ``ال``,
  ``و``: ``arabic.without_prefix``) but is not stemmed again (light stemming is not
  idempotent: ``بلكون`` would lose ``ون``), so where Snowball cut differently (``لكون`` for
  ``بلكونة``) the old stem stays until the turn is compiled again, and so do Arabic dialect
  question words and Cyrillic neighbour words that are Ukrainian function words now. A memory
  whose neighbour words changed loses its vector (they are embedded with it; the background
  pass embeds it again). SQLite's ``search_stems`` follow;
- document chunks: ``search_text`` from the content;
- items: each old term of ``search_text`` as for neighbour words, function words kept (the
  fields an item was indexed by are not stored).

The full-text indexes follow (the SQLite triggers, PostgreSQL's generated ``tsv`` and the
term statistics' triggers). A turn's confidence, which counts its content words, keeps the
value its compile gave it. Other rows analyse as before and are not touched. Going down
changes nothing; going up again would stem the neighbour words and items a second time.

Revision ID: 0027_light_stems
"""

import json
from typing import Any

import regex
import sqlalchemy as sa
import Stemmer
from alembic import op

from cairn.core.analysis import STOP_WORDS, fold, index_text
from cairn.core.arabic import without_prefix
from cairn.core.hebrew import prefix_stem
from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text
from cairn.store.migrations.reanalyse import reanalyse_rows
from cairn.store.migrations.turns import bump_vector_versions

revision = "0027_light_stems"
down_revision = "0026_contentless_again"
branch_labels = None
depends_on = None

BATCH = 1_000
# Letters (and digits) of the scripts whose analysis changed: Arabic, Hebrew, Devanagari, Greek.
_ARABIC = regex.compile(r"[\u0600-\u06ff\u0750-\u077f]")
_CHANGED = regex.compile(
    r"[\u0600-\u06ff\u0750-\u077f\u05d0-\u05ea\u0900-\u097f\u0370-\u03ff\u1f00-\u1fff]"
)


def upgrade() -> None:
    conn = op.get_bind()
    terms = _Terms()
    _memories(conn, conn.dialect.name == "sqlite", terms)
    changed = _CHANGED.search
    reanalyse_rows(conn, "document_chunks", "content", index_text, lambda t: bool(changed(t)))
    reanalyse_rows(conn, "items", "search_text", terms.index_terms, lambda t: bool(changed(t)))


class _Terms:
    """Old analysed terms as the analysis now makes them, as far as it can be told (see the
    module); its Snowball stemmers serve this revision only."""

    def __init__(self) -> None:
        self._hindi = Stemmer.Stemmer("hindi")
        self._greek = Stemmer.Stemmer("greek")

    def term(self, old: str) -> tuple[str, bool]:
        """The new term, and whether ``old`` was a word as written (Hebrew, Devanagari and
        Greek words were not stemmed before; Arabic ones were, by Snowball)."""
        word = fold(old)  # digits of every script as ASCII (a row ``0024`` left to this one)
        first = word[:1]
        if "\u05d0" <= first <= "\u05ea":
            return prefix_stem(word) or word, True
        if "\u0900" <= first <= "\u097f":
            return str(self._hindi.stemWord(word)) or word, True
        if "\u0370" <= first <= "\u03ff" or "\u1f00" <= first <= "\u1fff":
            return str(self._greek.stemWord(word)) or word, True
        return (without_prefix(word) if _ARABIC.match(word) else word), False

    def neighbour_terms(self, old: str) -> str:
        """Old neighbour words, each once; a word as written that is now a function word is
        dropped (a Snowball stem is not a word: it is never compared with the lists)."""
        out: dict[str, None] = {}
        for term in old.split():
            new, as_written = self.term(term)
            if not (as_written and fold(term) in STOP_WORDS):
                out.setdefault(new)
        return " ".join(out)

    def index_terms(self, old: str) -> str:
        """Old analysed terms, repeats kept (what an index stores)."""
        return " ".join(self.term(t)[0] for t in old.split())


def _memories(conn: sa.Connection, sqlite: bool, terms: _Terms) -> None:
    """Memories with a changed script in their text or neighbour words; those whose neighbour
    words changed lose their vector (it embeds them: the background pass embeds them again)."""
    after, touched = 0, set()
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT seq, content, metadata, tenant_id, runtime_id, user_id, agent_id "
                "FROM memories WHERE seq > :after AND status != 'deleted' ORDER BY seq LIMIT :n"
            ),
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            break
        after = rows[-1][0]
        changed, unembed = [], []
        for seq, content, raw, *partition in rows:
            meta: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
            context = str(meta.get("context_terms") or "")
            text = f"{content} {meta.get('keywords') or ''}"
            if not (_CHANGED.search(text) or _CHANGED.search(context)):
                continue
            if context and _CHANGED.search(context):
                meta["context_terms"] = terms.neighbour_terms(context)
                if meta["context_terms"] != context:
                    unembed.append({"q": seq})
                    touched.add(tuple(partition))
            analysed = memory_search_text(content or "", meta)
            change = {"q": seq, "x": analysed, "m": json.dumps(meta, ensure_ascii=False)}
            if sqlite:
                change["s"] = indexed_stems(f"{analysed} {meta.get('context_terms') or ''}")
            changed.append(change)
        if changed:
            sets = "search_text = :x, metadata = :m" + (", search_stems = :s" if sqlite else "")
            conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), changed)
        if unembed:
            conn.execute(sa.text("UPDATE memories SET vector_size = NULL WHERE seq = :q"), unembed)
            conn.execute(sa.text("DELETE FROM memory_embeddings WHERE seq = :q"), unembed)
    bump_vector_versions(conn, touched)


def downgrade() -> None:
    """Nothing to undo: an older release reads the analysed text as it is (its queries stem
    Arabic words the old way, so they match fewer of these rows until compiled again)."""
