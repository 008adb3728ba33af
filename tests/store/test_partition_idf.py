"""Both backends weigh a query term by its rarity in the subject searched, not in the
tenant: a word most of another subject's memories hold is still a rare, telling word in a
subject where one memory holds it (issue 14: SQLite's FTS5 ``bm25`` alone takes its IDF
over the tenant's whole index)."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from cairn.core.scope import Scope
from cairn.engine.query import ranking_terms
from cairn.store import Store
from cairn.store.memory_search import search_text

A = Scope.for_subject("alice")
B = Scope.for_subject("bob")
NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _row(scope: Scope, content: str) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "tenant_id": "acme",
        "runtime_id": scope.runtime_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "session_id": "s",
        "kind": "turn",
        "content": content,
        "search_text": search_text(content, {}),
        "summary": content,
        "confidence": 1.0,
        "valid_from": NOW,
        "valid_to": None,
        "status": "active",
        "source_episode_ids": [],
        "metadata": {},
        "content_hash": hashlib.sha256(f"{scope.user_id}{content}".encode()).hexdigest(),
        "superseded_by": None,
        "created_at": NOW,
        "updated_at": NOW,
    }


def test_a_term_weighs_its_rarity_in_the_subject(store: Store) -> None:
    # In alice's memories "oslo" is in one, "bergen" in two; in bob's "oslo" is in forty.
    alice = [f"harbour walk number {i}" for i in range(20)]
    alice += ["harbour oslo", "bergen harbour", "bergen market"]
    bob = [f"oslo office day {i}" for i in range(40)]
    with store.transaction() as tx:
        tx.memories.insert_new([_row(A, c) for c in alice] + [_row(B, c) for c in bob])
    with store.snapshot() as tx:
        found = tx.memories.lexical("acme", A, ranking_terms("oslo bergen"), limit=10)
        seqs = [seq for seq, _ in found]
        content = {seq: m.content for seq, m in tx.memories.by_seqs("acme", A, seqs).items()}
    ranked = [content[seq] for seq in seqs]
    assert set(ranked) == {"harbour oslo", "bergen harbour", "bergen market"}
    # The subject's rarest word first (over the tenant, "oslo" would be the common one).
    assert ranked[0] == "harbour oslo"
