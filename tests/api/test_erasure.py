"""Erasing a person leaves nothing, on both backends: the user writes through every API (subject
episodes, scope turns in another runtime and agent, documents, a compile job, a ladder run, a
per-user slate, vectors); ``DELETE /v1/scopes?user_id=`` removes it all, and a unique marker
is then found in no row of any table — and on SQLite neither in a ``.dump`` nor in the bytes of
the database file and its write-ahead log. Another user's data stays."""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect, text

from cairn.app import create_app
from cairn.engine.embedders import HashingEmbedder
from cairn.services import Services
from tests.conftest import database_url, make_settings
from tests.web.conftest import make_ladders_dir

USER = "erase-me"
OTHER = "keep-me"


@pytest.fixture
def world(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    settings = make_settings(
        tmp_path,
        database_url=database_url(backend, tmp_path, request),
        ladders_dir=make_ladders_dir(tmp_path / "ladders"),
    )
    services = Services.from_settings(settings, embedder=HashingEmbedder())
    try:
        with TestClient(create_app(services=services)) as client:
            yield client, services
    finally:
        services.close()


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def write_everything(client: TestClient, services: Services, user: str, marker: str) -> None:
    """The user's data through every API that stores any."""
    turn = {"role": "user", "content": f"I work at {marker.capitalize()} Labs."}
    _ok(
        client.post(
            "/v1/episodes",
            json={
                "subject_id": user,
                "source": "chat",
                "type": "conversation.turn",
                "session_id": "s1",
                "idempotency_key": f"key-{marker}",
                "payload": {"messages": [turn]},
            },
        ),
        201,
    )
    _ok(client.post("/v1/memories/compile", json={"subject_id": user}))
    scope = {"runtime_id": "rt-erase", "user_id": user, "agent_id": "helper"}
    _ok(
        client.post(
            "/v1/scopes/turns",
            json={
                "scope": scope,
                "conversation_id": "c1",
                "idempotency_key": f"turn-{marker}",
                "messages": [{"role": "user", "content": f"remember {marker} please"}],
            },
        ),
        201,
    )
    _ok(
        client.post(
            "/v1/scopes/documents",
            json={
                "scope": scope,
                "dataset_id": "ds",
                "document_id": "d1",
                "content": f"The handbook mentions {marker} twice: {marker}.",
            },
        ),
        201,
    )
    job = _ok(client.post("/v1/scopes/compile", json={"scope": scope, "async": True}), 202)
    while _ok(client.get(f"/v1/memories/compile/{job['job_id']}"))["status"] in (
        "queued",
        "running",
    ):
        services.job_runner.work_once()
    _ok(
        client.post(
            "/v1/slates/web-notes/Profile/prefs/likes.md",
            params={"user_id": user},
            json={"content": f"likes {marker}"},
        )
    )
    _ok(
        client.post(
            "/v1/local/memory-ladder/chat/completions",
            json={"messages": [{"role": "user", "content": f"Hello {marker}"}], "user": user},
        )
    )


def rows_text(services: Services) -> str:
    """Every row of every table, as text (blobs decoded leniently)."""
    db = services.store.db
    out = []
    with db.engine.connect() as conn:
        for name in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{name}"')):
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        out.append(bytes(value).decode("latin-1"))
                    else:
                        out.append(str(value))
    return "\n".join(out)


def sqlite_evidence(services: Services) -> tuple[str, bytes]:
    """A ``.dump`` of the database and the raw bytes of its file and write-ahead log."""
    path = Path(services.store.db.engine.url.database or "")
    conn = sqlite3.connect(path)
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    raw = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    if wal.exists():
        raw += wal.read_bytes()
    return dump, raw


def found_in(marker: str, dump: str, raw: bytes) -> list[str]:
    where = []
    if marker in dump.lower() or marker.encode().hex() in dump.lower():
        where.append("dump")
    if marker.encode() in raw.lower():
        where.append("file")
    return where


def test_delete_scopes_erases_a_person_everywhere(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    kept = "zq" + secrets.token_hex(6)
    write_everything(client, services, USER, marker)
    write_everything(client, services, OTHER, kept)
    assert marker in rows_text(services)
    sqlite = services.store.db.is_sqlite
    if sqlite:  # the probe can fail: before the erasure it finds the marker everywhere
        assert found_in(marker, *sqlite_evidence(services)) == ["dump", "file"]
    # A search of the user's document: on SQLite its words' stems are remembered in memory.
    scope = {"runtime_id": "rt-erase", "user_id": USER, "agent_id": "helper"}
    body = {"scope": scope, "query": f"handbook {marker}", "dataset_ids": ["ds"]}
    assert _ok(client.post("/v1/scopes/context", json=body))["items"]
    if sqlite:  # (the probe below can fail)
        assert marker in services.store.db.porter_stems._stems

    r = _ok(client.delete("/v1/scopes", params={"user_id": USER}))
    assert {(p["runtime_id"], p["agent_id"]) for p in r["partitions"]} == {
        ("default", ""),
        ("rt-erase", "helper"),
    }
    deleted = r["deleted"]
    for table in ("episodes", "memories", "documents", "document_chunks", "compile_jobs"):
        assert deleted[table] > 0, (table, deleted)
    assert deleted["ladder_runs"] == 1 and deleted["slate_folders"] == 1

    everything = rows_text(services)
    assert marker not in everything
    assert marker not in services.store.db.porter_stems._stems
    assert USER not in everything
    assert kept in everything  # another user's data stays
    if sqlite:
        assert found_in(marker, *sqlite_evidence(services)) == []
        assert "file" in found_in(kept, *sqlite_evidence(services))
    # What the other user's data answers still works.
    hits = _ok(client.get("/v1/memories/search", params={"subject_id": OTHER, "q": kept}))
    assert hits["memories"]


def test_delete_scopes_narrows_to_runtime_and_agent(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    write_everything(client, services, USER, marker)
    r = _ok(
        client.delete(
            "/v1/scopes", params={"user_id": USER, "runtime_id": "rt-erase", "agent_id": "helper"}
        )
    )
    assert [p["runtime_id"] for p in r["partitions"]] == ["rt-erase"]
    assert r["deleted"]["ladder_runs"] == 0 and r["deleted"]["documents"] == 1
    timeline = _ok(client.get("/v1/timeline", params={"subject_id": USER}))
    assert timeline["episodes"] and timeline["memories"]  # the subject partition stays
    r = _ok(client.delete(f"/v1/subjects/{USER}"))
    assert r["episodes_deleted"] == 1 and r["deleted"]["ladder_runs"] == 1
    assert marker not in rows_text(services)


def test_delete_scopes_refuses_bad_input(world: Any) -> None:
    client, _ = world
    for params in ({}, {"user_id": ""}, {"user_id": "u", "runtime_id": ""}):
        r = client.delete("/v1/scopes", params=params)
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error"
    empty = _ok(client.delete("/v1/scopes", params={"user_id": "nobody"}))
    assert empty["partitions"] == [] and set(empty["deleted"].values()) == {0}


def _chat(client: TestClient, marker: str, key: str) -> str:
    """A run of the example assistant (its memory.turn hook commits the turn to the scope
    ``(memories, user-1, assistant)``) by the OpenAI user ``hank``; the run's id."""
    r = client.post(
        "/v1/local/assistant/chat/completions",
        headers={"X-Conversation-ID": "c-erase", "Idempotency-Key": key},
        json={"user": "hank", "messages": [{"role": "user", "content": f"My word is {marker}."}]},
    )
    assert r.status_code == 200, r.text
    return r.headers["X-Cairn-Run-ID"]


def test_a_run_that_committed_a_turn_goes_with_the_turn(world: Any) -> None:
    client, services = world
    marker, other = "zq" + secrets.token_hex(6), "zq" + secrets.token_hex(6)
    run_id = _chat(client, marker, "run-erase-1")
    assert _ok(client.get(f"/v1/runs/{run_id}"))["id"] == run_id
    with services.store.db.engine.connect() as conn:
        episode = conn.execute(
            text("SELECT id FROM episodes WHERE source = 'cairn.turn_sink'")
        ).scalar_one()
    _ok(client.delete(f"/v1/episodes/{episode}"))
    assert client.get(f"/v1/runs/{run_id}").status_code == 404
    assert marker not in rows_text(services)
    # Erasing the scope's user takes the runs that committed its turns, whoever ran them.
    run_id = _chat(client, other, "run-erase-2")
    deleted = _ok(client.delete("/v1/scopes", params={"user_id": "user-1"}))["deleted"]
    assert deleted["ladder_runs"] == 1 and deleted["episodes"] == 1
    assert client.get(f"/v1/runs/{run_id}").status_code == 404
    assert other not in rows_text(services)


def test_a_turn_that_only_names_a_run_does_not_take_it(world: Any) -> None:
    """``metadata.run_id`` of a turn is the caller's to write: a turn committed through
    ``POST /v1/scopes/turns`` to another scope, naming a run (and its key), is deleted
    alone, by either deletion; the run goes only with the turn its own trace says it
    committed."""
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    run_id = _chat(client, marker, "run-forged-1")

    def forge(conversation: str) -> str:
        r = client.post(
            "/v1/scopes/turns",
            json={
                "scope": {"runtime_id": "default", "user_id": "mallory", "agent_id": ""},
                "conversation_id": conversation,
                "idempotency_key": run_id,
                "messages": [{"role": "user", "content": "nothing to see"}],
                "metadata": {"run_id": run_id, "channel": "main"},
            },
        )
        assert r.status_code == 201, r.text
        return str(r.json()["episode_id"])

    forge("c-forged-1")
    deleted = _ok(client.delete("/v1/scopes", params={"user_id": "mallory"}))["deleted"]
    assert deleted["episodes"] == 1 and deleted["ladder_runs"] == 0
    assert _ok(client.get(f"/v1/runs/{run_id}"))["id"] == run_id
    _ok(client.delete(f"/v1/episodes/{forge('c-forged-2')}"))
    assert _ok(client.get(f"/v1/runs/{run_id}"))["id"] == run_id
    # The run's own turn still takes it.
    deleted = _ok(client.delete("/v1/scopes", params={"user_id": "user-1"}))["deleted"]
    assert deleted["ladder_runs"] == 1
    assert client.get(f"/v1/runs/{run_id}").status_code == 404
    assert marker not in rows_text(services)


def test_a_turn_with_a_runs_key_does_not_take_a_run_that_names_no_turn(world: Any) -> None:
    """A run whose trace names no committed turn (it failed after its hook stored one, or
    has no commit hook) is taken by no turn: the key, like the metadata, is the caller's to
    choose, so a turn with the run's key in another scope must not reach it."""
    from sqlalchemy import update

    from cairn.store.runs import ladder_runs

    client, _ = world
    run_id = _chat(client, "zq" + secrets.token_hex(6), "run-failed-1")
    with world[1].store.db.write() as conn:  # (the server's own writer lock)
        trace = conn.execute(
            text("SELECT trace FROM ladder_runs WHERE id = :i"), {"i": run_id}
        ).scalar_one()
        trace = json.loads(trace) if isinstance(trace, str) else trace
        conn.execute(
            update(ladder_runs)
            .where(ladder_runs.c.id == run_id)
            .values(status="failed", trace={**trace, "commit": []})
        )
    forged = client.post(
        "/v1/scopes/turns",
        json={
            "scope": {"runtime_id": "default", "user_id": "mallory", "agent_id": ""},
            "conversation_id": "c",
            "idempotency_key": run_id,
            "messages": [{"role": "user", "content": "nothing"}],
            "metadata": {"run_id": run_id},
        },
    )
    assert forged.status_code == 201, forged.text
    _ok(client.delete(f"/v1/episodes/{forged.json()['episode_id']}"))
    assert _ok(client.get(f"/v1/runs/{run_id}"))["id"] == run_id


def test_a_conversation_id_header_in_any_script_is_kept_as_written(world: Any) -> None:
    """``X-Conversation-ID: 会话-1`` (UTF-8 bytes on the wire) names the conversation 会话-1,
    not its bytes read as Latin-1: the committed turn is found by that id."""
    client, _ = world
    r = client.post(
        "/v1/local/assistant/chat/completions",
        headers={"X-Conversation-ID": "会话-1".encode()},
        json={"user": "hank", "messages": [{"role": "user", "content": "My colour is teal."}]},
    )
    assert r.status_code == 200, r.text
    run = _ok(client.get(f"/v1/runs/{r.headers['X-Cairn-Run-ID']}"))
    assert "会话-1" in json.dumps(run, ensure_ascii=False)
    assert "\\u00e4" not in json.dumps(run)  # (the bytes read as Latin-1 start with ä)


def test_a_conversation_id_too_long_is_refused_before_the_run(world: Any) -> None:
    """The memory.turn hook stores the conversation id with the turn (at most 256 characters):
    one too long, by header or in ``metadata``, is a 422 before any step runs (it was refused
    by the hook after the steps had run, leaving a failed run behind)."""
    client, _ = world
    body = {"user": "hank", "messages": [{"role": "user", "content": "My colour is teal."}]}
    url = "/v1/local/assistant/chat/completions"
    refused = [
        client.post(url, headers={"X-Conversation-ID": "c" * 300}, json=body),
        client.post(url, json={**body, "metadata": {"conversation_id": "会" * 257}}),
    ]
    for r, field in zip(
        refused, ("header.X-Conversation-ID", "metadata.conversation_id"), strict=True
    ):
        assert r.status_code == 422 and r.json()["error"]["code"] == "validation_error", r.text
        assert r.json()["error"]["details"][0]["field"] == field
    assert _ok(client.get("/v1/runs", params={"ladder": "assistant"}))["runs"] == []
    long_ok = client.post(url, headers={"X-Conversation-ID": "会".encode() * 256}, json=body)
    assert long_ok.status_code == 200, long_ok.text


def _term_stats(services: Services, user: str) -> int:
    """Rows of ``memory_term_stats`` in the subject's partition."""
    with services.store.db.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM memory_term_stats"
                    " WHERE user_id = :u AND runtime_id = 'default' AND agent_id = ''"
                ),
                {"u": user},
            ).scalar_one()
        )


def test_the_erasure_counts_the_term_statistics_it_removed(world: Any) -> None:
    """``deleted`` counts every table's rows, PostgreSQL's term statistics too (its trigger
    removed them with the memories, and the answer said 0). SQLite keeps no rows there (its
    full-text index counts terms itself): 0 is then the right count."""
    client, services = world
    write_everything(client, services, USER, "zq" + secrets.token_hex(6))
    before = _term_stats(services, USER)
    assert (before == 0) == services.store.db.is_sqlite
    r = _ok(client.delete(f"/v1/subjects/{USER}"))
    assert r["deleted"]["memory_term_stats"] == before
    assert _term_stats(services, USER) == 0
