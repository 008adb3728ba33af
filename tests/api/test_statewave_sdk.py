"""The public ``statewave`` Python SDK works against Cairn unchanged (its core endpoints)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from statewave import StatewaveAPIError, StatewaveClient

from cairn.api.routes.unsupported import ROUTES, not_supported_code
from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings


@pytest.fixture
def sw(backend_services: Services) -> Iterator[StatewaveClient]:
    key, _ = backend_services.store.keys.create("acme")
    client = StatewaveClient("http://testserver", api_key=key, tenant_id="acme")
    with TestClient(
        create_app(services=backend_services), headers=dict(client._http.headers)
    ) as tc:
        client._http = tc  # the SDK's own code, over the in-process transport
        yield client


def test_statewave_sdk_round_trip(sw: StatewaveClient) -> None:
    ep = sw.create_episode(
        "user-1",
        "chat",
        "conversation.turn",
        {"messages": [{"role": "user", "content": "I work at Globex as a data engineer."}]},
        session_id="s1",
        idempotency_key="k1",
    )
    again = sw.create_episode("user-1", "chat", "conversation.turn", {"x": 1}, idempotency_key="k1")
    assert again.id == ep.id
    batch = sw.create_episodes_batch(
        [
            {
                "subject_id": "user-1",
                "source": "chat",
                "type": "conversation.turn",
                "session_id": "s1",
                "payload": {
                    "messages": [{"role": "user", "content": "I live in Lisbon with my dog Rex."}]
                },
            },
        ]
    )
    assert batch.episodes_created == 1

    compiled = sw.compile_memories("user-1")
    assert compiled.memories_created >= 1
    assert all(m.source_episode_ids for m in compiled.memories)

    found = sw.search_memories("user-1", query="where does the user work")
    assert found.memories and "Globex" in found.memories[0].content

    bundle = sw.get_context("user-1", "Where does the user work?", max_tokens=300)
    assert "Globex" in bundle.assembled_context
    assert 0 < bundle.token_estimate <= 300

    timeline = sw.get_timeline("user-1")
    assert len(timeline.episodes) == 2 and timeline.memories

    subjects = sw.list_subjects()
    assert [s.subject_id for s in subjects.subjects] == ["user-1"]
    deleted = sw.delete_subject("user-1")
    assert deleted.episodes_deleted == 2 and deleted.memories_deleted >= 1


def test_statewave_sdk_sees_cairn_errors(sw: StatewaveClient) -> None:
    with pytest.raises(StatewaveAPIError) as info:
        sw.create_episode("bad/subject", "chat", "x", {})
    assert info.value.status_code == 422
    assert info.value.code == "validation_error"


def test_statewave_sdk_semantic_search_works_by_default(
    semantic_services: Services,
) -> None:
    """``search_memories(semantic=True)`` with the default embedder: a paraphrase is found by
    meaning once the background pass has written the vectors."""
    key, _ = semantic_services.store.keys.create("acme")
    sw = StatewaveClient("http://testserver", api_key=key, tenant_id="acme")
    with TestClient(create_app(services=semantic_services), headers=dict(sw._http.headers)) as tc:
        sw._http = tc
        for text in ("I prefer green tea over coffee.", "My brother repairs old bicycles."):
            sw.create_episode(
                "user-1",
                "chat",
                "conversation.turn",
                {"messages": [{"role": "user", "content": text}]},
            )
        assert sw.compile_memories("user-1").memories_created >= 2
        assert semantic_services.embedding_backfill is not None
        assert semantic_services.embedding_backfill.wait_idle(30)
        found = sw.search_memories("user-1", query="what does the user drink", semantic=True)
        assert found.memories and "green tea" in found.memories[0].content


@pytest.fixture
def sw_worker(backend: str, db_url: str, tmp_path: Path) -> Iterator[StatewaveClient]:
    """The SDK against an app whose compile worker runs in the server, on each backend."""
    services = Services.from_settings(
        make_settings(tmp_path, database_url=db_url, worker_in_process=True)
    )
    key, _ = services.store.keys.create("acme")
    client = StatewaveClient("http://testserver", api_key=key, tenant_id="acme")
    try:
        with TestClient(create_app(services=services), headers=dict(client._http.headers)) as tc:
            client._http = tc
            yield client
    finally:
        services.close()


def _episode(sw: StatewaveClient, subject: str, text: str) -> None:
    sw.create_episode(
        subject, "chat", "conversation.turn", {"messages": [{"role": "user", "content": text}]}
    )


def test_async_compile_status_and_wait(sw_worker: StatewaveClient) -> None:
    sw = sw_worker
    _episode(sw, "user-2", "I work at Globex as a data engineer.")
    done = sw.compile_memories_wait("user-2", poll_interval=0.05, timeout=30)
    assert done.status == "completed" and done.subject_id == "user-2"
    assert done.memories_created == len(done.memories) >= 1
    assert any("Globex" in m.content for m in done.memories)

    _episode(sw, "user-2", "I live in Lisbon with my dog Rex.")
    job = sw.compile_memories_async("user-2")
    assert job.subject_id == "user-2" and job.status in ("queued", "running", "completed")
    deadline = time.monotonic() + 30
    status = sw.get_compile_status(job.job_id)
    while status.status not in ("completed", "failed") and time.monotonic() < deadline:
        time.sleep(0.05)
        status = sw.get_compile_status(job.job_id)
    assert status.job_id == job.job_id and status.subject_id == "user-2"
    assert status.status == "completed"
    assert any("Lisbon" in m.content for m in status.memories)


def test_search_by_kind_alone_lists_the_kind(sw: StatewaveClient) -> None:
    _episode(sw, "user-3", "I work at Globex as a data engineer.")
    _episode(sw, "user-3", "I prefer tea over coffee.")
    compiled = sw.compile_memories("user-3")
    kinds = {m.kind for m in compiled.memories}
    assert kinds
    everything = sw.search_memories("user-3")
    assert {m.id for m in everything.memories} == {m.id for m in compiled.memories}
    for kind in kinds:
        listed = sw.search_memories("user-3", kind=kind)
        expected = {m.id for m in compiled.memories if m.kind == kind}
        assert {m.id for m in listed.memories} == expected
    limited = sw.search_memories("user-3", limit=1)
    assert len(limited.memories) == 1
    # Newest first: the last memory compiled comes first.
    newest = max(compiled.memories, key=lambda m: (m.valid_from, m.created_at))
    assert limited.memories[0].valid_from == newest.valid_from


@pytest.mark.parametrize(("method", "path", "feature"), ROUTES)
def test_support_agent_extras_are_named_as_not_supported(
    sw: StatewaveClient, method: str, path: str, feature: str
) -> None:
    url = path.replace("{memory_id}", "0190a2b4-0000-7000-8000-000000000000")
    url = url.replace("{receipt_id}", "r1").replace("{subject_id}", "user-1")
    body = {} if method != "GET" else None
    with pytest.raises(StatewaveAPIError) as info:
        sw._request(method, url, json=body, model=dict)  # type: ignore[arg-type]
    assert info.value.status_code == 404
    assert info.value.code == not_supported_code(feature) == f"{feature}_not_supported"


def test_support_agent_sdk_calls_say_not_supported(sw: StatewaveClient) -> None:
    calls = [
        (lambda: sw.get_receipt("r1"), "receipts"),
        (lambda: sw.list_receipts("user-1"), "receipts"),
        (lambda: sw.verify_receipt("r1"), "receipts"),  # a GET
        (lambda: sw.replay_receipt("r1"), "receipts"),
        (lambda: sw.create_handoff("user-1", "s1"), "handoff"),
        (lambda: sw.create_resolution("user-1", "s1"), "resolutions"),
        (lambda: sw.list_suggested_labels(), "labels"),
        (
            lambda: sw.promote_suggested_labels("0190a2b4-0000-7000-8000-000000000000", ["pii"]),
            "labels",
        ),
        (lambda: sw.get_health("user-1"), "health"),
        (lambda: sw.get_sla("user-1"), "sla"),
        (lambda: sw.list_resolutions("user-1"), "resolutions"),
        (lambda: sw.set_memory_labels("0190a2b4-0000-7000-8000-000000000000", ["pii"]), "labels"),
    ]
    for call, feature in calls:
        with pytest.raises(StatewaveAPIError) as info:
            call()
        assert (info.value.status_code, info.value.code) == (404, f"{feature}_not_supported")


def test_not_supported_routes_still_need_a_key(backend_services: Services) -> None:
    backend_services.store.keys.create("acme")
    with TestClient(create_app(services=backend_services)) as tc:
        r = tc.get("/v1/receipts")
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
