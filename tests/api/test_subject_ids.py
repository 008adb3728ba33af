"""Subject ids accept what users use (e-mail addresses, ``+``, any script), the rule is the same
on every route, and URL-path routes take them percent-encoded; on both backends."""

from __future__ import annotations

import unicodedata
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from cairn.core.subject_id import is_subject_id, subject_id_problem

GOOD = [
    "user@example.com",
    "anna+work@example.com",
    "José Martínez",
    "李雷",
    "Анна",
    "مرحبا",
    "customer:globex",
    "🧗‍♀️ climber",  # emoji with a ZWJ (a format character)
    "a%b?c#d",
    "x" * 256,
    "\u200fمرحبا\u200f",  # right-to-left marks  # noqa: RUF001
    "e\u0301" * 200,  # 400 characters as typed (NFD), 200 as stored (NFC): counted as stored
]
BAD = [
    *["", "a/b", "/", ".", "..", " lead", "trail ", "tab\there", "line\nbreak", "x" * 257],
    *["admin\u202egnp.exe", "\u2066x\u2069", "\u200d", "\u200b\u200d"],  # spoofing, invisible
    "\u0958" * 200,  # 200 characters, 400 in NFC (U+0958 decomposes)
    "e\u0301" * 257,  # 257 in NFC
]


def test_the_rule() -> None:
    assert all(is_subject_id(s) for s in GOOD)
    assert [s for s in BAD if is_subject_id(s)] == []
    assert subject_id_problem("a/b") == "must not contain '/'"
    assert "U+0009" in (subject_id_problem("tab\there") or "")


def _episode(subject: str) -> dict[str, object]:
    return {
        "subject_id": subject,
        "source": "chat",
        "type": "conversation.turn",
        "payload": {"messages": [{"role": "user", "content": "I work at Globex as an engineer."}]},
    }


@pytest.mark.parametrize("subject", GOOD[:9])
def test_every_route_takes_the_id(backend_client: TestClient, subject: str) -> None:
    c = backend_client
    assert c.post("/v1/episodes", json=_episode(subject)).status_code == 201
    batch = c.post("/v1/episodes/batch", json={"episodes": [_episode(subject)]})
    assert batch.status_code == 201, batch.text
    compiled = c.post("/v1/memories/compile", json={"subject_id": subject})
    assert compiled.status_code == 200 and compiled.json()["subject_id"] == subject
    found = c.get("/v1/memories/search", params={"subject_id": subject, "q": "Globex"})
    assert found.status_code == 200 and found.json()["memories"], found.text
    listed = c.get("/v1/memories/search", params={"subject_id": subject})
    assert listed.status_code == 200 and listed.json()["memories"]
    context = c.post("/v1/context", json={"subject_id": subject, "task": "Where do they work?"})
    assert context.status_code == 200 and "Globex" in context.json()["assembled_context"]
    timeline = c.get("/v1/timeline", params={"subject_id": subject})
    assert timeline.status_code == 200 and timeline.json()["subject_id"] == subject
    assert len(timeline.json()["episodes"]) == 2
    subjects = c.get("/v1/subjects").json()["subjects"]
    assert [s["subject_id"] for s in subjects] == [subject]
    page = c.get(f"/ui/subjects/{quote(subject, safe='')}")
    assert page.status_code == 200 and "Globex" in page.text
    deleted = c.delete(f"/v1/subjects/{quote(subject, safe='')}")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json()["subject_id"] == subject and deleted.json()["episodes_deleted"] == 2
    assert c.get("/v1/subjects").json()["subjects"] == []


def test_literal_plus_and_at_in_a_path(backend_client: TestClient) -> None:
    c = backend_client
    assert c.post("/v1/episodes", json=_episode("a+b@example.com")).status_code == 201
    r = c.delete("/v1/subjects/a+b@example.com")
    assert r.status_code == 200 and r.json()["subject_id"] == "a+b@example.com"
    assert r.json()["episodes_deleted"] == 1


@pytest.mark.parametrize("subject", ["a/b", " lead", "tab\there", "x" * 257, ".."])
def test_every_route_refuses_the_same_ids(backend_client: TestClient, subject: str) -> None:
    c = backend_client
    answers = [
        c.post("/v1/episodes", json=_episode(subject)),
        c.post("/v1/episodes/batch", json={"episodes": [_episode(subject)]}),
        c.post("/v1/memories/compile", json={"subject_id": subject}),
        c.get("/v1/memories/search", params={"subject_id": subject, "q": "x"}),
        c.post("/v1/context", json={"subject_id": subject, "task": "x"}),
        c.get("/v1/timeline", params={"subject_id": subject}),
        c.post(
            "/v1/memory-templates/customer-support-handoff/apply",
            json={"subject_id": subject, "values": {}},
        ),
    ]
    if "/" not in subject and subject != "..":  # those never reach the route as one segment
        answers.append(c.delete(f"/v1/subjects/{quote(subject, safe='')}"))
    for r in answers:
        assert r.status_code == 422, (r.request.url, r.text)
        error = r.json()["error"]
        assert error["code"] == "validation_error"
        assert error["details"][0]["field"].endswith("subject_id"), error
        assert "subject id" in error["message"] and "Value error" not in error["message"]
    assert c.get("/v1/subjects").json()["total"] == 0


@pytest.mark.parametrize("subject", ["李雷", 'say "hi"', "Анна+work@example.com"])
def test_export_names_its_file_for_any_subject_id(client: TestClient, subject: str) -> None:
    from urllib.parse import unquote

    r = client.get(f"/v1/subjects/{quote(subject, safe='')}/export")
    assert r.status_code == 200, r.text
    disposition = r.headers["content-disposition"]
    assert disposition.isascii()
    encoded = disposition.split("filename*=UTF-8''", 1)[1]
    assert unquote(encoded) == f"cairn-{subject}.jsonl"


def test_listing_by_prefix_is_exact_and_ordered_alike_on_both_backends(
    backend_client: TestClient,
) -> None:
    """Case counts in a prefix and the order is by code point, on SQLite (whose LIKE ignores
    ASCII case) as on PostgreSQL (whose default collation follows a locale)."""
    names = ["ALIx", "Alice", "alice", "alpha", "ÅSA", "åsa", "b"]
    for name in names:
        episode = {
            "subject_id": name,
            "source": "chat",
            "type": "note",
            "payload": {"text": f"hello from {name}"},
        }
        assert backend_client.post("/v1/episodes", json=episode).status_code == 201
    listed = backend_client.get("/v1/subjects", params={"limit": 100}).json()
    assert [s["subject_id"] for s in listed["subjects"]] == sorted(names)
    for prefix, expected in (("al", ["alice", "alpha"]), ("AL", ["ALIx"]), ("å", ["åsa"])):
        got = backend_client.get("/v1/subjects", params={"prefix": prefix}).json()
        assert [s["subject_id"] for s in got["subjects"]] == expected, prefix
        assert got["total"] == len(expected)


def test_composed_and_decomposed_spellings_are_one_subject(backend_client: TestClient) -> None:
    c = backend_client
    nfc, nfd = "José", unicodedata.normalize("NFD", "José")
    assert nfc != nfd
    assert c.post("/v1/episodes", json=_episode(nfd)).status_code == 201
    assert c.post("/v1/episodes", json=_episode(nfc)).status_code == 201
    scope = {"runtime_id": "app", "user_id": nfd, "agent_id": ""}
    turn = {"scope": scope, "conversation_id": "c", "idempotency_key": "t1"}
    turn["messages"] = [{"role": "user", "content": "Hi"}]
    assert c.post("/v1/scopes/turns", json=turn).status_code == 201
    subjects = c.get("/v1/subjects").json()["subjects"]
    assert [s["subject_id"] for s in subjects] == [nfc]  # one subject, in NFC
    timeline = c.get("/v1/timeline", params={"subject_id": nfd}).json()
    assert timeline["subject_id"] == nfc and len(timeline["episodes"]) == 2
    assert (
        c.get("/v1/subjects", params={"prefix": unicodedata.normalize("NFD", "Jos")}).json()[
            "total"
        ]
        == 1
    )
    # Erasing by either spelling erases the person in every runtime.
    erased = c.delete("/v1/scopes", params={"user_id": nfd}).json()
    assert erased["deleted"]["episodes"] == 3


SCOPE_ROUTES = [
    (
        "POST",
        "/v1/scopes/turns",
        {
            "conversation_id": "c",
            "idempotency_key": "k",
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    ("POST", "/v1/scopes/documents", {"dataset_id": "d", "document_id": "x", "content": "hi"}),
    ("PUT", "/v1/items", {"namespace": ["n"], "key": "k", "value": {"v": 1}}),
]


@pytest.mark.parametrize("user", ["a/b", "line\nbreak", "..", "\u202eevil"])
def test_a_scope_user_is_a_subject_id(backend_client: TestClient, user: str) -> None:
    """A scope's user is the subject the subject routes, the inspector and erasure name:
    ``POST /v1/scopes/turns`` took ``x/y`` and ``line\\nbreak``, which then showed in
    ``GET /v1/subjects`` and no subject route could reach. New data is refused under such a
    user; reads still take one (data stored before the rule stays reachable)."""
    c = backend_client
    for method, path, body in SCOPE_ROUTES:
        scope = {"runtime_id": "default", "user_id": user}
        r = c.request(method, path, json={**body, "scope": scope})
        assert r.status_code == 422, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "validation_error"
        assert [d["field"] for d in error["details"]] == ["scope"], error
        assert "user_id: a user is a subject id" in error["details"][0]["message"], error
    assert c.get("/v1/subjects").json()["total"] == 0
    scope = {"runtime_id": "default", "user_id": user}
    assert c.post("/v1/scopes/context", json={"scope": scope, "query": "hi"}).status_code == 200
    found = c.post("/v1/items/search", json={"scope": scope, "namespace_prefix": ["n"]})
    assert found.status_code == 200, found.text
    # Any script, and the global user (empty), stay scope users.
    for ok in ("李雷", "Анна+work@example.com", ""):
        scope = {"runtime_id": "default", "user_id": ok}
        r = c.post("/v1/scopes/turns", json={**SCOPE_ROUTES[0][2], "scope": scope})
        assert r.status_code < 300, r.text
