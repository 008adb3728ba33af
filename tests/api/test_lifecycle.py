"""Single items through the real app, both backends: read an episode, read a memory with its
history, correct it (a new version, searchable at once), forget it (not re-created by the
next compile), delete an episode with the memories derived from it alone."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from cairn.store.schema import episodes
from cairn.store.schema import memories as memory_rows
from tests.api.test_memories import EPISODES, ingest

MISSING = "00000000-0000-0000-0000-000000000000"


def _compile(client: TestClient, subject: str = "u1") -> list[dict[str, Any]]:
    r = client.post("/v1/memories/compile", json={"subject_id": subject})
    assert r.status_code == 200, r.text
    return list(r.json()["memories"])


def _search(client: TestClient, q: str, **extra: Any) -> list[dict[str, Any]]:
    r = client.get("/v1/memories/search", params={"subject_id": "u1", "q": q, **extra})
    assert r.status_code == 200, r.text
    return list(r.json()["memories"])


def _fbi_fact(memories: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in memories if m["kind"] == "profile_fact" and "FBI" in m["content"])


def test_get_episode_and_unknown_ids(backend_client: TestClient) -> None:
    r = backend_client.post("/v1/episodes", json=EPISODES[0])
    assert r.status_code == 201
    ep = r.json()
    got = backend_client.get(f"/v1/episodes/{ep['id']}")
    assert got.status_code == 200, got.text
    assert got.json()["payload"] == EPISODES[0]["payload"]
    assert got.json()["scope"] == {"runtime_id": "default", "user_id": "u1", "agent_id": ""}
    for method, path, code in [
        ("GET", f"/v1/episodes/{MISSING}", "episode_not_found"),
        ("DELETE", f"/v1/episodes/{MISSING}", "episode_not_found"),
        ("GET", f"/v1/memories/{MISSING}", "memory_not_found"),
        ("DELETE", f"/v1/memories/{MISSING}", "memory_not_found"),
        ("PATCH", f"/v1/memories/{MISSING}", "memory_not_found"),
    ]:
        kw = {"json": {"content": "x"}} if method == "PATCH" else {}
        r = backend_client.request(method, path, **kw)
        assert r.status_code == 404 and r.json()["error"]["code"] == code, (method, r.text)
    assert backend_client.get("/v1/memories/not-a-uuid").status_code == 422


def test_correct_memory_makes_a_searchable_version(backend_client: TestClient) -> None:
    ingest(backend_client)
    fact = _fbi_fact(_compile(backend_client))
    r = backend_client.patch(
        f"/v1/memories/{fact['id']}",
        json={"content": "User works at the CIA in Langley", "editor": "Ana", "note": "moved"},
    )
    assert r.status_code == 200, r.text
    new = r.json()
    assert new["id"] != fact["id"] and new["status"] == "active"
    assert new["content"] == "User works at the CIA in Langley"
    correction = new["metadata"]["correction"]
    assert correction["replaces"] == fact["id"] and correction["editor"] == "Ana (local)"
    assert correction["at"] and correction["note"] == "moved"

    found = _search(backend_client, "Langley CIA")
    assert found and found[0]["id"] == new["id"]
    assert all(m["id"] != fact["id"] for m in _search(backend_client, "FBI Washington"))

    old = backend_client.get(f"/v1/memories/{fact['id']}").json()
    assert old["memory"]["status"] == "superseded" and old["current_id"] == new["id"]
    assert [m["id"] for m in old["replaced_by"]] == [new["id"]]
    cur = backend_client.get(f"/v1/memories/{new['id']}").json()
    assert [m["id"] for m in cur["replaces"]] == [fact["id"]] and cur["replaced_by"] == []

    stale = backend_client.patch(f"/v1/memories/{fact['id']}", json={"confidence": 0.5})
    assert stale.status_code == 409
    err = stale.json()["error"]
    assert err["code"] == "memory_superseded" and err["details"]["current_id"] == new["id"]
    assert new["id"] in err["message"]

    # Compiling the same episodes again brings back neither the old value nor a duplicate.
    _recompile_everything(backend_client)
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "u1"}).json()
    active = [m for m in timeline["memories"] if m["status"] == "active"]
    assert not any("FBI" in m["content"] and m["kind"] == "profile_fact" for m in active)


def test_a_corrected_text_keeps_nothing_the_old_text_alone_said(
    backend_client: TestClient,
) -> None:
    """The fact's value and entities come from its text: a new text takes them from itself
    (they said "FBI" after a correction to the CIA, and still did once the old version was
    forgotten); a correction that keeps the text keeps them."""
    ingest(backend_client)
    fact = _fbi_fact(_compile(backend_client))
    assert "FBI" in json.dumps(fact["metadata"])
    moved = backend_client.patch(
        f"/v1/memories/{fact['id']}", json={"content": "User works at the CIA in Langley"}
    ).json()
    assert backend_client.delete(f"/v1/memories/{fact['id']}").status_code == 200
    served = backend_client.get(f"/v1/memories/{moved['id']}").json()["memory"]
    assert "FBI" not in json.dumps(served["metadata"]), served["metadata"]
    assert "CIA" in served["metadata"]["entities"] or "Langley" in served["metadata"]["entities"]
    assert served["metadata"]["slot"] == fact["metadata"]["slot"]  # the same attribute
    same = backend_client.patch(f"/v1/memories/{moved['id']}", json={"confidence": 0.4}).json()
    assert same["metadata"]["entities"] == served["metadata"]["entities"]


def test_correction_errors_change_nothing(backend_client: TestClient) -> None:
    ingest(backend_client)
    fact = _fbi_fact(_compile(backend_client))
    url = f"/v1/memories/{fact['id']}"
    for body, code in [
        ({}, "empty_correction"),
        ({"editor": "x"}, "empty_correction"),
        # Every field given already has that value: no new version either.
        ({"content": fact["content"]}, "empty_correction"),
        ({"content": fact["content"], "kind": fact["kind"]}, "empty_correction"),
        ({"confidence": fact["confidence"], "note": "same"}, "empty_correction"),
        ({"kind": "nonsense"}, "unknown_kind"),
        ({"content": "   "}, "validation_error"),
        ({"confidence": 2}, "validation_error"),
        ({"confidence": True}, "validation_error"),
        (
            {"valid_from": "2026-01-02T00:00:00Z", "valid_to": "2026-01-01T00:00:00Z"},
            "invalid_validity",
        ),
    ]:
        r = backend_client.patch(url, json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == code, (body, r.text)
        if code == "validation_error":  # the documented shape: details name each field
            fields = [d["field"] for d in r.json()["error"]["details"]]
            assert fields == [next(iter(body))], r.text
            assert r.json()["error"]["message"].startswith(f"invalid request at '{fields[0]}'")
    assert backend_client.get(url).json()["memory"]["status"] == "active"
    assert backend_client.get(url).json()["memory"]["summary"] == fact["summary"]


def test_correction_keeps_an_omitted_valid_to_and_clears_a_null_one(
    backend_client: TestClient,
) -> None:
    ingest(backend_client)
    fact = _fbi_fact(_compile(backend_client))
    assert fact["valid_to"] is None
    # Nothing to reopen: valid_to is already open.
    same = backend_client.patch(f"/v1/memories/{fact['id']}", json={"valid_to": None})
    assert same.status_code == 422 and same.json()["error"]["code"] == "empty_correction"
    ended = backend_client.patch(
        f"/v1/memories/{fact['id']}", json={"valid_to": "2030-01-01T00:00:00Z"}
    ).json()
    assert ended["valid_to"].startswith("2030-01-01")
    # A correction that does not mention valid_to keeps it.
    renamed = backend_client.patch(
        f"/v1/memories/{ended['id']}", json={"content": "User works at the CIA"}
    ).json()
    assert renamed["content"] == "User works at the CIA"
    assert renamed["summary"] == "User works at the CIA"  # (it was left blank)
    assert renamed["valid_to"] == ended["valid_to"]
    # null reopens it.
    reopened = backend_client.patch(f"/v1/memories/{renamed['id']}", json={"valid_to": None})
    assert reopened.status_code == 200, reopened.text
    assert reopened.json()["valid_to"] is None
    assert reopened.json()["content"] == "User works at the CIA"


def test_forget_memory_is_not_recreated_by_compile(backend_client: TestClient) -> None:
    ingest(backend_client)
    memories = _compile(backend_client)
    fact = _fbi_fact(memories)
    turn = next(m for m in memories if m["kind"] == "turn" and "FBI" in m["content"])
    for m in (fact, turn):
        r = backend_client.delete(f"/v1/memories/{m['id']}")
        assert r.status_code == 200 and r.json() == {"memory_id": m["id"], "deleted": True}
        assert backend_client.get(f"/v1/memories/{m['id']}").status_code == 404
        again = backend_client.delete(f"/v1/memories/{m['id']}")
        assert again.json()["error"]["code"] == "memory_not_found"
    assert not any("FBI" in m["content"] for m in _search(backend_client, "FBI Washington"))
    # Nothing of the text stays in the tombstones (an export shows every stored column but
    # the analysed text, which the rows themselves show).
    exported = backend_client.get("/v1/subjects/u1/export").text
    tombs = [r["row"] for r in map(json.loads, exported.splitlines()) if r.get("type") == "memory"]
    tombs = [r for r in tombs if r["status"] == "deleted"]
    assert len(tombs) == 2 and all(not r["content"] for r in tombs)
    store = backend_client.app.state.services.store  # type: ignore[attr-defined]
    with store.db.read() as conn:
        stored = conn.execute(
            select(memory_rows.c.search_text).where(memory_rows.c.status == "deleted")
        ).scalars()
        assert [t for t in stored if t] == []
    # Compile the very same episodes again (as a re-processing would): the tombstones keep
    # both memories from coming back.
    _recompile_everything(backend_client)
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "u1"}).json()
    ids = {m["id"] for m in timeline["memories"]}
    assert fact["id"] not in ids and turn["id"] not in ids
    assert not any("FBI" in m["content"] for m in timeline["memories"])
    ctx = backend_client.post("/v1/context", json={"subject_id": "u1", "task": "employer?"})
    assert ctx.status_code == 200 and "FBI" not in ctx.text


def _recompile_everything(client: TestClient) -> None:
    store = client.app.state.services.store  # type: ignore[attr-defined]
    with store.db.write() as conn:
        conn.execute(update(episodes).values(compiled=False))
    r = client.post("/v1/memories/compile", json={"subject_id": "u1"})
    assert r.status_code == 200 and r.json()["remaining_episodes"] == 0, r.text


def test_delete_episode_removes_memories_derived_only_from_it(
    backend_client: TestClient,
) -> None:
    ingest(backend_client)
    memories = _compile(backend_client)
    fbi = [m for m in memories if "FBI" in m["content"]]
    assert fbi
    episode_id = fbi[0]["source_episode_ids"][0]
    r = backend_client.delete(f"/v1/episodes/{episode_id}")
    assert r.status_code == 200, r.text
    only = [m for m in memories if m["source_episode_ids"] == [episode_id]]
    assert r.json() == {"episode_id": episode_id, "memories_deleted": len(only)} and only
    assert backend_client.get(f"/v1/episodes/{episode_id}").status_code == 404
    for m in only:
        assert backend_client.get(f"/v1/memories/{m['id']}").status_code == 404
    for m in memories:
        if m not in only and episode_id in m["source_episode_ids"]:
            got = backend_client.get(f"/v1/memories/{m['id']}").json()["memory"]
            assert episode_id not in got["source_episode_ids"]
    assert not any("FBI" in m["content"] for m in _search(backend_client, "FBI Washington"))
