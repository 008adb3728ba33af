"""Both backends weigh a query term by its rarity in the subject searched, not in the
tenant: a word most of another subject's memories hold is still a rare, telling word in a
subject where one memory holds it (issue 14: SQLite's FTS5 ``bm25`` alone takes its IDF
over the tenant's whole index)."""

from __future__ import annotations

from cairn.core.scope import Scope
from cairn.engine.query import ranking_terms
from cairn.store import Store
from tests.store.rows import memory_row

A = Scope.for_subject("alice")
B = Scope.for_subject("bob")


def test_a_term_weighs_its_rarity_in_the_subject(store: Store) -> None:
    # In alice's memories "oslo" is in one, "bergen" in two; in bob's "oslo" is in forty.
    alice = [f"harbour walk number {i}" for i in range(20)]
    alice += ["harbour oslo", "bergen harbour", "bergen market"]
    bob = [f"oslo office day {i}" for i in range(40)]
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, c) for c in alice] + [memory_row(B, c) for c in bob])
    with store.snapshot() as tx:
        found = tx.memories.lexical("acme", A, ranking_terms("oslo bergen"), limit=10)
        seqs = [seq for seq, _ in found]
        content = {seq: m.content for seq, m in tx.memories.by_seqs("acme", A, seqs).items()}
    ranked = [content[seq] for seq in seqs]
    assert set(ranked) == {"harbour oslo", "bergen harbour", "bergen market"}
    # The subject's rarest word first (over the tenant, "oslo" would be the common one).
    assert ranked[0] == "harbour oslo"
