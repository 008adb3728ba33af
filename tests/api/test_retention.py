"""Retention through the real app, both backends: a tenant's TTLs are set by API, the worker's
sweep expires older episodes and memories (and nothing of another tenant, nothing younger),
and /metrics counts what expired."""

from __future__ import annotations

import secrets
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import update

from cairn.core.ids import utcnow
from cairn.engine.retention import RetentionClock, sweep_retention
from cairn.store.schema import episodes, memories
from tests.api.test_erasure import found_in, rows_text, sqlite_evidence
from tests.api.test_memories import EPISODES, ingest


def _age_everything(client: TestClient, days: int) -> None:
    """Make the stored rows ``days`` old (as if written then)."""
    store = client.app.state.services.store  # type: ignore[attr-defined]
    then = utcnow() - timedelta(days=days)
    with store.db.write() as conn:
        conn.execute(update(episodes).values(occurred_at=then))
        conn.execute(update(memories).values(created_at=then))


def test_retention_expires_old_rows_and_is_audited(
    backend_client: TestClient, two_tenants: dict[str, str]
) -> None:
    a, b = ({"X-API-Key": two_tenants[k]} for k in ("a", "b"))
    services = backend_client.app.state.services  # type: ignore[attr-defined]
    assert backend_client.get("/v1/retention", headers=a).json() == {
        "episode_ttl_days": None,
        "memory_ttl_days": None,
    }
    for headers in (a, b):
        ingest(backend_client, headers)
        r = backend_client.post("/v1/memories/compile", json={"subject_id": "u1"}, headers=headers)
        assert r.status_code == 200
    _age_everything(backend_client, 40)
    r = backend_client.put(
        "/v1/retention", json={"episode_ttl_days": 30, "memory_ttl_days": 60}, headers=a
    )
    assert r.status_code == 200 and r.json() == {"episode_ttl_days": 30, "memory_ttl_days": 60}
    fresh = backend_client.post("/v1/episodes", json=EPISODES[0], headers=a)
    assert fresh.status_code == 201

    result = sweep_retention(services.store)
    assert result.episodes_deleted == 3 and result.memories_deleted == 0
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "u1"}, headers=a).json()
    assert [e["id"] for e in timeline["episodes"]] == [fresh.json()["id"]]
    assert timeline["memories"]  # 40 days old: within the 60-day memory TTL
    other = backend_client.get("/v1/timeline", params={"subject_id": "u1"}, headers=b).json()
    assert len(other["episodes"]) == 3  # tenant b has no policy

    backend_client.put("/v1/retention", json={"memory_ttl_days": 10}, headers=a)
    again = sweep_retention(services.store)
    assert again.memories_deleted > 0 and again.episodes_deleted == 0
    timeline = backend_client.get("/v1/timeline", params={"subject_id": "u1"}, headers=a).json()
    assert timeline["memories"] == []
    hits = backend_client.get(
        "/v1/memories/search", params={"subject_id": "u1", "q": "FBI"}, headers=a
    ).json()
    assert hits["memories"] == []

    metrics = backend_client.get("/metrics").text
    assert "cairn_retention_sweeps_total 2" in metrics
    assert 'cairn_retention_deleted_total{kind="episodes"} 3' in metrics
    assert f'cairn_retention_deleted_total{{kind="memories"}} {again.memories_deleted}' in metrics
    assert sweep_retention(services.store).episodes_deleted == 0  # idempotent


def test_retention_refuses_bad_policies(backend_client: TestClient) -> None:
    for body in ({"episode_ttl_days": 0}, {"memory_ttl_days": 10**6}, {"episode_ttl_days": -3}):
        r = backend_client.put("/v1/retention", json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_retention"
    for body in ({"ttl": 3}, {"episode_ttl_days": True}, {"memory_ttl_days": "30"}):
        r = backend_client.put("/v1/retention", json=body)
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", body
    assert backend_client.get("/v1/retention").json()["episode_ttl_days"] is None


def test_retention_clock_runs_first_sweep_at_once_then_waits() -> None:
    clock = RetentionClock(3600)
    assert clock.due() and not clock.due()
    assert not RetentionClock(0).due()


def test_expired_text_leaves_the_database_files(backend_client: TestClient) -> None:
    """What a sweep expires is gone from the rows and, on SQLite, from the file's pages (its
    full-text index) and its write-ahead log, as every other deletion leaves them."""
    services = backend_client.app.state.services  # type: ignore[attr-defined]
    marker = "zq" + secrets.token_hex(6)
    episode = {
        "subject_id": "u-exp",
        "source": "chat",
        "type": "conversation.turn",
        "payload": {"messages": [{"role": "user", "content": f"My locker code is {marker}."}]},
        "metadata": {"note": marker},
    }
    assert backend_client.post("/v1/episodes", json=episode).status_code == 201
    assert backend_client.post("/v1/memories/compile", json={"subject_id": "u-exp"}).is_success
    _age_everything(backend_client, 3)
    backend_client.put("/v1/retention", json={"episode_ttl_days": 1, "memory_ttl_days": 1})
    result = sweep_retention(services.store)
    assert result.episodes_deleted == 1 and result.memories_deleted >= 1
    assert marker not in rows_text(services)
    if services.store.db.is_sqlite:
        assert found_in(marker, *sqlite_evidence(services)) == []
