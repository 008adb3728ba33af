"""Every method of ``AsyncCairn``, through the real app in-process (``httpx.ASGITransport``)."""

from __future__ import annotations

import asyncio

import pytest

from cairn.client import AsyncCairn, InvalidRequestError, NotFoundError
from cairn.config import Settings


async def _every_method(c: AsyncCairn) -> None:
    assert (await c.health()).status == "ok"
    assert (await c.ready()).status == "ready"
    assert (await c.version()).database in ("sqlite", "postgresql")
    ep = await c.episodes.create(
        "u-1",
        source="chat",
        type="message",
        session_id="s",
        payload={"text": "I live in Lisbon"},
        idempotency_key="k",
    )
    assert (
        await c.episodes.create(
            "u-1", source="chat", type="message", payload={}, idempotency_key="k"
        )
    ).id == ep.id
    batch = await c.episodes.create_many(
        [{"subject_id": "u-2", "source": "s", "type": "t", "payload": {"i": i}} for i in range(2)]
    )
    assert batch.episodes_created == 2
    assert len((await c.timeline("u-2")).episodes) == 2
    assert (await c.subjects.list()).total == 2
    compiled = await c.memories.compile("u-1")
    assert compiled.memories_created >= 1
    assert (await c.memories.search("u-1", "Lisbon")).memories
    queued = await c.memories.compile_async("u-2")
    job = await c.memories.wait(queued.job_id, timeout=30, interval=0.05)
    assert (await c.memories.job(queued.job_id)).job_id == job.job_id
    bundle = await c.context("u-1", "where does the user live?", session_id="s")
    assert "Lisbon" in bundle.assembled_context
    templates = await c.templates.list()
    assert (await c.templates.get(templates[0].id)).id == templates[0].id
    applied = await c.templates.apply(
        "user-preference", "u-3", {"subject": "food", "preference": "spicy"}
    )
    assert applied.type == "profile.preference"
    scope = {"runtime_id": "r", "user_id": "u"}
    turn = await c.scopes.commit_turn(scope, "c", "t-1", [{"role": "user", "content": "hello"}])
    assert turn.created
    doc = await c.scopes.put_document(scope, "ds", "d", "Some text.", idempotency_key="d")
    assert doc.chunk_count >= 1
    gone = await c.scopes.delete_document(scope, "ds", "d")
    assert gone.documents_deleted == 1 and gone.chunks_deleted == doc.chunk_count
    doc = await c.scopes.put_document(scope, "ds", "d", "Some text.", idempotency_key="d")
    assert doc.created  # stored anew after its deletion
    assert (await c.scopes.context(scope, "hello", conversation_id="c")).items
    assert (await c.slates.list()).slates[0].ladder == "notes"
    assert (await c.slates.write("notes", "Memory", "facts", "core.md", "x y z")).written
    assert await c.slates.read("notes", "Memory", "facts", "core.md", peek=True) == "x y z"
    assert (await c.slates.tree("notes", "Memory", depth=1))["slate"] == "Memory"
    assert isinstance(await c.slates.metatag("notes", "Memory", "facts", "core.md", "index"), list)
    assert (await c.slates.evictions("notes", "Memory")).evictions == []
    assert (await c.slates.delete("notes", "Memory", "facts", "core.md"))["entries_deleted"] == 1
    assert (await c.slates.reset("notes", "Memory", "facts"))["reset"] is True
    assert (await c.ladders.models()).data[0].id == "notes"
    assert (await c.ladders.chat("notes", [{"role": "user", "content": "hi"}])).text == "echo!"
    streamed = [ch async for ch in c.ladders.stream("notes", [{"role": "user", "content": "hi"}])]
    assert "".join(ch.text for ch in streamed) == "echo!"
    assert streamed[-1].choices[0]["finish_reason"] == "stop"
    runs = await c.runs.list()
    assert (await c.runs.get(runs.runs[0].id)).status == "completed"
    assert (await c.request("GET", "/v1/version"))["version"]
    assert (await c.subjects.delete("u-2")).episodes_deleted == 2
    with pytest.raises(InvalidRequestError) as info:
        await c.timeline("bad/id")
    assert info.value.code == "validation_error" and info.value.request_id
    with pytest.raises(NotFoundError):
        await c.templates.get("nope")


def test_every_async_method_in_process_on_each_backend(sdk_settings: Settings, db_url: str) -> None:
    # A compile worker in the process (the default only on SQLite) runs the queued job.
    settings = sdk_settings.model_copy(update={"database_url": db_url, "worker_in_process": True})

    async def main() -> None:
        async with AsyncCairn.local(settings) as c:
            await _every_method(c)

    asyncio.run(main())
