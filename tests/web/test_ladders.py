"""Ladders: the list, validation, a try-it chat (the seed-002 walkthrough) and its traces."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.api.test_domain_metrics import sample
from tests.web.conftest import LiveServer

pytestmark = pytest.mark.browser


def send(page: Any, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Control+Enter")  # the keyboard shortcut sends


def test_chat_with_a_ladder_and_open_its_trace(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Ladders").click()
    expect(page.get_by_test_id("ladders").locator("tbody tr")).to_have_count(
        len(live_server.services.ladders.names())
    )
    shoot(page, "ladders")
    page.get_by_role("link", name="memory-ladder", exact=True).click()
    expect(page.get_by_test_id("chat-empty")).to_be_visible()

    # Call 1 of the seed's walkthrough: the step emits {"fact": ...}, appended to core.md.
    send(page, "What is the capital of France?")
    chat = page.get_by_test_id("chat")
    expect(chat.locator(".msg.assistant")).to_have_count(1)
    expect(chat.locator(".msg.assistant").last).to_contain_text("Paris.")
    # Call 2 sees what call 1 learnt (KnownFacts from the slate).
    send(page, "What is the capital of Germany?")
    expect(chat.locator(".msg")).to_have_count(4)
    expect(chat.locator(".msg.assistant").last).to_contain_text(
        "from what I learnt before: Paris is the capital of France"
    )
    expect(page.get_by_label("Message")).to_be_focused()
    # The script posted in the background: the page did not navigate to the form's action.
    expect(page).to_have_url(re.compile(r"/ui/ladders/memory-ladder$"))
    shoot(page, "ladder-chat")
    # The chat's runs count in /metrics as the API's do (their writes were not counted).
    with live_server.api() as api:
        assert sample(api, "cairn_slate_writes_total", ladder="memory-ladder", outcome="written")

    chat.get_by_test_id("trace-link").last.click()
    expect(page).to_have_url(re.compile(r"/ui/runs/run-"))
    expect(page.get_by_test_id("run-status")).to_have_text("completed")
    step = page.get_by_test_id("trace-steps").locator("li[data-step='answer']")
    expect(step.get_by_test_id("slate-read")).to_contain_text("Memory/facts/core.md")
    expect(step.get_by_test_id("step-message").last).to_contain_text(
        "## KnownFacts\nParis is the capital of France."
    )
    expect(step.get_by_test_id("step-write")).to_contain_text(
        "written “Berlin is the capital of Germany.”"
    )
    shoot(page, "run-trace")
    run_id = page.get_by_test_id("run-id").inner_text()

    # The API has the same run, and the slate holds both facts.
    with live_server.api("a") as api:
        assert api.get(f"/v1/runs/{run_id}").json()["status"] == "completed"
        content = api.get(
            "/v1/slates/memory-ladder/Memory/facts/core.md", params={"peek": "true"}
        ).json()["content"]
    assert "Paris is the capital of France." in content
    assert "Berlin is the capital of Germany." in content
    step.get_by_role("link", name="inspect").click()
    expect(page.locator("tr[data-file='core.md']").get_by_test_id("file-content")).to_contain_text(
        "Berlin is the capital of Germany."
    )

    # As seed 002 tells it: the ladder's page, its Slate Inspector, the file's contents.
    page.goto(f"{live_server.url}/ui/ladders/memory-ladder")
    inspector = page.get_by_role("heading", name="Slate Inspector")
    expect(inspector).to_be_visible()
    page.locator("#slate-inspector ~ ul").get_by_role("link", name="Memory").click()
    expect(page.locator("tr[data-file='core.md']").get_by_test_id("file-content")).to_contain_text(
        "Paris is the capital of France."
    )

    page.goto(f"{live_server.url}/ui/runs")
    expect(page.get_by_test_id("runs").get_by_role("link", name=run_id)).to_be_visible()
    # Another tenant cannot open this run.
    page.context.clear_cookies()
    sign_in(page, "b")
    response = page.goto(f"{live_server.url}/ui/runs/{run_id}")
    assert response.status == 404


def test_validate_a_ladder(page: Any, live_server: LiveServer, sign_in: Any) -> None:
    sign_in(page)
    page.goto(f"{live_server.url}/ui/ladders/web-notes")
    page.get_by_role("button", name="Validate the file on disk").click()
    expect(page.get_by_test_id("validation")).to_contain_text(
        "Valid: ladder web-notes; 2 slate(s); steps: reply"
    )

    page.goto(f"{live_server.url}/ui/validate-ladder")
    page.get_by_label("Ladder YAML").fill(
        "slates:\n  - title: Memory\n    folders:\n      - name: facts\n        tokenLimit: 0\n"
    )
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_test_id("validation")).to_contain_text("tokenLimit")
    expect(page.get_by_test_id("validation")).not_to_contain_text("/tmp")
    page.get_by_label("Ladder YAML").fill("steps:\n  - id: answer\n    systemPrompt: Answer.\n")
    page.get_by_role("button", name="Validate").click()
    expect(page.get_by_test_id("validation")).to_contain_text("Valid:")

    response = page.goto(f"{live_server.url}/ui/ladders/no-such-ladder")
    assert response.status == 404
    expect(page.get_by_test_id("error-code")).to_have_text("ladder_not_found")
