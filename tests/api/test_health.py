"""Health, readiness, version, OpenAPI and metrics."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.testclient import TestClient

from cairn import __version__
from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings


def test_health_and_version(client: TestClient) -> None:
    assert client.get("/healthz").json() == {
        "status": "ok",
        "ladders": {"serving": 0, "invalid": []},
    }
    assert client.get("/readyz").json() == {"status": "ready", "database": "sqlite"}
    assert client.get("/v1/version").json()["version"] == __version__
    assert client.get("/openapi.json").json()["info"]["title"] == "Cairn"
    assert client.get("/docs").status_code == 200


def test_readyz_is_503_when_database_is_down(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path))
    try:
        with TestClient(create_app(services=services)) as c:
            services.store.db.ping = lambda: False  # type: ignore[method-assign]
            r = c.get("/readyz")
            assert r.status_code == 503
            assert r.json()["error"]["code"] == "unavailable"
    finally:
        services.close()


def test_readyz_503_when_the_database_server_is_unreachable(tmp_path: Path) -> None:
    from sqlalchemy import create_engine

    services = Services.from_settings(make_settings(tmp_path))
    db = services.store.db
    real = db.engine
    db.engine = create_engine("postgresql+psycopg2://nobody@127.0.0.1:1/none")
    try:
        with TestClient(create_app(services=services)) as c:
            assert c.get("/readyz").status_code == 503
            assert c.get("/healthz").status_code == 200
    finally:
        db.engine.dispose()
        db.engine = real
        services.close()


def test_metrics_count_requests_per_route(client: TestClient) -> None:
    client.get("/healthz")
    client.get("/v1/subjects")
    text = client.get("/metrics").text
    assert 'cairn_http_requests_total{method="GET",route="/healthz",status="200"} 1.0' in text
    assert (
        'cairn_http_request_duration_seconds_bucket{le="0.001",method="GET",route="/v1/subjects"}'
        in text
    )


def _value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_metrics_count_domain_events(backend_client: TestClient) -> None:
    c = backend_client
    turn = {
        "subject_id": "m",
        "source": "chat",
        "type": "conversation.turn",
        "payload": {"messages": [{"role": "user", "content": "I work at Initech in Москва."}]},
    }
    assert c.post("/v1/episodes", json={**turn, "idempotency_key": "k1"}).status_code == 201
    # A repeat of a key stores nothing, so it counts nothing.
    assert c.post("/v1/episodes", json={**turn, "idempotency_key": "k1"}).status_code == 201
    assert c.post("/v1/episodes/batch", json={"episodes": [turn, turn]}).status_code == 201
    compiled = c.post("/v1/memories/compile", json={"subject_id": "m"}).json()
    text = c.get("/metrics").text
    assert _value(text, "cairn_episodes_ingested_total") == 3
    assert _value(text, "cairn_memories_compiled_total") == compiled["memories_created"] > 0
    assert 'cairn_compile_jobs{status="queued"} 0.0' in text


def test_metrics_count_compile_jobs(backend_services: Services) -> None:

    with TestClient(create_app(services=backend_services)) as c:
        episode = {
            "subject_id": "j",
            "source": "chat",
            "type": "conversation.turn",
            "payload": {"messages": [{"role": "user", "content": "我住在北京。"}]},
        }
        assert c.post("/v1/episodes", json=episode).status_code == 201
        queued = c.post("/v1/memories/compile", json={"subject_id": "j", "async": True})
        assert queued.status_code == 202
        if backend_services.compile_worker is None:  # PostgreSQL: no in-process worker
            assert 'cairn_compile_jobs{status="queued"} 1.0' in c.get("/metrics").text
            assert backend_services.job_runner.work_once()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = c.get(f"/v1/memories/compile/{queued.json()['job_id']}").json()["status"]
            if status not in ("queued", "running"):
                break
            time.sleep(0.05)
        text = c.get("/metrics").text
    assert _value(text, 'cairn_compile_jobs_total{outcome="succeeded"}') == 1
    assert _value(text, "cairn_compile_job_lag_seconds_count") == 1
