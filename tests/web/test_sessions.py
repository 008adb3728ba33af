"""Inspector sessions on both backends: the cookie is an opaque random token, never the key;
a session ends at sign-out, at expiry and when its key is revoked; a replayed cookie after any
of those gets the sign-in page."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from cairn.app import create_app
from cairn.core.ids import utcnow
from cairn.services import Services
from cairn.store.keys import hash_key
from cairn.store.schema import ui_sessions
from tests.conftest import make_settings
from tests.web.test_pages_http import csrf_of


@pytest.fixture
def make_web(db_url: str, tmp_path: Path) -> Iterator[object]:
    made: list[tuple[Services, TestClient]] = []

    def make(**overrides: object) -> tuple[Services, TestClient]:
        settings = make_settings(tmp_path, database_url=db_url, **overrides)
        services = Services.from_settings(settings)
        client = TestClient(create_app(services=services), follow_redirects=False)
        client.__enter__()
        made.append((services, client))
        return services, client

    yield make
    for services, client in made:
        client.__exit__(None, None, None)
        services.close()


def sign_in(web: TestClient, key: str) -> str:
    token = csrf_of(web.get("/ui/login").text)
    r = web.post("/ui/login", data={"csrf": token, "api_key": key, "next": "/ui/subjects"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/subjects", r.text
    session = web.cookies.get("cairn_session")
    assert session
    return session


def signed_out(web: TestClient, session: str) -> bool:
    """Whether a browser presenting only this cookie is sent to the sign-in page."""
    replay = TestClient(web.app, follow_redirects=False, cookies={"cairn_session": session})
    r = replay.get("/ui/subjects")
    return r.status_code == 303 and r.headers["location"].startswith("/ui/login")


def test_cookie_is_an_opaque_token_not_the_key(make_web) -> None:  # type: ignore[no-untyped-def]
    services, web = make_web()
    key, _ = services.store.keys.create("acme")
    session = sign_in(web, key)
    assert key not in session and key[:12] not in session and len(session) >= 40
    page = web.get("/ui/subjects")
    assert page.status_code == 200 and "acme" in page.text and key[:12] in page.text
    # Only the digest is stored; the key itself as a cookie signs nobody in.
    with services.store.db.read() as conn:
        ids = [r.id for r in conn.execute(ui_sessions.select())]
    assert ids == [hash_key(session)]
    assert signed_out(web, key)
    # A second sign-in is a different session.
    other = TestClient(web.app, follow_redirects=False)
    assert sign_in(other, key) != session


def test_sign_out_ends_the_session_even_if_the_cookie_is_replayed(make_web) -> None:  # type: ignore[no-untyped-def]
    services, web = make_web()
    key, _ = services.store.keys.create("acme")
    session = sign_in(web, key)
    csrf = csrf_of(web.get("/ui/subjects").text)
    r = web.post("/ui/logout", data={"csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/ui/login"
    assert signed_out(web, session)


def test_revoking_the_key_ends_its_sessions(make_web) -> None:  # type: ignore[no-untyped-def]
    services, web = make_web()
    key, info = services.store.keys.create("acme")
    services.store.keys.create("other")  # keeps the server closed after the revocation
    session = sign_in(web, key)
    assert not signed_out(web, session)
    services.store.keys.revoke(info.id)
    assert signed_out(web, session)
    assert "reason=" in web.get("/ui/subjects").headers["location"]


def test_sessions_expire(make_web) -> None:  # type: ignore[no-untyped-def]
    services, web = make_web(session_ttl_seconds=90)
    key, _ = services.store.keys.create("acme")
    session = sign_in(web, key)
    assert not signed_out(web, session)
    with services.store.db.read() as conn:
        row = conn.execute(ui_sessions.select()).one()
    assert row.expires_at - row.created_at == timedelta(seconds=90)
    # Move the end into the past rather than sleeping: the clock, not the load, decides.
    with services.store.db.write() as conn:
        conn.execute(update(ui_sessions).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert signed_out(web, session)
