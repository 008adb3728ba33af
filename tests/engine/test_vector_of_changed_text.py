"""The embedding pass never stores a vector of text a memory no longer holds (both backends):
a memory whose text or neighbour words change while its vector is computed (a name erased
from it, say) gets no vector from that pass and keeps waiting; the next pass embeds what it
says now."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select, update

from cairn.core.scope import Scope
from cairn.engine.search import embed_memories
from cairn.store import Store
from cairn.store.schema import memories, memory_embeddings, memory_vector_waits
from tests.store.rows import memory_row

A = Scope.for_subject("changing")


class ChangingEmbedder:
    """Runs ``change`` once, while the pass computes its first batch (as another request
    would, between the pass's read and its write)."""

    name = "changing"
    dim = 4

    def __init__(self, change: Callable[[], None]) -> None:
        self.change: Callable[[], None] | None = change
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        if self.change is not None:
            self.change()
            self.change = None
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]


def _seqs(store: Store) -> list[int]:
    with store.db.read() as conn:
        return [
            int(s) for s in conn.execute(select(memories.c.seq).order_by(memories.c.seq)).scalars()
        ]


def _state(store: Store) -> tuple[set[int], set[int]]:
    """(seqs with a vector, seqs waiting for one)."""
    with store.db.read() as conn:
        vectors = {int(s) for s in conn.execute(select(memory_embeddings.c.seq)).scalars()}
        waiting = {int(s) for s in conn.execute(select(memory_vector_waits.c.seq)).scalars()}
    return vectors, waiting


def test_a_text_rewritten_while_it_is_embedded_gets_no_vector_of_the_old_text(
    store: Store,
) -> None:
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"Ana met Bo on day {i}") for i in range(3)])
    first, second, _ = _seqs(store)

    def erase_a_name() -> None:
        with store.db.read() as conn:
            memory_id = conn.execute(
                select(memories.c.id).where(memories.c.seq == first)
            ).scalar_one()
        with store.transaction() as tx:
            found = tx.lifecycle.memory("acme", memory_id)
            assert found is not None
            tx.lifecycle.rewrite(
                found, ("met on day 0", "met on day 0", {}), "h0", found.updated_at
            )

    def drop_neighbour_words() -> None:
        with store.db.write() as conn:
            conn.execute(
                update(memories)
                .where(memories.c.seq == second)
                .values(metadata={"context_terms": "day"})
            )

    def both() -> None:
        erase_a_name()
        drop_neighbour_words()

    embedder = ChangingEmbedder(both)
    embed_memories(store, embedder, "acme", A, batch=10, max_batches=1)
    assert any("Ana" in t for t in embedder.texts)  # the pass read the old texts
    vectors, waiting = _state(store)
    assert first not in vectors and second not in vectors
    assert {first, second} <= waiting and len(vectors) == 1
    # The next pass embeds what they say now.
    again = ChangingEmbedder(lambda: None)
    embed_memories(store, again, "acme", A, batch=10)
    assert sorted(again.texts) == ["Ana met Bo on day 1 (day)", "met on day 0"]
    vectors, waiting = _state(store)
    assert len(vectors) == 3 and not waiting
