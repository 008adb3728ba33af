"""Sign-in, the subjects list, a subject's timeline and deleting a subject, in a real browser."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from cairn.core.scope import Scope
from tests.web.conftest import LiveServer, unique

pytestmark = pytest.mark.browser


def record(server: LiveServer, tenant: str, subject: str, n: int, **extra: Any) -> list[dict]:
    """Record ``n`` episodes through the HTTP API; returns them."""
    out = []
    with server.api(tenant) as api:
        for i in range(n):
            body = {
                "subject_id": subject,
                "source": "chat",
                "type": "message",
                "payload": {"text": f"message {i} of {subject}"},
                **extra,
            }
            r = api.post("/v1/episodes", json=body)
            assert r.status_code == 201, r.text
            out.append(r.json())
    return out


def test_sign_in_is_required_and_checks_the_key(
    page: Any, live_server: LiveServer, shoot: Any
) -> None:
    page.goto(f"{live_server.url}/ui/subjects?prefix=x")
    expect(page).to_have_url(re.compile(r"/ui/login\?next="))
    expect(page.get_by_label("API key")).to_be_focused()
    page.get_by_label("API key").fill("not-a-key")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("login-error")).to_contain_text("invalid_api_key")
    shoot(page, "sign-in")
    page.get_by_label("API key").fill(live_server.keys["a"])
    page.get_by_role("button", name="Sign in").click()
    # Back where the viewer wanted to go, signed in as the key's tenant.
    expect(page).to_have_url(re.compile(r"/ui/subjects\?prefix=x$"))
    expect(page.get_by_test_id("tenant")).to_have_text("tenant-a")
    # The key lives in an HTTP-only cookie that scripts cannot read.
    cookie = next(c for c in page.context.cookies() if c["name"] == "cairn_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert "cairn_session" not in page.evaluate("document.cookie")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/ui/login$"))
    page.goto(f"{live_server.url}/ui/subjects")
    expect(page).to_have_url(re.compile(r"/ui/login"))


def test_subjects_list_search_and_delete(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    base = unique("web-subj")
    record(live_server, "a", f"{base}:alice", 3)
    record(live_server, "a", f"{base}:bob", 1)
    record(live_server, "b", f"{base}:other-tenant", 2)
    sign_in(page, "a")
    page.keyboard.press("/")  # the shortcut focuses the search box
    expect(page.get_by_label("Subject id starts with")).to_be_focused()
    page.keyboard.type(base)
    page.keyboard.press("Enter")
    rows = page.get_by_test_id("subjects").locator("tbody tr")
    expect(rows).to_have_count(2)  # tenant b's subject is not visible to tenant a
    alice = page.locator(f"tr[data-subject='{base}:alice']")
    expect(alice.locator("td").nth(1)).to_have_text("3")
    expect(alice.locator("td").nth(2)).to_have_text("0")
    shoot(page, "subjects")

    page.get_by_label("Subject id starts with").fill(f"{base}:nobody")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_test_id("empty")).to_contain_text("No subject id starts with")

    page.goto(f"{live_server.url}/ui/subjects?prefix={base}")
    page.get_by_role("link", name=f"Delete {base}:alice").click()
    expect(page.get_by_test_id("delete-episodes")).to_have_text("3")
    expect(page.get_by_test_id("delete-memories")).to_have_text("0")
    shoot(page, "subject-delete")
    page.get_by_role("button", name=f"Delete {base}:alice").click()
    expect(page.get_by_test_id("deleted-notice")).to_contain_text("3 episodes")
    with live_server.api("a") as api:
        listed = api.get("/v1/subjects", params={"prefix": base}).json()
    assert [s["subject_id"] for s in listed["subjects"]] == [f"{base}:bob"]
    with live_server.api("b") as api:
        assert api.get("/v1/subjects", params={"prefix": base}).json()["total"] == 1


def test_timeline_orders_links_and_filters(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    subject = unique("web-timeline")
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    eps = [
        record(
            live_server,
            "a",
            subject,
            1,
            session_id="s-1",
            occurred_at=(t0 + timedelta(minutes=i)).isoformat(),
            payload={"role": "user", "name": "Ana", "content": text},
        )[0]
        for i, text in enumerate(["I live in Lisbon.", "I moved to Porto last month.", "Hi again"])
    ]
    record(
        live_server,
        "a",
        subject,
        1,
        session_id="s-2",
        occurred_at=(t0 + timedelta(hours=1)).isoformat(),
    )
    # The real compiler: a turn per message, and a location fact that Porto supersedes.
    live_server.services.compile_step("tenant-a", Scope.for_subject(subject))
    sign_in(page)
    page.goto(f"{live_server.url}/ui/subjects/{subject}")
    entries = page.get_by_test_id("timeline").locator("> li")
    expect(entries).to_have_count(10)
    kinds = entries.evaluate_all(
        "els => els.map(e => e.dataset.kind === 'episode' ? 'episode' : e.dataset.memoryKind)"
    )
    assert kinds == [
        "episode",
        "turn",
        "profile_fact",
        "episode",
        "turn",
        "profile_fact",
        "episode",
        "turn",
        "episode",
        "note",
    ]
    old = page.locator("li[data-status='superseded']")
    expect(old).to_have_count(1)
    expect(old.locator(".content")).to_contain_text("Ana lives in Lisbon")
    expect(old.get_by_test_id("successor")).to_contain_text("Ana lives in Porto")
    shoot(page, "timeline")
    old.get_by_test_id("successor").get_by_role("link").click()
    new = page.locator("li[data-memory-kind='profile_fact'][data-status='active']")
    new_id = new.get_attribute("id")
    expect(page).to_have_url(re.compile(f"#{new_id}$"))
    # A memory links to the episode it came from.
    new.locator("a[data-source-episode]").click()
    expect(page).to_have_url(re.compile(f"#ep-{eps[1]['id']}$"))

    page.get_by_label("Memory kind").select_option("profile_fact")  # applies on change
    expect(page).to_have_url(re.compile(r"kind=profile_fact"))
    expect(entries).to_have_count(2)
    page.get_by_role("link", name="Clear filters").click()
    page.get_by_label("Session").select_option("s-2")
    expect(entries).to_have_count(2)  # the episode and the note compiled from it
    page.get_by_label("Show").select_option("episodes")
    expect(entries).to_have_count(1)
    expect(entries.first).to_have_attribute("data-kind", "episode")
    page.get_by_label("Memory kind").select_option("turn")
    expect(page.get_by_test_id("empty")).to_contain_text("Nothing matches")

    # An episode page shows the episode in full.
    page.goto(f"{live_server.url}/ui/episodes/{eps[0]['id']}")
    expect(page.get_by_test_id("episode-payload")).to_contain_text("I live in Lisbon.")


def test_other_tenants_data_is_not_found(page: Any, live_server: LiveServer, sign_in: Any) -> None:
    subject = unique("web-private")
    ep = record(live_server, "b", subject, 1)[0]
    sign_in(page, "a")
    for path in (
        f"/ui/subjects/{subject}",
        f"/ui/episodes/{ep['id']}",
        f"/ui/subjects/{subject}/delete",
    ):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 404
        expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    response = page.goto(f"{live_server.url}/ui/no-such-page")
    assert response.status == 404
    response = page.goto(f"{live_server.url}/ui/subjects/%20bad")
    assert response.status == 422
    expect(page.get_by_test_id("error-code")).to_have_text("validation_error")


def test_open_mode_needs_no_sign_in(page: Any, open_server: LiveServer, shoot: Any) -> None:
    subject = unique("web-open")
    record(open_server, "a", subject, 2)
    page.goto(f"{open_server.url}/ui")
    expect(page).to_have_url(re.compile(r"/ui/subjects$"))
    expect(page.get_by_test_id("tenant")).to_have_text("default")
    expect(page.get_by_text("open mode")).to_be_visible()
    expect(page.locator(f"tr[data-subject='{subject}'] td").nth(1)).to_have_text("2")
    page.goto(f"{open_server.url}/ui/login")
    expect(page.get_by_text("No sign-in is needed")).to_be_visible()
    # A form post without the CSRF token is refused and deletes nothing.
    response = page.request.post(f"{open_server.url}/ui/subjects/{subject}/delete", form={})
    assert response.status == 403
    with open_server.api() as api:
        assert api.get("/v1/subjects", params={"prefix": subject}).json()["total"] == 1


def test_right_to_left_and_unbroken_text_lay_out_within_the_page(
    page: Any, live_server: LiveServer, sign_in: Any
) -> None:
    subject = unique("web-rtl")
    hebrew = "אני גר בחיפה ועובד בנמל."
    unbroken = "x" * 400
    for text in (hebrew, unbroken):
        record(live_server, "a", subject, 1, payload={"text": text})
    with live_server.api("a") as api:
        assert api.post("/v1/memories/compile", json={"subject_id": subject}).is_success
    sign_in(page, "a")
    page.goto(f"{live_server.url}/ui/subjects/{subject}")
    memory = page.locator(".content", has_text="בחיפה").first
    expect(memory).to_have_attribute("dir", "auto")
    expect(page.locator(".content", has_text=unbroken[:40]).first).to_be_visible()
    # The page does not grow sideways: long words wrap, whatever their script.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
