"""Superscripts and subscripts in content hashes, through the real app on both backends: two
texts that differ only by one are two memories, and a memory stored (or forgotten) under the
hash the text had before keeps it: the same text merges into it, a forgotten one stays
forgotten (``cairn.engine.compile.legacy``)."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from cairn.core.analysis import content_digest, legacy_digest
from cairn.store.schema import episodes, memories

DOSE, PLAIN = "The dose is 10⁶ units.", "The dose is 106 units."


def _turns(client: TestClient, subject: str, texts: list[str]) -> None:
    batch = [
        {
            "subject_id": subject,
            "source": "chat",
            "type": "conversation.turn",
            "session_id": "s1",
            "occurred_at": f"2024-03-01T10:{i:02d}:00Z",
            "payload": {"messages": [{"role": "user", "name": "Li", "content": text}]},
        }
        for i, text in enumerate(texts)
    ]
    assert client.post("/v1/episodes/batch", json={"episodes": batch}).status_code == 201
    assert client.post("/v1/memories/compile", json={"subject_id": subject}).status_code == 200


def _turn_memories(client: TestClient, subject: str) -> list[dict[str, Any]]:
    params = {"subject_id": subject, "kind": "turn", "limit": 50}
    return list(client.get("/v1/memories/search", params=params).json()["memories"])


def _recompile(client: TestClient, subject: str) -> None:
    store = client.app.state.services.store  # type: ignore[attr-defined]
    with store.db.write() as conn:
        conn.execute(update(episodes).values(compiled=False))
    assert client.post("/v1/memories/compile", json={"subject_id": subject}).status_code == 200


def test_a_superscript_keeps_two_texts_apart(backend_client: TestClient) -> None:
    _turns(backend_client, "dose", [DOSE, PLAIN, PLAIN.upper()])
    stored = sorted(m["content"] for m in _turn_memories(backend_client, "dose"))
    assert stored == sorted([f"Li: {DOSE}", f"Li: {PLAIN}"])  # (the upper case: a variant)


def test_a_memory_hashed_before_keeps_its_hash_and_a_forgotten_one_stays_forgotten(
    backend_client: TestClient,
) -> None:
    c = backend_client
    _turns(c, "old", [DOSE, "Formula H₂O is water."])
    store = c.app.state.services.store  # type: ignore[attr-defined]
    # As a release before the change stored them: the text's old hash.
    with store.db.write() as conn:
        for m in _turn_memories(c, "old"):
            assert m["content"] and content_digest(m["content"]) != legacy_digest(m["content"])
            old = legacy_digest(m["content"])
            conn.execute(
                update(memories).where(memories.c.id == uuid.UUID(m["id"])).values(content_hash=old)
            )
    water = next(m for m in _turn_memories(c, "old") if "H₂O" in m["content"])
    assert c.delete(f"/v1/memories/{water['id']}").status_code == 200  # its tombstone: old hash
    _recompile(c, "old")
    again = _turn_memories(c, "old")
    assert [m["content"] for m in again] == [f"Li: {DOSE}"]  # merged, not stored twice
    with store.db.read() as conn:
        rows = conn.execute(select(memories.c.status).where(memories.c.user_id == "old")).all()
    assert sorted(r[0] for r in rows) == ["active", "deleted"]  # nothing came back
