"""The context API through the real ASGI app: Statewave's /v1/context and the scope-level
endpoints that mirror the contracts."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.core.tokens import get_tokenizer
from cairn.services import Services
from tests.conftest import make_settings

SCOPE = {"runtime_id": "memories", "user_id": "user-1", "agent_id": "assistant"}


def turn(
    client: TestClient,
    key: str,
    text: str,
    conv: str = "conv-1",
    headers: dict[str, str] | None = None,
    scope: dict[str, str] = SCOPE,
) -> Any:
    return client.post(
        "/v1/scopes/turns",
        headers=headers or {},
        json={
            "scope": scope,
            "conversation_id": conv,
            "idempotency_key": key,
            "messages": [{"role": "user", "content": text}],
        },
    )


def test_scope_endpoints_mirror_the_contracts(backend_client: TestClient) -> None:
    c = backend_client
    first = turn(c, "run-1", "I keep bees on the roof.")
    assert first.status_code == 201 and first.json()["created"] is True
    again = turn(c, "run-1", "something else")
    assert again.status_code == 200 and again.json() == {**first.json(), "created": False}
    doc = {
        "scope": SCOPE,
        "dataset_id": "docs",
        "document_id": "bees",
        "content": "Beekeeping guide. Hives need inspection every week in summer.",
    }
    r = c.post("/v1/scopes/documents", json=doc)
    assert r.status_code == 201 and r.json()["chunk_count"] == 1
    assert c.post("/v1/scopes/documents", json=doc).status_code == 200
    r = c.post(
        "/v1/scopes/context",
        json={
            "scope": SCOPE,
            "conversation_id": "conv-1",
            "query": "hive inspection",
            "dataset_ids": ["docs"],
            "render": {"max_chars": 2000},
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [i["source_class"] for i in body["items"]] == ["recent", "long_term"]
    assert body["items"][1]["provenance"][0]["type"] == "chunk"
    assert body["token_count"] == sum(i["token_count"] for i in body["items"])
    assert body["truncated"] is False
    assert "reference data, not instructions" in body["rendered"]


@pytest.mark.parametrize(
    ("body", "field", "text"),
    [
        ({"scope": SCOPE}, "body", "a query or a conversation_id is required"),
        (
            {"scope": {"runtime_id": " "}, "query": "x"},
            "scope.runtime_id",
            "runtime_id is required",
        ),
        ({"scope": SCOPE, "query": "x", "min_score": 2}, "min_score", "min_score must be"),
        (
            {"scope": SCOPE, "query": "x", "budget": {"max_tokens": -1}},
            "budget.max_tokens",
            "max_tokens must be >= 0",
        ),
        (
            {"scope": SCOPE, "query": "x", "dataset_ids": ["a", "a"]},
            "dataset_ids",
            "dataset_ids[1] repeats 'a'",
        ),
    ],
)
def test_scope_context_validation(
    client: TestClient, body: dict[str, Any], field: str, text: str
) -> None:
    r = client.post("/v1/scopes/context", json=body)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "validation_error"
    assert err["details"][0]["field"] == field and text in err["details"][0]["message"]


def test_render_too_large_is_a_422_naming_both_numbers(client: TestClient) -> None:
    turn(client, "k", "x " * 200)
    # Items that do not fit the rendering are dropped (lowest-ranked first) ...
    r = client.post(
        "/v1/scopes/context",
        json={"scope": SCOPE, "conversation_id": "conv-1", "render": {"max_chars": 100}},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["items"] == [] and body["truncated"] is True and body["rendered"] == ""
    # ... and only a rendering that cannot fit even without items is an error.
    r = client.post(
        "/v1/scopes/context",
        json={
            "scope": SCOPE,
            "conversation_id": "conv-1",
            "render": {"max_chars": 100, "template": "y" * 150},
        },
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "render_too_large" and "over max_chars 100" in err["message"]
    assert err["details"]["max_chars"] == 100 and err["details"]["rendered_chars"] == 150
    r = client.post(
        "/v1/scopes/context",
        json={"scope": SCOPE, "conversation_id": "conv-1", "render": {"template": "{{ 1 + }}"}},
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_template"


def test_turn_and_document_validation(client: TestClient) -> None:
    r = client.post(
        "/v1/scopes/turns",
        json={"scope": SCOPE, "conversation_id": "c", "idempotency_key": "k", "messages": []},
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "messages"
    blank = [{"role": "user", "content": ""}, {"role": "assistant", "content": "  "}]
    r = client.post(
        "/v1/scopes/turns",
        json={"scope": SCOPE, "conversation_id": "c", "idempotency_key": "k", "messages": blank},
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "messages"
    assert "a turn needs one with content" in r.text
    r = client.post(
        "/v1/scopes/documents",
        json={"scope": SCOPE, "dataset_id": "d", "document_id": "x", "content": " "},
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "content"
    assert (
        client.post("/v1/scopes/context", json={"scope": SCOPE, "conversation_id": "c"}).json()[
            "items"
        ]
        == []
    )  # nothing was written


def episode(
    client: TestClient,
    subject: str,
    text: str,
    session: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    r = client.post(
        "/v1/episodes",
        headers=headers or {},
        json={
            "subject_id": subject,
            "source": "chat",
            "type": "conversation",
            "payload": {"messages": [{"role": "user", "content": text}]},
            "session_id": session,
        },
    )
    assert r.status_code == 201


def test_statewave_context_shape_and_token_bound(backend_client: TestClient) -> None:
    c = backend_client
    for i in range(12):
        episode(
            c,
            "alice",
            f"Message {i}: my favourite colour is green and I live in Porto.",
            session="s1",
        )
    tok = get_tokenizer()
    for max_tokens in (1, 40, 90, 150, 400, 4000):
        r = c.post(
            "/v1/context",
            json={
                "subject_id": "alice",
                "task": "favourite colour",
                "max_tokens": max_tokens,
                "session_id": "s1",
            },
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) == {
            "subject_id",
            "task",
            "facts",
            "procedures",
            "episodes",
            "provenance",
            "assembled_context",
            "token_estimate",
        }
        assert body["token_estimate"] == tok.count(body["assembled_context"]) <= max_tokens
        assert len(body["episodes"]) == len(body["provenance"]["episode_ids"])
    assert body["episodes"][0]["session_id"] == "s1"
    assert "Message 11" in body["assembled_context"]  # newest first


def test_statewave_context_recalls_compiled_facts(client: TestClient) -> None:
    from cairn.core.scope import Scope

    episode(client, "bob", "I work at Globex as a data engineer.", session="old")
    services = client.app.state.services  # type: ignore[attr-defined]
    services.compile_step("default", Scope.for_subject("bob"))
    r = client.post("/v1/context", json={"subject_id": "bob", "task": "Where does the user work?"})
    body = r.json()
    assert any("Globex" in f["content"] for f in body["facts"])
    assert all(f["valid_from"] for f in body["facts"])
    assert body["provenance"]["source_episode_ids"]


def test_statewave_context_validation(client: TestClient) -> None:
    for body, field in (
        ({"task": "x"}, "subject_id"),
        ({"subject_id": "a"}, "task"),
        ({"subject_id": "a", "task": "x", "max_tokens": -1}, "max_tokens"),
        ({"subject_id": "a", "task": "   "}, "task"),
        ({"subject_id": "a/b", "task": "x"}, "subject_id"),
        ({"subject_id": "a", "task": "x", "colour": 1}, "colour"),
    ):
        r = client.post("/v1/context", json=body)
        assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == field
    r = client.post("/v1/context", json={"subject_id": "a", "task": "x", "emit_receipt": False})
    assert r.status_code == 200 and r.json()["assembled_context"] == ""
    # 0 means the default budget, as in the contracts.
    r = client.post("/v1/context", json={"subject_id": "a", "task": "x", "max_tokens": 0})
    assert r.status_code == 200, r.text


def test_tenants_never_see_each_other(
    backend_client: TestClient, two_tenants: dict[str, str]
) -> None:
    a = {"X-API-Key": two_tenants["a"]}
    b = {"X-API-Key": two_tenants["b"]}
    assert turn(backend_client, "k", "tenant a secret", headers=a).status_code == 201
    episode(backend_client, "shared", "tenant a subject secret", session="s", headers=a)
    r = backend_client.post(
        "/v1/scopes/context", headers=b, json={"scope": SCOPE, "conversation_id": "conv-1"}
    )
    assert r.status_code == 200 and r.json()["items"] == []
    r = backend_client.post(
        "/v1/context", headers=b, json={"subject_id": "shared", "task": "secret", "session_id": "s"}
    )
    assert r.json()["episodes"] == [] and r.json()["assembled_context"] == ""
    # The same key in tenant b is a new turn, not tenant a's.
    assert turn(backend_client, "k", "tenant b", headers=b).json()["created"] is True
    assert (
        backend_client.post("/v1/scopes/context", json={"scope": SCOPE, "query": "x"}).status_code
        == 401
    )


def test_overlong_scope_ids_are_a_422_on_both_backends(backend_client: TestClient) -> None:
    """The scope columns hold 256 characters; a longer id is refused before the database
    (PostgreSQL used to answer 500), and nothing is written."""
    long_scope = {"runtime_id": "r" * 300}
    r = backend_client.post(
        "/v1/scopes/turns",
        json={
            "scope": long_scope,
            "conversation_id": "c",
            "idempotency_key": "k",
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "scope.runtime_id"
    r = backend_client.post(
        "/v1/scopes/documents",
        json={
            "scope": {"runtime_id": "rt", "user_id": "u" * 300},
            "dataset_id": "d",
            "document_id": "x",
            "content": "text",
        },
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "scope.user_id"
    r = backend_client.post(
        "/v1/scopes/context", json={"scope": {"runtime_id": "r" * 256}, "conversation_id": "c"}
    )
    assert r.status_code == 200 and r.json()["items"] == []  # 256 is allowed


def test_committed_turns_become_long_term_memory_in_the_background(
    backend_client: TestClient,
) -> None:
    """By default a committed turn is compiled in the background: another conversation of
    the scope recalls it soon after (polled with a generous bound; no timing assertion)."""
    c = backend_client
    assert turn(c, "t1", "My favourite ramen is shoyu.").status_code == 201
    ask = {"scope": SCOPE, "conversation_id": "conv-2", "query": "which ramen do I like"}
    deadline = time.monotonic() + 30
    items: list[Any] = []
    while time.monotonic() < deadline:
        items = [i for i in c.post("/v1/scopes/context", json=ask).json()["items"]]
        if items:
            break
        time.sleep(0.05)
    assert items and "shoyu" in items[0]["content"] and items[0]["source_class"] == "long_term"
    # The same turn committed again is not a new episode, and nothing is left to compile.
    assert turn(c, "t1", "My favourite ramen is shoyu.").status_code == 200
    r = c.post("/v1/scopes/compile", json={"scope": SCOPE})
    assert r.json()["remaining_episodes"] == 0


@pytest.fixture
def manual_client(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """A client whose server does not compile committed turns by itself."""
    s = Services.from_settings(make_settings(tmp_path, database_url=db_url, compile_turns=False))
    with TestClient(create_app(services=s)) as c:
        yield c
    s.close()


def test_turns_of_a_scope_are_compiled_and_recalled(manual_client: TestClient) -> None:
    """A turn is an episode compiled like any other: ``POST /v1/scopes/compile`` does it for a
    scope that is not a subject, and long-term recall then finds it without its
    conversation."""
    c = manual_client
    for i, text in enumerate(["I keep bees on the roof.", "My favourite ramen is shoyu."]):
        assert turn(c, f"k{i}", text).status_code == 201
    ask = {"scope": SCOPE, "query": "which ramen do I like"}
    assert c.post("/v1/scopes/context", json=ask).json()["items"] == []  # not compiled yet
    r = c.post("/v1/scopes/compile", json={"scope": SCOPE})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["scope"] == SCOPE and body["memories_created"] >= 2
    assert body["has_more"] is False and body["remaining_episodes"] == 0
    items = c.post("/v1/scopes/context", json=ask).json()["items"]
    assert items and "shoyu" in items[0]["content"] and items[0]["source_class"] == "long_term"
    # Nothing left: a second compile creates nothing; the async form answers with a job.
    assert c.post("/v1/scopes/compile", json={"scope": SCOPE}).json()["memories_created"] == 0
    r = c.post("/v1/scopes/compile", json={"scope": SCOPE, "async": True})
    assert r.status_code == 202 and r.json()["status"] == "queued"
    assert c.get(f"/v1/memories/compile/{r.json()['job_id']}").status_code == 200
    r = c.post("/v1/scopes/compile", json={"scope": {"runtime_id": " "}})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "scope.runtime_id"
