"""Migration 0024 on both backends: rows whose text holds marks of an unspaced script (Thai)
or another script's digits (Devanagari) are analysed again, so the full-text indexes hold
grapheme pairs and ASCII digits; other rows are left as they are."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.analysis import index_text
from cairn.core.scope import Scope
from cairn.engine.items import plan_item, put_item
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.memory_search import search_text
from cairn.store.migrations import _config
from tests.store.test_turn_confidence_migration import TENANT, compile_turns, merge_metadata

SCOPE = Scope.for_subject("somchai")
OLD_ITEM = "ซ ซื ื ื้ ้ ้อ อ อก ก กุ ุ ุ้ ้ ้ง ง งส ส สด ด"
OLD_CONTEXT = "ยุ ุ้ ้ง งฉ ฉา ११००१"
SAID = [
    "ชาวนาเก็บข้าวไว้ในยุ้งฉาง",  # "the farmer keeps rice in the granary"
    "मेरा पिन कोड ११००१ है",
    "We keep the rice in the barn.",
]


def test_0024_analyses_affected_rows_again(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Somchai", SAID)
        item = plan_item(
            ["notes"],
            "k",
            {"note": "ซื้อกุ้งสด"},
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
        command.downgrade(_config(conn), "0023_tombstone_text")
        conn.execute(text("UPDATE memories SET search_text = 'stale' WHERE kind = 'turn'"))
        # As the analysis before this revision cut them: code points paired, digits kept.
        conn.execute(text("UPDATE items SET search_text = :x"), {"x": OLD_ITEM})
        merge_metadata(conn, f"Somchai: {SAID[2]}", {"context_terms": OLD_CONTEXT})
        conn.commit()
        command.upgrade(_config(conn), "heads")
        conn.commit()
        rows = conn.execute(
            text("SELECT content, metadata, search_text FROM memories WHERE kind = 'turn'")
        ).all()
    analysed = {str(c).removeprefix("Somchai: "): (m, t) for c, m, t in rows}
    for said in SAID[:2]:
        metadata, stored = analysed[said]
        metadata = metadata if isinstance(metadata, dict) else json.loads(metadata)
        assert stored == search_text(f"Somchai: {said}", metadata)
    assert "11001" in analysed[SAID[1]][1].split()
    assert "ุ้" not in analysed[SAID[0]][1].split()  # no lone mark is a term
    context = analysed[SAID[2]][0]
    context = context if isinstance(context, dict) else json.loads(context)
    assert context["context_terms"].split() == ["ยุ้ง", "งฉ", "ฉา", "11001"]
    # Its neighbour words changed (Thai marks, Devanagari digits): analysed again too.
    assert analysed[SAID[2]][1] == search_text(f"Somchai: {SAID[2]}", context)
    with engine.connect() as conn:
        (item_text,) = conn.execute(text("SELECT search_text FROM items")).one()
    assert item_text.split() == index_text("ซื้อกุ้งสด").split()

    engine.dispose()
    store = open_store(db_url)
    try:
        found = store.memories.lexical(TENANT, SCOPE, ["11001"], limit=5)
        with store.snapshot() as tx:
            hits = tx.memories.by_seqs(TENANT, SCOPE, [seq for seq, _ in found]).values()
        assert any("११००१" in m.content for m in hits)  # (and neighbours indexed with it)
        shrimp = store.memories.lexical(TENANT, SCOPE, ["กุ้ง"], limit=5)
        assert shrimp == []  # "shrimp" shares no grapheme pair with "granary"
    finally:
        store.close()
