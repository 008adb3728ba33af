"""Every error has one JSON shape, a stable code and a request id; no 500 for bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.api.test_episodes_api import EPISODE


def assert_error(r: object, status: int, code: str) -> dict:
    assert r.status_code == status, r.text  # type: ignore[attr-defined]
    body = r.json()  # type: ignore[attr-defined]
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details", "request_id"}
    assert body["error"]["code"] == code
    assert body["error"]["message"]
    assert body["error"]["request_id"] == r.headers["x-request-id"]  # type: ignore[attr-defined]
    return body["error"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"subject_id": ""}, "subject_id"),
        ({"subject_id": "has/slash"}, "subject_id"),
        ({"subject_id": "x" * 257}, "subject_id"),
        ({"source": ""}, "source"),
        ({"source": "s" * 257}, "source"),
        ({"type": ""}, "type"),
        ({"type": "t" * 129}, "type"),
        ({"payload": [1, 2]}, "payload"),
        ({"payload": "text"}, "payload"),
        ({"occurred_at": "yesterday"}, "occurred_at"),
        ({"unknown_key": 1}, "unknown_key"),
        ({"payload": {"text": "a\x00b"}}, "payload.text"),
        ({"metadata": {"k": ["ok", "\x00"]}}, "metadata.k.1"),
        ({"session_id": "s\x00"}, "session_id"),
        ({"idempotency_key": "\x00"}, "idempotency_key"),
    ],
)
def test_invalid_episode_is_422_with_field_path(
    client: TestClient, change: dict, field: str
) -> None:
    err = assert_error(
        client.post("/v1/episodes", json={**EPISODE, **change}), 422, "validation_error"
    )
    assert err["details"][0]["field"] == field
    assert client.get("/v1/subjects").json()["total"] == 0


def test_missing_payload_is_422(client: TestClient) -> None:
    body = {k: v for k, v in EPISODE.items() if k != "payload"}
    err = assert_error(client.post("/v1/episodes", json=body), 422, "validation_error")
    assert err["details"][0]["field"] == "payload"


@pytest.mark.parametrize("raw", [b"{not json", b"", b"null", b"[]", b"\xff\xfe"])
def test_malformed_bodies_are_4xx(client: TestClient, raw: bytes) -> None:
    r = client.post("/v1/episodes", content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500
    assert_error(r, r.status_code, r.json()["error"]["code"])


def test_invalid_json_names_the_body_and_the_position(client: TestClient) -> None:
    r = client.post(
        "/v1/episodes", content=b'{"subject_id": "a",', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422
    (detail,) = r.json()["error"]["details"]
    assert detail["field"] == "body" and detail["type"] == "json_invalid"
    assert detail["message"].startswith("the body is not valid JSON at character 19")


def test_body_over_limit_is_413(client: TestClient) -> None:
    big = {**EPISODE, "payload": {"text": "x" * 1_100_000}}
    assert_error(client.post("/v1/episodes", json=big), 413, "payload_too_large")


def test_an_inspector_form_over_the_limit_is_a_413_page_with_its_headers(
    client: TestClient,
) -> None:
    r = client.post("/ui/login", content=b"key=" + b"x" * 1_100_000)
    assert r.status_code == 413 and r.headers["content-type"].startswith("text/html")
    assert "Error 413 · Cairn inspector" in r.text
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"


def test_streamed_body_over_limit_is_413(client: TestClient) -> None:
    def chunks():
        for _ in range(40):
            yield b"x" * 50_000

    r = client.post("/v1/episodes", content=chunks(), headers={"content-type": "application/json"})
    assert_error(r, 413, "payload_too_large")


def test_unknown_route_and_method(client: TestClient) -> None:
    assert_error(client.get("/v1/nothing-here"), 404, "not_found")
    assert_error(client.put("/v1/episodes", json={}), 405, "method_not_allowed")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/subjects/"),
        ("GET", "/v1/memories/compile/"),
        ("GET", "/v1/episodes/"),
        ("POST", "/v1/episodes/"),
    ],
)
def test_an_empty_last_segment_is_a_404_not_a_redirect(
    client: TestClient, method: str, path: str
) -> None:
    """``/v1/subjects/`` (an empty subject id) is no route: a redirect to ``/v1/subjects``
    would have a client act on the collection instead (the inspector's pages still redirect)."""
    r = client.request(method, path, follow_redirects=False)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["code"] == "not_found"
    page = client.get("/docs/", follow_redirects=False)
    assert page.status_code == 307 and page.headers["location"] == "/docs"


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"subject_id": "bad/id"},
        {"subject_id": "u", "limit": 0},
        {"subject_id": "u", "limit": "many"},
        {"subject_id": "u", "offset": -1},
    ],
)
def test_bad_timeline_query_is_422(client: TestClient, params: dict) -> None:
    assert_error(client.get("/v1/timeline", params=params), 422, "validation_error")


def test_incoming_request_id_is_kept(client: TestClient) -> None:
    r = client.get("/v1/nothing", headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    assert r.json()["error"]["request_id"] == "abc-123"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/subjects?prefix=a%00", "query.prefix"),
        ("/v1/timeline?subject_id=u&x=%00", "query.x"),
        ("/v1/memories/search?subject_id=u&q=a%00b", "query.q"),
        ("/v1/slates?ladder=%00", "query.ladder"),
        ("/v1/runs/%00", "path"),
    ],
)
def test_nul_in_path_or_query_is_422_naming_where(
    backend_client: TestClient, path: str, field: str
) -> None:
    """As a NUL in a body, the details name the field: the path, or the query parameter."""
    r = backend_client.get(path)
    assert_error(r, 422, "validation_error")
    assert r.json()["error"]["details"] == [
        {"field": field, "message": "must not contain a NUL character", "type": "nul_character"}
    ]


@pytest.mark.parametrize("path", ["/ui/subjects/%FF", "/ui/subjects/a%00b", "/ui?x=%00"])
def test_an_inspector_address_refused_for_its_bytes_is_an_error_page(
    client: TestClient, path: str
) -> None:
    """Bad bytes in an inspector address get a page, as the inspector's other errors do, not
    the API's JSON."""
    r = client.get(path)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert "Error 422 · Cairn inspector" in r.text and "Back to the inspector" in r.text


def test_a_compressed_body_is_415_and_stores_nothing(backend_client: TestClient) -> None:
    import gzip
    import json

    episode = {"subject_id": "gz", "source": "s", "type": "note", "payload": {"text": "hi"}}
    body = gzip.compress(json.dumps(episode).encode())
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    r = backend_client.post("/v1/episodes", content=body, headers=headers)
    assert_error(r, 415, "unsupported_media_type")
    assert "Content-Encoding 'gzip'" in r.json()["error"]["message"]
    assert backend_client.get("/v1/timeline", params={"subject_id": "gz"}).json()["episodes"] == []
    plain = {"Content-Type": "application/json", "Content-Encoding": "identity"}
    r = backend_client.post("/v1/episodes", content=json.dumps(episode), headers=plain)
    assert r.status_code == 201, r.text


def test_model_built_from_the_body_inside_a_route_is_a_422(backend_client: TestClient) -> None:
    r = backend_client.post(
        "/v1/context", json={"subject_id": "u", "task": "x\x00y", "max_tokens": 100}
    )
    assert_error(r, 422, "validation_error")


def test_a_validation_error_inside_the_server_is_a_500_not_the_callers_fault(
    services: object,
) -> None:
    from pydantic import BaseModel

    from cairn.app import create_app

    class Internal(BaseModel):
        n: int

    app = create_app(services=services)  # type: ignore[arg-type]

    def broken() -> dict[str, int]:
        Internal.model_validate({"n": "not a number"})  # a server bug, not bad input
        return {}

    app.add_api_route("/v1/_broken", broken)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/v1/_broken")
    error = assert_error(r, 500, "internal_error")
    assert "not a number" not in r.text and "Internal" not in r.text
    assert error["details"] is None


def test_an_internal_error_in_a_stream_is_reported_without_its_text() -> None:
    """After the status line, an error can only go in the stream: as the error handler
    answers, with a generic message (the details go to the log)."""
    from cairn.api.routes.ladders import _stream

    def events() -> Iterator[str]:
        yield "more"
        raise RuntimeError("password=hunter2 at /srv/secret")

    body = b"".join(_stream("first", events(), "run-1", "m", False, lambda writes: None))
    assert b'"code": "internal_error"' in body and b"internal server error" in body
    assert b"hunter2" not in body and b"/srv/secret" not in body
