"""Invisible break hints inside a word (migration 0031), both backends: the analysis joins
the word, and the migration analyses again the stored memories and chunks holding one, and no
other row."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, select, update

from cairn.core.analysis import index_text, query_terms
from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.schema import memories
from tests.store.rows import memory_row

A = Scope.for_subject("invisible")
SOFT = "I bought a new Kaffee\u00admaschine"
JOINED = "The pass\u2060word is fish"


def test_a_word_holding_an_invisible_hint_is_one_term() -> None:
    for text, word in ((SOFT, "kaffeemaschine"), (JOINED, "password")):
        assert word in index_text(text).split() and query_terms(word) == [word]
    assert query_terms("Kaffee\u00admaschine") == ["kaffeemaschine"]
    assert "kaffeemaschine" in index_text("Kaffee\u2060maschine\ufeff").split()
    # A zero-width space separates words, as a space does (Unicode's word boundaries).
    assert index_text("foo\u200bbar").split() == ["foo", "bar"]


def migrated_again(db_url: str, down_to: str, before: dict[str, str]) -> dict[str, str]:
    """``content → search_text`` after storing each text of ``before``, going down to
    revision ``down_to``, giving each row the ``search_text`` of ``before`` (as an older
    analysis indexed it) and opening the store again (which migrates up)."""
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new([memory_row(A, t) for t in before])
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.begin() as conn:
            command.downgrade(_config(conn), down_to)
            for text, old in before.items():
                conn.execute(
                    update(memories).where(memories.c.content == text).values(search_text=old)
                )
    finally:
        engine.dispose()
    store = open_store(db_url)
    try:
        with store.db.read() as conn:
            return dict(conn.execute(select(memories.c.content, memories.c.search_text)).all())
    finally:
        store.close()


def test_0031_analyses_again_only_the_memories_holding_one(db_url: str) -> None:
    # As the analysis before 0031 indexed them: the word in two.
    before = {SOFT: "i bought a new kaffee maschine", JOINED: "the pass word", "plain kaffee": "x"}
    found = migrated_again(db_url, "0030_vector_waits", before)
    assert found[SOFT] == index_text(SOFT) and "kaffeemaschine" in found[SOFT]
    assert found[JOINED] == index_text(JOINED)
    assert found["plain kaffee"] == "x"  # not read, not touched


PERSIAN = "من کتاب\u200cها را می\u200cخوانم"  # noqa: RUF001
HINDI = "मेरा कर्\u200dम अच्छा है"


def test_a_word_holding_a_zero_width_joiner_is_its_parts_and_the_word_without_it() -> None:
    indexed = index_text(PERSIAN).split()
    # As most keyboards type it (without the mark), and as its parts: "book" finds "books".
    for typed in ("کتابها", "میخوانم", "کتاب", "کتاب\u200cها", "می\u200cخوانم"):  # noqa: RUF001
        assert set(query_terms(typed)) <= set(indexed), typed
    assert "कर्म" in index_text(HINDI).split() and query_terms("कर्म") == ["कर्म"]
    assert "ශ්රී" in index_text("ශ්\u200dරී ලංකාවේ").split()
    # An emoji sequence's joiners make no term.
    assert index_text("👨\u200d👩\u200d👧 family").split() == ["family"]


def test_0034_analyses_again_only_the_memories_holding_a_joiner(db_url: str) -> None:
    # As the analysis before 0034 indexed them: the parts only.
    before = {
        t: index_text(t.replace("\u200c", " ").replace("\u200d", " ")) for t in (PERSIAN, HINDI)
    }
    found = migrated_again(db_url, "0033_vector_claims", {**before, "plain text": "x"})
    assert found[PERSIAN] == index_text(PERSIAN) and "کتابها" in found[PERSIAN].split()
    assert found[HINDI] == index_text(HINDI)
    assert found["plain text"] == "x"  # not read, not touched
