"""Imported memories never take ids another tenant or subject needs, and an import says
nothing about what other tenants hold (memory ids are derived, so anyone can compute them)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.core.analysis import content_digest
from cairn.core.memories import memory_id
from cairn.core.scope import Scope
from cairn.services import Services

SECRET = "User: I work at AcmeCorp. ACME-SECRET"


def _episode(subject: str, text: str, session: str = "s1") -> dict[str, Any]:
    return {
        "subject_id": subject,
        "source": "chat",
        "type": "conversation.turn",
        "session_id": session,
        "payload": {"messages": [{"role": "user", "content": text}]},
    }


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def _probe_record(victim_tenant: str, subject: str) -> dict[str, Any]:
    """A memory record carrying the id the victim's compile gives ``SECRET``'s turn."""
    digest = content_digest(SECRET)
    target = memory_id(victim_tenant, Scope.for_subject(subject), "turn", digest)
    return {
        "type": "memory",
        "row": {
            "id": str(target),
            "kind": "turn",
            "content": SECRET,
            "summary": "",
            "confidence": 1.0,
            "status": "active",
            "source_episode_ids": [str(uuid.uuid4())],
            "metadata": {},
            "content_hash": digest,
            "created_at": "2026-01-01T00:00:00+00:00",
            "updated_at": "2026-01-01T00:00:00+00:00",
        },
    }


def test_an_import_can_neither_probe_nor_block_another_tenants_memories(
    backend_services: Services,
) -> None:
    acme_key, _ = backend_services.store.keys.create("acme")
    globex_key, _ = backend_services.store.keys.create("globex")
    with TestClient(create_app(services=backend_services)) as client:
        acme = {"Authorization": f"Bearer {acme_key}"}
        globex = {"Authorization": f"Bearer {globex_key}"}
        # acme holds the secret in "holder"; "victim" does not have it yet.
        _ok(client.post("/v1/episodes", json=_episode("holder", SECRET[6:]), headers=acme), 201)
        _ok(client.post("/v1/memories/compile", json={"subject_id": "holder"}, headers=acme))
        answers = []
        for subject in ("holder", "victim"):
            r = client.post(
                f"/v1/subjects/probe-{subject}/import",
                json={"records": [_probe_record("acme", subject)]},
                headers=globex,
            )
            answers.append((r.status_code, {**r.json(), "subject_id": "-"}))
        # The same answer whether acme holds that memory or not.
        assert answers[0] == answers[1] and answers[0][0] == 200
        assert answers[0][1]["imported"]["memory"] == 1
        # And acme's own compile of the text still stores it, under its usual id.
        _ok(client.post("/v1/episodes", json=_episode("victim", SECRET[6:]), headers=acme), 201)
        made = _ok(client.post("/v1/memories/compile", json={"subject_id": "victim"}, headers=acme))
        turn = next(m for m in made["memories"] if m["kind"] == "turn")
        expected = memory_id("acme", Scope.for_subject("victim"), "turn", content_digest(SECRET))
        assert turn["id"] == str(expected)
        assert (
            _ok(client.get(f"/v1/memories/{expected}", headers=acme))["memory"]["content"] == SECRET
        )
        # globex sees its imported copies under ids of its own, never acme's.
        assert client.get(f"/v1/memories/{expected}", headers=globex).status_code == 404


def test_a_subject_copied_within_one_database_loses_nothing(backend_client: TestClient) -> None:
    """Export a subject and import it as another subject of the same tenant, one record per
    call and in reverse order: both subjects keep every memory, the copy's correction chain
    points at the copy's own ids, and the original still compiles as before."""
    client = backend_client
    for text in ("I work at the FBI in Washington.", "I like green tea.", "My sister is Dana."):
        _ok(client.post("/v1/episodes", json=_episode("src", text)), 201)
    made = _ok(client.post("/v1/memories/compile", json={"subject_id": "src"}))["memories"]
    fact = next(m for m in made if m["kind"] == "profile_fact" and "FBI" in m["content"])
    corrected = _ok(
        client.patch(f"/v1/memories/{fact['id']}", json={"content": "User works at the CIA"})
    )
    lines = [json.loads(x) for x in client.get("/v1/subjects/src/export").text.splitlines()][1:]
    for record in reversed(lines):
        _ok(client.post("/v1/subjects/dst/import", json={"records": [record]}))
    copies = _ok(client.get("/v1/timeline", params={"subject_id": "dst", "limit": 100}))["memories"]
    originals = _ok(client.get("/v1/timeline", params={"subject_id": "src", "limit": 100}))[
        "memories"
    ]
    assert sorted(m["content"] for m in copies) == sorted(m["content"] for m in originals)
    assert not {m["id"] for m in copies} & {m["id"] for m in originals}
    new = next(m for m in copies if m["content"] == "User works at the CIA")
    history = _ok(client.get(f"/v1/memories/{new['id']}"))
    old = history["replaces"][0]
    assert old["content"] == fact["content"] and old["superseded_by"] == new["id"]
    assert new["metadata"]["correction"]["replaces"] == old["id"]
    assert history["memory"]["id"] != corrected["id"]
    # The original subject compiles the same text again without losing or duplicating.
    _ok(client.post("/v1/episodes", json=_episode("src", "I like green tea.", "s2")), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": "src"}))
    again = _ok(client.get("/v1/timeline", params={"subject_id": "src", "limit": 100}))["memories"]
    assert len(again) == len(originals)
    # Importing the same records again changes nothing.
    result = _ok(client.post("/v1/subjects/dst/import", json={"records": lines}))
    assert sum(result["imported"].values()) == 0 and result["skipped"] == len(lines)


def test_a_reference_whose_target_never_comes_points_into_no_other_subject(
    backend_client: TestClient,
) -> None:
    """Import only the old version of a corrected memory: its ``superseded_by`` must not name
    the source subject's new version (whose history would then list the copy)."""
    client = backend_client
    _ok(client.post("/v1/episodes", json=_episode("src", "I work at the FBI in Washington.")), 201)
    made = _ok(client.post("/v1/memories/compile", json={"subject_id": "src"}))["memories"]
    fact = next(m for m in made if m["kind"] == "profile_fact")
    new = _ok(client.patch(f"/v1/memories/{fact['id']}", json={"content": "User works at NASA"}))
    lines = [json.loads(x) for x in client.get("/v1/subjects/src/export").text.splitlines()]
    old_only = [r for r in lines[1:] if r["type"] == "episode" or r["row"]["id"] == fact["id"]]
    _ok(client.post("/v1/subjects/dst/import", json={"records": old_only}))
    history = _ok(client.get(f"/v1/memories/{new['id']}"))
    assert [m["id"] for m in history["replaces"]] == [fact["id"]]  # the source's own chain
    copy = next(
        m
        for m in _ok(client.get("/v1/timeline", params={"subject_id": "dst"}))["memories"]
        if m["content"] == fact["content"]
    )
    assert copy["superseded_by"] not in (new["id"], fact["id"])
    # The rest arrives later: the link is made then.
    _ok(client.post("/v1/subjects/dst/import", json={"records": lines[1:]}))
    chain = _ok(client.get(f"/v1/memories/{copy['id']}"))
    assert chain["replaced_by"][0]["content"] == "User works at NASA"
    assert chain["replaced_by"][0]["metadata"]["correction"]["replaces"] == copy["id"]


def test_a_memory_the_subject_already_holds_takes_the_links(backend_client: TestClient) -> None:
    """When the importing subject already has a record's content (under another id), the
    imported versions link to that stored memory, not to an id that was never stored."""
    client = backend_client
    text = "I work at the FBI in Washington."
    for subject in ("src", "dst"):
        _ok(client.post("/v1/episodes", json=_episode(subject, text)), 201)
    made = _ok(client.post("/v1/memories/compile", json={"subject_id": "src"}))["memories"]
    _ok(client.post("/v1/memories/compile", json={"subject_id": "dst"}))
    fact = next(m for m in made if m["kind"] == "profile_fact")
    _ok(client.patch(f"/v1/memories/{fact['id']}", json={"content": "User works at NASA"}))
    lines = [json.loads(x) for x in client.get("/v1/subjects/src/export").text.splitlines()]
    _ok(client.post("/v1/subjects/dst/import", json={"records": lines[1:]}))
    mine = _ok(client.get("/v1/timeline", params={"subject_id": "dst", "limit": 100}))["memories"]
    held = next(m for m in mine if m["content"] == fact["content"])
    nasa = next(m for m in mine if m["content"] == "User works at NASA")
    assert nasa["metadata"]["correction"]["replaces"] == held["id"]
    assert _ok(client.get(f"/v1/memories/{nasa['id']}"))["replaces"][0]["id"] == held["id"]


def test_a_copied_subject_cites_its_own_episodes(backend_client: TestClient) -> None:
    """An export imported as another subject of the same tenant copies its episodes under
    ids of the copy (they were skipped as stored, and the copy's memories cited the other
    subject's episodes, out of reach of the copy's deletions): the copy is whole and its own,
    in one call or record by record, and importing it again adds nothing."""
    client = backend_client
    _ok(
        client.post("/v1/episodes", json=_episode("orig", "I live in Kyiv and I work at Roshen.")),
        201,
    )
    _ok(client.post("/v1/memories/compile", json={"subject_id": "orig"}))
    lines = [json.loads(x) for x in client.get("/v1/subjects/orig/export").text.splitlines()][1:]
    original = _ok(client.get("/v1/timeline", params={"subject_id": "orig"}))
    for target, batches in (("copy1", [lines]), ("copy2", [[r] for r in reversed(lines)])):
        for batch in batches:
            _ok(client.post(f"/v1/subjects/{target}/import", json={"records": batch}))
        copy = _ok(client.get("/v1/timeline", params={"subject_id": target}))
        own = {e["id"] for e in copy["episodes"]}
        assert len(own) == 1 and not own & {e["id"] for e in original["episodes"]}
        assert copy["memories"] and all(
            set(m["source_episode_ids"]) <= own for m in copy["memories"]
        )
        again = _ok(client.post(f"/v1/subjects/{target}/import", json={"records": lines}))
        assert sum(again["imported"].values()) == 0
    # The copy's episode takes the copy's memories with it; the original keeps its own.
    copy = _ok(client.get("/v1/timeline", params={"subject_id": "copy1"}))
    deleted = _ok(client.delete(f"/v1/episodes/{copy['episodes'][0]['id']}"))
    assert deleted["memories_deleted"] == len(copy["memories"])
    assert _ok(client.get("/v1/timeline", params={"subject_id": "copy1"}))["memories"] == []
    kept = _ok(client.get("/v1/timeline", params={"subject_id": "orig"}))
    assert len(kept["memories"]) == len(original["memories"])
    # With the original gone, importing the copy's records again still adds nothing.
    _ok(client.delete("/v1/subjects/orig"))
    again = _ok(client.post("/v1/subjects/copy2/import", json={"records": lines}))
    assert sum(again["imported"].values()) == 0, again
