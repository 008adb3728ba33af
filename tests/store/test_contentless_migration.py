"""Migration 0017 on both backends: turns compiled under the older filler rule whose text the
rule now finds contentless (Arabic and Korean chat filler) get confidence 0.2, the
``contentless`` mark, no neighbour words, and lose their vector (to be embedded again; the
partition's vector version moves on); turns with content, corrected turns and other kinds keep
what they had."""

from __future__ import annotations

import json

from alembic import command
from sqlalchemy import create_engine, inspect, text

from cairn.core.scope import Scope
from cairn.engine.search import search_memories
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config, current_revisions
from tests.store.test_turn_confidence_migration import TENANT, compile_turns, merge_metadata

SCOPE = Scope.for_subject("nour")
SAID = [
    "تركت مطعم الزعتر، وصرت أشتغل بعربية أكل مع توم",
    "منشوفك قريباً",  # see you soon
    "إي والله",  # yes, by God (corrected below: stays as its editor left it)
    "ㅋㅋ 그니까",  # lol, right
]


def _rows(db_url: str) -> dict[str, tuple[float, bool, str, bool]]:
    """Turn text → (confidence, contentless, context terms, has a vector): the vector in the
    row before migration 0020, its size from 0020 to 0030, its row in ``memory_embeddings``
    after."""
    engine = create_engine(normalize_url(db_url))
    columns = {c["name"] for c in inspect(engine).get_columns("memories")}
    vector = next(
        (c for c in ("embedding", "vector_size") if c in columns),
        "(SELECT e.seq FROM memory_embeddings e WHERE e.seq = memories.seq)",
    )
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                f"SELECT content, confidence, metadata, {vector} FROM memories WHERE kind = 'turn'"
            )
        ).all()
    engine.dispose()
    out = {}
    for content, confidence, raw, embedding in rows:
        meta = json.loads(raw) if isinstance(raw, str) else dict(raw)
        out[str(content).removeprefix("Nour: ")] = (
            float(confidence),
            bool(meta.get("contentless")),
            str(meta.get("context_terms") or ""),
            embedding is not None,
        )
    return out


def test_0017_marks_stored_filler_turns_contentless(db_url: str) -> None:
    store = open_store(db_url)
    try:
        compile_turns(store, SCOPE, "Nour", SAID)
    finally:
        store.close()
    now = _rows(db_url)
    assert [now[t][:2] for t in SAID] == [(0.9, False)] + [(0.2, True)] * 3

    engine = create_engine(normalize_url(db_url))
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0016_memory_lengths")
        conn.commit()
        assert "0017_contentless_turns" not in current_revisions(conn)
        # As the older rule compiled them: full-ish confidence, neighbour words, a vector.
        for t in SAID[1:]:
            conn.execute(
                text(
                    "UPDATE memories SET confidence = 0.6, embedding = :v, metadata = "
                    + (
                        "json_set(json_remove(metadata, '$.contentless'), "
                        "'$.context_terms', 'mat3am zaatar')"
                        if sqlite
                        else "(metadata - 'contentless') || "
                        '\'{"context_terms": "mat3am zaatar"}\'::jsonb'
                    )
                    + " WHERE content = :c"
                ),
                {"c": f"Nour: {t}", "v": b"\x00" * 8},
            )
        # The partition has vectors a running process may hold in its cache (version 1).
        conn.execute(text("DELETE FROM memory_vector_versions"))
        conn.execute(
            text(
                "INSERT INTO memory_vector_versions (tenant_id, runtime_id, user_id, agent_id, "
                "version) SELECT DISTINCT tenant_id, runtime_id, user_id, agent_id, 1 "
                "FROM memories"
            )
        )
        # Someone corrected one of them: it stays as they left it.
        merge_metadata(conn, f"Nour: {SAID[2]}", {"correction": {"editor": "ana"}})
        conn.commit()
    engine.dispose()
    before = _rows(db_url)
    assert [before[t] for t in SAID[1:]] == [(0.6, False, "mat3am zaatar", True)] * 3

    open_store(db_url).close()  # migrates: 0017 runs over the stored rows
    after = _rows(db_url)
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        versions = conn.execute(text("SELECT version FROM memory_vector_versions")).scalars()
        assert [v > 1 for v in versions] == [True]  # caches of the old vectors are stale
    engine.dispose()
    assert after[SAID[0]] == before[SAID[0]]
    assert after[SAID[1]] == after[SAID[3]] == (0.2, True, "", False)
    assert after[SAID[2]] == before[SAID[2]]
    # The index follows: the neighbour words are no longer searchable in the filler turns.
    store = open_store(db_url)
    try:
        found = search_memories(store, TENANT, SCOPE, "zaatar", limit=10)
    finally:
        store.close()
    assert [r.memory.content.removeprefix("Nour: ") for r in found] == [SAID[2]]
