"""The memories waiting for a vector (``memory_vector_waits``, migration 0030), both backends:
a stored memory waits, its vector ends the wait without touching its row, a text change or
another embedder's vector makes it wait again, a tombstone never waits, erasure takes the
rows; and the migration moves ``vector_size`` both ways."""

from __future__ import annotations

import numpy as np
from alembic import command
from sqlalchemy import create_engine, inspect, select, text

from cairn.core.scope import Scope
from cairn.store import Store, open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.partitions import PartitionSelector
from cairn.store.schema import memories, memory_vector_waits
from tests.store.rows import memory_row

A = Scope.for_subject("waits-a")
B = Scope.for_subject("waits-b")
BLOB = np.ones(4, dtype="<f4").tobytes()


def _waiting(store: Store) -> set[int]:
    with store.db.read() as conn:
        return {int(s) for s in conn.execute(select(memory_vector_waits.c.seq)).scalars()}


def _row_versions(store: Store, seqs: list[int]) -> dict[int, str]:
    """Each row's version: PostgreSQL's ``xmin`` (a new one for every update of the row);
    SQLite updates in place, so its rows' whole content stands for it."""
    with store.db.read() as conn:
        if store.db.is_sqlite:
            rows = conn.execute(select(memories).where(memories.c.seq.in_(seqs))).all()
            return {int(r.seq): repr(tuple(r)) for r in rows}
        found = conn.execute(
            text("SELECT seq, xmin::text FROM memories WHERE seq = ANY(:s)"), {"s": seqs}
        )
        return {int(r[0]): str(r[1]) for r in found}


def test_a_memory_waits_until_its_vector_is_written(store: Store) -> None:
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"note {i}") for i in range(4)])
        tx.memories.insert_new([memory_row(B, "other")])
        tx.memories.insert_new([memory_row(A, "", status="deleted")])
    with store.snapshot() as tx:
        a = [seq for seq, _, _ in tx.memories.without_embedding("acme", A)]
        b = [seq for seq, _, _ in tx.memories.without_embedding("acme", B)]
        assert len(a) == 4 and len(b) == 1  # a tombstone never waits
        parts = tx.memories.partitions_without_embedding()
        assert {(t, s.user_id) for t, s in parts} == {("acme", A.user_id), ("acme", B.user_id)}
    assert _waiting(store) == {*a, *b}

    before = _row_versions(store, a)
    with store.transaction() as tx:
        tx.memories.set_embeddings("acme", A, [(s, BLOB) for s in a])
    # Writing a vector ends the wait and leaves the memory's row as it was (PostgreSQL: no
    # new row version, so no dead copy and no new index entries).
    assert _row_versions(store, a) == before
    assert _waiting(store) == set(b)
    with store.snapshot() as tx:
        assert tx.memories.vector_count("acme", A) == 4
        assert tx.memories.unembedded_count("acme", A, 10) == 0
        assert [(t, s.user_id) for t, s in tx.memories.partitions_without_embedding()] == [
            ("acme", B.user_id)
        ]

    # Another embedder's vector (another byte length) is dropped: the memory waits again.
    with store.transaction() as tx:
        tx.memories.set_embeddings("acme", A, [(a[0], np.ones(2, "<f4").tobytes())])
        assert tx.memories.drop_vectors_of_other_size(len(BLOB)) == 1
    assert _waiting(store) == {a[0], *b}

    # A rewrite of the text drops the vector: the memory waits for one of the new text.
    with store.db.read() as conn:
        memory_id = conn.execute(select(memories.c.id).where(memories.c.seq == a[1])).scalar()
    with store.transaction() as tx:
        found = tx.lifecycle.memory("acme", memory_id)
        assert found is not None
        tx.lifecycle.rewrite(found, ("new text", "new text", {}), "hash-new", found.updated_at)
    assert a[1] in _waiting(store)

    # Forgotten: a tombstone waits for nothing (the rewrite gave the memory a new id).
    with store.db.read() as conn:
        memory_id = conn.execute(select(memories.c.id).where(memories.c.seq == a[1])).scalar()
    with store.transaction() as tx:
        found = tx.lifecycle.memory("acme", memory_id)
        assert found is not None
        tx.lifecycle.forget(found, "test", found.updated_at)
    assert a[1] not in _waiting(store)

    # Erasure takes the partition's waiting rows (registered, and cascading on both).
    with store.transaction() as tx:
        tx.lifecycle.erase(PartitionSelector.of_scope("acme", A))
    assert _waiting(store) == set(b)


def test_0030_moves_the_waiting_rows_out_of_memories_and_back(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new([memory_row(A, f"moved {i}") for i in range(3)])
            tx.memories.insert_new([memory_row(A, "", status="deleted")])
        with store.snapshot() as tx:
            seqs = [seq for seq, _, _ in tx.memories.without_embedding("acme", A)]
        with store.transaction() as tx:
            tx.memories.set_embeddings("acme", A, [(seqs[0], BLOB)])
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.connect() as conn:
            command.downgrade(_config(conn), "0029_slate_reads")
            conn.commit()
            assert "memory_vector_waits" not in inspect(conn).get_table_names()
            sizes = conn.execute(
                text("SELECT seq, vector_size FROM memories WHERE content LIKE 'moved%'")
            ).all()
            assert dict(sizes) == {seqs[0]: len(BLOB), seqs[1]: None, seqs[2]: None}
            # As the code before 0030 wrote a vector: the row says so.
            conn.execute(
                text("INSERT INTO memory_embeddings (seq, embedding) VALUES (:s, :e)"),
                {"s": seqs[1], "e": BLOB},
            )
            conn.execute(
                text("UPDATE memories SET vector_size = :n WHERE seq = :s"),
                {"s": seqs[1], "n": len(BLOB)},
            )
            conn.commit()
        open_store(db_url).close()  # migrates: 0030 again
        with engine.connect() as conn:
            assert "vector_size" not in {c["name"] for c in inspect(conn).get_columns("memories")}
            waiting = conn.execute(text("SELECT seq FROM memory_vector_waits")).scalars()
            assert [int(s) for s in waiting] == [seqs[2]]  # not the tombstone either
    finally:
        engine.dispose()
    store = open_store(db_url)
    try:  # the trigger is back: a new memory waits
        with store.transaction() as tx:
            tx.memories.insert_new([memory_row(A, "after")])
        assert len(_waiting(store)) == 2
    finally:
        store.close()
