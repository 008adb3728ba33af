"""Migration 0015 on both backends: turns compiled before it (every turn with content at
confidence 1.0) get the confidence the compiler gives now, by how much they say; contentless
turns, corrected turns and other kinds keep theirs, and going down restores 1.0."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from alembic import command
from sqlalchemy import Connection, create_engine, text

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.store import Store, open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config, current_revisions

TENANT = "t1"
SCOPE = Scope.for_subject("maya")
T0 = datetime(2024, 2, 3, 19, 0, tzinfo=UTC)
SAID = [
    "go on",
    "Bad news",
    "haha ok",
    "I got an offer from Initech. Senior analyst, remote three days a week, and I accepted "
    "it this afternoon after talking it through with Raj.",
    "我住在北京",
]


def _turns(db_url: str) -> dict[str, float]:
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT content, confidence FROM memories WHERE kind = 'turn'")
        ).all()
    engine.dispose()
    return {str(c).removeprefix("Maya: "): float(v) for c, v in rows}


def compile_turns(store: Store, scope: Scope, speaker: str, said: list[str]) -> None:
    """One session of ``speaker``'s messages, a minute apart, ingested and compiled."""
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(
                scope=scope,
                source="test",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "name": speaker, "content": t}]},
                session_id="s1",
                occurred_at=T0 + timedelta(minutes=i),
            )
            for i, t in enumerate(said)
        ],
    )
    compile_scope(store, TENANT, scope)


def merge_metadata(conn: Connection, content: str, patch: dict[str, Any]) -> None:
    """Merge ``patch`` into the metadata of the memories whose content is ``content`` (as an
    edit made before a migration would leave it), on either backend."""
    merged = (
        "json_patch(metadata, :patch)"
        if conn.dialect.name == "sqlite"
        else "metadata || CAST(:patch AS jsonb)"
    )
    conn.execute(
        text(f"UPDATE memories SET metadata = {merged} WHERE content = :c"),
        {"patch": json.dumps(patch), "c": content},
    )


def test_0015_recomputes_stored_turns_and_down_restores_them(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Maya", SAID)
        facts = {m.content: m.confidence for m in store.memories.list(TENANT, SCOPE, limit=100)}
    finally:
        store.close()
    now = _turns(db_url)
    assert now == {"go on": 0.5, "Bad news": 0.6, "haha ok": 0.2, SAID[3]: 1.0, "我住在北京": 0.6}

    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0014_compile_indexes")
        conn.commit()
        assert "0015_turn_confidence" not in current_revisions(conn)
        # Someone corrected a brief turn before the upgrade: their confidence stays.
        merge_metadata(conn, "Maya: go on", {"correction": {"editor": "ana"}})
        conn.commit()
    engine.dispose()
    before = _turns(db_url)
    assert before == {**{t: 1.0 for t in SAID}, "haha ok": 0.2}

    open_store(db_url).close()  # migrates: 0015 runs over the stored rows
    assert _turns(db_url) == {**now, "go on": 1.0}
    store = open_store(db_url)
    try:
        others = {
            m.content: m.confidence
            for m in store.memories.list(TENANT, SCOPE, limit=100)
            if m.kind != "turn"
        }
    finally:
        store.close()
    assert others == {c: v for c, v in facts.items() if not c.startswith("Maya: ")}
