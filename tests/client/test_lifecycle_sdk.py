"""The SDK's lifecycle methods through the real app in-process, both backends: remember,
get/update/delete a memory, get/delete an episode, export and import a subject, erase a
person (sync), and the same surface on ``AsyncCairn``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.client import AsyncCairn, Cairn, ConflictError, NotFoundError
from cairn.services import Services
from tests.conftest import make_settings

MESSAGES = [
    "Hi, my name is Dana Scully.",
    {"role": "assistant", "content": "Nice to meet you, Dana!"},
    "I work at the FBI in Washington.",
]


@pytest.fixture
def client(backend_services: Services) -> Iterator[Cairn]:
    with Cairn.local(services=backend_services) as c:
        yield c


def test_remember_correct_forget_export_erase(client: Cairn) -> None:
    learnt = client.remember("u1", MESSAGES, session_id="s1")
    assert learnt.memories_created == len(learnt.memories) >= 3
    fact = next(m for m in learnt.memories if m.kind == "profile_fact" and "FBI" in m.content)

    detail = client.memories.get(fact.id)
    assert detail.memory.id == fact.id and detail.current_id == fact.id
    assert detail.memory.scope == {"runtime_id": "default", "user_id": "u1", "agent_id": ""}
    new = client.memories.update(fact.id, content="User works at the CIA", editor="Ana")
    assert new.metadata["correction"]["replaces"] == str(fact.id)
    with pytest.raises(ConflictError) as conflict:
        client.memories.update(fact.id, confidence=0.3)
    assert conflict.value.code == "memory_superseded"
    assert conflict.value.details["current_id"] == str(new.id)
    assert client.memories.get(fact.id).current_id == new.id
    assert client.memories.search("u1", "CIA").memories[0].id == new.id
    # Without a query: a listing of the kinds asked for (Statewave's search by kind).
    listed = client.memories.search("u1", kinds=["profile_fact"], limit=50).memories
    assert new.id in {m.id for m in listed} and all(m.kind == "profile_fact" for m in listed)
    assert all(m.score is None for m in listed)
    assert client.memories.delete(new.id).deleted
    with pytest.raises(NotFoundError) as gone:
        client.memories.get(new.id)
    assert gone.value.code == "memory_not_found"

    episode_id = fact.source_episode_ids[0]
    assert client.episodes.get(episode_id).payload["messages"][0]["content"] == MESSAGES[2]
    records = list(client.subjects.export("u1"))
    assert records[0]["type"] == "header" and len(records) > 5
    before = client.timeline("u1")
    assert client.subjects.delete("u1").deleted["episodes"] == 3
    # Ids are unique in a database: the same database restores what is missing.
    result = client.subjects.import_records("u1", records)
    assert result.imported["episode"] == 3 and result.skipped == 0
    assert client.timeline("u1") == before
    again = client.subjects.import_records("u1", records)
    assert again.skipped == len(records) - 1
    # Each skipped record is named by its place among the records given (the header is 0).
    assert [(s.record, s.reason) for s in again.skipped_records] == [
        (i, "stored") for i in range(1, len(records))
    ]
    assert client.episodes.delete(episode_id).episode_id == episode_id
    with pytest.raises(NotFoundError):
        client.episodes.get(episode_id)

    erased = client.scopes.delete("u1")
    assert erased.deleted["episodes"] == 2 and erased.partitions
    assert client.timeline("u1").episodes == []


def test_async_lifecycle(tmp_path: Path) -> None:
    async def run() -> None:
        async with AsyncCairn.local(make_settings(tmp_path)) as c:
            learnt = await c.remember("u1", MESSAGES)
            fact = next(m for m in learnt.memories if "FBI" in m.content)
            new = await c.memories.update(fact.id, content="User works at the CIA")
            assert (await c.memories.get(fact.id)).current_id == new.id
            assert (await c.memories.delete(new.id)).deleted
            records = [r async for r in c.subjects.export("u1")]
            assert (await c.scopes.delete("u1")).deleted["episodes"] == 3
            assert (await c.subjects.import_records("u1", records)).imported["episode"] == 3
            episode = await c.episodes.get(fact.source_episode_ids[0])
            assert (await c.episodes.delete(episode.id)).episode_id == episode.id
            with pytest.raises(TypeError):
                await c.memories.update(fact.id, colour="red")

    asyncio.run(run())


def test_a_subject_of_long_messages_exports_and_imports_back(client: Cairn) -> None:
    # A message as long as a body may be becomes a memory of the same length (with its
    # summary and metadata); its export record must import, and many long records are sent
    # in batches the server takes.
    long = " ".join(f"word{i}" for i in range(90_000))  # ~890 KB
    assert 800_000 < len(long) < 1_000_000
    client.remember("big", [long], session_id="s1")
    client.remember("big", [f"note {n} " + "x" * 30_000 for n in range(20)], session_id="s2")
    records = list(client.subjects.export("big"))
    memory = next(r for r in records if r["type"] == "memory" and long in r["row"]["content"])
    assert "search_text" not in memory["row"]

    def contents(records: list[dict[str, object]]) -> list[object]:
        return sorted(str(r["row"]["content"]) for r in records if r["type"] == "memory")  # type: ignore[index]

    client.subjects.delete("big")
    result = client.subjects.import_records("big", records)
    assert result.imported["episode"] == 21 and result.skipped == 0
    assert contents(list(client.subjects.export("big"))) == contents(records)
    # (its first 100,000 analysed characters are indexed: PostgreSQL bounds a tsvector)
    assert long in client.memories.search("big", "word5000").memories[0].content
