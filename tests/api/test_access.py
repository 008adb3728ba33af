"""Who may reach the server: open mode answers loopback peers only, whatever the bind; the Host
header must be a loopback name in open mode and one of ``CAIRN_ALLOWED_HOSTS`` otherwise; every
inspector page carries the security headers. Driven through a transport that presents a real
socket's addresses, on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.api.access import host_allowed, host_name, is_loopback_name
from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings

REMOTE = ("203.0.113.9", 40000)
LOCAL = ("127.0.0.1", 40000)


def peer_client(services: Services, client: tuple[str, int], host: str) -> TestClient:
    """A client whose requests look like they came over a socket of a server bound on every
    interface: the peer is ``client``, the server end the address that peer reached (the
    interface 192.0.2.2 for a remote peer, 127.0.0.1 for a local one), the Host ``host``."""
    server = "127.0.0.1" if client == LOCAL else "192.0.2.2"
    return TestClient(
        create_app(services=services),
        base_url=f"http://{server}:8100",
        client=client,
        headers={"Host": host},
    )


@pytest.fixture
def make_services(db_url: str, tmp_path: Path) -> Iterator[object]:
    made: list[Services] = []

    def make(**overrides: object) -> Services:
        s = Services.from_settings(make_settings(tmp_path, database_url=db_url, **overrides))
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_open_mode_refuses_remote_peers_on_api_and_ui(make_services) -> None:  # type: ignore[no-untyped-def]
    services = make_services()
    with peer_client(services, REMOTE, "192.0.2.2:8100") as c:
        for path in ("/v1/subjects", "/ui/subjects", "/ui/login", "/healthz"):
            r = c.get(path, headers={"Host": "192.0.2.2:8100"})
            assert r.status_code == 403, path
            assert r.json()["error"]["code"] == "loopback_only"
        r = c.post("/v1/episodes", json={"subject_id": "s", "payload": {"text": "x"}})
        assert r.status_code == 403
    with peer_client(services, LOCAL, "localhost") as c:
        r = c.get("/v1/subjects")
        assert r.json()["total"] == 0, r.text


def test_open_mode_serves_loopback_peers_with_loopback_hosts(make_services) -> None:  # type: ignore[no-untyped-def]
    services = make_services()
    with peer_client(services, LOCAL, "127.0.0.1:8100") as c:
        for host in (
            "127.0.0.1:8100",
            "localhost:8100",
            "[::1]:8100",
            "app.localhost",
            "LOCALHOST.",
        ):
            r = c.get("/ui/subjects", headers={"Host": host})
            assert r.status_code == 200, host
        assert c.get("/v1/subjects", headers={"Host": "localhost"}).status_code == 200


@pytest.mark.parametrize(
    "host", ["rebind.example", "rebind.example:8100", "192.0.2.2", "", "localhost.evil.example"]
)
def test_open_mode_refuses_other_host_names(make_services, host: str) -> None:  # type: ignore[no-untyped-def]
    services = make_services()
    with peer_client(services, LOCAL, "127.0.0.1:8100") as c:
        for path in ("/ui/subjects", "/v1/subjects"):
            r = c.get(path, headers={"Host": host})
            assert r.status_code == 400, (path, host)
            assert r.json()["error"]["code"] == "host_not_allowed"


def test_keys_open_the_server_to_remote_peers(make_services) -> None:  # type: ignore[no-untyped-def]
    services = make_services()
    key, _ = services.store.keys.create("acme")
    with peer_client(services, REMOTE, "cairn.example") as c:
        assert c.get("/v1/subjects").status_code == 401
        assert c.get("/v1/subjects", headers={"X-API-Key": key}).status_code == 200
        assert c.get("/ui/login").status_code == 200


def test_allowed_hosts_limit_host_names_once_keys_exist(make_services) -> None:  # type: ignore[no-untyped-def]
    services = make_services(allowed_hosts="cairn.example, .internal.example")
    key, _ = services.store.keys.create("acme")
    with peer_client(services, REMOTE, "cairn.example") as c:
        auth = {"X-API-Key": key}
        assert c.get("/v1/subjects", headers=auth).status_code == 200
        ok = c.get("/v1/subjects", headers={**auth, "Host": "api.internal.example:443"})
        assert ok.status_code == 200
        r = c.get("/v1/subjects", headers={**auth, "Host": "rebind.example"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"
        # A remote client naming a loopback host is still refused ...
        r = c.get("/healthz", headers={"Host": "127.0.0.1:8100"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"
    # ... but this machine's own health probe (loopback client, loopback name) is answered.
    with peer_client(services, LOCAL, "127.0.0.1:8100") as c:
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        r = c.get("/v1/subjects", headers={"Host": "rebind.example"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "host_not_allowed"


def test_inspector_pages_carry_security_headers(make_services) -> None:  # type: ignore[no-untyped-def]
    services = make_services()
    with peer_client(services, LOCAL, "localhost:8100") as c:
        for path in ("/ui/login", "/ui/subjects", "/ui/no-such-page"):
            r = c.get(path)
            csp = r.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, path
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["x-content-type-options"] == "nosniff"
        assert c.get("/v1/subjects").headers["x-content-type-options"] == "nosniff"


def test_host_rules() -> None:
    assert host_name("LocalHost:8100") == "localhost"
    assert host_name("[::1]:80") == "::1" and host_name("::1") == "::1"
    assert is_loopback_name("127.3.4.5") and is_loopback_name("x.localhost")
    assert not is_loopback_name("localhost.example") and not is_loopback_name("")
    assert host_allowed("a.b.example", [".b.example"]) and host_allowed("any", ["*"])
    assert not host_allowed("b.example.evil", [".b.example", "b.example"])
