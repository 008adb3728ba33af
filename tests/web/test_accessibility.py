"""Every page is keyboard-usable: labelled controls, one heading, a skip link, visible focus."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import LiveServer, unique

pytestmark = pytest.mark.browser

UNLABELLED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button')]
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                && !(el.tagName === 'BUTTON' && el.textContent.trim()))
  .map(el => el.outerHTML.slice(0, 120))"""


def test_pages_have_labels_and_a_skip_link(
    page: Any, live_server: LiveServer, sign_in: Any
) -> None:
    subject = unique("web-a11y")
    with live_server.api() as api:
        api.post(
            "/v1/episodes",
            json={
                "subject_id": subject,
                "source": "chat",
                "type": "message",
                "payload": {"text": "hello"},
            },
        )
    sign_in(page)
    paths = [
        "/ui/subjects",
        f"/ui/subjects/{subject}",
        f"/ui/subjects/{subject}/delete",
        f"/ui/context?subject_id={subject}&query=hello",
        "/ui/templates",
        "/ui/templates/incident-summary",
        "/ui/slates",
        "/ui/slates/web-notes/Notes",
        "/ui/ladders",
        "/ui/ladders/memory-ladder",
        "/ui/validate-ladder",
        "/ui/runs",
    ]
    for path in paths:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert page.evaluate(UNLABELLED) == [], path
        expect(page.locator("h1")).to_have_count(1)
    # The first Tab reaches the skip link; following it moves focus to the content.
    page.goto(f"{live_server.url}/ui/subjects")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("", "none")
