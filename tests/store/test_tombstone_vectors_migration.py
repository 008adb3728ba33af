"""Migration 0035, both backends: a tombstone's vector (left by an older release that embedded
a memory while it was forgotten, then copied by 0020) and its wait are removed; a live
memory's are kept."""

from __future__ import annotations

from alembic import command
from sqlalchemy import create_engine, insert, select

from cairn.core.scope import Scope
from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from cairn.store.schema import memories, memory_embeddings, memory_vector_waits
from tests.store.rows import memory_row

A = Scope.for_subject("forgotten")


def test_0035_removes_the_vectors_and_waits_of_tombstones(db_url: str) -> None:
    store = open_store(db_url)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new(
                [
                    memory_row(A, "Alice prefers email"),
                    memory_row(A, "", status="deleted", search_text="", summary=""),
                ]
            )
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    try:
        with engine.begin() as conn:
            command.downgrade(_config(conn), "0034_zero_width_joiners")
            seqs = dict(conn.execute(select(memories.c.status, memories.c.seq)).all())
            conn.execute(memory_vector_waits.delete())
            for seq in seqs.values():  # as an older release left them
                conn.execute(insert(memory_embeddings).values(seq=seq, embedding=b"\x00" * 8))
                conn.execute(
                    insert(memory_vector_waits).values(
                        seq=seq,
                        tenant_id="acme",
                        runtime_id=A.runtime_id,
                        user_id=A.user_id,
                        agent_id=A.agent_id,
                    )
                )
    finally:
        engine.dispose()
    store = open_store(db_url)  # migrates: 0035 again
    try:
        with store.db.read() as conn:
            vectors = set(conn.execute(select(memory_embeddings.c.seq)).scalars())
            waits = set(conn.execute(select(memory_vector_waits.c.seq)).scalars())
        assert vectors == waits == {seqs["active"]}
    finally:
        store.close()
