"""SQLite: the counts behind a query's IDF (``fts5_rank.MatchCounts``) are remembered between
searches only while the index is unchanged: every committed write, delete or re-index of a
memory is seen by the next search, and a search of an unchanged index counts nothing again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from cairn.core.scope import Scope
from cairn.store import Store, fts, open_store
from tests.store.rows import memory_row

A = Scope.for_subject("alice")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'cairn.db'}")
    yield s
    s.close()


def _counts(store: Store, *queries: str) -> list[int]:
    """The partition's matches of each term, through the database's cache."""
    part = fts.part_token("acme", A.runtime_id, A.user_id, A.agent_id)
    with store.db.read() as conn:
        table = fts.MEMORIES.table("acme")
        counter = store.db.fts_counts.counter(conn, table)
        return [counter(f'part : "{part}" AND "{q}"') for q in queries]


def test_counts_follow_every_write(sqlite_store: Store) -> None:
    store = sqlite_store
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"oslo harbour {i}") for i in range(3)])
    assert _counts(store, "oslo", "harbour", "bergen") == [3, 3, 0]
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, "bergen harbour"), memory_row(A, "oslo market")])
    assert _counts(store, "oslo", "harbour", "bergen") == [4, 4, 1]
    with store.db.write() as conn:
        conn.execute(text("DELETE FROM memories WHERE content = 'oslo harbour 0'"))
    assert _counts(store, "oslo", "harbour", "bergen") == [3, 3, 1]
    # Re-indexing a row (its analysed text changes) is a write to the index too.
    with store.db.write() as conn:
        conn.execute(
            text("UPDATE memories SET search_text = 'bergen' WHERE content = 'oslo market'")
        )
    assert _counts(store, "oslo", "harbour", "bergen") == [2, 3, 2]


def test_an_unchanged_index_is_not_counted_again(sqlite_store: Store, counted: list[str]) -> None:
    store = sqlite_store
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, f"oslo harbour {i}") for i in range(3)])
    counted.clear()
    assert _counts(store, "oslo", "harbour") == [3, 3]
    assert len(counted) == 2
    assert _counts(store, "oslo", "harbour") == [3, 3]
    assert len(counted) == 2  # remembered
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, "oslo")])
    assert _counts(store, "oslo", "harbour") == [4, 3]
    assert len(counted) == 4  # the write made both stale


def test_a_write_transaction_counts_its_own_rows(sqlite_store: Store) -> None:
    store = sqlite_store
    with store.transaction() as tx:
        tx.memories.insert_new([memory_row(A, "oslo harbour")])
    assert _counts(store, "oslo") == [1]
    part = fts.part_token("acme", A.runtime_id, A.user_id, A.agent_id)
    with store.db.write() as conn:
        conn.execute(text("DELETE FROM memories WHERE content = 'oslo harbour'"))
        counter = store.db.fts_counts.counter(conn, fts.MEMORIES.table("acme"))
        # Uncommitted: the index's records do not show it yet, so nothing is taken from
        # (or left in) the cache.
        assert counter(f'part : "{part}" AND "oslo"') == 0
    assert _counts(store, "oslo") == [0]
