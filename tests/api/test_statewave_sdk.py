"""The public ``statewave`` Python SDK works against Cairn unchanged (its core endpoints)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from statewave import StatewaveAPIError, StatewaveClient

from cairn.api.app import create_app
from cairn.services import Services


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
        sw.create_episode("bad subject!", "chat", "x", {})
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
