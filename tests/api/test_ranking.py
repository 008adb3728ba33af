"""Ranking that respects content, through the HTTP API on both backends: acknowledgements
never outrank a turn with a fact, facts carry the person's name, and role words in a question
do not match every memory."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

FIVE_TURNS = [
    ("user", "I work at Acme as a designer."),
    ("assistant", "Noted."),
    ("user", "I drink green tea every morning."),
    ("assistant", "Great, thanks."),
    ("user", "I now work at Initech."),
]


def ingest(
    c: TestClient, subject: str, turns: list[tuple[str, str]], name: str = "", day: int = 1
) -> None:
    episodes = []
    for i, (role, text) in enumerate(turns):
        msg: dict[str, Any] = {"role": role, "content": text}
        if name and role == "user":
            msg["name"] = name
        episodes.append(
            {
                "subject_id": subject,
                "source": "chat",
                "type": "conversation.turn",
                "payload": {"messages": [msg]},
                "session_id": "s1",
                "occurred_at": f"2024-05-{day + i:02d}T10:00:00Z",
            }
        )
    r = c.post("/v1/episodes/batch", json={"episodes": episodes})
    assert r.status_code in (200, 201), r.text
    r = c.post("/v1/memories/compile", json={"subject_id": subject})
    assert r.status_code == 200, r.text


def search(c: TestClient, subject: str, q: str) -> list[dict[str, Any]]:
    r = c.get("/v1/memories/search", params={"subject_id": subject, "q": q, "limit": 20})
    assert r.status_code == 200, r.text
    return list(r.json()["memories"])


def test_filler_never_outranks_a_fact_and_facts_keep_the_name(backend_client: TestClient) -> None:
    c = backend_client
    ingest(c, "maya", FIVE_TURNS, name="Maya")
    found = search(c, "maya", "Where does Maya work now?")
    contents = [m["content"] for m in found]
    assert contents and all(m["score"] <= 1.0 for m in found)
    # Every memory about her work ranks above any acknowledgement (which may not match at all).
    work = [i for i, t in enumerate(contents) if "Acme" in t or "Initech" in t]
    filler = [i for i, t in enumerate(contents) if t.endswith(("Noted.", "Great, thanks."))]
    assert len(work) >= 3 and "Maya works at Initech" in contents
    assert not filler or max(work) < min(filler)
    # The context the model gets starts with her work, not with filler.
    r = c.post("/v1/context", json={"subject_id": "maya", "task": "Where does Maya work now?"})
    text = r.json()["assembled_context"]
    assert "Initech" in text and "Great, thanks." not in text.split("\n")[2]


def test_a_stated_name_resolves_facts_of_an_unnamed_user(backend_client: TestClient) -> None:
    c = backend_client
    ingest(c, "anon", [("user", "Hi! My name is Maya."), *FIVE_TURNS])
    found = {m["content"]: m["score"] for m in search(c, "anon", "Where does Maya work?")}
    # Found by her name, above a turn about something else (whose neighbours' words match):
    # scores in a six-memory subject are low on both backends (each term's IDF is the
    # subject's), so the check is the order, not a magnitude.
    assert found.get("Maya works at Initech", 0) > found["User: I drink green tea every morning."]
    assert "User works at Initech" not in found
    assert "User's name is Maya" in [m["content"] for m in search(c, "anon", "name")]
    # A later compile still knows the name (from the stored name fact); the new employer
    # supersedes the old one.
    ingest(c, "anon", [("user", "I now work at Hooli.")], day=20)
    found = {m["content"]: m["score"] for m in search(c, "anon", "Where does Maya work?")}
    tea = found.get("User: I drink green tea every morning.", 0)
    assert found.get("Maya works at Hooli", 0) > tea and "Maya works at Initech" not in found


def test_the_role_word_alone_matches_nothing(backend_client: TestClient) -> None:
    c = backend_client
    ingest(c, "u", FIVE_TURNS)
    found = [m["content"] for m in search(c, "u", "What does the user drink")]
    # The turn itself first; a neighbour may be found by its words, the rest not at all.
    assert found[0] == "User: I drink green tea every morning."
    assert "User: I work at Acme as a designer." not in found
    assert not any(t.startswith("Assistant:") for t in found)
    assert search(c, "u", "What does the user like") == []
