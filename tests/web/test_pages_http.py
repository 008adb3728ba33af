"""The inspector over plain HTTP (no browser): sessions, CSRF, redirects, error pages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.web.conftest import make_ladders_dir, server_settings


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def signed_in(web: TestClient, key: str) -> None:
    token = csrf_of(web.get("/ui/login").text)
    r = web.post("/ui/login", data={"csrf": token, "api_key": key, "next": "/ui/subjects"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/subjects"


def test_session_cookie_redirects_and_revocation(web: TestClient, app_services: Services) -> None:
    key, info = app_services.store.keys.create("acme")
    app_services.store.keys.create("other")  # so revoking acme's key does not open the server
    assert web.get("/ui/").headers["location"] == "/ui/subjects"
    r = web.get("/ui/subjects?prefix=a")
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=%2Fui%2Fsubjects%3Fprefix%3Da"

    token = csrf_of(web.get("/ui/login").text)
    # An absolute or protocol-relative `next` never leaves the inspector.
    r = web.post("/ui/login", data={"csrf": token, "api_key": key, "next": "//evil.example/"})
    assert r.headers["location"] == "/ui/subjects"
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith("cairn_session="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
    assert key not in cookie  # an opaque session token, not the key
    page = web.get("/ui/subjects")
    assert page.status_code == 200 and "acme" in page.text
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-store"

    app_services.store.keys.revoke(info.id)
    r = web.get("/ui/subjects")
    assert r.status_code == 303 and "reason=" in r.headers["location"]


def test_forms_need_the_csrf_token(web: TestClient, app_services: Services) -> None:
    key, _ = app_services.store.keys.create("acme")
    r = web.post("/ui/login", data={"api_key": key})
    assert r.status_code == 403
    assert "csrf_failed" in r.text and "cairn_session" not in r.headers.get("set-cookie", "")
    signed_in(web, key)
    web.post(
        "/v1/episodes",
        headers={"X-API-Key": key},
        json={"subject_id": "s1", "source": "t", "type": "t", "payload": {}},
    )
    r = web.post("/ui/subjects/s1/delete", data={"csrf": "forged"})
    assert r.status_code == 403
    listed = web.get("/v1/subjects", headers={"X-API-Key": key}).json()
    assert listed["total"] == 1


def test_errors_are_pages_and_the_api_stays_json(web: TestClient) -> None:
    # Open mode: no key exists yet.
    r = web.get("/ui/nowhere")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "There is no page at /ui/nowhere" in r.text
    r = web.get("/v1/nowhere")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = web.get("/ui/runs/run-unknown")
    assert r.status_code == 404 and "run_not_found" in r.text
    r = web.get("/ui/context", params={"subject_id": "bad/id", "query": "x"})
    assert r.status_code == 422 and "subject_id" in r.text and "any script" in r.text
    # The timeline's "Preview its context" link: the form with the subject filled in.
    r = web.get("/ui/context", params={"subject_id": "user 李雷"})
    assert r.status_code == 200 and 'value="user 李雷"' in r.text, r.text[:2000]
    assert web.get("/ui/static/cairn.css").status_code == 200
    assert (
        web.get("/openapi.json")
        .json()["paths"]
        .keys()
        .isdisjoint({p for p in web.get("/openapi.json").json()["paths"] if p.startswith("/ui")})
    )


def test_a_per_user_slate_asks_for_the_user(web: TestClient) -> None:
    listed = web.get("/ui/slates").text
    assert 'href="/ui/slates/web-notes/Profile"' in listed and "kept per user" in listed
    r = web.get("/ui/slates/web-notes/Profile")
    assert r.status_code == 200 and "enter a user id" in r.text
    token = csrf_of(web.get("/ui/slates/web-notes/Notes").text)
    r = web.post(
        "/ui/slates/web-notes/Profile/write",
        data={
            "csrf": token,
            "folder": "prefs",
            "file": "likes.md",
            "content": "green tea",
            "user_id": "ana",
        },
    )
    assert r.status_code == 303
    assert r.headers["location"].startswith("/ui/slates/web-notes/Profile?user_id=ana&wrote=")
    page = web.get("/ui/slates/web-notes/Profile", params={"user_id": "ana"}).text
    assert "green tea" in page
    assert 'href="/ui/slates/web-notes/Profile?user_id=ana"' in web.get("/ui/slates").text
    assert (
        "green tea" not in web.get("/ui/slates/web-notes/Profile", params={"user_id": "bob"}).text
    )
    # A write without the user is refused on the page, and writes nothing.
    r = web.post(
        "/ui/slates/web-notes/Profile/write",
        data={"csrf": token, "folder": "prefs", "file": "likes.md", "content": "coffee"},
    )
    assert r.status_code == 422 and "slate_user_required" in r.text


@pytest.fixture
def backend_web(db_url: str, tmp_path: Path) -> Iterator[TestClient]:
    """The inspector on each storage backend (parametrized by ``backend``), in open mode."""
    ladders = make_ladders_dir(tmp_path / "ladders")
    services = Services.from_settings(
        server_settings(tmp_path / "data", ladders_dir=ladders, database_url=db_url)
    )
    with TestClient(create_app(services=services), follow_redirects=False) as c:
        yield c
    services.close()


def test_every_page_on_each_backend(backend_web: TestClient) -> None:
    web = backend_web
    token = csrf_of(web.get("/ui/templates/user-preference").text)
    r = web.post(
        "/ui/templates/user-preference",
        data={
            "csrf": token,
            "subject_id": "ana",
            "session_id": "s1",
            "field.subject": "drinks",
            "field.preference": "Ana prefers green tea.",
        },
    )
    assert r.status_code == 201 and "Episode created" in r.text
    web.post(
        "/v1/episodes",
        json={
            "subject_id": "ana",
            "source": "chat",
            "type": "message",
            "payload": {"role": "user", "content": "I live in Lisbon."},
        },
    )
    web.post("/v1/memories/compile", json={"subject_id": "ana"}).raise_for_status()
    r = web.post(
        "/ui/slates/memory-ladder/Memory/write",
        data={"csrf": token, "folder": "facts", "file": "core.md", "content": "Ana likes tea."},
    )
    assert r.status_code == 303
    r = web.post(
        "/ui/ladders/memory-ladder/chat",
        data={"csrf": token, "message": "What is the capital of France?", "history": "[]"},
    )
    assert r.status_code == 200 and "Paris." in r.text
    run_id = re.search(r'href="/ui/runs/(run-[0-9a-f]+)"', r.text)
    assert run_id is not None
    pages = {
        "/ui/subjects?prefix=an": "ana",
        "/ui/subjects/ana": "Ana prefers green tea.",
        "/ui/subjects/ana/delete": "delete-episodes",
        "/ui/context?subject_id=ana&query=tea": "Ana prefers green tea.",
        "/ui/slates": "memory-ladder",
        "/ui/slates/memory-ladder/Memory": "Ana likes tea.",
        "/ui/ladders/memory-ladder": "Try it",
        f"/ui/runs/{run_id.group(1)}": "Paris is the capital of France.",
        "/ui/runs?ladder=memory-ladder": run_id.group(1),
    }
    for path, text in pages.items():
        r = web.get(path)
        assert r.status_code == 200, (path, r.text[:300])
        assert text in r.text, path
    # A forgotten memory (its tombstone a row of its own) is not counted in the result: the
    # result says what the confirmation said.
    listed = web.get("/v1/memories/search", params={"subject_id": "ana", "limit": 50}).json()
    web.delete(f"/v1/memories/{listed['memories'][0]['id']}").raise_for_status()
    confirm = web.get("/ui/subjects/ana/delete").text
    shown = re.search(r'data-testid="delete-memories">(\d+)<', confirm)
    assert shown is not None
    r = web.post("/ui/subjects/ana/delete", data={"csrf": token})
    assert r.headers["location"].startswith("/ui/subjects?deleted=ana&episodes_deleted=2")
    assert r.headers["location"].endswith(f"&memories_deleted={shown.group(1)}")


def test_timeline_session_filter_reaches_past_the_first_page(
    web: TestClient,
    app_services: Services,
) -> None:
    """The session filter is applied by the database, so a session whose memories all lie
    beyond the first page is found, and it is offered as a choice on every page."""
    from cairn.core.episodes import NewEpisode
    from cairn.core.scope import Scope
    from cairn.engine.compile import compile_scope

    key, _ = app_services.store.keys.create("acme")
    scope = Scope.for_subject("long")
    store = app_services.store
    store.episodes.append_many(
        "acme",
        [
            NewEpisode(
                scope=scope,
                source="t",
                type="conversation.turn",
                session_id=session,
                payload={"messages": [{"role": "user", "content": f"note {session} {i}"}]},
            )
            for session, count in (("early", 150), ("late", 3))
            for i in range(count)
        ],
    )
    while compile_scope(store, "acme", scope).has_more:
        pass
    signed_in(web, key)
    first = web.get("/ui/subjects/long")
    assert first.status_code == 200 and "note late" not in first.text
    assert '<option value="late">late</option>' in first.text  # a choice though not on page 1
    late = web.get("/ui/subjects/long?session=late&show=memories")
    assert late.status_code == 200
    assert late.text.count('data-kind="memory"') >= 3 and "note early" not in late.text
