"""Templates: the list, a generated form, applying it, and seeing the episode in the timeline."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import LiveServer, unique

pytestmark = pytest.mark.browser


def test_apply_a_template_through_its_form(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    subject = unique("customer:globex")
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Templates").click()
    cards = page.get_by_test_id("templates").locator("article")
    expect(cards).to_have_count(len(live_server.services.templates))
    shoot(page, "templates")
    page.get_by_role("link", name="Customer support handoff").click()
    form = page.get_by_test_id("template-form")
    # The form follows the field schema: string → a line, text → a text area, required marked.
    expect(form.locator("input[name='field.customer']")).to_have_attribute("required", "")
    expect(form.locator("textarea[name='field.issue']")).to_have_attribute("required", "")
    expect(form.locator("textarea[name='field.steps_taken']")).not_to_have_attribute("required", "")
    expect(form.locator("input[name='field.next_owner']")).to_be_visible()
    expect(form.get_by_text("(text, required)")).to_have_count(1)

    # A missing required field is refused with the API's error code; nothing is written.
    page.get_by_label("Subject id").fill(subject)
    page.get_by_label("customer").fill("Globex Corp")
    page.get_by_role("button", name="Apply template").click()
    expect(page.get_by_test_id("error-code")).to_have_text("template_missing_field")
    expect(page.locator("textarea[name='field.issue']")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Subject id")).to_have_value(subject)  # input is kept
    with live_server.api() as api:
        assert api.get("/v1/subjects", params={"prefix": subject}).json()["total"] == 0

    page.get_by_label("Session id").fill("ticket-8842")
    page.get_by_label("issue").fill("Duplicate charge on the May invoice")
    page.get_by_label("next_owner").fill("Tier 2 billing")
    shoot(page, "template-form")
    page.get_by_role("button", name="Apply template").click()
    expect(page.get_by_test_id("applied")).to_be_visible()
    content = page.get_by_test_id("episode-content")
    expect(content).to_contain_text("Customer support handoff — Globex Corp.")
    expect(content).to_contain_text("Next owner: Tier 2 billing")
    payload = page.get_by_test_id("episode-payload").inner_text()
    assert '"steps_taken"' not in payload  # an omitted optional field is absent
    episode_id = page.get_by_test_id("episode-id").inner_text()

    page.get_by_role("link", name="see it in the timeline").click()
    expect(page).to_have_url(re.compile(f"#ep-{episode_id}$"))
    entry = page.locator(f"li#ep-{episode_id}")
    expect(entry).to_contain_text("support.handoff_note")
    expect(entry).to_contain_text("session ticket-8842")
    with live_server.api() as api:
        timeline = api.get("/v1/timeline", params={"subject_id": subject}).json()
    assert [e["id"] for e in timeline["episodes"]] == [episode_id]
    assert timeline["episodes"][0]["payload"]["fields"] == {
        "customer": "Globex Corp",
        "issue": "Duplicate charge on the May invoice",
        "next_owner": "Tier 2 billing",
    }
    assert timeline["episodes"][0]["metadata"]["template"] == {
        "id": "customer-support-handoff",
        "version": 1,
    }


def test_unknown_template_is_a_404_page(page: Any, live_server: LiveServer, sign_in: Any) -> None:
    sign_in(page)
    response = page.goto(f"{live_server.url}/ui/templates/no-such-template")
    assert response.status == 404
    expect(page.get_by_test_id("error-code")).to_have_text("template_not_found")
