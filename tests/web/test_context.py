"""Context preview: packed items, what was left out and why, and the rendered text."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from cairn.core.scope import Scope
from tests.web.conftest import LiveServer, unique

pytestmark = pytest.mark.browser

FACTS = [
    "My name is Ana and I live in Lisbon.",
    "I prefer green tea over coffee.",
    "Our deploys run every Tuesday at 10am.",
    "I moved to Porto last month, Lisbon was too expensive.",
]


def seeded_subject(server: LiveServer) -> str:
    subject = unique("web-context")
    with server.api() as api:
        for text in FACTS:
            r = api.post(
                "/v1/episodes",
                json={
                    "subject_id": subject,
                    "source": "chat",
                    "type": "message",
                    "payload": {"text": text},
                    "session_id": "s1",
                },
            )
            assert r.status_code == 201
    server.services.compile_step("tenant-a", Scope.for_subject(subject))
    with server.api() as api:  # a later conversation, not compiled yet: the recent lane
        for text in ("Hello again!", "Can you remind me where I live now?"):
            api.post(
                "/v1/episodes",
                json={
                    "subject_id": subject,
                    "source": "chat",
                    "type": "message",
                    "payload": {"text": text},
                    "session_id": "s2",
                },
            )
    return subject


def test_context_preview_matches_the_api_and_explains_what_is_left_out(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    subject = seeded_subject(live_server)
    query = "Where does Ana live, Lisbon or Porto?"
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Context").click()
    page.get_by_label("Subject id").fill(subject)
    page.get_by_label("Task or query").fill(query)
    page.get_by_role("button", name="Preview context").click()
    rows = page.get_by_test_id("packed").locator("tbody tr")
    expect(rows.first).to_be_visible()
    packed_ids = rows.evaluate_all("rs => rs.map(r => r.dataset.item)")
    with live_server.api() as api:
        scoped = api.post(
            "/v1/scopes/context",
            json={
                "scope": {"runtime_id": "default", "user_id": subject},
                "query": query,
            },
        ).json()
        bundle = api.post("/v1/context", json={"subject_id": subject, "task": query}).json()
    # The page shows exactly what the API assembles, in the same order, and renders the same text.
    assert packed_ids == [i["id"] for i in scoped["items"]]
    assert page.get_by_test_id("rendered").inner_text() == bundle["assembled_context"]
    expect(rows.first).to_contain_text("Lisbon")
    expect(rows.first.locator("td").nth(3)).to_have_text("memory search")
    expect(rows.first.locator("td").nth(4)).to_have_text("long_term")

    # A high min_score leaves memories out (and says so), but recent turns are exempt.
    page.get_by_label("Session (conversation) id").fill("s2")
    page.get_by_label("min_score").fill("0.99")
    page.get_by_label("max_tokens").fill("110")
    page.get_by_role("button", name="Preview context").click()
    reasons = page.get_by_test_id("left-out").get_by_test_id("reason")
    expect(reasons.filter(has_text="below min_score 0.99").first).to_be_visible()
    classes = page.get_by_test_id("packed").locator("tbody tr td:nth-child(5)").all_inner_texts()
    assert classes and set(classes) == {"recent"}
    expect(page.get_by_test_id("context-summary")).to_contain_text("of 110 tokens")

    # Without min_score the memories pass, and the budget is what leaves some of them out.
    page.get_by_label("min_score").fill("0")
    page.get_by_label("max_tokens").fill("")
    page.get_by_label("max_items").fill("3")
    page.get_by_role("button", name="Preview context").click()
    expect(reasons.first).to_have_text("max_items 3 already reached")
    assert set(reasons.all_inner_texts()) == {"max_items 3 already reached"}
    expect(page.get_by_test_id("packed").locator("tbody tr")).to_have_count(3)
    expect(page.get_by_test_id("rendered")).to_contain_text("<recalled-memory>")
    shoot(page, "context")

    page.get_by_label("min_score").fill("2")
    page.get_by_role("button", name="Preview context").click()
    expect(page.get_by_test_id("form-error")).to_contain_text("min_score")
