"""The Slate Inspector: folders with usage bars and policies, files, writing from the page,
FIFO eviction showing in the log, and a refused write under ``reject``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import LiveServer

pytestmark = pytest.mark.browser


def write(
    page: Any,
    folder: str,
    content: str,
    *,
    file: str | None = None,
    tags: str = "",
    mode: str = "append",
) -> None:
    section = page.locator(f"section[data-folder='{folder}']")
    section.locator("summary").filter(has_text="Write to this folder").click()
    if file:
        section.get_by_label("File", exact=True).select_option(file)
    section.get_by_label("Write mode").select_option(mode)
    section.get_by_label("Content").fill(content)
    section.get_by_label("Tags (comma-separated, optional)").fill(tags)
    section.get_by_role("button", name="Write").click()


def test_write_to_a_slate_and_watch_usage_and_evictions(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    sign_in(page, "b")  # tenant b's slates are untouched by the other tests
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Slates").click()
    ladder = page.locator("section[data-ladder='web-notes']")
    expect(ladder.locator("tr[data-slate='Notes'] [data-testid=usage]")).to_have_attribute(
        "data-limit", "42"
    )
    expect(page.locator("section[data-ladder='memory-ladder']")).to_be_visible()
    shoot(page, "slates")
    ladder.get_by_role("link", name="Notes", exact=True).click()

    inbox = page.locator("section[data-folder='inbox']")
    usage = inbox.get_by_test_id("usage")
    expect(usage).to_have_attribute("data-tokens", "0")
    expect(usage).to_have_attribute("data-limit", "30")
    expect(inbox.get_by_test_id("policy")).to_have_text("FIFO")
    expect(page.get_by_test_id("no-evictions")).to_be_visible()

    write(page, "inbox", "Call the plumber about the kitchen sink.", tags="home, urgent")
    expect(page.get_by_test_id("write-notice")).to_contain_text("inbox/notes.md: usage")
    first_tokens = int(usage.get_attribute("data-tokens"))
    assert 0 < first_tokens <= 30
    notes = inbox.locator("tr[data-file='notes.md']")
    expect(notes.get_by_test_id("file-content")).to_have_text(
        "Call the plumber about the kitchen sink."
    )
    expect(notes.locator(".tag")).to_have_text(["home", "urgent"])

    write(page, "inbox", "Renew the passport before the trip in June.", file="todo.md")
    write(page, "inbox", "Buy a birthday present for Maria this week, maybe a gardening book.")
    # FIFO: the oldest entry (the plumber) made room; the usage bar stays within the limit.
    expect(page.get_by_test_id("write-notice")).to_contain_text("evicted")
    tokens = int(usage.get_attribute("data-tokens"))
    assert tokens <= 30
    log = page.get_by_test_id("evictions")
    expect(log.locator("tbody tr").first).to_contain_text("Call the plumber")
    expect(log.locator("tbody tr").first).to_contain_text("FIFO")
    expect(notes.get_by_test_id("file-content")).not_to_contain_text("plumber")
    shoot(page, "slate-inspector")

    # `reject`: a write that does not fit is refused, shown, and changes nothing.
    rules = page.locator("section[data-folder='rules']")
    before = rules.get_by_test_id("usage").get_attribute("data-tokens")
    write(page, "rules", "Always answer in full sentences, with sources and dates.")
    expect(page.get_by_test_id("error-code")).to_have_text(
        re.compile("slate_limit_exceeded|slate_entry_too_large")
    )
    expect(rules.get_by_test_id("usage")).to_have_attribute("data-tokens", before)
    expect(rules.locator("tr[data-file='rules.md']").get_by_test_id("file-content")).to_have_text(
        "Be brief."
    )

    # The API sees the same slate.
    with live_server.api("b") as api:
        tree = api.get("/v1/slates/web-notes/Notes").json()
        evictions = api.get("/v1/slates/web-notes/Notes/evictions").json()["evictions"]
    assert tree["folders"][0]["tokens"] == tokens
    assert evictions[0]["preview"].startswith("Call the plumber")
    with live_server.api("a") as api:  # another tenant's slate is untouched
        assert api.get("/v1/slates/web-notes/Notes").json()["folders"][0]["tokens"] == 0

    # Reset puts the folder back to its declared contents.
    inbox.locator("summary").filter(has_text="Write to this folder").click()
    page.once("dialog", lambda dialog: dialog.accept())
    inbox.get_by_role("button", name="Reset folder").click()
    expect(page.get_by_test_id("reset-notice")).to_be_visible()
    expect(usage).to_have_attribute("data-tokens", "0")


def test_unknown_slate_is_a_404_page(page: Any, live_server: LiveServer, sign_in: Any) -> None:
    sign_in(page)
    response = page.goto(f"{live_server.url}/ui/slates/web-notes/Nope")
    assert response.status == 404
    expect(page.get_by_test_id("error-code")).to_have_text("slate_not_found")
