"""The memory page in a real browser: history, correcting (a new version with provenance),
forgetting after a confirmation, and the subject's export download."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.web.conftest import LiveServer, unique

pytestmark = pytest.mark.browser


def _fact(live_server: LiveServer, subject: str) -> dict[str, Any]:
    with live_server.api("a") as api:
        messages = ["Hi, my name is Dana Scully.", "I work at the FBI in Washington."]
        for text in messages:
            body = {
                "subject_id": subject,
                "source": "chat",
                "type": "conversation.turn",
                "session_id": "s1",
                "payload": {"messages": [{"role": "user", "content": text}]},
            }
            assert api.post("/v1/episodes", json=body).status_code == 201
        compiled = api.post("/v1/memories/compile", json={"subject_id": subject}).json()
    return next(
        m for m in compiled["memories"] if "FBI" in m["content"] and m["kind"] == "profile_fact"
    )


def test_correct_and_forget_a_memory(
    page: Any, live_server: LiveServer, sign_in: Any, shoot: Any
) -> None:
    subject = unique("mem")
    fact = _fact(live_server, subject)
    errors: list[str] = []  # the console's errors (a missing favicon was one on every page)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page)
    page.goto(f"{live_server.url}/ui/subjects/{subject}")
    page.wait_for_load_state("networkidle")
    assert errors == []
    page.locator(f"#mem-{fact['id']}").get_by_test_id("memory-link").click()
    expect(page).to_have_url(re.compile(rf"/ui/memories/{fact['id']}$"))
    expect(page.get_by_test_id("memory-content")).to_have_text(fact["content"])

    page.get_by_label("Corrected content").fill("User works at the CIA in Langley")
    page.get_by_label("Why (recorded with the correction)").fill("moved jobs")
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.get_by_test_id("corrected")).to_be_visible()
    expect(page.get_by_test_id("memory-content")).to_have_text("User works at the CIA in Langley")
    expect(page.get_by_test_id("provenance")).to_contain_text("moved jobs")
    expect(page.get_by_test_id("replaces")).to_contain_text(fact["content"])
    shoot(page, "memory-history")
    new_url = page.url

    # The old version says where the current one is and offers no edit form.
    page.goto(f"{live_server.url}/ui/memories/{fact['id']}")
    expect(page.get_by_test_id("edit-form")).to_have_count(0)
    page.get_by_test_id("current-link").click()
    expect(page).to_have_url(new_url.split("?")[0])

    page.get_by_test_id("forget-link").click()
    expect(page.get_by_test_id("forget-content")).to_contain_text("CIA")
    page.get_by_role("link", name="Cancel").click()  # cancelling forgets nothing
    expect(page.get_by_test_id("memory-content")).to_be_visible()
    page.get_by_test_id("forget-link").click()
    page.get_by_role("button", name="Forget it").click()
    expect(page.get_by_test_id("forgotten")).to_be_visible()
    with live_server.api("a") as api:
        found = api.get("/v1/memories/search", params={"subject_id": subject, "q": "CIA"})
        assert found.json()["memories"] == []

    with page.expect_download() as download:
        page.get_by_test_id("export").click()
    lines = Path(download.value.path()).read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["subject_id"] == subject
    assert any(json.loads(line)["type"] == "episode" for line in lines[1:])
