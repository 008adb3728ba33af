"""Deleting an episode leaves nothing of what it said: not in a session summary that quoted
it, not in the neighbour words indexed (and embedded) with the turns around it."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import text

from cairn.core.analysis import content_digest
from cairn.core.memories import memory_id
from cairn.core.scope import Scope
from cairn.services import Services
from tests.api.test_erasure import found_in, sqlite_evidence

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
    if backend_services.store.db.is_sqlite:  # nor in the file's pages (its full-text index)
        assert found_in("bluebirdquartz", *sqlite_evidence(backend_services)) == []
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


def _say(
    client: TestClient, subject: str, lines: list[str], *, compile_now: bool = True
) -> list[str]:
    """One user turn per episode, a minute apart, in one session; their ids. Compiled at
    once unless ``compile_now`` is False."""
    ids = []
    for i, content in enumerate(lines):
        episode = {
            "subject_id": subject,
            "source": "chat",
            "type": "conversation.turn",
            "session_id": "s1",
            "occurred_at": f"2026-03-01T10:{i:02d}:00Z",
            "payload": {"messages": [{"role": "user", "content": content}]},
        }
        ids.append(_ok(client.post("/v1/episodes", json=episode), 201)["id"])
    if compile_now:
        _ok(client.post("/v1/memories/compile", json={"subject_id": subject}))
    return ids


def _compile_job(client: TestClient, services: Services, subject: str) -> str:
    """Compile the subject as an async job, run by hand to its end; the job's id."""
    job = _ok(client.post("/v1/memories/compile", json={"subject_id": subject, "async": True}), 202)
    url = f"/v1/memories/compile/{job['job_id']}"
    while _ok(client.get(url))["status"] in ("queued", "running"):
        services.job_runner.work_once()
    assert _ok(client.get(url))["status"] == "completed"
    return str(job["job_id"])


def _all(client: TestClient, subject: str) -> list[dict[str, Any]]:
    """Every stored memory of the subject, in any status (its export)."""
    r = client.get(f"/v1/subjects/{subject}/export")
    assert r.status_code == 200, r.text[:400]
    records = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    return [rec["row"] for rec in records if rec.get("type") == "memory"]


def test_a_stated_name_leaves_with_its_episode(
    backend_client: TestClient, backend_services: Services
) -> None:
    client = backend_client
    ids = _say(
        client,
        "n1",
        [
            "Hi there, my name is Zorblax.",
            "I work at Acme Robotics these days.",
            "I live in Porto.",
        ],
    )
    facts = [m["content"] for m in _all(client, "n1") if m["kind"] == "profile_fact"]
    assert "Zorblax works at Acme Robotics" in facts
    hits = _ok(client.get("/v1/memories/search", params={"subject_id": "n1", "q": "zorblax"}))
    assert len(hits["memories"]) >= 3  # the name fact, the facts naming them, their turns

    _ok(client.delete(f"/v1/episodes/{ids[0]}"))
    left = _all(client, "n1")
    assert not any("zorblax" in json.dumps(m).lower() for m in left)
    facts = [m["content"] for m in left if m["kind"] == "profile_fact"]
    assert "User works at Acme Robotics" in facts and "User lives in Porto" in facts
    hits = _ok(client.get("/v1/memories/search", params={"subject_id": "n1", "q": "zorblax"}))
    assert hits["memories"] == []
    hits = _ok(client.get("/v1/memories/search", params={"subject_id": "n1", "q": "Acme"}))
    assert any(m["content"] == "User works at Acme Robotics" for m in hits["memories"])
    with backend_services.store.db.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM memories")).all()
    assert rows and not any("zorblax" in str(r).lower() for r in rows)
    if backend_services.store.db.is_sqlite:
        assert found_in("zorblax", *sqlite_evidence(backend_services)) == []


def test_a_deleted_name_gives_way_to_the_name_still_stated(backend_client: TestClient) -> None:
    client = backend_client
    ids = _say(
        client,
        "n2",
        [
            "My name is Zorblax.",
            "Actually my name is Quimby, Zorblax was a nickname.",
            "I work at Acme Robotics.",
        ],
    )
    current = [m for m in _all(client, "n2") if m["status"] == "active"]
    assert "Quimby works at Acme Robotics" in [m["content"] for m in current]
    _ok(client.delete(f"/v1/episodes/{ids[1]}"))
    left = _all(client, "n2")
    assert [json.dumps(m) for m in left if "quimby" in json.dumps(m).lower()] == []
    current = {m["content"]: m for m in left if m["status"] == "active"}
    # The name the user stated before is theirs again, and names the fact.
    assert "User's name is Zorblax" in current
    assert "Zorblax works at Acme Robotics" in current


def test_a_memory_rewritten_without_a_name_gets_the_id_of_its_new_text(
    backend_client: TestClient, backend_services: Services
) -> None:
    """A memory id is derived from the text (``memory_id``): kept after the name left it, it
    would let anyone holding it test guesses of the name. The rewritten memory takes its new
    text's id, and what referred to the old one (a newer version, an async job's list)
    follows."""
    client = backend_client
    ids = _say(
        client,
        "n5",
        ["My name is Zorblax.", "I live in Paris.", "I moved to Berlin."],
        compile_now=False,
    )
    job_id = _compile_job(client, backend_services, "n5")
    named = {m["content"]: m["id"] for m in _all(client, "n5") if "Zorblax" in m["content"]}
    assert {"Zorblax lives in Paris", "Zorblax lives in Berlin"} <= set(named)

    _ok(client.delete(f"/v1/episodes/{ids[0]}"))
    left = {m["content"]: m for m in _all(client, "n5")}
    paris, berlin = left["User lives in Paris"], left["User lives in Berlin"]
    assert not set(named.values()) & {m["id"] for m in left.values()}
    scope = Scope.for_subject("n5")
    for memory in (paris, berlin):
        starts = (
            datetime.fromisoformat(memory["valid_from"]) if memory["metadata"].get("slot") else None
        )
        derived = memory_id(
            "default", scope, "profile_fact", content_digest(memory["content"], starts)
        )
        assert memory["id"] == str(derived)
    assert paris["superseded_by"] == berlin["id"] and berlin["status"] == "active"
    listed = {m["id"] for m in _ok(client.get(f"/v1/memories/compile/{job_id}"))["memories"]}
    assert {paris["id"], berlin["id"]} <= listed


def test_references_follow_a_renamed_memory_merged_into_another(
    backend_client: TestClient,
) -> None:
    """Without the deleted name a fact reads like one already stored: it merges into that
    one, and what referred to it (a newer version, a correction's ``replaces``) points there;
    no reference is left to an id that is gone."""
    client = backend_client
    _say(client, "n6", ["I like jazz."])
    ids = _say(client, "n6", ["My name is Zorblax.", "I like jazz."])
    facts = {m["content"]: m for m in _all(client, "n6")}
    named = facts["Zorblax likes jazz"]
    fixed = _ok(
        client.patch(f"/v1/memories/{named['id']}", json={"content": "Zorblax likes bebop"})
    )
    assert fixed["metadata"]["correction"]["replaces"] == named["id"]

    _ok(client.delete(f"/v1/episodes/{ids[0]}"))
    left = {m["content"]: m for m in _all(client, "n6")}
    assert not any("zorblax" in json.dumps(m).lower() for m in left.values())
    plain, correction = left["User likes jazz"], left["User likes bebop"]
    assert correction["metadata"]["correction"]["replaces"] == plain["id"]
    stored = {m["id"] for m in left.values()}
    for m in left.values():
        assert m["superseded_by"] in stored | {None}
        replaces = (m["metadata"].get("correction") or {}).get("replaces")
        assert replaces in stored | {None}


def test_a_deleted_update_gives_the_earlier_value_back(backend_client: TestClient) -> None:
    client = backend_client
    ids = _say(
        client, "n3", ["I live in Paris.", "I moved to Berlin.", "I moved to Lisbon.", "Hello!"]
    )
    by_content = {m["content"]: m for m in _all(client, "n3")}
    paris, berlin = by_content["User lives in Paris"], by_content["User lives in Berlin"]
    lisbon = by_content["User lives in Lisbon"]
    assert paris["superseded_by"] == berlin["id"] and berlin["superseded_by"] == lisbon["id"]
    _ok(client.delete(f"/v1/episodes/{ids[1]}"))  # Berlin: Paris was replaced by Lisbon
    by_content = {m["content"]: m for m in _all(client, "n3")}
    assert "User lives in Berlin" not in by_content
    assert by_content["User lives in Paris"]["superseded_by"] == lisbon["id"]
    assert by_content["User lives in Paris"]["valid_to"] == lisbon["valid_from"]  # no gap
    _ok(client.delete(f"/v1/episodes/{ids[2]}"))  # Lisbon: Paris holds again
    paris = {m["content"]: m for m in _all(client, "n3")}["User lives in Paris"]
    assert paris["status"] == "active" and paris["superseded_by"] is None
    assert paris["valid_to"] is None


def test_of_two_versions_made_current_again_only_the_latest_is(backend_client: TestClient) -> None:
    """A value stated late is stored already superseded by the current one: when that current
    one goes, the latest of the others by validity is current, not all of them."""
    client = backend_client
    ids = []
    for content, day, key in [
        ("I live in Paris.", "01", "p"),
        ("I moved to Berlin.", "03", "b"),
        ("I moved to Rome.", "02", "r"),
    ]:
        episode = {
            "subject_id": "n4",
            "source": "chat",
            "type": "conversation.turn",
            "idempotency_key": key,
            "occurred_at": f"2026-01-{day}T10:00:00Z",
            "payload": {"messages": [{"role": "user", "content": content}]},
        }
        ids.append(_ok(client.post("/v1/episodes", json=episode), 201)["id"])
        _ok(client.post("/v1/memories/compile", json={"subject_id": "n4"}))
    _ok(client.delete(f"/v1/episodes/{ids[1]}"))
    facts = {m["content"]: m for m in _all(client, "n4") if m["kind"] == "profile_fact"}
    assert [c for c, m in facts.items() if m["status"] == "active"] == ["User lives in Rome"]
    assert facts["User lives in Paris"]["superseded_by"] == facts["User lives in Rome"]["id"]


def test_a_name_beginning_with_a_common_word_is_a_fact_and_leaves_with_its_episode(
    backend_client: TestClient,
) -> None:
    client = backend_client
    ids = _say(client, "n5", ["My name is So Yeon.", "I work at Acme Robotics."])
    facts = [m["content"] for m in _all(client, "n5") if m["kind"] == "profile_fact"]
    assert "User's name is So Yeon" in facts and "So Yeon works at Acme Robotics" in facts
    _ok(client.delete(f"/v1/episodes/{ids[0]}"))
    assert not any("yeon" in json.dumps(m).lower() for m in _all(client, "n5"))


def test_a_removed_name_is_not_cut_from_a_longer_one(backend_client: TestClient) -> None:
    client = backend_client
    _say(client, "n6", ["My name is Mary Ann.", "I work at Acme Robotics."])
    episode = {
        "subject_id": "n6",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "s2",
        "payload": {"messages": [{"role": "user", "content": "My name is Ann now."}]},
    }
    ann = _ok(client.post("/v1/episodes", json=episode), 201)["id"]
    episode["payload"] = {"messages": [{"role": "user", "content": "I live in Porto."}]}
    _ok(client.post("/v1/episodes", json=episode), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": "n6"}))
    _ok(client.delete(f"/v1/episodes/{ann}"))
    turns = {
        m["content"]: m["metadata"]["keywords"] for m in _all(client, "n6") if m["kind"] == "turn"
    }
    assert turns["User: I work at Acme Robotics."].endswith(" Mary Ann")
    assert turns["User: I live in Porto."].endswith(" Mary Ann")  # the name on record again
    facts = {m["content"] for m in _all(client, "n6") if m["status"] == "active"}
    assert "Mary Ann lives in Porto" in facts and "User's name is Mary Ann" in facts


def test_a_job_never_lists_a_later_memory_that_took_a_deleted_ones_seq(
    backend_client: TestClient, backend_services: Services
) -> None:
    """SQLite gives a new row the seq (rowid) of the newest deleted one: a job that listed the
    deleted memory must not list its successor, a memory it never made."""
    client = backend_client
    (episode,) = _say(client, "n7", ["I live in Oslo."], compile_now=False)
    url = f"/v1/memories/compile/{_compile_job(client, backend_services, 'n7')}"
    made = _ok(client.get(url))["memories"]
    assert made and all("Oslo" in m["content"] for m in made)
    _ok(client.delete(f"/v1/episodes/{episode}"))
    _say(client, "n7", ["I like rye bread."])
    job = _ok(client.get(url))
    assert job["memories"] == [] and job["memories_created"] == len(made)
