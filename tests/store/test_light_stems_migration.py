"""Migration 0027 on both backends: rows with Arabic, Hebrew, Hindi or Greek text are analysed again
with the new stemmers, so a stored turn is found by the word as a question asks it."""

from __future__ import annotations

import json

import pytest
from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.analysis import query_terms
from cairn.core.scope import Scope
from cairn.engine.items import plan_item, put_item
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.memory_search import search_text
from cairn.store.migrations import _config
from tests.store.test_turn_confidence_migration import TENANT, compile_turns, merge_metadata

SCOPE = Scope.for_subject("layla")
SAID = [
    "البلكونة صغيرة بس البندورة والريحان صاروا طالعين",  # the balcony: tomatoes and basil
    "We grow basil on the balcony.",
    "אימצתי את הכלב מעמותה בחולון",  # "I adopted the dog from a shelter in Holon"
    "मैंने शेल्टर से कुत्ते गोद लिए",  # "I adopted dogs from a shelter"
    "Υιοθέτησα τον σκύλο από ένα καταφύγιο",  # "I adopted the dog from a shelter"
]
# As Snowball's Arabic stemmer cut them before this revision.
OLD_TURN = "بلكون صغير بس بندور والريح صار طالع"
OLD_CONTEXT = "بلكون والريح ايه הכלב של कुत्ते में що σκυλοσ του"
OLD_ITEM = "الشق لكون"


@pytest.mark.parametrize("start", ["0026_contentless_again", "0023_tombstone_text"])
def test_0027_light_stems_arabic_rows(db_url: str, start: str) -> None:
    """From 0026, or from 0023 through ``0024_grapheme_terms`` (which runs today's analysis
    and leaves these rows to 0027): the same result, nothing stemmed twice."""
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Layla", SAID)
        item = plan_item(
            ["notes"],
            "k",
            {"note": "الشقة بلكونة"},
            index=None,
            vectors=None,
            ttl_seconds=None,
            embedder=None,
        )
        put_item(store, TENANT, SCOPE, item)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), start)
        for said in SAID[2:]:  # as the analysis left them before: words as written
            conn.execute(
                text("UPDATE memories SET search_text = :x WHERE content = :c"),
                {"x": " ".join(f"Layla: {said}".replace(":", "").split()), "c": f"Layla: {said}"},
            )
        conn.execute(
            text("UPDATE memories SET search_text = :x WHERE content LIKE 'Layla: ال%'"),
            {"x": OLD_TURN},
        )
        english = f"Layla: {SAID[1]}"
        conn.execute(text("UPDATE items SET search_text = :x"), {"x": OLD_ITEM})
        merge_metadata(conn, english, {"context_terms": OLD_CONTEXT})
        conn.commit()
        command.upgrade(_config(conn), "heads")
        conn.commit()
        rows = conn.execute(
            text("SELECT content, metadata, search_text FROM memories WHERE kind = 'turn'")
        ).all()
        (item_text,) = conn.execute(text("SELECT search_text FROM items")).one()
    analysed = {str(c).removeprefix("Layla: "): (m, t) for c, m, t in rows}
    metadata, stored = analysed[SAID[0]]
    metadata = metadata if isinstance(metadata, dict) else json.loads(metadata)
    assert stored == search_text(f"Layla: {SAID[0]}", metadata)
    assert "ريح" in stored.split() and "والريح" not in stored.split()
    # The English turn's Arabic neighbour words lose the conjunction Snowball left on, not
    # their endings (a stem is never stemmed again); the function word (Egyptian "what") goes.
    context, english_after = analysed[SAID[1]]
    context = context if isinstance(context, dict) else json.loads(context)
    # Words as written (Hebrew, Hindi, Greek) are stemmed or, if function words, dropped; a
    # Snowball stem (Arabic) only loses the conjunction left on, never compared with the lists;
    # Cyrillic words are as they were.
    assert context["context_terms"].split() == ["بلكون", "ريح", "ايه", "כלב", "कुत्त", "що", "σκυλ"]
    assert english_after == search_text(english, context)
    assert item_text.split() == ["شق", "لكون"]
    for said in SAID[2:]:  # analysed before as written, now stemmed
        metadata, stored = analysed[said]
        metadata = metadata if isinstance(metadata, dict) else json.loads(metadata)
        assert stored == search_text(f"Layla: {said}", metadata)
    assert "כלב" in analysed[SAID[2]][1].split() and "कुत्त" in analysed[SAID[3]][1].split()
    assert "σκυλ" in analysed[SAID[4]][1].split()

    engine.dispose()
    store = open_store(db_url)
    try:
        assert store.memories.lexical(TENANT, SCOPE, query_terms("איפה הכלבים?"), limit=5)
        # "What is planted on the balcony?" without the article finds the turn with it.
        terms = query_terms("شو مزروع على بلكونة ليلى؟")
        assert "بلكون" in terms
        found = store.memories.lexical(TENANT, SCOPE, ["بلكون"], limit=5)
        with store.snapshot() as tx:
            hits = tx.memories.by_seqs(TENANT, SCOPE, [seq for seq, _ in found]).values()
        assert any("البلكونة" in m.content for m in hits)
        assert store.memories.lexical(TENANT, SCOPE, ["والريح"], limit=5) == []
    finally:
        store.close()
