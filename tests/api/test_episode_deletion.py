"""Deleting an episode leaves nothing of what it said: not in a session summary that quoted
it, not in the neighbour words indexed (and embedded) with the turns around it."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from cairn.services import Services

TURNS = [
    ("user", "Hi, I moved to Bergen last spring and I love the fjords there."),
    ("assistant", "Bergen is lovely. Do you hike much around the fjords?"),
    ("user", "My password hint is BLUEBIRDQUARTZ, please keep it safe for me."),
    ("assistant", "Noted, I will remember the hint for you."),
    ("user", "I also started a pottery class on Tuesdays in Bergen."),
    ("assistant", "Pottery sounds fun, what are you making first?"),
]


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def test_a_deleted_episodes_words_leave_summaries_and_neighbours(
    backend_client: TestClient, backend_services: Services
) -> None:
    client = backend_client
    ids = []
    for i, (role, content) in enumerate(TURNS):
        episode = {
            "subject_id": "u1",
            "source": "chat",
            "type": "conversation.turn",
            "session_id": "s1",
            "occurred_at": f"2026-03-01T10:0{i}:00Z",
            "payload": {"messages": [{"role": role, "content": content}]},
        }
        ids.append(_ok(client.post("/v1/episodes", json=episode), 201)["id"])
    made = _ok(client.post("/v1/memories/compile", json={"subject_id": "u1"}))["memories"]
    assert any(m["kind"] == "episode_summary" and "BLUEBIRDQUARTZ" in m["content"] for m in made)
    hits = _ok(
        client.get("/v1/memories/search", params={"subject_id": "u1", "q": "bluebirdquartz"})
    )
    assert len(hits["memories"]) >= 2  # the turn, its neighbours (and the summary)

    _ok(client.delete(f"/v1/episodes/{ids[2]}"))
    hits = _ok(
        client.get("/v1/memories/search", params={"subject_id": "u1", "q": "bluebirdquartz"})
    )
    assert hits["memories"] == []
    context = _ok(
        client.post("/v1/context", json={"subject_id": "u1", "task": "bluebirdquartz hint"})
    )
    assert "bluebirdquartz" not in context["assembled_context"].lower()
    with backend_services.store.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT content, metadata, search_text FROM memories")).all()
    assert rows and not any("bluebirdquartz" in str(r).lower() for r in rows)
    # A word the rest of the session says too stays with the neighbours ("hint": turn 4).
    timeline = _ok(client.get("/v1/timeline", params={"subject_id": "u1", "limit": 100}))
    near = next(m for m in timeline["memories"] if m["content"].startswith("Assistant: Bergen"))
    assert "hint" in near["metadata"]["context_terms"].split()
    # The next compile summarises what is left of the session.
    _ok(client.post("/v1/memories/compile", json={"subject_id": "u1"}))
    timeline = _ok(client.get("/v1/timeline", params={"subject_id": "u1", "limit": 100}))
    summaries = [m for m in timeline["memories"] if m["kind"] == "episode_summary"]
    assert summaries and all("BLUEBIRDQUARTZ" not in m["content"] for m in summaries)
    assert any("pottery" in m["content"] or "Bergen" in m["content"] for m in summaries)
    # The rest of the session is still there, and found by its words.
    hits = _ok(client.get("/v1/memories/search", params={"subject_id": "u1", "q": "pottery"}))
    assert any("pottery" in m["content"] for m in hits["memories"])
