"""A memory forgotten or corrected while a deletion takes a stated name out of it (and gives
it the id of its new text): once the forget or correction holds the partition's lock it reads
the memory again, so it never answers "done" for an id that is gone (PostgreSQL reads what
committed before each statement; on SQLite the writer lock keeps the two apart)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine import lifecycle as lifecycle_module
from cairn.engine.compile import compile_scope
from cairn.engine.lifecycle import MemoryCorrection
from cairn.errors import NotFound
from cairn.store import Store
from cairn.store.lifecycle import LifecycleRepository

TENANT = "t1"


def _named(store: Store) -> tuple[Scope, list[Any], Any]:
    scope = Scope.for_subject("race")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    made, _ = store.episodes.append_many(
        TENANT,
        [
            NewEpisode(
                scope=scope,
                source="t",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "content": text}]},
                occurred_at=t0 + timedelta(days=i),
            )
            for i, text in enumerate(["My name is Zorblax.", "I live in Paris."])
        ],
    )
    compile_scope(store, TENANT, scope)
    with store.snapshot() as tx:
        memories = tx.memories.list(TENANT, scope)
    fact = next(m for m in memories if m.content == "Zorblax lives in Paris")
    return scope, made, fact


@pytest.mark.parametrize("action", ["forget", "correct"])
def test_a_memory_renamed_meanwhile_is_not_acted_on_under_its_old_id(
    store: Store, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    scope, episodes, fact = _named(store)
    real_memory = LifecycleRepository.memory
    reads: list[int] = []
    deleting: list[threading.Thread] = []

    def memory_then_delete(self: Any, tenant_id: str, memory_id: Any) -> Any:
        got = real_memory(self, tenant_id, memory_id)
        reads.append(1)
        if len(reads) == 1:  # after the first read, the name's episode is deleted
            worker = threading.Thread(
                target=lifecycle_module.delete_episode, args=(store, TENANT, episodes[0].id)
            )
            worker.start()
            deleting.append(worker)
            if not store.db.is_sqlite:  # SQLite: the deletion waits for this transaction
                worker.join(30)
                assert not worker.is_alive()
        return got

    monkeypatch.setattr(LifecycleRepository, "memory", memory_then_delete)
    try:
        if action == "forget":
            lifecycle_module.forget_memory(store, TENANT, fact.id, "tester")
        else:
            change = MemoryCorrection(content="Zorblax lives in Lyon")
            lifecycle_module.correct_memory(store, TENANT, fact.id, change, "tester")
        acted = True
    except NotFound:
        acted = False
    finally:
        for worker in deleting:
            worker.join(30)
    monkeypatch.undo()
    with store.snapshot() as tx:
        left = {m.content: m for m in tx.memories.list(TENANT, scope)}
    assert not any("Zorblax" in content for content in left)
    if store.db.is_sqlite:
        assert acted  # it held the writer first; the deletion came after
        return
    assert not acted  # the old id is gone: a 404, not a "done" that changed nothing
    paris = left["User lives in Paris"]
    assert paris.status == "active" and paris.id != fact.id
