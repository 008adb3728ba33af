"""Health, readiness, version, OpenAPI and metrics."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from cairn import __version__
from cairn.api.app import create_app
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
