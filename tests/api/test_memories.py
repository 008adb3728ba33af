"""The memories API through the real ASGI app: compile (sync, async job), search, errors,
tenant isolation."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings

EPISODES = [
    {
        "subject_id": "u1",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "c1",
        "payload": {"messages": [{"role": "user", "content": "Hi, my name is Dana Scully."}]},
    },
    {
        "subject_id": "u1",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "c1",
        "payload": {"messages": [{"role": "assistant", "content": "Nice to meet you, Dana!"}]},
    },
    {
        "subject_id": "u1",
        "source": "chat",
        "type": "conversation.turn",
        "session_id": "c1",
        "payload": {"messages": [{"role": "user", "content": "I work at the FBI in Washington."}]},
    },
]


def ingest(client: TestClient, headers: dict[str, str] | None = None) -> None:
    r = client.post("/v1/episodes/batch", json={"episodes": EPISODES}, headers=headers or {})
    assert r.status_code == 201, r.text


def test_compile_then_search(backend_client: TestClient) -> None:
    ingest(backend_client)
    r = backend_client.post("/v1/memories/compile", json={"subject_id": "u1"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {
        "subject_id",
        "memories_created",
        "memories",
        "has_more",
        "remaining_episodes",
    }
    assert body["subject_id"] == "u1" and body["memories_created"] == len(body["memories"]) > 0
    assert body["has_more"] is False and body["remaining_episodes"] == 0
    kinds = {m["kind"] for m in body["memories"]}
    assert {"turn", "profile_fact"} <= kinds
    assert all(m["source_episode_ids"] for m in body["memories"])

    again = backend_client.post("/v1/memories/compile", json={"subject_id": "u1"}).json()
    assert again["memories_created"] == 0

    r = backend_client.get(
        "/v1/memories/search", params={"subject_id": "u1", "q": "Where does she work?"}
    )
    assert r.status_code == 200, r.text
    found = r.json()["memories"]
    assert any("FBI" in m["content"] for m in found[:2])
    assert all(0.0 <= m["score"] <= 1.0 for m in found)

    facts = backend_client.get(
        "/v1/memories/search",
        params={"subject_id": "u1", "q": "name", "kind": "profile_fact", "limit": 5},
    ).json()["memories"]
    assert [m["content"] for m in facts] == ["User's name is Dana Scully"]


def test_async_compile_job(tmp_path: Any) -> None:
    # SQLite runs the worker in-process by default.
    services = Services.from_settings(make_settings(tmp_path))
    try:
        with TestClient(create_app(services=services)) as client:
            ingest(client)
            r = client.post("/v1/memories/compile", json={"subject_id": "u1", "async": True})
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]
            assert r.json()["status"] in ("queued", "running", "completed")
            assert r.json()["subject_id"] == "u1"  # the queued job carries its subject
            deadline = time.monotonic() + 30
            while True:
                job = client.get(f"/v1/memories/compile/{job_id}").json()
                if job["status"] in ("completed", "failed") or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert job["status"] == "completed", job
            assert set(job) == {
                "job_id",
                "status",
                "subject_id",
                "memories_created",
                "memories",
                "error",
            }
            assert job["subject_id"] == "u1" and job["error"] is None
            assert job["memories_created"] == len(job["memories"]) > 0
            # A job recorded by an earlier version lists its memories by id: still shown.
            from sqlalchemy import update

            from cairn.store.jobs import compile_jobs

            listed = [m["id"] for m in job["memories"]]
            with services.store.db.write() as conn:
                conn.execute(update(compile_jobs).values(memory_ids=listed))
            again = client.get(f"/v1/memories/compile/{job_id}").json()
            assert [m["id"] for m in again["memories"]] == listed
    finally:
        services.close()


def test_async_job_is_run_by_a_worker_on_postgres(
    backend_services: Services,
    backend: str,
) -> None:

    with TestClient(create_app(services=backend_services)) as client:
        ingest(client)
        r = client.post("/v1/memories/compile", json={"subject_id": "u1", "async": True})
        assert r.status_code == 202
        if backend == "postgres":  # no in-process worker by default: run one step by hand
            assert backend_services.compile_worker is None
            assert backend_services.job_runner.work_once()
        deadline = time.monotonic() + 30
        while (
            client.get(f"/v1/memories/compile/{r.json()['job_id']}").json()["status"]
            not in ("completed", "failed")
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        job = client.get(f"/v1/memories/compile/{r.json()['job_id']}").json()
        assert job["status"] == "completed" and job["memories_created"] > 0


def test_errors(backend_client: TestClient) -> None:
    r = backend_client.post("/v1/memories/compile", json={"subject_id": "bad/id!"})
    assert r.status_code == 422
    r = backend_client.post("/v1/memories/compile", json={"subject_id": "u1", "extra": 1})
    assert r.status_code == 422
    for body in (
        {"subject_id": "u1", "async": "yes"},
        {"subject_id": "u1", "async": 1},
        {"subject_id": "u1", "run_async": True},
    ):  # only "async", only a boolean
        r = backend_client.post("/v1/memories/compile", json=body)
        assert r.status_code == 422, body
    r = backend_client.get("/v1/memories/compile/00000000-0000-7000-8000-000000000000")
    assert r.status_code == 404 and r.json()["error"]["code"] == "job_not_found"
    r = backend_client.get("/v1/memories/search", params={"subject_id": "u1", "q": ""})
    assert r.status_code == 422
    r = backend_client.get(
        "/v1/memories/search", params={"subject_id": "u1", "q": "x", "kind": "nope"}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_kind"
    r = backend_client.get(
        "/v1/memories/search",
        params={  # a space after the comma is fine
            "subject_id": "u1",
            "q": "x",
            "kind": "profile_fact, episode_summary",
        },
    )
    assert r.status_code == 200, r.text
    r = backend_client.get(
        "/v1/memories/search", params={"subject_id": "u1", "q": "x", "semantic": "true"}
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "embedder_not_configured"
    r = backend_client.get("/v1/memories/search", params={"subject_id": "u1", "q": "x", "limit": 0})
    assert r.status_code == 422


def test_tenants_are_isolated(backend_client: TestClient, two_tenants: dict[str, str]) -> None:
    a = {"X-API-Key": two_tenants["a"]}
    b = {"X-API-Key": two_tenants["b"]}
    ingest(backend_client, a)
    job = backend_client.post(
        "/v1/memories/compile", json={"subject_id": "u1", "async": True}, headers=a
    ).json()
    assert (
        backend_client.post("/v1/memories/compile", json={"subject_id": "u1"}, headers=b).json()[
            "memories_created"
        ]
        == 0
    )
    assert (
        backend_client.get(
            "/v1/memories/search", params={"subject_id": "u1", "q": "FBI"}, headers=b
        ).json()["memories"]
        == []
    )
    r = backend_client.get(f"/v1/memories/compile/{job['job_id']}", headers=b)
    assert r.status_code == 404
    assert backend_client.post("/v1/memories/compile", json={"subject_id": "u1"}).status_code == 401


def test_compile_on_ingest(tmp_path: Any) -> None:
    services = Services.from_settings(make_settings(tmp_path, compile_on_ingest=True))
    try:
        with TestClient(create_app(services=services)) as client:
            ingest(client)
            found = client.get(
                "/v1/memories/search", params={"subject_id": "u1", "q": "FBI"}
            ).json()["memories"]
            assert found and "FBI" in found[0]["content"]
            r = client.post("/v1/memories/compile", json={"subject_id": "u1"}).json()
            assert r["memories_created"] == 0 and r["remaining_episodes"] == 0
    finally:
        services.close()


def test_one_compile_call_covers_many_steps(
    backend_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request compiles up to REQUEST_LIMIT episodes in steps of DEFAULT_BATCH (each a short
    write transaction) and answers has_more only past the limit."""
    from cairn.engine.compile import runner

    monkeypatch.setattr(runner, "DEFAULT_BATCH", 40)
    monkeypatch.setattr(runner, "REQUEST_LIMIT", 200)
    for start in range(0, 250, 50):
        batch = [
            {
                "subject_id": "steps",
                "source": "chat",
                "type": "note",
                "payload": {"text": f"Note {start + i}: the shelf in room {start + i} is blue."},
            }
            for i in range(50)
        ]
        assert (
            backend_client.post("/v1/episodes/batch", json={"episodes": batch}).status_code == 201
        )
    first = backend_client.post("/v1/memories/compile", json={"subject_id": "steps"}).json()
    assert first["has_more"] is True and first["remaining_episodes"] == 50
    second = backend_client.post("/v1/memories/compile", json={"subject_id": "steps"}).json()
    assert second["has_more"] is False and second["remaining_episodes"] == 0
