"""Processes of a fleet share the background embedding: each batch is claimed by the process
that embeds it, so two processes on one partition embed every memory once between them."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from cairn.core.episodes import NewEpisode
from cairn.core.ids import utcnow
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.search import embed_memories
from cairn.store import open_store

TENANT = "default"


class _Counting(HashingEmbedder):
    """Counts the texts it embeds; slow enough that two passes overlap."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        threading.Event().wait(0.02)
        return super().embed(texts)


def test_two_processes_embed_each_memory_once(db_url: str) -> None:
    stores = [open_store(db_url), open_store(db_url)]
    try:
        scope = Scope.for_subject("fleet-embed")
        stores[0].episodes.append_many(
            TENANT,
            [
                NewEpisode(scope=scope, source="s", type="note", payload={"text": f"fact {i}"})
                for i in range(120)
            ],
        )
        while compile_scope(stores[0], TENANT, scope).has_more:
            pass
        with stores[0].snapshot() as tx:
            waiting = len(tx.memories.without_embedding(TENANT, scope))
        assert waiting >= 120
        embedders = [_Counting(), _Counting()]
        threads = [
            threading.Thread(target=embed_memories, args=(s, e, TENANT, scope), kwargs={"batch": 8})
            for s, e in zip(stores, embedders, strict=True)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        counts = [len(e.texts) for e in embedders]
        assert sum(counts) == waiting, counts  # none embedded twice
        assert all(counts), counts  # both took part
        with stores[0].snapshot() as tx:
            assert tx.memories.without_embedding(TENANT, scope) == []
    finally:
        for s in stores:
            s.close()


def test_a_claim_that_ran_out_is_taken_again(db_url: str) -> None:
    """A process that claimed a batch and died: once the claim runs out another takes it."""
    store = open_store(db_url)
    try:
        scope = Scope.for_subject("dead-claim")
        store.episodes.append_many(
            TENANT, [NewEpisode(scope=scope, source="s", type="note", payload={"text": "a fact"})]
        )
        compile_scope(store, TENANT, scope)
        now = utcnow()
        with store.transaction() as tx:
            taken = tx.memories.claim_waiting(TENANT, scope, 10, now, timedelta(seconds=60))
        assert taken
        with store.transaction() as tx:
            assert tx.memories.claim_waiting(TENANT, scope, 10, now, timedelta(seconds=60)) == []
        later = now + timedelta(seconds=61)
        with store.transaction() as tx:
            again = tx.memories.claim_waiting(TENANT, scope, 10, later, timedelta(seconds=60))
        assert [r[0] for r in again] == [r[0] for r in taken]
    finally:
        store.close()
