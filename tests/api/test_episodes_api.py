"""POST /v1/episodes and /v1/episodes/batch through the real app, on both backends."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

EPISODE = {
    "subject_id": "user:42",
    "source": "chat",
    "type": "conversation.turn",
    "payload": {"messages": [{"role": "user", "content": "I moved to Lisbon"}]},
    "metadata": {"channel": "web"},
    "provenance": {"system": "test"},
    "session_id": "s-1",
    "occurred_at": "2024-05-01T10:00:00+02:00",
}


def test_create_returns_201_with_the_episode(backend_client: TestClient) -> None:
    r = backend_client.post("/v1/episodes", json=EPISODE)
    assert r.status_code == 201
    body = r.json()
    assert set(body) >= {
        "id",
        "subject_id",
        "source",
        "type",
        "payload",
        "metadata",
        "provenance",
        "session_id",
        "occurred_at",
        "created_at",
    }
    assert body["subject_id"] == "user:42"
    assert body["occurred_at"] == "2024-05-01T08:00:00Z"  # stored and shown in UTC
    assert body["created_at"].endswith("Z")
    assert r.headers["x-request-id"]


def test_repeated_idempotency_key_returns_original(backend_client: TestClient) -> None:
    first = backend_client.post("/v1/episodes", json={**EPISODE, "idempotency_key": "k-1"})
    second = backend_client.post(
        "/v1/episodes", json={**EPISODE, "idempotency_key": "k-1", "payload": {"x": 1}}
    )
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "user:42"}).json()
    assert len(timeline["episodes"]) == 1


def test_concurrent_requests_with_one_key_make_one_episode(backend_client: TestClient) -> None:
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def post() -> None:
        barrier.wait()
        r = backend_client.post("/v1/episodes", json={**EPISODE, "idempotency_key": "race"})
        assert r.status_code == 201
        ids.append(r.json()["id"])

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 8 and len(set(ids)) == 1
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "user:42"}).json()
    assert len(timeline["episodes"]) == 1


def test_batch_creates_all(backend_client: TestClient) -> None:
    items = [{**EPISODE, "payload": {"n": i}} for i in range(100)]
    r = backend_client.post("/v1/episodes/batch", json={"episodes": items})
    assert r.status_code == 201
    body = r.json()
    assert body["episodes_created"] == 100
    assert [e["payload"]["n"] for e in body["episodes"]] == list(range(100))


def test_batch_with_one_invalid_item_writes_nothing(backend_client: TestClient) -> None:
    items = [{**EPISODE, "payload": {"n": i}} for i in range(5)]
    items[3] = {**items[3], "subject_id": "bad/subject"}
    r = backend_client.post("/v1/episodes/batch", json={"episodes": items})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["code"] == "validation_error"
    assert "episodes.3.subject_id" in err["message"]
    assert err["details"][0]["field"] == "episodes.3.subject_id"
    assert backend_client.get("/v1/subjects").json()["total"] == 0


def test_batch_size_limits(backend_client: TestClient) -> None:
    assert backend_client.post("/v1/episodes/batch", json={"episodes": []}).status_code == 422
    items = [{**EPISODE, "payload": {"n": i}} for i in range(101)]
    r = backend_client.post("/v1/episodes/batch", json={"episodes": items})
    assert r.status_code == 422
    assert backend_client.get("/v1/subjects").json()["total"] == 0


def test_timeline_orders_and_pages(backend_client: TestClient) -> None:
    for day in (3, 1, 2):
        backend_client.post(
            "/v1/episodes",
            json={**EPISODE, "payload": {"day": day}, "occurred_at": f"2024-01-0{day}T00:00:00Z"},
        )
    page = backend_client.get("/v1/timeline", params={"subject_id": "user:42", "limit": 2}).json()
    assert [e["payload"]["day"] for e in page["episodes"]] == [1, 2]
    assert page["episodes_has_more"] is True
    assert page["memories"] == [] and page["memories_has_more"] is False
    rest = backend_client.get(
        "/v1/timeline", params={"subject_id": "user:42", "limit": 2, "offset": 2}
    ).json()
    assert [e["payload"]["day"] for e in rest["episodes"]] == [3]
    assert rest["episodes_has_more"] is False


def test_subjects_list_and_delete(backend_client: TestClient) -> None:
    for subject in ("alice", "alice", "bob"):
        backend_client.post("/v1/episodes", json={**EPISODE, "subject_id": subject})
    listed = backend_client.get("/v1/subjects").json()
    assert listed == {
        "subjects": [
            {"subject_id": "alice", "episode_count": 2, "memory_count": 0},
            {"subject_id": "bob", "episode_count": 1, "memory_count": 0},
        ],
        "total": 2,
    }
    r = backend_client.delete("/v1/subjects/alice")
    body = r.json()
    assert body.pop("deleted")["episodes"] == 2
    assert body == {"subject_id": "alice", "episodes_deleted": 2, "memories_deleted": 0}
    assert backend_client.get("/v1/subjects").json()["total"] == 1
    assert (
        backend_client.get("/v1/timeline", params={"subject_id": "alice"}).json()["episodes"] == []
    )


def test_timeline_newest_first_pages_from_the_end(backend_client: TestClient) -> None:
    for day in range(1, 6):
        backend_client.post(
            "/v1/episodes",
            json={**EPISODE, "payload": {"day": day}, "occurred_at": f"2024-01-0{day}T00:00:00Z"},
        )
    params = {"subject_id": "user:42", "limit": 2, "newest_first": "true"}
    first = backend_client.get("/v1/timeline", params=params).json()
    assert [e["payload"]["day"] for e in first["episodes"]] == [4, 5]
    assert first["episodes_has_more"] is True
    last = backend_client.get("/v1/timeline", params={**params, "offset": 4}).json()
    assert [e["payload"]["day"] for e in last["episodes"]] == [1]
    assert last["episodes_has_more"] is False


def test_nul_characters_are_refused_on_both_backends(backend_client: TestClient) -> None:
    r = backend_client.post("/v1/episodes", json={**EPISODE, "payload": {"t": "x\x00y"}})
    assert r.status_code == 422
    assert "'payload.t'" in r.json()["error"]["message"]
    assert backend_client.get("/v1/subjects").json()["total"] == 0
