"""Memories' vectors in their own table (``memory_embeddings``, migration 0020), both backends:
written only for rows still stored, read per partition, gone with their memory (forgotten,
erased, deleted with its episode), and moved out of the rows by the migration."""

from __future__ import annotations

import numpy as np
from alembic import command
from sqlalchemy import create_engine, inspect, select, text

from cairn.core.scope import Scope
from cairn.store import Store, open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.partitions import PartitionSelector
from cairn.store.schema import memories, memory_embeddings
from tests.store.rows import memory_row

A = Scope.for_subject("vectors-a")
B = Scope.for_subject("vectors-b")


def _blob(x: float) -> bytes:
    return np.full(4, x, dtype="<f4").tobytes()


def _stored(store: Store) -> dict[int, bytes]:
    with store.db.read() as conn:
        rows = conn.execute(select(memory_embeddings.c.seq, memory_embeddings.c.embedding))
        return {int(r[0]): bytes(r[1]) for r in rows}


def _embedded(store: Store, scope: Scope) -> list[int]:
    with store.snapshot() as tx:
        return [seq for seq, _, _ in tx.memories.without_embedding("acme", scope)]


def test_vectors_live_beside_their_memories_and_leave_with_them(store: Store) -> None:
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"note {i}") for i in range(5)])
        tx.memories.insert_new([memory_row(B, f"other {i}") for i in range(2)])
    a, b = _embedded(store, A), _embedded(store, B)
    with store.transaction() as tx:
        tx.memories.set_embeddings("acme", A, [(s, _blob(s)) for s in a])
        # A row of another partition (or one erased since it was read) is not written.
        tx.memories.set_embeddings("acme", A, [(b[0], _blob(9.0)), (10**9, _blob(9.0))])
    assert _stored(store) == {s: _blob(s) for s in a}
    with store.snapshot() as tx:
        assert tx.memories.vector_count("acme", A) == 5
        assert tx.memories.unembedded_count("acme", A, 100) == 0
        assert tx.memories.vectors("acme", A).seqs == a
        assert tx.memories.vectors("acme", A, after=a[2]).blobs == [_blob(s) for s in a[3:]]
        pages = list(tx.memories.vector_pages("acme", A, 2))
        assert [p.seqs for p in pages] == [a[:2], a[2:4], a[4:]]
    with store.transaction() as tx:  # written again: replaced, not doubled
        tx.memories.set_embeddings("acme", A, [(a[0], _blob(7.0))])
    assert _stored(store)[a[0]] == _blob(7.0) and len(_stored(store)) == 5

    # Forgotten: the tombstone keeps no vector.
    with store.db.read() as conn:
        forgotten_id = conn.execute(select(memories.c.id).where(memories.c.seq == a[1])).scalar()
    with store.transaction() as tx:
        found = tx.lifecycle.memory("acme", forgotten_id)
        assert found is not None
        tx.lifecycle.forget(found, "test", found.updated_at)
    assert a[1] not in _stored(store)
    with store.transaction() as tx:  # a vector computed before it was forgotten arrives late
        tx.memories.set_embeddings("acme", A, [(a[1], _blob(5.0))])
    assert a[1] not in _stored(store)
    with store.snapshot() as tx:
        assert tx.memories.vector_count("acme", A) == 4
        assert tx.memories.unembedded_count("acme", A, 100) == 0  # a tombstone never waits

    # Other sizes (another embedder's) are dropped, to be embedded again.
    with store.transaction() as tx:
        tx.memories.set_embeddings("acme", B, [(b[0], np.ones(2, "<f4").tobytes())])
        assert tx.memories.drop_vectors_of_other_size(16) == 1
    assert b[0] not in _stored(store)

    # Erasing the partition takes its vectors (a foreign key cascades on both backends).
    with store.transaction() as tx:
        tx.lifecycle.erase(PartitionSelector.of_scope("acme", A))
    assert _stored(store) == {}


def test_0020_moves_stored_vectors_out_of_the_rows(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new([memory_row(A, f"moved {i}") for i in range(3)])
        seqs = _embedded(store, A)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0019_inline_fts")
            conn.commit()
            assert "embedding" in {c["name"] for c in inspect(conn).get_columns("memories")}
            conn.execute(
                text("UPDATE memories SET embedding = :e WHERE seq = :s"),
                [{"s": s, "e": _blob(s)} for s in seqs[:2]],
            )
            conn.commit()
        open_store(db_url).close()  # migrates: 0020 moves them
        with engine.connect() as conn:
            assert "embedding" not in {c["name"] for c in inspect(conn).get_columns("memories")}
            moved = conn.execute(text("SELECT seq, embedding FROM memory_embeddings")).all()
            assert {int(r[0]): bytes(r[1]) for r in moved} == {s: _blob(s) for s in seqs[:2]}
            # (0030 then keeps the one without a vector among the rows waiting for one.)
            waiting = conn.execute(
                text("SELECT seq FROM memory_vector_waits WHERE seq IN (:a, :b, :c)"),
                {"a": seqs[0], "b": seqs[1], "c": seqs[2]},
            ).all()
            assert [int(r[0]) for r in waiting] == [seqs[2]]
    finally:
        engine.dispose()
    store = open_store(db_url)
    try:
        with store.snapshot() as tx:
            assert tx.memories.unembedded_count("acme", A, 100) == 1  # the one without
            assert tx.memories.vectors("acme", A).blobs == [_blob(s) for s in seqs[:2]]
    finally:
        store.close()
