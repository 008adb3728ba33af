"""The slates HTTP API through the real app, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from cairn.services import Services
from cairn.slates.errors import InvalidSlateWrite
from tests.slates.conftest import SecretSchemas

BASE = "/v1/slates/memory-ladder/Memory"


def test_seed_flow_write_then_read(api: TestClient) -> None:
    r = api.get(f"{BASE}/facts/core.md")
    assert r.status_code == 200 and r.json() == {"content": ""}
    r = api.post(f"{BASE}/facts/core.md", json={"content": "Paris is the capital of France."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["written"] is True and body["usage"] == {"tokens": 7, "tokenLimit": 500}
    assert body["evictions"] == []
    r = api.post(f"{BASE}/facts/core.md", json={"content": "Berlin is the capital of Germany."})
    assert api.get(f"{BASE}/facts/core.md").json() == {
        "content": "Paris is the capital of France.\nBerlin is the capital of Germany."
    }


def test_tree_instances_and_metatags(api: TestClient) -> None:
    api.post(f"{BASE}/lessons/wins.md", json={"content": "one", "tags": ["good", "short"]})
    tree = api.get(BASE).json()
    assert tree["ladder"] == "memory-ladder" and tree["slate"] == "Memory"
    assert [f["folder"] for f in tree["folders"]] == ["facts", "lessons"]
    lessons = tree["folders"][1]
    assert lessons["tokens"] == 1 and lessons["evictionPolicy"] == "LRU"
    assert [(f["file"], f["tokens"]) for f in lessons["files"]] == [
        ("failures.md", 0),
        ("wins.md", 1),
    ]
    assert "folders" not in api.get(BASE, params={"depth": 0}).json()
    assert "files" not in api.get(BASE, params={"depth": 1}).json()["folders"][0]
    assert api.get(f"{BASE}/lessons/wins.md", params={"metatag": "tags"}).json() == [
        "good",
        "short",
    ]
    index = [
        {"name": "failures.md", "tokens": 0, "bytes": 0},
        {"name": "wins.md", "tokens": 1, "bytes": 3},
    ]
    assert api.get(f"{BASE}/lessons", params={"metatag": "index"}).json() == index
    assert api.get(f"{BASE}/lessons/wins.md", params={"metatag": "index"}).json() == index
    assert api.get(f"{BASE}/lessons", params={"metatag": "tree", "depth": 1}).json()["folders"][
        1
    ] == {"folder": "lessons", "tokenLimit": 300, "evictionPolicy": "LRU", "tokens": 1}
    instances = api.get("/v1/slates").json()["slates"]
    memory = next(i for i in instances if i["ladder"] == "memory-ladder")
    assert memory == {
        "ladder": "memory-ladder",
        "slate": "Memory",
        "partition": "ladder",
        "user_id": None,
        "folders": 2,
        "tokens": 1,
        "tokenLimit": 800,
    }


def test_errors(api: TestClient) -> None:
    cases = [
        ("get", "/v1/slates/memory-ladder/Nope", None, 404, "slate_not_found"),
        ("get", "/v1/slates/nope/Memory", None, 404, "slate_not_found"),
        ("get", f"{BASE}/nope/core.md", None, 404, "folder_not_found"),
        ("get", f"{BASE}/facts/nope.md", None, 404, "file_not_found"),
        ("post", f"{BASE}/facts/nope.md", {"content": "x"}, 404, "file_not_found"),
        ("post", f"{BASE}/facts/core.md", {"content": ""}, 422, "slate_empty_write"),
        (
            "post",
            f"{BASE}/facts/core.md",
            {"content": "x", "on": "prepend"},
            422,
            "validation_error",
        ),
        ("post", f"{BASE}/facts/core.md", {"content": "x", "colour": 1}, 422, "validation_error"),
        (
            "post",
            f"{BASE}/facts/core.md",
            {"content": "x", "on": "mergeByKey"},
            422,
            "slate_merge_key_missing",
        ),
        (
            "post",
            f"{BASE}/facts/core.md",
            {"content": "[1]", "on": "mergeByKey", "key": "id"},
            422,
            "slate_merge_not_json",
        ),
        (
            "post",
            f"{BASE}/facts/core.md",
            {"content": "{}", "match": {"type": 5}},
            422,
            "invalid_schema",
        ),
        ("post", f"{BASE}/facts/core.md", {"content": "word " * 600}, 422, "slate_entry_too_large"),
        ("get", f"{BASE}/facts/core.md?metatag=bogus", None, 422, "validation_error"),
        ("delete", f"{BASE}/facts/nope.md", None, 404, "file_not_found"),
        ("post", f"{BASE}/nope/reset", None, 404, "folder_not_found"),
        ("get", "/v1/slates/per-user/Notes/inbox/todo.md", None, 422, "slate_user_required"),
        # A user named for a slate every user shares: the write would not be theirs alone.
        (
            "post",
            f"{BASE}/facts/core.md?user_id=alice",
            {"content": "a"},
            422,
            "slate_not_per_user",
        ),
        ("delete", f"{BASE}/facts/core.md?user_id=alice", None, 422, "slate_not_per_user"),
        ("post", f"{BASE}/facts/reset?user_id=alice", None, 422, "slate_not_per_user"),
    ]
    for method, url, body, status, code in cases:
        r = api.request(method.upper(), url, json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (url, body, r.text)
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": ""}
    # An unknown ladder is named as such, with the ladders that are loaded.
    error = api.get("/v1/slates/nope/Memory").json()["error"]
    assert "no ladder 'nope' is loaded" in error["message"], error
    assert "memory-ladder" in error["message"] and "memory-ladder" in str(error["details"])
    error = api.get("/v1/slates/memory-ladder/Nope").json()["error"]
    assert error["message"] == "ladder 'memory-ladder' declares no slate 'Nope'", error


def test_reject_is_409_and_per_user_state(api: TestClient) -> None:
    url = "/v1/slates/per-user/Notes/inbox/todo.md"
    assert api.get(url, params={"user_id": "ann"}).json() == {"content": "nothing yet"}
    r = api.post(url, params={"user_id": "ann"}, json={"content": "buy milk"})
    assert r.status_code == 200
    r = api.post(url, params={"user_id": "ann"}, json={"content": "word " * 45})
    assert r.status_code == 409 and r.json()["error"]["code"] == "slate_limit_exceeded"
    assert api.get(url, params={"user_id": "ann"}).json() == {"content": "nothing yet\nbuy milk"}
    assert api.get(url, params={"user_id": "bob"}).json() == {"content": "nothing yet"}
    r = api.post("/v1/slates/per-user/Notes/inbox/reset", params={"user_id": "ann"})
    assert r.status_code == 200 and r.json()["usage"]["tokens"] == 2
    assert api.get(url, params={"user_id": "ann"}).json() == {"content": "nothing yet"}


def test_open_folder_creates_and_deletes_files(api: TestClient) -> None:
    base = "/v1/slates/per-user/Notes/scratch"
    p = {"user_id": "ann"}
    assert api.post(f"{base}/idea.md", params=p, json={"content": "one"}).status_code == 200
    assert api.get(f"{base}", params=p).json() == [{"name": "idea.md", "tokens": 1, "bytes": 3}]
    r = api.delete(f"{base}/idea.md", params=p)
    assert r.status_code == 200 and r.json()["entries_deleted"] == 1
    assert api.get(f"{base}/idea.md", params=p).status_code == 404


def test_no_file_is_named_reset_and_a_write_never_resets(api: TestClient) -> None:
    """``POST …/{folder}/reset`` is the reset route: a write meant for a file of that name
    emptied the open folder (every file gone). No file may be named ``reset`` (HTTP, CLI and
    inspector write through one service), and the reset route refuses a write's body."""
    base = "/v1/slates/per-user/Notes/scratch"
    p = {"user_id": "ann"}
    assert api.post(f"{base}/idea.md", params=p, json={"content": "one two"}).status_code == 200
    r = api.post(f"{base}/reset", params=p, json={"content": "hi"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "slate_invalid_name", r.text
    assert api.get(f"{base}/idea.md", params=p).json() == {"content": "one two"}
    with pytest.raises(InvalidSlateWrite) as refused:
        api.app.state.services.slates.write(  # type: ignore[attr-defined]
            "default", "per-user", "Notes", "scratch", "reset", "hi", user_id="ann"
        )
    assert refused.value.code == "slate_invalid_name"
    # Any other body is ignored, as before (a form, a JSON array).
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert api.post(f"{base}/reset", params=p, content=b"x=1", headers=form).status_code == 200
    assert api.post(f"{base}/reset", params=p, json=["content"]).status_code == 200
    assert api.post(f"{base}/idea.md", params=p, json={"content": "one two"}).status_code == 200
    # The listing's usage follows a reset of an open folder (it kept the tokens before).
    r = api.post(f"{base}/reset", params=p)
    assert r.status_code == 200 and r.json()["usage"]["tokens"] == 0
    listed = api.get("/v1/slates", params={"ladder": "per-user"}).json()["slates"]
    shown = api.get("/v1/slates/per-user/Notes", params=p).json()
    assert [f["tokens"] for f in shown["folders"] if f["folder"] == "scratch"] == [0]
    assert [s["tokens"] for s in listed if s["user_id"] == "ann"] == [shown["tokens"]], listed


def test_evictions_endpoint_and_match(api: TestClient) -> None:
    answered = []
    for i in range(40):
        r = api.post(
            f"{BASE}/lessons/wins.md",
            json={"content": f"lesson {i} " + "w " * 10, "run_id": f"r{i}"},
        )
        answered += r.json()["evictions"]
    evictions = api.get(f"{BASE}/evictions", params={"limit": 5}).json()["evictions"]
    assert len(evictions) == 5
    # A write's answer shows its evictions as the history lists them, ids included.
    assert answered[-1]["id"] is not None and answered[-1] == evictions[0]
    first = evictions[-1]
    assert set(first) == {
        "id",
        "ladder",
        "slate",
        "folder",
        "file",
        "user_id",
        "preview",
        "tokens",
        "policy",
        "evicted_at",
        "run_id",
    }
    assert first["folder"] == "lessons" and first["policy"] == "LRU"
    schema = {
        "type": "object",
        "required": ["fact"],
        "properties": {"fact": {"type": "string", "minLength": 5}},
    }
    r = api.post(
        f"{BASE}/facts/core.md",
        json={
            "content": 'Sure. {"fact": "Water boils at 100 C"}',
            "match": schema,
            "field": "fact",
        },
    )
    assert r.json()["written"] is True
    r = api.post(
        f"{BASE}/facts/core.md",
        json={"content": '{"fact": "abc"}', "match": schema, "field": "fact"},
    )
    assert r.status_code == 200 and r.json()["written"] is False
    assert r.json()["reason"] == "schema_mismatch"
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": "Water boils at 100 C"}


def test_tenants_are_isolated(api: TestClient, slate_services: Services) -> None:
    key_a, _ = slate_services.store.keys.create("tenant-a")
    key_b, _ = slate_services.store.keys.create("tenant-b")
    a, b = {"X-API-Key": key_a}, {"X-API-Key": key_b}
    r = api.post(f"{BASE}/facts/core.md", headers=a, json={"content": "secret"})
    assert r.status_code == 200
    assert api.get(f"{BASE}/facts/core.md", headers=b).json() == {"content": ""}
    spoofed = {**b, "X-Tenant-ID": "tenant-a"}
    assert api.get(f"{BASE}/facts/core.md", headers=spoofed).status_code == 403
    assert api.get(f"{BASE}/facts/core.md").status_code == 401
    assert api.get(f"{BASE}/facts/core.md", headers=a).json() == {"content": "secret"}


def test_hostile_input_is_a_clear_4xx_and_changes_nothing(api: TestClient) -> None:
    cases = [
        # A NUL anywhere in a JSON body is refused at the edge, before any slate code runs.
        ({"content": "a\u0000b"}, {}, "validation_error"),
        ({"content": "ok", "tags": ["a\u0000"]}, {}, "validation_error"),
        ({"content": "ok", "tags": [""]}, {}, "slate_invalid_write"),
        ({"content": "ok", "tags": ["x" * 129]}, {}, "slate_invalid_write"),
        ({"content": "ok", "run_id": "r" * 257}, {}, "validation_error"),
    ]
    for body, params, code in cases:
        r = api.post(f"{BASE}/facts/core.md", json=body, params=params)
        assert (r.status_code, r.json()["error"]["code"]) == (422, code), (body, r.text)
    # A NUL in the query string is refused at the edge, before any slate code runs.
    r = api.get("/v1/slates/per-user/Notes/inbox/todo.md", params={"user_id": "a\u0000b"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": ""}
    # A schema mismatch whose message quotes a NUL is still recorded as a no-op.
    r = api.post(
        f"{BASE}/facts/core.md",
        json={
            "content": '{"fact": "\\u0000"}',
            "match": {"properties": {"fact": {"minLength": 5}}},
        },
    )
    assert r.status_code == 200 and r.json()["reason"] == "schema_mismatch"
    # A NUL inside JSON content is refused at the edge too, like every NUL in a body.
    r = api.post(f"{BASE}/facts/core.md", json={"content": {"x": "\u0000"}})
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "content.x"


def test_deleting_a_subject_removes_its_per_user_slate_state(api: TestClient) -> None:
    todo = "/v1/slates/per-user/Notes/inbox/todo.md"
    for user in ("ann", "bob"):
        assert api.post(todo, params={"user_id": user}, json={"content": f"for {user}"}).is_success
    api.post(f"{BASE}/facts/core.md", json={"content": "shared"})
    assert api.delete("/v1/subjects/ann").status_code == 200
    assert api.get(todo, params={"user_id": "ann"}).json() == {"content": "nothing yet"}
    assert api.get(todo, params={"user_id": "bob"}).json() == {"content": "nothing yet\nfor bob"}
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": "shared"}


def test_a_match_schema_never_fetches_a_reference(
    api: TestClient, secret_schemas: SecretSchemas
) -> None:
    """A ``$ref`` outside the schema (a URL, a file) is refused before anything is read: it
    made the server fetch the URL and answer with what it held."""
    refs = (secret_schemas.url, secret_schemas.file_uri, "other.json", "http://127.0.0.1:9/x")
    for ref in refs:
        schemas = (
            {"$ref": ref},
            {"properties": {"fact": {"$ref": ref}}},
            {"properties": {"const": {"$ref": ref}}},  # a property called "const"
        )
        for schema in schemas:
            body = {"content": '{"fact": "x"}', "match": schema, "field": "fact"}
            r = api.post(f"{BASE}/facts/core.md", json=body)
            assert r.status_code == 422, r.text
            assert r.json()["error"]["code"] == "invalid_schema"
            assert "SECRET" not in r.text and "may only refer inside itself" in r.text
    assert secret_schemas.hits == []
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": ""}
    # A reference inside the schema works.
    inside = {"$defs": {"f": {"type": "object", "required": ["fact"]}}, "$ref": "#/$defs/f"}
    r = api.post(f"{BASE}/facts/core.md", json={"content": '{"fact": "x"}', "match": inside})
    assert r.status_code == 200 and r.json()["written"] is True


def test_a_backtracking_pattern_cannot_stall_the_server(api: TestClient) -> None:
    """``pattern`` runs with a time limit: these patterns backtrack exponentially, so Python's
    ``re`` (jsonschema's) would hold the interpreter for longer than any test runs."""
    for pattern, value in (
        ("^(a|aa)+$", "a" * 5000 + "!"),
        ("(x+x+)+y", "x" * 5000),
        ("^((a+)+)+b", "a" * 5000),
    ):
        dialect = "https://json-schema.org/draft/2020-12/schema"
        for schema in (
            {"properties": {"fact": {"type": "string", "pattern": pattern}}},
            {"patternProperties": {pattern: {}}, "additionalProperties": False},
            {"propertyNames": {"pattern": pattern}},
            # A subschema naming its dialect got jsonschema's stock validator (Python's re).
            {"properties": {"fact": {"$schema": dialect, "pattern": pattern}}},
        ):
            content = (
                json.dumps({"fact": value}) if "properties" in schema else json.dumps({value: 1})
            )
            body = {"content": content, "match": {"type": "object", **schema}}
            r = api.post(f"{BASE}/facts/core.md", json=body)
            assert r.status_code == 200, r.text
            assert r.json()["written"] is False and r.json()["reason"] == "schema_mismatch"
            assert "took over 0.05 s" in r.json()["detail"], r.json()
    # Many values under one pattern share one budget (0.5 s), not 0.05 s each.
    many = {"type": "array", "items": {"type": "string", "pattern": "^(a|aa)+$"}}
    r = api.post(
        f"{BASE}/facts/core.md",
        json={"content": json.dumps(["a" * 500 + "!"] * 400), "match": many},
    )
    assert r.status_code == 200 and r.json()["reason"] == "schema_mismatch"
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": ""}
    for schema, says in (
        ({"properties": {"f": {"pattern": "(unclosed"}}}, "is not a 'regex'"),
        ({"patternProperties": {"^a": {}}, "unevaluatedProperties": False}, "not supported"),
        ({"allOf": [{"patternProperties": {"^a": {}}}], "unevaluatedProperties": False}, "not"),
    ):
        r = api.post(f"{BASE}/facts/core.md", json={"content": "{}", "match": schema})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_schema", r.text
        assert says in r.text
    # A pattern that is only data (an enum value, a property's name) is not checked.
    data = {"enum": [{"pattern": "(unclosed"}], "properties": {"pattern": {"type": "string"}}}
    r = api.post(
        f"{BASE}/facts/core.md", json={"content": '{"pattern": "(unclosed"}', "match": data}
    )
    assert r.status_code == 200 and r.json()["written"] is True, r.text


def test_content_nested_too_deeply_is_no_json_not_a_500(api: TestClient) -> None:
    deep = "[" * 5000 + "]" * 5000
    r = api.post(f"{BASE}/facts/core.md", json={"content": deep, "match": {"type": "array"}})
    assert r.status_code == 200 and r.json()["reason"] == "no_json", r.text
    merge = {"content": deep, "on": "mergeByKey", "key": "id"}
    r = api.post(f"{BASE}/facts/core.md", json=merge)
    assert r.status_code == 422 and r.json()["error"]["code"] == "slate_merge_not_json", r.text
    # A body nested deeper than 128 levels (here the schema) is refused before any route.
    r = api.post(f"{BASE}/facts/core.md", json={"content": "[1]", "match": _deep_schema(600)})
    assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", r.text
    assert r.json()["error"]["details"][0]["type"] == "json_too_deep", r.text


def _deep_schema(depth: int) -> dict[str, object]:
    schema: dict[str, object] = {"type": "array"}
    for _ in range(depth):
        schema = {"items": schema}
    return schema


def test_a_per_user_slates_user_is_a_subject_id(api: TestClient) -> None:
    """The user's state is erased with the subject (``DELETE /v1/subjects/{id}``), so a user
    id that cannot be a subject id (it could never be erased that way) is refused."""
    url = "/v1/slates/per-user/Notes/inbox/todo.md"
    for user in ("a/b", " lead", "tab\tx", ".", "x" * 257):
        r = api.post(url, params={"user_id": user}, json={"content": "note"})
        assert r.status_code == 422, (user, r.text)
        assert r.json()["error"]["code"] in ("slate_user_required", "validation_error"), r.text
    # A user typed decomposed (NFD) is counted as stored: 200 characters, not 400.
    long_nfd = "e\u0301" * 200
    assert api.post(url, params={"user_id": long_nfd}, json={"content": "n"}).status_code == 200
    r = api.post(url, params={"user_id": "李雷"}, json={"content": "note of 李雷"})
    assert r.status_code == 200, r.text
    assert api.delete("/v1/subjects/李雷").status_code == 200
    assert "note of" not in api.get(url, params={"user_id": "李雷"}).json()["content"]


def test_the_listing_counts_the_init_of_folders_never_written(api: TestClient) -> None:
    """``GET /v1/slates`` says what reading the slate shows: a folder never written holds its
    files' ``init`` (the per-user inbox's "nothing yet"), not 0 tokens."""
    base = "/v1/slates/per-user/Notes"
    p = {"user_id": "ann"}
    assert api.post(f"{base}/scratch/idea.md", params=p, json={"content": "one"}).status_code == 200
    listed = next(i for i in api.get("/v1/slates").json()["slates"] if i["ladder"] == "per-user")
    tree = api.get(base, params={**p, "metatag": "tree"}).json()
    assert listed["user_id"] == "ann"
    assert listed["tokens"] == sum(f["tokens"] for f in tree["folders"]) == 1 + 2  # "nothing yet"


def test_a_new_files_name_is_printable_text(api: TestClient) -> None:
    """A name is shown in the inspector and the CLI: a control (DEL, C1: U+009B is a CSI), a
    line separator, a noncharacter or a bidi override (``\u202egnp.exe`` shows as
    ``exe.png``) is refused; any script, emoji and right-to-left marks are names."""
    base = "/v1/slates/per-user/Notes/scratch"
    p = {"user_id": "ann"}
    for name in ("del\x7f.md", "nel\x85.md", "csi\x9b31m.md", "a\u2028b.md", "\u202egnp.exe"):
        r = api.post(f"{base}/{quote(name)}", params=p, json={"content": "x"})
        assert r.status_code == 422, (name, r.text)
        assert r.json()["error"]["code"] == "slate_invalid_name", r.text
    r = api.post(f"{base}/{quote(chr(0xFFFE))}.md", params=p, json={"content": "x"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "slate_invalid_name"
    for name in (
        "李雷.md",
        "заметка.md",
        "👨\u200d👩\u200d👧.md",
        "ملاحظة\u200f.md",
        "メモ\u3000一覧.md",
    ):
        assert api.post(f"{base}/{quote(name)}", params=p, json={"content": "x"}).status_code == 200
    names = {f["name"] for f in api.get(base, params=p).json()}
    assert names == {
        "李雷.md",
        "заметка.md",
        "👨\u200d👩\u200d👧.md",
        "ملاحظة\u200f.md",
        "メモ\u3000一覧.md",  # an ideographic space: any space inside a name
    }


def test_a_file_name_with_a_slash_is_refused_by_name(api: TestClient) -> None:
    """``a%2Fb`` is decoded before routing: a 422 that says why, not a 404 naming no route."""
    for method in ("GET", "POST", "DELETE"):
        r = api.request(method, f"{BASE}/facts/a%2Fb", json={"content": "x"})
        assert r.status_code == 422 and r.json()["error"]["code"] == "slate_invalid_name", r.text
        assert "has a '/'" in r.json()["error"]["message"]
    assert api.get(f"{BASE}/facts/core.md").json() == {"content": ""}
