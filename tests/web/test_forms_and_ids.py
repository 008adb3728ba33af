"""The inspector's forms keep what was typed, its ids show their characters in order, and its
errors say what they mean (findings of a run of every page in a real browser)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.web.test_pages_http import csrf_of


def _episode(web: TestClient, subject: str, text: str) -> None:
    body = {"subject_id": subject, "source": "chat", "type": "message", "payload": {"text": text}}
    assert web.post("/v1/episodes", json=body).status_code == 201


def test_the_runs_filter_takes_any_status(web: TestClient) -> None:
    for params in ({"ladder": "web-notes", "status": ""}, {"ladder": "", "status": ""}):
        r = web.get("/ui/runs", params=params)
        assert r.status_code == 200, r.text[:500]
    assert web.get("/ui/runs", params={"status": "nope"}).status_code == 422


def test_ids_mixing_directions_show_their_characters_in_order(web: TestClient) -> None:
    """As plain text the bidi algorithm showed both ids as ``user:mixed-123-עברית``."""
    one, two = "user:mixed-עברית-123", "user:mixed-123-עברית"
    for sid in (one, two):
        _episode(web, sid, "shalom")
    page = web.get("/ui/subjects", params={"prefix": "user:mixed"}).text
    shown = {
        sid: f'<span dir="ltr" class="ident">{runs}</span>'
        for sid, runs in (
            (one, "<bdi>user:mixed-</bdi><bdi>עברית</bdi><bdi>-</bdi><bdi>123</bdi>"),
            (two, "<bdi>user:mixed-</bdi><bdi>123</bdi><bdi>-</bdi><bdi>עברית</bdi>"),
        )
    }
    assert shown[one] in page and shown[two] in page
    assert shown[one] in web.get("/ui/subjects/" + one).text
    assert shown[two] in web.get("/ui/subjects/" + two + "/delete").text
    _episode(web, "a-1\u200f-2", "mark")  # a right-to-left mark is right-to-left too
    assert "<bdi>a-</bdi><bdi>1</bdi><bdi>\u200f</bdi><bdi>-</bdi><bdi>2</bdi>" in (
        web.get("/ui/subjects", params={"prefix": "a-1"}).text
    )
    _episode(web, "plain-user", "hello")  # an id in one direction is shown as it is
    assert ">plain-user</a>" in web.get("/ui/subjects").text


def test_a_refused_chat_message_stays_in_its_box(web: TestClient) -> None:
    """A run refused before it ran (a user that is not a subject id) has no trace to link;
    the message is not added to the conversation, and it is still in the box to send again."""
    token = csrf_of(web.get("/ui/ladders/web-notes").text)
    r = web.post(
        "/ui/ladders/web-notes/chat",
        data={"csrf": token, "message": "Keep me please", "history": "[]", "user": "a/b"},
    )
    assert r.status_code == 422 and "subject id" in r.text
    assert "the failed run's trace" not in r.text
    assert re.search(r'<textarea id="message"[^>]*>Keep me please</textarea>', r.text)
    history = re.search(r'name="history" value="([^"]*)"', r.text)
    assert history and history.group(1) == "[]"


def test_a_conversation_id_too_long_is_refused_before_the_run(web: TestClient) -> None:
    token = csrf_of(web.get("/ui/ladders/web-notes").text)
    r = web.post(
        "/ui/ladders/web-notes/chat",
        data={"csrf": token, "message": "hi there", "history": "[]", "conversation_id": "c" * 300},
    )
    assert r.status_code == 422 and "conversation id is over 256" in r.text
    assert re.search(r'<textarea id="message"[^>]*>hi there</textarea>', r.text)
    assert web.get("/v1/runs", params={"ladder": "web-notes"}).json()["runs"] == []


def test_an_error_page_shows_its_details_values(web: TestClient) -> None:
    r = web.get("/ui/slates/nope/Nope")
    assert r.status_code == 404
    assert re.search(r"<code>ladder</code>: nope", r.text), r.text[-1500:]
    assert re.search(r"<code>known_ladders</code>: [^<]*web-notes", r.text)


def test_a_page_past_the_last_one_says_so(web: TestClient) -> None:
    _episode(web, "only-one", "hello")
    r = web.get("/ui/subjects", params={"page": 99})
    assert r.status_code == 200 and "past the last page" in r.text
    assert "No subjects yet" not in r.text


def test_a_refused_slate_write_refills_only_its_own_form(web: TestClient) -> None:
    page = web.get("/ui/slates/web-notes/Notes").text
    r = web.post(
        "/ui/slates/web-notes/Notes/write",
        data={
            "csrf": csrf_of(page),
            "folder": "rules",
            "file": "rules.md",
            "on": "append",
            "content": "قواعد " * 40,
            "tags": "قواعد, long",
        },
    )
    assert r.status_code == 422 and "slate_entry_too_large" in r.text
    assert re.search(r'id="w-rules-tags"[^>]*value="قواعد, long"', r.text)
    assert re.search(r'id="w-inbox-tags"[^>]*value=""', r.text)
    assert re.search(r'id="w-rules-content"[^>]*>قواعد', r.text)


def test_left_out_items_say_which_limit_stopped_them(web: TestClient) -> None:
    for i in range(12):
        _episode(web, "tight", f"User works at Globex number {i} and likes teal handbooks")
    assert web.post("/v1/memories/compile", json={"subject_id": "tight"}).status_code == 200
    r = web.get(
        "/ui/context",
        params={"subject_id": "tight", "query": "Globex handbook teal", "max_tokens": "90"},
    )
    assert r.status_code == 200
    assert "would exceed max_tokens 90" in r.text and "not packed" not in r.text


def test_a_refused_correction_is_shown_next_to_the_form(web: TestClient) -> None:
    _episode(web, "fixer", "I work at Globex as an engineer.")
    memories = web.post("/v1/memories/compile", json={"subject_id": "fixer"}).json()["memories"]
    mid = memories[0]["id"]
    page = web.get(f"/ui/memories/{mid}").text
    for content, code in (
        ("   ", "validation_error"),
        (memories[0]["content"], "empty_correction"),
    ):
        r = web.post(
            f"/ui/memories/{mid}/edit",
            data={"csrf": csrf_of(page), "content": content, "note": "why ملاحظة"},
        )
        assert r.status_code == 422 and code in r.text, r.text[:300]
        assert 'data-testid="edit-form"' in r.text and 'value="why ملاحظة"' in r.text
        assert f">{content}</textarea>" in r.text


def test_a_long_or_bad_number_stays_in_the_context_form(web: TestClient) -> None:
    r = web.get("/ui/context", params={"subject_id": "u", "query": "x", "max_tokens": "9" * 30})
    # Any size is a budget (the API takes it too): the preview, not the framework's error page.
    assert r.status_code == 200 and "Invalid input" not in r.text
    assert 'value="' + "9" * 30 + '"' in r.text and 'id="max_tokens"' in r.text
    bad = web.get("/ui/context", params={"subject_id": "u", "query": "x", "max_items": "lots"})
    assert bad.status_code == 422 and "max_items: &#39;lots&#39; is not a whole number" in bad.text
    assert 'value="lots"' in bad.text and 'id="max_items"' in bad.text
