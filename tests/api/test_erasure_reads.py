"""A ladder run that read a partition goes when what it read is deleted, on both backends.

The ``reader`` ladder below recalls from Maya's partition ``(library, maya, "")`` whoever calls
it: a run by the OpenAI user ``hank`` belongs to hank, yet its trace, board and reply quote
Maya's memories and document chunks. Deleting Maya's partition, the memory, the episode it
was made from, or the document deletes that run (and its reads); a run that read something
else stays.
"""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text, update

from cairn.app import create_app
from cairn.core.ids import utcnow
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.lifecycle import forget_memory
from cairn.engine.retention import sweep_retention
from cairn.ladders import runtime as runtime_module
from cairn.services import Services
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.schema import episodes, memories
from tests.api.test_erasure import rows_text
from tests.conftest import database_url, make_settings
from tests.web.conftest import make_ladders_dir

MAYA = {"runtime_id": "library", "user_id": "maya", "agent_id": ""}
_AGENT = """
  {name}:
    prepare:
      - type: memory.context
        deps:
          memory: memories
        settings:
          query:
            current_message: true
          scope: {scope}
          dataset_ids: [handbook]
          budget: {budget}
          output: memory_items
          render:
            output: memory_text
    steps:
      - id: reply
        fields:
          - {{ name: Memory, type: text, from: board.memory_text, fallback: "(nothing)" }}
          - {{ name: Conversation, type: text, from: input.messages }}
"""
_MAYAS = '{runtime_id: library, user_id: maya, agent_id: ""}'
# ``reader`` recalls from Maya's library partition, ``closest`` only its best item from there,
# ``own`` only the best item from Maya's subject partition ("default", maya, "").
READER = (
    """
resources:
  memories:
    kind: memory.Assembly
    impl: cairn
    settings:
      file: ./memory.yaml

agents:"""
    + _AGENT.format(name="reader", scope=_MAYAS, budget="{max_tokens: 2000}")
    + _AGENT.format(name="closest", scope=_MAYAS, budget="{max_tokens: 2000, max_items: 1}")
    + _AGENT.format(
        name="own",
        scope='{runtime_id: default, user_id: maya, agent_id: ""}',
        budget="{max_items: 1}",
    )
    + """
providers:
  offline:
    kind: scripted
    default: "Noted."

models:
  "*": { provider: offline }
"""
)


@contextmanager
def _server(url: str, tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    ladders = tmp_path / "ladders"
    if not ladders.exists():
        make_ladders_dir(ladders)
        (ladders / "reader.yaml").write_text(READER, encoding="utf-8")
    settings = make_settings(tmp_path, database_url=url, ladders_dir=ladders)
    services = Services.from_settings(settings, embedder=HashingEmbedder())
    try:
        with TestClient(create_app(services=services)) as client:
            yield client, services
    finally:
        services.close()


@pytest.fixture
def db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return database_url(backend, tmp_path, request)


@pytest.fixture
def world(db: str, tmp_path: Path) -> Iterator[tuple[TestClient, Services]]:
    with _server(db, tmp_path) as served:
        yield served


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text[:400]
    return r.json()


def _maya_knows(client: TestClient, marker: str) -> None:
    """A turn (compiled) and a handbook document in Maya's partition, both naming ``marker``."""
    _ok(
        client.post(
            "/v1/scopes/turns",
            json={
                "scope": MAYA,
                "conversation_id": "c1",
                "idempotency_key": f"turn-{marker}",
                "messages": [{"role": "user", "content": f"The spare key is under the {marker}."}],
            },
        ),
        201,
    )
    _ok(client.post("/v1/scopes/compile", json={"scope": MAYA}))
    _ok(
        client.post(
            "/v1/scopes/documents",
            json={
                "scope": MAYA,
                "dataset_id": "handbook",
                "document_id": "doc-1",
                "content": f"The handbook says the {_doc(marker)} is blue.",
            },
        ),
        201,
    )


def _maya_says(client: TestClient, said: list[str], sessions: list[str]) -> None:
    """Turns of Maya's subject (one an episode, in the sessions given), compiled (subject
    episodes are compiled when asked, so the neighbour words are the session's)."""
    episodes_ = [
        {
            "subject_id": "maya",
            "source": "chat",
            "type": "conversation.turn",
            "session_id": session,
            "payload": {"messages": [{"role": "user", "content": text_}]},
        }
        for text_, session in zip(said, sessions, strict=True)
    ]
    _ok(client.post("/v1/episodes/batch", json={"episodes": episodes_}), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": "maya"}))


def _doc(marker: str) -> str:
    """The word the document says, which the turn does not."""
    return "zd" + marker[2:]


def _ask(client: TestClient, question: str, agent: str = "reader", user: str = "hank") -> str:
    """A run of the ladder ``agent`` by ``user``; its id."""
    r = client.post(
        f"/v1/local/{agent}/chat/completions",
        json={"user": user, "messages": [{"role": "user", "content": question}]},
    )
    assert r.status_code == 200, r.text
    return r.headers["X-Cairn-Run-ID"]


def _elsewhere(client: TestClient) -> str:
    """A run by hank of another ladder, which reads (and writes) the scope ``(memories,
    user-1, assistant)``; its id."""
    r = client.post(
        "/v1/local/assistant/chat/completions",
        json={"user": "hank", "messages": [{"role": "user", "content": "Any news?"}]},
    )
    assert r.status_code == 200, r.text
    return r.headers["X-Cairn-Run-ID"]


def _memory_id(services: Services, marker: str) -> uuid.UUID:
    with services.store.db.engine.connect() as conn:
        found = conn.execute(
            text("SELECT id, content FROM memories WHERE user_id = 'maya' AND kind = 'turn'")
        ).all()
    return uuid.UUID(str(next(i for i, c in found if marker in c)))


def _reads(services: Services, run_id: str) -> list[tuple[str, str, str]]:
    with services.store.db.engine.connect() as conn:
        return [
            (r[0], r[1], r[2])
            for r in conn.execute(
                text(
                    "SELECT runtime_id, user_id, agent_id FROM ladder_run_reads WHERE run_id = :r"
                ),
                {"r": run_id},
            )
        ]


def _gone(client: TestClient, run_id: str) -> bool:
    return client.get(f"/v1/runs/{run_id}").status_code == 404


def test_erasing_a_partition_takes_the_runs_that_read_it(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read = _ask(client, f"Where is the {marker}?")
    other = _elsewhere(client)
    trace = _ok(client.get(f"/v1/runs/{read}"))["trace"]
    assert marker in str(trace)
    assert trace["prepare"][0]["scope"] == MAYA
    assert set(_reads(services, read)) == {("library", "maya", "")}
    assert all(p[1] == "user-1" for p in _reads(services, other))
    deleted = _ok(client.delete("/v1/scopes", params={"user_id": "maya"}))["deleted"]
    assert deleted["ladder_runs"] == 1
    assert _gone(client, read) and not _gone(client, other)
    assert _reads(services, read) == []
    assert marker not in rows_text(services)


def test_a_narrower_erasure_keeps_runs_that_read_elsewhere(world: Any) -> None:
    client, _ = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read = _ask(client, f"Where is the {marker}?")
    # Maya's partition of another runtime held nothing this run read.
    _ok(client.delete("/v1/scopes", params={"user_id": "maya", "runtime_id": "elsewhere"}))
    assert not _gone(client, read)
    _ok(client.delete("/v1/scopes", params={"user_id": "maya", "runtime_id": "library"}))
    assert _gone(client, read)


def test_forgetting_a_memory_takes_the_runs_that_read_it(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read, other = _ask(client, f"Where is the {marker}?"), _elsewhere(client)
    assert marker in str(_ok(client.get(f"/v1/runs/{read}"))["trace"])
    _ok(client.delete(f"/v1/memories/{_memory_id(services, marker)}"))
    # (The episode it was made from stays: forgetting a memory keeps the record.)
    assert _gone(client, read) and not _gone(client, other)


def test_deleting_an_episode_takes_the_runs_that_read_its_memories(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read, other = _ask(client, f"Where is the {marker}?"), _elsewhere(client)
    with services.store.db.engine.connect() as conn:
        episode = conn.execute(text("SELECT id FROM episodes WHERE user_id = 'maya'")).scalar_one()
    _ok(client.delete(f"/v1/episodes/{uuid.UUID(str(episode))}"))
    assert _gone(client, read) and not _gone(client, other)
    assert marker not in rows_text(services)


def test_deleting_a_document_takes_the_runs_that_read_its_chunks(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    doc_only = _ask(client, f"What colour is the {_doc(marker)}?")
    memory_only = _ask(client, f"Where is the {marker}?")
    assert _doc(marker) in str(_ok(client.get(f"/v1/runs/{doc_only}"))["trace"])
    assert _doc(marker) not in str(_ok(client.get(f"/v1/runs/{memory_only}"))["trace"])
    _ok(
        client.delete(
            "/v1/scopes/documents",
            params={**MAYA, "dataset_id": "handbook", "document_id": "doc-1"},
        )
    )
    assert _gone(client, doc_only) and not _gone(client, memory_only)
    assert _doc(marker) not in rows_text(services)


def test_migration_0028_records_what_stored_runs_read(db: str, tmp_path: Path) -> None:
    """Runs stored before the table existed: their reads are found from the items their
    traces name (the partition looked up), so erasing takes them too."""
    marker = "zq" + secrets.token_hex(6)
    with _server(db, tmp_path) as (client, services):
        _maya_knows(client, marker)
        read, other = _ask(client, f"Where is the {marker}?"), _elsewhere(client)
        before = {run: sorted(_reads(services, run)) for run in (read, other)}
    assert before[read]
    engine = create_engine(normalize_url(db))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0027_light_stems")
            conn.commit()
            command.upgrade(_config(conn), "heads")
            conn.commit()
    finally:
        engine.dispose()
    with _server(db, tmp_path) as (client, services):
        assert {run: sorted(_reads(services, run)) for run in (read, other)} == before
        _ok(client.delete("/v1/scopes", params={"user_id": "maya"}))
        assert _gone(client, read) and not _gone(client, other)


def test_a_run_expires_with_the_memories_it_read(world: Any) -> None:
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read, other = _ask(client, f"Where is the {marker}?"), _elsewhere(client)
    with services.store.db.write() as conn:
        conn.execute(
            update(memories)
            .where(memories.c.user_id == "maya")
            .values(created_at=utcnow() - timedelta(days=40))
        )
    _ok(client.put("/v1/retention", json={"memory_ttl_days": 30}))
    assert sweep_retention(services.store).memories_deleted > 0
    assert _gone(client, read) and not _gone(client, other)


def test_an_imported_run_goes_with_what_its_trace_read(world: Any) -> None:
    """hank's export imported as another subject: the copy of the run quotes Maya's partition
    as the original does, and erasing Maya takes both."""
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    read = _ask(client, f"Where is the {marker}?")
    lines = [json.loads(x) for x in client.get("/v1/subjects/hank/export").text.splitlines()]
    assert any(line["type"] == "run" for line in lines)
    # Run ids are unique per tenant: the copy is stored under another id.
    for line in lines:
        if line["type"] == "run":
            line["row"]["id"] = "copy-" + line["row"]["id"]
    imported = _ok(client.post("/v1/subjects/hank2/import", json={"records": lines}))
    assert imported["imported"]["run"] == 1
    copy = "copy-" + read
    # What it read, and the ids those items would have if imported here too.
    assert set(_reads(services, read)) < set(_reads(services, copy))
    _ok(client.delete("/v1/scopes", params={"user_id": "maya"}))
    assert _gone(client, read) and _gone(client, copy)
    assert marker not in rows_text(services)


def test_an_imported_run_goes_with_the_imported_memory_it_read(world: Any) -> None:
    """Maya's own run read her subject's memory; her export imported as ``maya2`` stores the
    memory under a moved id, and forgetting that copy takes the copy of the run."""
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    said = {"role": "user", "content": f"My locker code is {marker}."}
    episode = {"subject_id": "maya", "source": "chat", "type": "conversation.turn"}
    episode["payload"] = {"messages": [said]}
    _ok(client.post("/v1/episodes", json=episode), 201)
    _ok(client.post("/v1/memories/compile", json={"subject_id": "maya"}))
    read = _ask(client, f"What is the code {marker}?", agent="reader:own", user="maya")
    assert marker in str(_ok(client.get(f"/v1/runs/{read}"))["trace"])
    lines = [json.loads(x) for x in client.get("/v1/subjects/maya/export").text.splitlines()]
    for line in lines:
        if line["type"] == "run":
            line["row"]["id"] = "copy-" + line["row"]["id"]
    _ok(client.post("/v1/subjects/maya2/import", json={"records": lines}))
    copy = "copy-" + read
    assert not _gone(client, copy)
    with services.store.db.engine.connect() as conn:
        copies = conn.execute(
            text("SELECT id FROM memories WHERE user_id = 'maya2' AND status = 'active'")
        ).scalars()
        ids = [uuid.UUID(str(i)) for i in copies]
    assert ids
    for memory_id in ids:
        _ok(client.delete(f"/v1/memories/{memory_id}"))
    assert _gone(client, copy) and not _gone(client, read)


def test_a_deleted_turns_words_leave_the_runs_that_read_its_neighbours(world: Any) -> None:
    """A run read only the pottery turn, whose neighbour words held the next turn's secret;
    deleting the secret's episode takes the run."""
    client, services = world
    secret = "zq" + "".join(secrets.choice("bcdfghjklmnpqrstvwxz") for _ in range(12))
    said = ["The pottery class is on Tuesday evenings.", f"Hint: {secret}."]
    _maya_says(client, said, ["s1", "s1"])
    read = _ask(client, "When is the pottery class on Tuesday evenings?", agent="reader:own")
    trace = _ok(client.get(f"/v1/runs/{read}"))["trace"]
    assert "pottery" in str(trace["prepare"]) and f"Hint: {secret}" not in str(trace)
    assert secret in str(trace)  # in the pottery memory's neighbour words
    with services.store.db.engine.connect() as conn:
        found = conn.execute(text("SELECT id, payload FROM episodes WHERE user_id = 'maya'"))
        episode = next(i for i, p in found.all() if secret in str(p))
    _ok(client.delete(f"/v1/episodes/{uuid.UUID(str(episode))}"))
    assert _gone(client, read)
    assert secret not in rows_text(services)


def test_a_deleted_name_leaves_the_runs_that_read_it(world: Any) -> None:
    """A run read "<name> works at Acme" (a fact named by another episode); deleting the
    episode that stated the name rewrites the fact, and takes the run."""
    client, services = world
    name = "Zq" + "".join(secrets.choice("bcdfghjklmnpqrstvwxz") for _ in range(10))
    said = [f"My name is {name}.", "I work at Acme Robotics."]
    _maya_says(client, said, ["s0", "s1"])
    read = _ask(client, f"Where does {name} work at Acme Robotics?", agent="reader:own")
    trace = str(_ok(client.get(f"/v1/runs/{read}"))["trace"]["prepare"])
    assert "Acme" in trace and name in trace and "My name is" not in trace
    with services.store.db.engine.connect() as conn:
        found = conn.execute(text("SELECT id, payload FROM episodes WHERE user_id = 'maya'"))
        episode = next(i for i, p in found.all() if "My name is" in str(p))
    _ok(client.delete(f"/v1/episodes/{uuid.UUID(str(episode))}"))
    assert _gone(client, read)
    assert name.lower() not in rows_text(services).lower()


def test_a_run_expires_with_the_turn_it_committed(world: Any) -> None:
    client, services = world
    run = _elsewhere(client)  # its memory.turn hook commits the turn to user-1's scope
    with services.store.db.write() as conn:
        conn.execute(update(episodes).values(occurred_at=utcnow() - timedelta(days=40)))
    _ok(client.put("/v1/retention", json={"episode_ttl_days": 30}))
    assert sweep_retention(services.store).episodes_deleted > 0
    assert _gone(client, run)


def test_migration_0028_deletes_runs_that_read_what_is_gone(db: str, tmp_path: Path) -> None:
    """A memory forgotten before the table existed (a tombstone now): the run that read it
    still quoted it, and the upgrade deletes it."""
    marker = "zq" + secrets.token_hex(6)
    with _server(db, tmp_path) as (client, services):
        _maya_knows(client, marker)
        read, other = _ask(client, f"Where is the {marker}?"), _elsewhere(client)
        memory_id = _memory_id(services, marker)
    engine = create_engine(normalize_url(db))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0027_light_stems")
            conn.execute(
                update(memories).where(memories.c.id == memory_id).values(status="deleted")
            )
            conn.commit()
            command.upgrade(_config(conn), "heads")
            conn.commit()
    finally:
        engine.dispose()
    with _server(db, tmp_path) as (client, _):
        assert _gone(client, read) and not _gone(client, other)


def test_a_memory_forgotten_while_the_hooks_read_takes_the_run(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The memory is forgotten right after the hook has read it and before what the hook
    read is recorded: the deletion cannot see that the run read it, but the run holds its
    ``READING`` row then, so the run goes all the same (its reply is still answered)."""
    client, services = world
    marker = "zq" + secrets.token_hex(6)
    _maya_knows(client, marker)
    memory_id = _memory_id(services, marker)
    read_hook = runtime_module.run_hook

    def forget_after_reading(*args: Any) -> Any:
        entry = read_hook(*args)
        assert marker in str(entry)  # the hook read the memory
        forget_memory(services.store, "default", memory_id, "test")
        return entry

    monkeypatch.setattr(runtime_module, "run_hook", forget_after_reading)
    read = _ask(client, f"Where is the {marker}?")
    monkeypatch.undo()
    other = _elsewhere(client)
    assert _gone(client, read) and not _gone(client, other)
    assert _reads(services, read) == []
    # Once a run's reads are recorded it holds no ``READING`` row: a later deletion takes
    # only the runs that read what it deletes.
    with services.store.db.engine.connect() as conn:
        assert (
            conn.execute(text("SELECT count(*) FROM ladder_run_reads WHERE item_id = ''")).scalar()
            == 0
        )
    _ok(client.delete("/v1/scopes", params={"user_id": "maya"}))
    assert not _gone(client, other)
