"""Episodes at the calendar's ends (years 1 and 9999, which the API accepts) compile, and a
subject that has them keeps compiling: relative dates past the ends resolve to nothing."""

from __future__ import annotations

from fastapi.testclient import TestClient

TEXTS = [
    "I saw her yesterday, and tomorrow I fly to Lisbon.",
    "Next week and next year I start at Globex; two years ago I lived in Oslo.",
    "Three days ago, 5 weeks ago and 2 months ago it rained.",
    "Last month on February 30 I was in Kyiv.",
]


def _episode(i: int, text: str, at: str) -> dict[str, object]:
    return {
        "subject_id": "edge",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": f"s-{at[:4]}",
        "occurred_at": at,
        "payload": {"messages": [{"role": "user", "content": text}]},
    }


def test_episodes_at_the_calendars_ends_compile(backend_client: TestClient) -> None:
    episodes = [
        _episode(i, text, at)
        for at in ("0001-01-01T00:00:00Z", "9999-12-31T12:00:00Z")
        for i, text in enumerate(TEXTS)
    ]
    r = backend_client.post("/v1/episodes/batch", json={"episodes": episodes})
    assert r.status_code == 201, r.text
    compiled = backend_client.post("/v1/memories/compile", json={"subject_id": "edge"})
    assert compiled.status_code == 200, compiled.text
    assert compiled.json()["memories_created"] >= len(TEXTS)  # (the same text twice is one)
    # A later, ordinary episode still compiles.
    later = _episode(0, "I like green tea.", "2026-03-01T09:00:00Z")
    assert backend_client.post("/v1/episodes", json=later).status_code == 201
    again = backend_client.post("/v1/memories/compile", json={"subject_id": "edge"}).json()
    assert any("green tea" in m["content"] for m in again["memories"])
    for path, body in (
        ("/v1/context", {"subject_id": "edge", "task": "Where did I fly?", "max_tokens": 400}),
    ):
        r = backend_client.post(path, json=body)
        assert r.status_code == 200, r.text
        assert "Lisbon" in r.json()["assembled_context"]
    found = backend_client.get("/v1/memories/search", params={"subject_id": "edge", "q": "Oslo"})
    assert found.status_code == 200 and found.json()["memories"], found.text
    assert backend_client.get("/v1/subjects/edge/export").status_code == 200
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "edge", "limit": 100})
    assert timeline.status_code == 200, timeline.text
