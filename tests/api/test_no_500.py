"""No malformed input ever yields a 500: every route of the real app, driven with bad input.

Routes are enumerated from the app itself (``app.routes``, walking included routers, plus the
OpenAPI request schemas), so a route added later is covered without editing this module. Two
parts:

* a deterministic table of nasty cases (wrong JSON types for every body field, missing and
  extra fields, huge strings and numbers, lone surrogates, RTL, emoji, NUL, invalid JSON, bad
  ids in paths, bad query parameters), run on SQLite and PostgreSQL; a 4xx must carry the one
  error shape and must not have written anything (row counts of every table unchanged);
* a bounded Hypothesis search over the same routes on SQLite.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select, union_all

from cairn.app import create_app
from cairn.core.scope import DEFAULT_RUNTIME
from cairn.services import Services
from cairn.store.schema import episodes, memories, metadata
from tests.conftest import database_url, make_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ladders"
CSRF = "no500-csrf-token"

# Known-good path values, so a malformed body or query reaches the route's real logic rather
# than stopping at "no such ladder".
GOOD_PATH = {
    "ladder": "memory-ladder",
    "slate": "Memory",
    "folder": "facts",
    "file": "core.md",
    "name": "memory-ladder",
    "template_id": "customer-support-handoff",
    "subject_id": "no500-subject",
    "episode_id": "00000000-0000-0000-0000-000000000000",
    "memory_id": "00000000-0000-0000-0000-000000000000",
    "model_id": "memory-ladder",
    "receipt_id": "no500-receipt",
}

HUGE = "x" * 100_000
NASTY_STRINGS = [
    "",
    "\ud800",  # a lone surrogate: json.dumps sends it escaped as "\ud800"
    "\u202eevil\u202c שלום 🧗‍♀️🏔️",  # RTL override, Hebrew, emoji with ZWJ
    "nul\u0000inside",
    HUGE,
    "../../etc/passwd' OR 1=1; --%s{0}{{x}}",
]
WRONG_VALUES: list[Any] = [
    None,
    True,
    -1,
    10**30,
    1.5e308,
    [None, 1, "x"],
    {"nested": {"deeper": [1, {"x": None}]}},
    *NASTY_STRINGS[1:5],
]
NASTY_PATH = [
    "not-a-uuid",
    "00000000-0000-0000-0000-000000000000",
    "%2e%2e",
    "%ED%A0%80",  # UTF-8 of a lone surrogate: invalid UTF-8
    "%FF%FE",
    "%E2%80%AErtl%F0%9F%A7%97",
    "a" * 5000,
    "99999999999999999999999999",
    "%00",
]
NASTY_QUERY = [
    "-1",
    "0",
    "99999999999999999999999999999",
    "NaN",
    "",
    "%ED%A0%80",
    "%FF",
    "%E2%80%AE",
    "x" * 20_000,
    "%00",
]
RAW_BODIES: list[bytes] = [
    b"",
    b"{",
    b"not json",
    b"null",
    b"[]",
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',
    b'{"a": "\\ud800"}',
    b'{"a": "\\u0000"}',
    b'{"a": "\xed\xa0\x80"}',  # raw UTF-8 bytes of a lone surrogate
    b"\xff\xfe\xfd",
    b"[" * 5000 + b"]" * 5000,
    b'{"x": ' + b"9" * 5000 + b"}",
]


# ----------------------------------------------------------------------------- the app's routes


FORM_FIELDS: dict[str, list[str]] = {}


def walk_routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(method, path) of every endpoint, including those of included routers; records the
    form fields of form routes (not in the OpenAPI schema) in FORM_FIELDS."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            ctx = getattr(route, "include_context", None)
            yield from walk_routes(inner.routes, prefix + getattr(ctx, "prefix", ""))
        elif getattr(route, "methods", None) and hasattr(route, "path"):
            dependant = getattr(route, "dependant", None)
            fields = [p.name for p in getattr(dependant, "body_params", [])]
            if fields:
                FORM_FIELDS[prefix + route.path] = fields
            for method in sorted(route.methods - {"HEAD", "OPTIONS"}):
                yield method, prefix + route.path


def endpoints(app: FastAPI) -> list[tuple[str, str]]:
    found = sorted(set(walk_routes(list(app.routes))))
    return [
        (m, p)
        for m, p in found
        if p not in ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")
    ]


def resolve(schema: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = spec["components"]["schemas"][name]
    return schema


def operation(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return spec["paths"].get(path, {}).get(method.lower(), {})


def body_schema(spec: dict[str, Any], method: str, path: str) -> dict[str, Any] | None:
    content = operation(spec, method, path).get("requestBody", {}).get("content", {})
    raw = content.get("application/json", {}).get("schema")
    return resolve(raw, spec) if raw else None


def query_params(spec: dict[str, Any], method: str, path: str) -> list[str]:
    params = operation(spec, method, path).get("parameters", [])
    return [p["name"] for p in params if p.get("in") == "query"]


def plausible(schema: dict[str, Any], spec: dict[str, Any], depth: int = 0) -> Any:
    """A value of the schema's type (not necessarily valid), so mutations reach deeper checks."""
    schema = resolve(schema, spec)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if resolve(s, spec).get("type") != "null"]
            return plausible(options[0] if options else schema[key][0], spec, depth)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 3:
            return {}
        props = schema.get("properties", {})
        required = schema.get("required", list(props))
        return {k: plausible(props[k], spec, depth + 1) for k in required if k in props}
    if kind == "array":
        return [plausible(schema.get("items", {}), spec, depth + 1)] if depth < 3 else []
    return {"string": "no500 text", "integer": 1, "number": 1.0, "boolean": True}.get(kind, "x")


# ----------------------------------------------------------------------------- fixtures


def build_services(tmp_path: Path, url: str | None = None) -> Services:
    ladders = tmp_path / "ladders"
    shutil.copytree(EXAMPLES, ladders)
    # No background work (turn compiles, vectors): "writes nothing" compares row counts, and
    # rows arriving later from an earlier, accepted request would be blamed on this one.
    extra: dict[str, Any] = {"ladders_dir": ladders, "compile_turns": False, "embedder": "none"}
    if url:
        extra["database_url"] = url
    return Services.from_settings(make_settings(tmp_path, **extra))


@pytest.fixture
def nasty_client(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    services = build_services(tmp_path, database_url(backend, tmp_path, request))
    try:
        with TestClient(create_app(services=services), raise_server_exceptions=False) as c:
            c.cookies.set("cairn_csrf", CSRF)
            yield c, services
    finally:
        services.close()


_COUNTS: dict[int, Any] = {}


def subjects_total() -> Any:
    """What GET /v1/subjects reports as ``total`` for tenant ``default`` (subjects with an
    episode or a memory not deleted: ``SubjectRepository.list``), as a column: one more
    subquery of the count below instead of a query of its own per snapshot (the store builds
    that statement on each call, milliseconds each, thousands of calls)."""
    parts = [
        select(table.c.user_id.label("subject_id")).where(
            table.c.tenant_id == "default",
            table.c.runtime_id == DEFAULT_RUNTIME,
            table.c.agent_id == "",
            table.c.user_id != "",
            *([table.c.status != "deleted"] if table is memories else []),
        )
        for table in (episodes, memories)
    ]
    rows = union_all(*parts).subquery()
    return select(func.count(func.distinct(rows.c.subject_id))).scalar_subquery()


def row_counts(services: Services) -> dict[str, int]:
    """Rows of every table and the subjects total, in one query: the measure of "nothing was
    written"."""
    with services.store.db.read() as conn:
        query = _COUNTS.get(id(services))
        if query is None:
            # Built once per app: reflecting the table names on every call is the slow part.
            names = set(conn.dialect.get_table_names(conn))
            query = _COUNTS[id(services)] = select(
                *(
                    select(func.count()).select_from(t).scalar_subquery().label(t.name)
                    for t in metadata.sorted_tables
                    if t.name in names
                ),
                subjects_total().label("_subjects"),
            )
        return dict(conn.execute(query).one()._mapping)


def slate_route(method: str, path: str) -> bool:
    return method != "GET" and path.startswith(
        ("/v1/slates", "/v1/local", "/ui/slates", "/ui/ladders")
    )


def snapshot(client: TestClient, services: Services, method: str, path: str) -> dict[str, Any]:
    """Row counts of every table and the subjects total; for a route that can touch slates
    also the example slate's tree with its usage (catches in-place updates)."""
    if services.turn_compiler is not None:  # a committed turn is compiled in the background
        assert services.turn_compiler.wait_idle(), "the background compile did not finish"
    state: dict[str, Any] = dict(row_counts(services))
    state["_slates"] = None
    if slate_route(method, path):
        tree = client.get("/v1/slates/memory-ladder/Memory")
        assert tree.status_code == 200, tree.text
        state["_slates"] = tree.json()
    return state


def qs(text: str) -> str:
    """URL-encode any text, lone surrogates included (as the invalid UTF-8 they become)."""
    return quote(text, safe="", errors="surrogatepass")


def fill_path(path: str, override: str | None = None) -> str:
    """Fill the path's parameters: good values, or ``override`` (already URL-encoded) for all."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[0]
        if override is not None:
            return override
        return quote(GOOD_PATH.get(name, "no500"), safe="")

    return re.sub(r"\{([^}]+)\}", one, path)


def request_of(
    method: str, path: str, *, body: Any = ..., raw: bytes | None = None, query: str = ""
) -> tuple[str, str, bytes | None, tuple[tuple[str, str], ...]]:
    """The request ``send`` makes: method, URL, content and headers."""
    url = path + (("?" + query) if query else "")
    json_headers = (("content-type", "application/json"),)
    if path.startswith("/ui") and method == "POST":
        # Form posts: a valid CSRF pair so the form's own fields are what gets tested.
        form = {"csrf": CSRF}
        if isinstance(body, dict):
            form.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()})
        # Encoded by hand: a lone surrogate becomes invalid UTF-8, a case worth sending too.
        encoded = urlencode(form, encoding="utf-8", errors="surrogatepass").encode()
        return method, url, encoded, (("content-type", "application/x-www-form-urlencoded"),)
    if raw is not None:
        return method, url, raw, json_headers
    if body is ...:
        return method, url, None, ()
    return method, url, json.dumps(body).encode(), json_headers


def send(
    client: TestClient,
    method: str,
    path: str,
    *,
    body: Any = ...,
    raw: bytes | None = None,
    query: str = "",
) -> Any:
    method, url, content, headers = request_of(method, path, body=body, raw=raw, query=query)
    return client.request(method, url, content=content, headers=dict(headers))


def check(response: Any, case: str) -> None:
    assert response.status_code < 500, f"{case}: {response.status_code} {response.text[:500]}"
    if 400 <= response.status_code < 500 and not response.request.url.path.startswith("/ui"):
        body = response.json()
        assert set(body) == {"error"}, f"{case}: {body}"
        err = body["error"]
        keys = {"code", "message", "details", "request_id"}
        if response.request.url.path.startswith("/v1/local"):
            keys |= {"type", "param"}  # OpenAI's error fields too, for OpenAI clients
        assert set(err) == keys, f"{case}: {err}"
        assert isinstance(err["code"], str) and err["code"], case
        assert isinstance(err["message"], str) and err["message"], case


def deterministic_cases(app: FastAPI, spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, send() kwargs + method/path) for the table of nasty cases of every route."""
    for method, path in endpoints(app):
        good = fill_path(path)
        schema = body_schema(spec, method, path)
        if "{" in path:
            for value in NASTY_PATH:
                yield (
                    f"{method} {path} path={value[:20]}",
                    {"method": method, "path": fill_path(path, value), "body": {}},
                )
        for name in query_params(spec, method, path):
            for value in NASTY_QUERY:
                yield (
                    f"{method} {path} ?{name}={value[:20]}",
                    {"method": method, "path": good, "query": f"{name}={quote(value, safe='%')}"},
                )
        if method == "GET":
            continue
        for raw in RAW_BODIES:
            yield f"{method} {path} raw={raw[:20]!r}", {"method": method, "path": good, "raw": raw}
        base = plausible(schema, spec) if schema else {}
        if not isinstance(base, dict):
            base = {}
        props = (schema or {}).get("properties", {}) or dict.fromkeys(FORM_FIELDS.get(path, []))
        # A form field is always text: wrong JSON types mean nothing there, nasty text does.
        values = WRONG_VALUES if schema else NASTY_STRINGS
        yield f"{method} {path} missing all", {"method": method, "path": good, "body": {}}
        yield (
            f"{method} {path} extra",
            {
                "method": method,
                "path": good,
                "body": {**base, "unexpected_field": 1, "\ud800": "x"},
            },
        )
        for field in props:
            missing = {k: v for k, v in base.items() if k != field}
            yield f"{method} {path} -{field}", {"method": method, "path": good, "body": missing}
            for value in values:
                label = f"{method} {path} {field}={json.dumps(value)[:30]}"
                yield label, {"method": method, "path": good, "body": {**base, field: value}}


@pytest.mark.slow
def test_nasty_table_never_500_and_writes_nothing(nasty_client: Any) -> None:
    client, services = nasty_client
    app = client.app
    spec = client.get("/openapi.json").json()
    before: dict[str, Any] = {}
    failures: list[str] = []
    sent: set[Any] = set()
    for label, case in deterministic_cases(app, spec):
        method, path = case.pop("method"), case.pop("path")
        # A request byte for byte like one already sent is not sent again (about 250 of the
        # 3,150 cases: a form route reads no JSON, so its raw bodies and "missing all" are all
        # the same post of the CSRF field alone).
        request = request_of(method, path, **case)
        if request in sent:
            continue
        sent.add(request)
        if not before or (before["_slates"] is None and slate_route(method, path)):
            before = snapshot(client, services, method, path)
        response = send(client, method, path, **case)
        after = snapshot(client, services, method, path)
        try:
            check(response, label)
        except AssertionError as exc:
            failures.append(str(exc)[:400])
            before = after
            continue
        changed = {
            k: (before.get(k), v)
            for k, v in after.items()
            if before.get(k) != v and not (k[0] == "_" and (v is None or before.get(k) is None))
        }
        if 400 <= response.status_code < 500 and changed:
            failures.append(f"{label}: {response.status_code} but wrote {str(changed)[:300]}")
        before = after
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} failures)"
    # The snapshot's subjects total is the one the store reports (some subjects exist by now).
    total = row_counts(services)["_subjects"]
    assert total > 0 and total == services.store.subjects.list("default", limit=1)[1]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_lone_surrogate_is_refused_but_a_surrogate_pair_is_text(nasty_client: Any) -> None:
    client, services = nasty_client
    episode = {
        "subject_id": "no500-pair",
        "source": "test",
        "type": "note",
        "payload": {"text": "climb 🧗"},
    }
    # json.dumps escapes the emoji as the pair "\ud83e\uddd7": that is valid text.
    ok = send(client, "POST", "/v1/episodes", body=episode)
    assert ok.status_code in (200, 201), ok.text
    counts = row_counts(services)
    bad = send(
        client,
        "POST",
        "/v1/episodes",
        body={**episode, "subject_id": "no500-lone", "payload": {"text": "a\ud800"}},
    )
    assert bad.status_code == 422
    assert bad.json()["error"]["code"] == "invalid_text"
    assert row_counts(services) == counts
    # An escaped backslash before "ud800" is plain text, not a surrogate.
    raw = json.dumps({**episode, "subject_id": "no500-text", "payload": {"text": "\\ud800"}})
    assert send(client, "POST", "/v1/episodes", raw=raw.encode()).status_code in (200, 201)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite"])
def test_hypothesis_never_500(nasty_client: Any) -> None:
    client, _ = nasty_client
    app = client.app
    spec = client.get("/openapi.json").json()
    routes = endpoints(app)

    json_values = st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False)
        | st.text(max_size=50),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
        ),
        max_leaves=12,
    )
    segment = st.text(min_size=1, max_size=40).map(qs)

    @st.composite
    def request_case(draw: Any) -> tuple[str, str, Any, str]:
        method, template = draw(st.sampled_from(routes))
        schema = body_schema(spec, method, template)
        names = query_params(spec, method, template) or ["limit", "q"]
        if "{" in template and draw(st.booleans()):
            path = re.sub(r"\{[^}]+\}", lambda _m: draw(segment), template)
        else:
            path = fill_path(template)
        query = "&".join(
            f"{n}={qs(draw(st.text(max_size=30)))}"
            for n in draw(st.lists(st.sampled_from(names), max_size=3))
        )
        body: Any = ...
        if method != "GET":
            fields = list((schema or {}).get("properties", {})) or FORM_FIELDS.get(template, ["x"])
            keys = st.sampled_from(fields) | st.text(max_size=10)
            body = draw(st.dictionaries(keys, json_values, max_size=6) | json_values)
        return method, path, body, query

    @settings(
        max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(request_case())
    def run(case: tuple[str, str, Any, str]) -> None:
        method, path, body, query = case
        response = send(client, method, path, body=body, query=query)
        check(response, f"{method} {path}?{query[:80]} body={str(body)[:200]}")

    run()
