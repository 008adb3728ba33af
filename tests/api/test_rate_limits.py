"""Per-key rate limits on both backends: off by default; over the limit a 429 ``rate_limited``
with ``Retry-After``; per key, with per-tenant overrides; one count shared by every server
process on the database."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.http import auth
from cairn.services import Services
from tests.conftest import make_settings

MINUTE = 29_000_000 * 60  # a fixed minute: the window cannot roll over mid-test


@pytest.fixture(autouse=True)
def pinned_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "clock", lambda: MINUTE + 20.5)


@pytest.fixture
def make_client(db_url: str, tmp_path: Path) -> Iterator[object]:
    made: list[tuple[Services, TestClient]] = []

    def make(**overrides: object) -> tuple[Services, TestClient]:
        services = Services.from_settings(make_settings(tmp_path, database_url=db_url, **overrides))
        client = TestClient(create_app(services=services))
        made.append((services, client))
        return services, client

    yield make
    for services, _ in made:
        services.close()


def subjects(client: TestClient, key: str) -> int:
    return client.get("/v1/subjects", headers={"X-API-Key": key}).status_code


def test_off_by_default(make_client) -> None:  # type: ignore[no-untyped-def]
    services, client = make_client()
    key, _ = services.store.keys.create("acme")
    assert [subjects(client, key) for _ in range(25)] == [200] * 25


def test_over_the_limit_is_429_with_retry_after_per_key(make_client) -> None:  # type: ignore[no-untyped-def]
    services, client = make_client(rate_limit_per_minute=5)
    key, _ = services.store.keys.create("acme")
    other, _ = services.store.keys.create("acme", name="second key")
    assert [subjects(client, key) for _ in range(5)] == [200] * 5
    r = client.get("/v1/subjects", headers={"X-API-Key": key})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "40"  # the rest of the minute (pinned at :20.5)
    error = r.json()["error"]
    assert error["code"] == "rate_limited" and error["details"]["limit_per_minute"] == 5
    # A write over the limit changes nothing.
    episode = {"subject_id": "s", "source": "t", "type": "t", "payload": {"text": "x"}}
    assert client.post("/v1/episodes", json=episode, headers={"X-API-Key": key}).status_code == 429
    assert subjects(client, other) == 200  # each key has its own count
    assert services.store.subjects.list("acme", limit=1)[1] == 0


def test_per_tenant_overrides(make_client) -> None:  # type: ignore[no-untyped-def]
    services, client = make_client(rate_limit_per_minute=2, rate_limits="big=6,free=0")
    small, _ = services.store.keys.create("small")
    big, _ = services.store.keys.create("big")
    free, _ = services.store.keys.create("free")
    assert [subjects(client, small) for _ in range(3)] == [200, 200, 429]
    assert [subjects(client, big) for _ in range(7)] == [200] * 6 + [429]
    assert [subjects(client, free) for _ in range(10)] == [200] * 10


def test_the_count_is_shared_by_server_processes(make_client) -> None:  # type: ignore[no-untyped-def]
    """Two apps over their own services (pools, caches) on one database, as two processes."""
    services, first = make_client(rate_limit_per_minute=4)
    _, second = make_client(rate_limit_per_minute=4)
    key, _ = services.store.keys.create("acme")
    answers = [subjects(app, key) for app in (first, second, first, second, first)]
    assert answers == [200, 200, 200, 200, 429]
    # The next minute starts a new count.
    auth.clock = lambda: MINUTE + 61.0  # undone by the pinned_clock fixture's monkeypatch
    assert subjects(second, key) == 200


def test_bad_limit_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tenant=N"):
        make_settings(tmp_path, rate_limits="oops")
    with pytest.raises(ValueError):
        make_settings(tmp_path, rate_limits="a=-1")


def test_a_refusal_by_the_limit_is_logged_with_its_tenant(
    make_client, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    services, client = make_client(rate_limit_per_minute=1)
    key, _ = services.store.keys.create("acme")
    assert subjects(client, key) == 200
    with caplog.at_level(logging.INFO, logger="cairn.access"):
        assert subjects(client, key) == 429
    lines = [r.getMessage() for r in caplog.records if r.name == "cairn.access"]
    assert lines and lines[-1].endswith("tenant=acme") and "-> 429" in lines[-1]
