"""Inputs an outside fuzzing run turned into 500s (issue 17), each now a clear 4xx that writes
nothing, on both backends: times that overflow on UTC conversion, numbers as times, NaN and
Infinity, raw surrogate bytes, non-ASCII CSRF tokens on every inspector form, and keys that
overflow their column once prefixed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairn.api.middleware import too_deep
from tests.api.test_no_500 import CSRF, endpoints, nasty_client, row_counts

__all__ = ["nasty_client"]  # the fixture, re-exported for pytest

JSON_TYPE = {"content-type": "application/json"}
EPISODE = {"subject_id": "s17", "source": "t", "type": "note", "payload": {"text": "hi"}}
SCOPE = {"runtime_id": "r17", "user_id": "u17"}
TURN = {
    "scope": SCOPE,
    "conversation_id": "c17",
    "idempotency_key": "k17",
    "messages": [{"role": "user", "content": "hello"}],
}
BAD_TIMES: list[Any] = [
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+01:00",
    0,
    1700000000,
    1.5,
]
TIMED_ROUTES = [
    ("/v1/episodes", EPISODE),
    ("/v1/episodes/batch", {"episodes": [EPISODE]}),
    ("/v1/scopes/turns", TURN),
    ("/v1/memory-templates/customer-support-handoff/apply", {"subject_id": "s17", "values": {}}),
]


def refused(response: Any, status: int = 422, code: str = "validation_error") -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code, response.text


def with_time(body: dict[str, Any], value: Any) -> dict[str, Any]:
    if "episodes" in body:
        return {"episodes": [{**body["episodes"][0], "occurred_at": value}]}
    return {**body, "occurred_at": value}


def test_times_that_overflow_or_are_numbers_are_422(nasty_client: Any) -> None:
    client, services = nasty_client
    before = row_counts(services)
    for path, body in TIMED_ROUTES:
        for value in BAD_TIMES:
            r = client.post(path, json=with_time(body, value))
            assert r.status_code == 422, (path, value, r.text)
            assert r.json()["error"]["details"][0]["field"].endswith("occurred_at"), r.text
    assert row_counts(services) == before
    # The edges that do fit are stored, in UTC.
    ok = client.post("/v1/episodes", json={**EPISODE, "occurred_at": "9999-12-31T23:59:59+00:00"})
    assert ok.status_code == 201, ok.text
    early = client.post(
        "/v1/episodes", json={**EPISODE, "occurred_at": "0001-01-01T01:00:00+01:00"}
    )
    assert early.status_code == 201 and early.json()["occurred_at"].startswith("0001-01-01T00:00")


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_422(nasty_client: Any, constant: bytes) -> None:
    client, services = nasty_client
    before = row_counts(services)
    raw = json.dumps({**EPISODE, "payload": {"score": "@"}}).encode().replace(b'"@"', constant)
    for path, body in [("/v1/episodes", raw), ("/v1/episodes/batch", b'{"episodes": [%s]}' % raw)]:
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        refused(r)
        assert r.json()["error"]["details"][0]["type"] == "non_finite_number"
    assert row_counts(services) == before
    # The words as text are fine.
    text = {**EPISODE, "payload": {"text": "NaN and Infinity war"}}
    assert client.post("/v1/episodes", json=text).status_code == 201


@pytest.mark.parametrize(
    "number",
    [b"1e400", b"-1e999", b"1E+0400", b"2.5e308", b"1" * 400 + b".5", b"-" + b"9" * 320 + b"e1"],
)
def test_numbers_too_large_for_a_double_are_422(nasty_client: Any, number: bytes) -> None:
    """Python's parser reads them as infinity: stored, they made the reply a 500 and the
    subject's export invalid JSON."""
    client, services = nasty_client
    before = row_counts(services)
    raw = json.dumps({**EPISODE, "payload": {"n": "@"}, "metadata": {"m": "@"}}).encode()
    raw = raw.replace(b'"@"', number)
    for path, body in [("/v1/episodes", raw), ("/v1/episodes/batch", b'{"episodes": [%s]}' % raw)]:
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        refused(r)
        detail = r.json()["error"]["details"][0]
        assert detail["type"] == "non_finite_number" and "too large" in detail["message"]
    assert row_counts(services) == before
    # An integer longer than Python reads (4,300 digits) is named as such, not "not JSON".
    for digits in (4301, 5000):
        body = json.dumps({**EPISODE, "payload": {"n": 1}}).replace("1}", "9" * digits + "}")
        r = client.post("/v1/episodes", content=body, headers={"content-type": "application/json"})
        refused(r)
        detail = r.json()["error"]["details"][0]
        assert detail["type"] == "number_too_long" and f"{digits} digits" in detail["message"]
    assert row_counts(services) == before
    # Numbers that fit, however written, and the same digits as text, are stored.
    fits = {"big": 1.7e308, "tiny": 1e-400, "long": int("9" * 400), "text": "1e400"}
    r = client.post("/v1/episodes", json={**EPISODE, "payload": fits})
    assert r.status_code == 201, r.text
    assert r.json()["payload"] == {**fits, "tiny": 0.0}


UNPARSED = "the body could not be parsed as JSON (not UTF-8 text, or nested too deeply)"


def test_bodies_the_parser_gives_up_on_are_422_json_invalid(nasty_client: Any) -> None:
    """Nested thousands of levels deep, or bytes that are not UTF-8: FastAPI's own answer was
    a 400 ``bad_request`` saying only "There was an error parsing the body"."""
    client, services = nasty_client
    before = row_counts(services)
    not_utf8 = json.dumps(EPISODE).encode().replace(b'"hi"', b'"\xff\xfe"')
    r = client.post("/v1/episodes", content=not_utf8, headers={"content-type": "application/json"})
    refused(r)
    assert r.json()["error"]["details"][0] == {
        "field": "body",
        "type": "json_invalid",
        "message": UNPARSED,
    }
    # Thousands of levels deep: refused before parsing, as too deep (``json_too_deep``).
    deep = b'{"episodes": [' + b"[" * 5000 + b"]" * 5000 + b"]}"
    r = client.post(
        "/v1/episodes/batch", content=deep, headers={"content-type": "application/json"}
    )
    refused(r)
    assert r.json()["error"]["details"][0]["type"] == "json_too_deep"
    assert row_counts(services) == before


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def test_json_nested_deeper_than_128_levels_is_refused_and_what_is_kept_reads_back(
    nasty_client: Any,
) -> None:
    """A payload 300 levels deep was stored (201), then every read of it was a 500 (the
    reply's serializer stops at about 255 levels), and an item's scope could no longer be
    searched. The body itself counts: 128 levels of brackets in all are kept, 129 refused."""
    client, services = nasty_client
    before = row_counts(services)
    too_deep = [
        ("/v1/episodes", {**EPISODE, "payload": {"x": nested(300)}}),
        ("/v1/episodes/batch", {"episodes": [{**EPISODE, "payload": {"x": nested(126)}}]}),
    ]
    for path, body in too_deep:
        r = client.post(path, json=body)
        refused(r)
        assert r.json()["error"]["details"][0]["type"] == "json_too_deep", r.text
    item = {"scope": SCOPE, "namespace": ["n"], "key": "deep", "value": {"v": nested(300)}}
    refused(client.put("/v1/items", json=item))
    # A bracket inside a string is text, not nesting.
    r = client.post("/v1/episodes", json={**EPISODE, "payload": {"text": "[{" * 500}})
    assert r.status_code == 201, r.text
    assert row_counts(services)["episodes"] == before["episodes"] + 1
    # The deepest body allowed (128 levels: the body's object, then 127) is stored and read.
    r = client.post("/v1/episodes", json={**EPISODE, "payload": {"x": nested(126)}})
    assert r.status_code == 201, r.text
    episode_id = r.json()["id"]
    got = client.get(f"/v1/episodes/{episode_id}")
    assert got.status_code == 200 and got.json()["payload"]["x"] == nested(126)
    assert client.get("/v1/timeline", params={"subject_id": "s17"}).status_code == 200
    item = {**item, "value": {"v": nested(126)}}
    assert client.put("/v1/items", json=item).status_code < 300
    found = client.post("/v1/items/search", json={"scope": SCOPE, "namespace_prefix": ["n"]})
    assert found.status_code == 200, found.text


def test_percent_encoded_bytes_that_are_not_utf8_are_422(nasty_client: Any) -> None:
    """``%FF`` in a path was decoded to U+FFFD: ``DELETE /v1/subjects/%FF`` deleted the subject
    named "\ufffd"."""
    client, services = nasty_client
    assert client.post("/v1/episodes", json={**EPISODE, "subject_id": "\ufffd"}).status_code == 201
    before = row_counts(services)
    for method, url in [
        ("DELETE", "/v1/subjects/%FF"),
        ("DELETE", "/v1/subjects/%C3"),
        ("GET", "/v1/timeline?subject_id=%FF"),
        ("GET", "/v1/subjects/%FF%FE/export"),
        ("GET", "/v1/memories/search?subject_id=s17&q=%ED%A0%80"),
    ]:
        refused(client.request(method, url), code="invalid_text")
    assert row_counts(services) == before
    # Percent-encoded UTF-8 of any script still works.
    r = client.get("/v1/timeline?subject_id=%E6%9D%8E%20%F0%9F%98%80")
    assert r.status_code == 200, r.text
    r = client.delete("/v1/subjects/%EF%BF%BD")  # "\ufffd" itself, asked for as UTF-8
    assert r.status_code == 200 and r.json()["episodes_deleted"] == 1, r.text


def test_a_body_not_sent_as_json_says_so(nasty_client: Any) -> None:
    client, services = nasty_client
    before = row_counts(services)
    raw = json.dumps(EPISODE).encode()
    for kind in ("application/x-www-form-urlencoded", None):
        headers = {"content-type": kind} if kind else {}
        r = client.post("/v1/episodes", content=raw, headers=headers)
        refused(r)
        assert "Content-Type: application/json" in r.json()["error"]["message"]
        assert f"(it was {kind or 'none'})" in r.json()["error"]["message"]
    assert row_counts(services) == before
    # Several fields wrong: the message names the first and says more are in the details.
    r = client.post("/v1/context", json={"max_tokens": 300})
    refused(r)
    assert r.json()["error"]["message"].endswith("(and 1 more: see details)")
    assert [d["field"] for d in r.json()["error"]["details"]] == ["subject_id", "task"]


def test_raw_surrogate_bytes_are_422(nasty_client: Any) -> None:
    client, services = nasty_client
    before = row_counts(services)
    raw = json.dumps(EPISODE).encode().replace(b'"hi"', b'"a\xed\xa0\x80b"')
    r = client.post("/v1/episodes", content=raw, headers={"content-type": "application/json"})
    refused(r, code="invalid_text")
    turn = json.dumps(TURN).encode().replace(b'"hello"', b'"\xed\xbf\xbf"')
    r = client.post("/v1/scopes/turns", content=turn, headers={"content-type": "application/json"})
    refused(r, code="invalid_text")
    assert row_counts(services) == before


@pytest.mark.parametrize("token", ["é", "токен", "🧗", "\u202e"])
def test_non_ascii_csrf_token_is_403_on_every_form(nasty_client: Any, token: str) -> None:
    client, services = nasty_client
    forms = [p for m, p in endpoints(client.app) if m == "POST" and p.startswith("/ui")]
    assert "/ui/login" in forms and len(forms) >= 5
    before = row_counts(services)
    for path in forms:
        url = path.replace("{", "").replace("}", "")
        r = client.post(url, data={"csrf": token, "api_key": "x"})
        assert r.status_code in (403, 404), (path, r.status_code, r.text[:200])
        # The cookie side non-ASCII too (sent as raw UTF-8 bytes), the field plain.
        cookie = f"cairn_csrf={token}".encode()
        client.cookies.clear()
        r = client.post(url, data={"csrf": CSRF}, headers={"cookie": cookie})  # type: ignore[dict-item]
        client.cookies.set("cairn_csrf", CSRF)
        assert r.status_code in (403, 404), (path, r.status_code, r.text[:200])
    assert row_counts(services) == before


def test_prefixed_and_derived_keys_fit_their_columns(nasty_client: Any) -> None:
    client, _services = nasty_client
    for n in (251, 252, 255, 256, 257):
        key = "k" * n
        r = client.post("/v1/scopes/turns", json={**TURN, "idempotency_key": key})
        if n <= 251:
            assert r.status_code == 201, r.text
            again = client.post("/v1/scopes/turns", json={**TURN, "idempotency_key": key})
            assert again.status_code in (200, 201) and again.json()["created"] is False
        else:
            refused(r)
        long_id = "d" * n
        doc = {"scope": SCOPE, "dataset_id": long_id, "document_id": long_id, "content": "x y"}
        r = client.post("/v1/scopes/documents", json=doc)
        assert r.status_code == (201 if n <= 256 else 422), r.text
        conv = client.post(
            "/v1/scopes/turns",
            json={**TURN, "conversation_id": "c" * n, "idempotency_key": f"conv-{n}"},
        )
        assert conv.status_code == (201 if n <= 256 else 422), conv.text
        episode = {**EPISODE, "idempotency_key": key, "session_id": "s" * n}
        r = client.post("/v1/episodes", json=episode)
        assert r.status_code == (201 if n <= 256 else 422), r.text


@pytest.mark.parametrize(
    ("body", "deep"),
    [
        (b'{"a":' * 128 + b"1" + b"}" * 128, False),
        (b'{"a":' * 129 + b"1" + b"}" * 129, True),
        (b"[" * 129 + b"]" * 129, True),
        # Brackets inside strings, escaped quotes and a string ending in a backslash are text.
        (b'["' + b"[" * 300 + b'"]', False),
        (b"[" * 120 + b'"x\\"[[[[[[[[[[", "y\\\\"' + b"]" * 120, False),
        (b"[" * 127 + b'"\\\\"' + b"[]" + b"]" * 127, False),
        (b"[" * 128 + b'"\\\\"' + b"[]" + b"]" * 128, True),
        # A string never closed runs to the end (invalid JSON, its parser's to report).
        (b"[" * 129 + b'"' + b'\\"' * 50_000, True),
        (b"[" * 100 + b'"' + b'\\"' * 50_000, False),
    ],
)
def test_the_depth_of_a_body(body: bytes, deep: bool) -> None:
    assert too_deep(body) is deep


def test_a_deep_body_without_a_content_type_is_refused_too(nasty_client: Any) -> None:
    client, services = nasty_client
    before = row_counts(services)
    body = json.dumps({**EPISODE, "payload": {"x": nested(300)}}).encode()
    r = client.post("/v1/episodes", content=body, headers={"content-type": ""})
    assert r.status_code == 422, r.text
    # An unclosed string after many brackets: answered at once, as too deep.
    body = b'{"episodes": ' + b"[" * 200 + b'"' + b'\\"' * 200_000
    refused(client.post("/v1/episodes/batch", content=body, headers=JSON_TYPE))
    assert row_counts(services) == before


def test_a_string_too_short_or_long_is_told_in_characters(nasty_client: Any) -> None:
    """A length checked after another validator read "Value should have at least 1 item
    after validation" for a string (a template's empty idempotency key)."""
    client, _ = nasty_client
    url = "/v1/memory-templates/customer-support-handoff/apply"
    for body, said in [
        ({"idempotency_key": ""}, "String should have at least 1 character"),
        ({"session_id": "s" * 257}, "String should have at most 256 characters"),
    ]:
        r = client.post(url, json={"subject_id": "s17", "values": {}, **body})
        refused(r)
        detail = r.json()["error"]["details"][0]
        assert detail["message"] == said and "item" not in r.text, r.text
