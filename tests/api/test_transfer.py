"""Export a subject from a SQLite Cairn and import it into a PostgreSQL one: ids, history and
provenance come across intact, search works there, and importing again changes nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.api.test_memories import EPISODES
from tests.conftest import database_url, make_settings
from tests.web.conftest import make_ladders_dir

SUBJECT = "u1"


def _app(tmp_path: Path, url: str) -> tuple[TestClient, Services]:
    settings = make_settings(
        tmp_path, database_url=url, ladders_dir=make_ladders_dir(tmp_path / "ladders")
    )
    services = Services.from_settings(settings)
    return TestClient(create_app(services=services)), services


@pytest.fixture
def two_cairns(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    src, src_services = _app(tmp_path / "a", database_url("sqlite", tmp_path / "a", request))
    dst, dst_services = _app(tmp_path / "b", database_url("postgres", tmp_path / "b", request))
    with src, dst:
        yield src, dst
    src_services.close()
    dst_services.close()


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def fill(client: TestClient) -> dict[str, Any]:
    _ok(client.post("/v1/episodes/batch", json={"episodes": EPISODES}), 201)
    memories = _ok(client.post("/v1/memories/compile", json={"subject_id": SUBJECT}))["memories"]
    fact = next(m for m in memories if "FBI" in m["content"] and m["kind"] == "profile_fact")
    corrected = _ok(
        client.patch(f"/v1/memories/{fact['id']}", json={"content": "User works at the CIA"})
    )
    name = next(m for m in memories if "Dana" in m["content"] and m["kind"] == "profile_fact")
    _ok(client.delete(f"/v1/memories/{name['id']}"))
    _ok(
        client.post(
            "/v1/scopes/documents",
            json={
                "scope": {"runtime_id": "default", "user_id": SUBJECT},
                "dataset_id": "ds",
                "document_id": "d1",
                "content": "Der Handbuch-Eintrag: 東京 — Ärger, café ☕.",
            },
        ),
        201,
    )
    _ok(
        client.post(
            "/v1/local/memory-ladder/chat/completions",
            headers={"Idempotency-Key": "run-1"},
            json={"messages": [{"role": "user", "content": "Привет"}], "user": SUBJECT},
        )
    )
    _ok(
        client.put(
            "/v1/items",
            json={
                "scope": {"runtime_id": "default", "user_id": SUBJECT},
                "namespace": ["prefs", "drinks"],
                "key": "tea",
                "value": {"text": "Жасминовый чай, 茉莉花茶", "cups": 2},
                "ttl_seconds": 86400,
            },
        )
    )
    # Per-user slate state is the subject's too: a folder with its files and entries, the
    # entries its limit evicted and a write whose value did not match.
    likes = "/v1/slates/web-notes/Profile/prefs/likes.md"
    for text in ("green tea every morning, никакого кофе", "茉莉花茶 after lunch, always hot"):
        for _ in range(2):
            _ok(client.post(likes, params={"user_id": SUBJECT}, json={"content": text}))
    # One write that evicts several entries at once (same file, same time: alike but for
    # their text, and each must be restored).
    big = " ".join(f"word{i}" for i in range(14))
    evicted = _ok(client.post(likes, params={"user_id": SUBJECT}, json={"content": big}))
    assert len(evicted["evictions"]) >= 2, evicted
    skipped = client.post(
        likes,
        params={"user_id": SUBJECT},
        json={"content": "not json", "match": {"type": "object"}},
    )
    assert _ok(skipped)["written"] is False
    return {"fact": fact, "corrected": corrected, "forgotten": name}


def export_lines(client: TestClient) -> list[dict[str, Any]]:
    r = client.get(f"/v1/subjects/{SUBJECT}/export")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in r.text.splitlines()]


def test_export_import_round_trip_sqlite_to_postgres(two_cairns: Any) -> None:
    src, dst = two_cairns
    made = fill(src)
    lines = export_lines(src)
    assert lines[0]["type"] == "header" and lines[0]["format"] == "cairn-export"
    kinds = {line["type"] for line in lines}
    assert kinds == {
        "header",
        "episode",
        "memory",
        "document",
        "chunk",
        "run",
        "item",
        "slate",
        "slate_eviction",
        "slate_skip",
    }

    result = _ok(dst.post(f"/v1/subjects/{SUBJECT}/import", json={"records": lines}))
    assert result["skipped"] == 0 and result["imported"]["memory"] == sum(
        line["type"] == "memory" for line in lines
    )
    assert export_lines(dst)[1:] == lines[1:]  # the same records, exported again
    again = _ok(dst.post(f"/v1/subjects/{SUBJECT}/import", json={"records": lines}))
    assert sum(again["imported"].values()) == 0 and again["skipped"] == len(lines) - 1
    # Each record is named with why: its row is stored (a slate folder, which has no id of its
    # own, under its key).
    assert again["skipped_records"] == [
        {
            "record": i,
            "type": line["type"],
            "reason": "stored",
        }
        for i, line in enumerate(lines)
        if i > 0
    ]

    params = {"subject_id": SUBJECT, "limit": 1000}
    assert _ok(dst.get("/v1/timeline", params=params)) == _ok(
        src.get("/v1/timeline", params=params)
    )
    for key in ("fact", "corrected"):
        url = f"/v1/memories/{made[key]['id']}"
        assert _ok(dst.get(url)) == _ok(src.get(url))
    history = _ok(dst.get(f"/v1/memories/{made['fact']['id']}"))
    assert history["current_id"] == made["corrected"]["id"]
    assert history["replaced_by"][0]["metadata"]["correction"]["replaces"] == made["fact"]["id"]
    assert dst.get(f"/v1/memories/{made['forgotten']['id']}").status_code == 404
    assert _ok(dst.get("/v1/runs/run-1")) == _ok(src.get("/v1/runs/run-1"))
    found = _ok(dst.get("/v1/memories/search", params={"subject_id": SUBJECT, "q": "CIA"}))
    assert found["memories"][0]["id"] == made["corrected"]["id"]
    scope = {"runtime_id": "default", "user_id": SUBJECT}
    item = {**scope, "namespace": ["prefs", "drinks"], "key": "tea"}
    assert _ok(dst.get("/v1/items", params=item)) == _ok(src.get("/v1/items", params=item))
    hits = _ok(dst.post("/v1/items/search", json={"scope": scope, "query": "茉莉花茶"}))["items"]
    assert [h["key"] for h in hits] == ["tea"] and hits[0]["score"] > 0
    for path in ("prefs/likes.md", "prefs", "evictions"):
        url = f"/v1/slates/web-notes/Profile/{path}"
        params = {"user_id": SUBJECT}
        assert _ok(dst.get(url, params=params)) == _ok(src.get(url, params=params)), path
    peek = {**params, "peek": "true"}  # a read that does not count as a use (LRU clock)
    likes = _ok(dst.get("/v1/slates/web-notes/Profile/prefs/likes.md", params=peek))
    assert "茉莉花茶" in likes["content"]

    # The tombstone travels: recompiling the same episodes there does not bring it back.
    assert (
        _ok(dst.post("/v1/memories/compile", json={"subject_id": SUBJECT}))["memories_created"] == 0
    )


def test_import_refuses_bad_records_and_writes_nothing(two_cairns: Any) -> None:
    src, dst = two_cairns
    fill(src)
    lines = export_lines(src)
    memory = next(line for line in lines if line["type"] == "memory")
    item = next(line for line in lines if line["type"] == "item")
    slate = next(line for line in lines if line["type"] == "slate")
    chunk = next(line for line in lines if line["type"] == "chunk")
    bad_rows = [
        {"type": "nonsense", "row": {}},
        {"type": "memory"},
        {"type": "memory", "row": {**memory["row"], "extra": 1}},
        {"type": "memory", "row": {**memory["row"], "status": "weird"}},
        {"type": "memory", "row": {**memory["row"], "confidence": "high"}},
        {"type": "memory", "row": {**memory["row"], "source_episode_ids": ["x"]}},
        {"type": "memory", "row": {**memory["row"], "created_at": "yesterday"}},
        {"type": "memory", "row": {k: v for k, v in memory["row"].items() if k != "content"}},
        {"type": "memory", "row": {**memory["row"], "kind": "bogus"}},
        {"type": "memory", "row": {**memory["row"], "content": "  ", "status": "active"}},
        {"type": "episode", "row": {**lines[1]["row"], "payload": [1]}},
        {"type": "item", "row": {**item["row"], "namespace": "no-dot"}},
        {"type": "item", "row": {**item["row"], "namespace": "a..b."}},
        {"type": "item", "row": {**item["row"], "value": "text"}},
        {"type": "item", "row": {**item["row"], "address": "x" * 64}},
        {"type": "memory", "row": {**memory["row"], "source_episode_ids": []}},
        {"type": "memory", "row": {**memory["row"], "summary": "s" * 201}},
        {
            "type": "memory",
            "row": {
                **memory["row"],
                "valid_from": "2026-02-01T00:00:00+00:00",
                "valid_to": "2026-01-01T00:00:00+00:00",
            },
        },
        {"type": "episode", "row": {**lines[1]["row"], "source": ""}},
        {"type": "episode", "row": {**lines[1]["row"], "source": "s" * 300}},
        {"type": "item", "row": {**item["row"], "key": "k" * 5000}},
        {"type": "item", "row": {**item["row"], "ttl_seconds": -1}},
        {"type": "chunk", "row": {**chunk["row"], "char_end": 10**12}},
        {"type": "header", "format": "cairn-export", "version": 99},
        {"type": "slate", "row": {**slate["row"], "files": "likes.md"}},
        {"type": "slate", "row": {**slate["row"], "files": []}},
        {"type": "slate", "row": {**slate["row"], "entries": [{"file": "likes.md"}]}},
        {"type": "slate", "row": {**slate["row"], "clock": "late"}},
        {"type": "slate", "row": {**slate["row"], "usage": slate["row"]["usage"] + 1}},
        {"type": "slate", "row": {**slate["row"], "entries": []}},  # files counted, no entries
        {"type": "slate_eviction", "row": {"ladder": "web-notes"}},
    ]
    for bad in bad_rows:
        r = dst.post(f"/v1/subjects/{SUBJECT}/import", json={"records": [*lines, bad]})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_import", (bad, r.text)
        # The record is named by its place in the request's records (the header counts).
        assert f"record {len(lines)}" in r.json()["error"]["message"], r.text
    timeline = _ok(dst.get("/v1/timeline", params={"subject_id": SUBJECT}))
    assert timeline["episodes"] == [] and timeline["memories"] == []
    scope = {"runtime_id": "default", "user_id": SUBJECT}
    assert _ok(dst.post("/v1/items/search", json={"scope": scope})) == {"items": []}
    assert [line for line in export_lines(dst) if line["type"].startswith("slate")] == []


def test_import_makes_derived_text_again_and_wipes_tombstones(two_cairns: Any) -> None:
    """What is derived from a memory's or a chunk's text is never taken from a record: an
    edited ``search_text`` finds nothing, and a tombstone keeps no text."""
    src, dst = two_cairns
    fill(src)
    lines = export_lines(src)
    memory = next(line for line in lines if line["type"] == "memory" and line["row"]["content"])
    planted = {**memory["row"], "search_text": "injectedsecretword"}
    tomb = {**memory["row"], "id": str(uuid.uuid4()), "status": "deleted", "kind": "note"}
    records = [r for r in lines if r["type"] in ("episode", "document")]
    records += [{"type": "memory", "row": planted}, {"type": "memory", "row": tomb}]
    chunk = next(line for line in lines if line["type"] == "chunk")
    records.append({"type": "chunk", "row": {**chunk["row"], "search_text": "injectedsecretword"}})
    _ok(dst.post(f"/v1/subjects/{SUBJECT}/import", json={"records": records}))
    params = {"subject_id": SUBJECT, "q": "injectedsecretword"}
    assert _ok(dst.get("/v1/memories/search", params=params))["memories"] == []
    # A chunk's analysed text too (an older release's export holds that release's analysis);
    # an export no longer carries it (made again from the content on import).
    assert all("search_text" not in r.get("row", {}) for r in export_lines(dst))
    scope = {"runtime_id": "default", "user_id": SUBJECT}

    def chunks_for(query: str) -> list[Any]:
        body = {"scope": scope, "query": query, "dataset_ids": ["ds"]}
        items = _ok(dst.post("/v1/scopes/context", json=body))["items"]
        return [i for i in items if i["provenance"][0]["type"] == "chunk"]

    assert chunks_for("injectedsecretword") == [] and chunks_for("Handbuch")
    exported = [r for r in export_lines(dst) if r["type"] == "memory"]
    stored = next(r["row"] for r in exported if r["row"]["status"] == "deleted")
    assert stored["content"] == "" and stored["summary"] == ""
    assert set(stored["metadata"]) <= {"deleted_at", "deleted_by"}


def test_imported_memories_get_their_vectors_in_the_background(
    two_cairns: Any, tmp_path: Path
) -> None:
    """The import answers without embedding; the background pass writes the vectors after it."""
    from cairn.core.scope import Scope
    from cairn.engine.embedders import HashingEmbedder

    src, _ = two_cairns
    fill(src)
    lines = export_lines(src)
    settings = make_settings(tmp_path / "c", embedder="onnx")
    services = Services.from_settings(settings, embedder=HashingEmbedder(32))
    try:
        assert services.embedding_backfill is not None
        with TestClient(create_app(services=services)) as dst:
            result = _ok(dst.post(f"/v1/subjects/{SUBJECT}/import", json={"records": lines}))
            assert result["imported"]["memory"] > 0
            assert services.embedding_backfill.wait_idle(30)
        with services.store.snapshot() as tx:
            scope = Scope.for_subject(SUBJECT)
            assert tx.memories.unembedded_count("default", scope, 100) == 0  # tombstones aside
            assert tx.memories.vector_count("default", scope) > 0
    finally:
        services.close()
