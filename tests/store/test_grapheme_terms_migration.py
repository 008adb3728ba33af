"""Migration 0024 on both backends: rows whose text holds marks of an unspaced script (Thai)
or another script's digits (Devanagari) are analysed again, so the full-text indexes hold
grapheme pairs and ASCII digits; other rows are left as they are."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.memory_search import search_text
from cairn.store.migrations import _config
from tests.store.test_turn_confidence_migration import TENANT, compile_turns

SCOPE = Scope.for_subject("somchai")
SAID = [
    "ชาวนาเก็บข้าวไว้ในยุ้งฉาง",  # "the farmer keeps rice in the granary"
    "मेरा पिन कोड ११००१ है",
    "We keep the rice in the barn.",
]


def test_0024_analyses_affected_rows_again(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Somchai", SAID)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0023_tombstone_text")
        conn.execute(text("UPDATE memories SET search_text = 'stale' WHERE kind = 'turn'"))
        conn.commit()
        command.upgrade(_config(conn), "heads")
        conn.commit()
        rows = conn.execute(
            text("SELECT content, metadata, search_text FROM memories WHERE kind = 'turn'")
        ).all()
    engine.dispose()
    analysed = {str(c).removeprefix("Somchai: "): (m, t) for c, m, t in rows}
    for said in SAID[:2]:
        metadata, stored = analysed[said]
        metadata = metadata if isinstance(metadata, dict) else json.loads(metadata)
        assert stored == search_text(f"Somchai: {said}", metadata)
    assert "11001" in analysed[SAID[1]][1].split()
    assert "ุ้" not in analysed[SAID[0]][1].split()  # no lone mark is a term
    assert analysed[SAID[2]][1] == "stale"  # nothing to analyse again: untouched

    store = open_store(db_url)
    try:
        found = store.memories.lexical(TENANT, SCOPE, ["11001"], limit=5)
        with store.snapshot() as tx:
            best = tx.memories.by_seqs(TENANT, SCOPE, [found[0][0]])[found[0][0]]
        assert "११००१" in best.content  # (its neighbours, indexed with its words, follow)
        shrimp = store.memories.lexical(TENANT, SCOPE, ["กุ้ง"], limit=5)
        assert shrimp == []  # "shrimp" shares no grapheme pair with "granary"
    finally:
        store.close()
