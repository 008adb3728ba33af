"""Reading memories and their ranking facts by ``seq`` (the search's per-request reads): one
statement for any number of seqs on both backends (SQLite: a JSON array; PostgreSQL: one
``bigint[]``), never a row of another partition, unknown and repeated seqs harmless."""

from __future__ import annotations

from typing import Any

import numpy as np

from cairn.core.scope import Scope
from cairn.store import Store
from tests.store.rows import memory_row

A = Scope.for_subject("ana")
B = Scope.for_subject("ben")


def _row(scope: Scope, i: int) -> dict[str, Any]:
    """Facts and turns of several speakers (Cyrillic names), confidences 0.5-0.9."""
    return memory_row(
        scope,
        f"{scope.user_id} note {i} 北京 café",
        kind="turn" if i % 2 else "fact",
        confidence=0.5 + (i % 5) / 10,
        metadata={"speaker": f"Спикер {i % 3}"} if i % 2 else {},
    )


def test_reads_by_seq_keep_to_the_partition(store: Store) -> None:
    with store.transaction() as tx:
        inserted = tx.memories.insert_new([_row(A, i) for i in range(700)])
        inserted_b = tx.memories.insert_new([_row(B, i) for i in range(30)])
    with store.snapshot() as tx:  # as stored, with their seqs
        mine = tx.memories.by_ids("acme", [m.id for m in inserted])
        theirs = tx.memories.by_ids("acme", [m.id for m in inserted_b])
    assert len(mine) == 700 and len(theirs) == 30
    mine_seqs = [m.seq for m in mine]
    other = [m.seq for m in theirs]
    unknown = max(mine_seqs + other) + 1_000
    by_seq = {m.seq: m for m in mine}
    with store.snapshot() as tx:
        for count in (1, 7, 160, 501, 700):  # any count, past a 500-seq chunk too
            asked = mine_seqs[:count] + other + [unknown, mine_seqs[0]]
            # numpy integers, as a vector lane's candidates may be
            found = tx.memories.by_seqs("acme", A, list(np.asarray(asked, dtype=np.int64)))
            assert set(found) == set(mine_seqs[:count])
            assert all(found[s].content == by_seq[s].content for s in found)
            facts = tx.memories.rank_facts("acme", A, asked)
            assert set(facts) == set(mine_seqs[:count])
            for seq, (confidence, status, kind, speaker) in facts.items():
                m = by_seq[seq]
                assert (confidence, status, kind) == (m.confidence, "active", m.kind)
                assert speaker == m.metadata.get("speaker", "")
        assert tx.memories.by_seqs("acme", A, []) == {}
        assert tx.memories.rank_facts("acme", A, []) == {}
        assert tx.memories.by_seqs("acme", B, mine_seqs) == {}
