"""``unembedded_count``: a partition's memories still waiting for a vector, counted up to a
cap, deleted ones aside, other partitions never (both backends)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import update

from cairn.core.scope import Scope
from cairn.store import Store
from cairn.store.schema import memories
from tests.store.rows import memory_row

A = Scope.for_subject("waiting")
B = Scope.for_subject("other")


def test_counts_the_partitions_rows_without_a_vector_up_to_the_cap(store: Store) -> None:
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"note {i}") for i in range(6)])
        tx.memories.insert_new([memory_row(B, f"other {i}") for i in range(4)])
    with store.snapshot() as tx:
        seqs = [seq for seq, _, _ in tx.memories.without_embedding("acme", A)]
        assert len(seqs) == 6
        assert tx.memories.unembedded_count("acme", A, 100) == 6
        assert tx.memories.unembedded_count("acme", A, 4) == 4  # the cap
        assert tx.memories.unembedded_count("acme", A, 0) == 0
    blob = np.ones(4, dtype="<f4").tobytes()
    with store.transaction() as tx:
        tx.memories.set_embeddings("acme", A, [(s, blob) for s in seqs[:2]])
    with store.db.write() as conn:
        conn.execute(update(memories).where(memories.c.seq == seqs[2]).values(status="deleted"))
    with store.snapshot() as tx:
        assert tx.memories.unembedded_count("acme", A, 100) == 3  # 2 embedded, 1 deleted
        assert tx.memories.unembedded_count("acme", B, 100) == 4
        assert tx.memories.unembedded_count("other-tenant", A, 100) == 0
