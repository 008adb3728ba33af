"""API keys and tenant isolation, on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.errors import InvalidInput
from cairn.services import Services
from tests.api.test_episodes_api import EPISODE
from tests.conftest import make_settings


def h(key: str, **extra: str) -> dict[str, str]:
    return {"X-API-Key": key, **extra}


def test_missing_key_is_401_once_keys_exist(backend_client: TestClient, two_tenants: dict) -> None:
    r = backend_client.post("/v1/episodes", json=EPISODE)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "missing_api_key"
    assert backend_client.get("/v1/subjects").status_code == 401


def test_unknown_key_is_403(backend_client: TestClient, two_tenants: dict) -> None:
    r = backend_client.get("/v1/subjects", headers=h("cairn_not-a-key"))
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "invalid_api_key"


def test_bearer_and_header_both_work(backend_client: TestClient, two_tenants: dict) -> None:
    key = two_tenants["a"]
    assert backend_client.get("/v1/subjects", headers=h(key)).status_code == 200
    bearer = {"Authorization": f"Bearer {key}"}
    assert backend_client.get("/v1/subjects", headers=bearer).status_code == 200
    assert (
        backend_client.get("/v1/subjects", headers={"Authorization": "Basic abc"}).status_code
        == 401
    )


def test_revoked_key_is_403(backend_client: TestClient, backend_services: Services) -> None:
    key, info = backend_services.store.keys.create("tenant-r")
    assert backend_client.get("/v1/subjects", headers=h(key)).status_code == 200
    backend_services.store.keys.revoke(info.id)
    r = backend_client.get("/v1/subjects", headers=h(key))
    assert r.status_code == 403 and r.json()["error"]["code"] == "invalid_api_key"


def test_tenant_header_must_match_key(backend_client: TestClient, two_tenants: dict) -> None:
    a = two_tenants["a"]
    ok = backend_client.get("/v1/subjects", headers=h(a, **{"X-Tenant-ID": "tenant-a"}))
    assert ok.status_code == 200
    r = backend_client.get("/v1/subjects", headers=h(a, **{"X-Tenant-ID": "tenant-b"}))
    assert r.status_code == 403 and r.json()["error"]["code"] == "tenant_mismatch"


def test_repeated_credentials_must_agree(backend_client: TestClient, two_tenants: dict) -> None:
    """Which key or tenant claim a request acts by must not depend on the order of its
    headers: two different keys, or two different ``X-Tenant-ID`` values, are refused; the
    same one twice is the one."""
    a, b = two_tenants["a"], two_tenants["b"]
    c = backend_client
    both = [("X-API-Key", a), ("Authorization", f"Bearer {b}")]
    for headers in (both, [("X-API-Key", a), ("X-API-Key", b)]):
        r = c.get("/v1/subjects", headers=headers)
        assert r.status_code == 403 and r.json()["error"]["code"] == "invalid_api_key", r.text
    same = [("X-API-Key", a), ("Authorization", f"Bearer {a}")]
    assert c.get("/v1/subjects", headers=same).status_code == 200
    claims = [("X-API-Key", a), ("X-Tenant-ID", "tenant-a"), ("X-Tenant-ID", "tenant-b")]
    r = c.get("/v1/subjects", headers=claims)
    assert r.status_code == 403 and r.json()["error"]["code"] == "tenant_mismatch", r.text
    twice = [("X-API-Key", a), ("X-Tenant-ID", "tenant-a"), ("X-Tenant-ID", "tenant-a")]
    assert c.get("/v1/subjects", headers=twice).status_code == 200


def test_a_tenant_header_in_any_script_matches_its_key(
    backend_client: TestClient, backend_services: Services
) -> None:
    """HTTP carries header bytes: a UTF-8 ``X-Tenant-ID`` names the tenant it spells."""
    key, _ = backend_services.store.keys.create("租户A")
    headers: dict[str, Any] = {"Authorization": f"Bearer {key}", "X-Tenant-ID": "租户A".encode()}
    assert backend_client.get("/v1/subjects", headers=headers).status_code == 200
    headers["X-Tenant-ID"] = "租户B".encode()
    r = backend_client.get("/v1/subjects", headers=headers)
    assert r.status_code == 403 and r.json()["error"]["code"] == "tenant_mismatch"


def test_tenants_never_see_each_other(backend_client: TestClient, two_tenants: dict) -> None:
    a, b = h(two_tenants["a"]), h(two_tenants["b"])
    created = backend_client.post(
        "/v1/episodes", json={**EPISODE, "idempotency_key": "shared"}, headers=a
    ).json()
    batch = backend_client.post(
        "/v1/episodes/batch", json={"episodes": [{**EPISODE, "subject_id": "only-a"}]}, headers=a
    )
    assert batch.status_code == 201
    # Same idempotency key in tenant b is a different episode, not a's original.
    other = backend_client.post(
        "/v1/episodes", json={**EPISODE, "idempotency_key": "shared"}, headers=b
    ).json()
    assert other["id"] != created["id"]
    # b sees only its own subject, a's timeline shows nothing to b, b cannot delete a's data.
    assert backend_client.get("/v1/subjects", headers=b).json()["subjects"] == [
        {"subject_id": "user:42", "episode_count": 1, "memory_count": 0}
    ]
    assert (
        backend_client.get("/v1/timeline", params={"subject_id": "only-a"}, headers=b).json()[
            "episodes"
        ]
        == []
    )
    deleted = backend_client.delete("/v1/subjects/only-a", headers=b).json()
    assert deleted["episodes_deleted"] == 0
    a_subjects = backend_client.get("/v1/subjects", headers=a).json()
    assert {s["subject_id"] for s in a_subjects["subjects"]} == {"user:42", "only-a"}
    a_timeline = backend_client.get("/v1/timeline", params={"subject_id": "user:42"}, headers=a)
    assert [e["id"] for e in a_timeline.json()["episodes"]] == [created["id"]]


def test_open_mode_without_any_key(client: TestClient) -> None:
    r = client.post("/v1/episodes", json=EPISODE)
    assert r.status_code == 201
    # Any key is taken as none while no key exists (an OpenAI client must send one).
    r = client.get("/v1/subjects", headers=h("cairn_nope"))
    assert r.status_code == 200 and r.json()["total"] == 1
    bearer = client.get("/v1/local/models", headers={"Authorization": "Bearer local"})
    assert bearer.status_code == 200


def test_configured_api_key_belongs_to_default_tenant(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path, api_key="cairn_test_key_123"))
    try:
        with TestClient(create_app(services=services)) as c:
            assert c.get("/v1/subjects").status_code == 401
            r = c.post("/v1/episodes", json=EPISODE, headers=h("cairn_test_key_123"))
            assert r.status_code == 201
            assert services.store.episodes.count("default", _scope()) == 1
    finally:
        services.close()


def _scope():  # type: ignore[no-untyped-def]
    from cairn.core import Scope

    return Scope.for_subject("user:42")


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/v1/version", "/metrics"])
def test_health_endpoints_need_no_key(
    backend_client: TestClient, two_tenants: dict, path: str
) -> None:
    assert backend_client.get(path).status_code == 200


def test_revoking_every_key_does_not_reopen_the_server(
    backend_client: TestClient, backend_services: Services
) -> None:
    _key, info = backend_services.store.keys.create("only")
    backend_services.store.keys.revoke(info.id)
    r = backend_client.get("/v1/subjects")
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"


def test_open_mode_refuses_requests_to_a_public_bind(client: TestClient) -> None:
    """However the app was started, a server bound beyond loopback needs a key."""
    from cairn.errors import MissingApiKey
    from cairn.http.auth import tenant_for_key

    services = client.app.state.services  # type: ignore[attr-defined]
    assert tenant_for_key(services, None, "127.0.0.1") == "default"
    assert tenant_for_key(services, None, "cairn.local") == "default"
    with pytest.raises(MissingApiKey):
        tenant_for_key(services, None, "0.0.0.0")


@pytest.mark.parametrize("tenant", ["", " ", " lead", "a/b", "tab\tx", ".", "x" * 129])
def test_a_key_needs_a_tenant_id_that_can_name_one(backend_services: Services, tenant: str) -> None:
    before = backend_services.store.keys.list(None)
    with pytest.raises(InvalidInput) as err:
        backend_services.store.keys.create(tenant)
    assert err.value.code == "invalid_tenant"
    assert backend_services.store.keys.list(None) == before
    # Any script is a tenant id.
    key, info = backend_services.store.keys.create("李雷 & co")
    assert info.tenant_id == "李雷 & co" and key


def test_a_body_without_a_key_is_401_before_its_checks(
    backend_client: TestClient, two_tenants: dict
) -> None:
    """A keyed server answers a request with a body and no key 401, not the body's 422 (NUL,
    a lone surrogate, a non-finite number, bad JSON): nobody learns what it checks without a
    key. With a key the body's own errors come back as before."""
    assert backend_client.get("/v1/subjects").status_code == 401  # (the mode is now known)
    bodies = [
        b'{"subject_id": "u\\u0000", "source": "s", "type": "t", "payload": {}}',
        b'{"subject_id": "\\ud800", "source": "s", "type": "t", "payload": {}}',
        b'{"subject_id": "u", "source": "s", "type": "t", "payload": {"x": NaN}}',
        b"{not json",
    ]
    json_type = {"Content-Type": "application/json"}
    for body in bodies:
        r = backend_client.post("/v1/episodes", content=body, headers=json_type)
        assert r.status_code == 401, (body, r.text)
        assert r.json()["error"]["code"] == "missing_api_key"
        keyed = backend_client.post(
            "/v1/episodes", content=body, headers={**json_type, **h(two_tenants["a"])}
        )
        assert keyed.status_code == 422, (body, keyed.text)
    # Its size too: nobody without a key learns the limit.
    big = backend_client.post("/v1/episodes", content=b"x" * 1_100_000, headers=json_type)
    assert big.status_code == 401 and big.json()["error"]["code"] == "missing_api_key"
    r = backend_client.post("/v1/local/chat/completions", content=b"{not json", headers=json_type)
    assert r.status_code == 401
    error = r.json()["error"]
    assert error["code"] == "missing_api_key" and error["type"]  # OpenAI's shape there


def test_a_request_refused_before_routing_is_logged_under_its_route(
    backend_client: TestClient, two_tenants: dict, caplog: pytest.LogCaptureFixture
) -> None:
    """A request answered before the router saw it (no key, a NUL in the body) is logged and
    counted under the route it was for, not ``<unmatched>``; a path no route has stays
    ``<unmatched>``."""
    import logging

    assert backend_client.get("/v1/subjects").status_code == 401  # (the mode is now known)
    nul = b'{"subject_id": "u\\u0000", "source": "s", "type": "t", "payload": {}}'
    json_type = {"Content-Type": "application/json"}
    with caplog.at_level(logging.INFO, logger="cairn.access"):
        assert backend_client.post("/v1/episodes", json=EPISODE).status_code == 401
        keyed = {**json_type, **h(two_tenants["a"])}
        assert backend_client.post("/v1/episodes", content=nul, headers=keyed).status_code == 422
        missing = f"/v1/memories/compile/{'0' * 8}-0000-7000-8000-000000000000"
        assert backend_client.head(missing, headers=h(two_tenants["a"])).status_code == 404
        assert backend_client.get("/v1/no/such/route").status_code == 404
        assert backend_client.options("/v1/episodes/batch").status_code == 204
        assert backend_client.patch("/v1/timeline", headers=keyed).status_code == 405
    routes = [r.getMessage().split()[3] for r in caplog.records if r.name == "cairn.access"]
    assert routes == [
        "/v1/episodes",
        "/v1/episodes",
        "/v1/memories/compile/{job_id}",
        "<unmatched>",
        "/v1/episodes/batch",
        "/v1/timeline",
    ]
    scrape = backend_client.get("/metrics").text
    assert 'method="POST",route="/v1/episodes",status="401"' in scrape
    assert 'route="<unmatched>",status="401"' not in scrape
