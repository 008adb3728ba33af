# ruff: noqa: RUF001 -- Turkish text
"""Migration 0026 on both backends: turns compiled before the filler lists of Turkish,
Vietnamese, Greek, Hebrew, Thai and Hindi (a turn of one of those words kept its confidence and
its neighbours' words) get what the compiler gives them now."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import create_engine, text

from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from tests.store.test_turn_confidence_migration import compile_turns, merge_metadata

SCOPE = Scope.for_subject("elif")
SAID = ["Kerem yarın İzmir'e taşınıyor.", "Tamam", "ขอบคุณครับ", "धन्यवाद"]


def _turns(conn: object) -> dict[str, tuple[float, dict[str, object]]]:
    rows = conn.execute(  # type: ignore[attr-defined]
        text("SELECT content, confidence, metadata FROM memories WHERE kind = 'turn'")
    ).all()
    return {
        str(c).removeprefix("Elif: "): (float(v), m if isinstance(m, dict) else json.loads(m))
        for c, v, m in rows
    }


def test_0026_makes_stored_filler_turns_contentless(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Elif", SAID)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        now = _turns(conn)
        assert [now[s][0] for s in SAID[1:]] == [0.2, 0.2, 0.2]
        command.downgrade(_config(conn), "0025_nfc_ids")
        # As an older compiler stored them: content, with their neighbours' words.
        for said in SAID[1:]:
            conn.execute(
                text("UPDATE memories SET confidence = 0.55 WHERE content = :c"),
                {"c": f"Elif: {said}"},
            )
            merge_metadata(conn, f"Elif: {said}", {"contentless": None, "context_terms": "izmir"})
        merge_metadata(conn, f"Elif: {SAID[3]}", {"correction": {"editor": "ana"}})
        conn.commit()
        command.upgrade(_config(conn), "heads")
        conn.commit()
        after = _turns(conn)
    engine.dispose()
    for said in SAID[1:3]:
        confidence, metadata = after[said]
        assert confidence == 0.2 and metadata["contentless"] is True
        assert metadata["context_terms"] == ""
    assert after[SAID[3]][0] == 0.55  # corrected by someone: kept
    assert after[SAID[0]] == now[SAID[0]]  # content: untouched
