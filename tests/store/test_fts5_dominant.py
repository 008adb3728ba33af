"""SQLite: a big partition holding most of its tenant's index is matched without its
partition token; it ranks exactly as the token-filtered query does, never returns another
partition's rows, and still finds every match when the other partitions crowd the window."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.core.scope import Scope
from cairn.engine.query import ranking_terms
from cairn.store import Store, memory_search, open_store
from tests.store.rows import memory_row

BIG = Scope.for_subject("big")
SMALL = Scope.for_subject("small")
WORDS = ("harbour", "ferry", "lunch", "garden", "violin", "tortoise", "bees", "scooter")


def _texts(prefix: str, n: int) -> list[str]:
    return [
        f"{prefix} {WORDS[i % 8]} {WORDS[(i * 3) % 8]} note {i} " + "filler " * (i % 5)
        for i in range(n)
    ]


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'cairn.db'}")
    yield s
    s.close()


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The one-query path's statements, and after each search its MATCH expression."""
    seen: list[str] = []
    original = memory_search.statement

    def spy(sql: str) -> Any:
        if "LIMIT :wide" in sql:
            seen.append(sql)
        return original(sql)

    ranked = memory_search._fts5_ranked

    def matched(*args: Any, **kwargs: Any) -> Any:
        found = ranked(*args, **kwargs)
        seen.append("MATCH " + args[5]["q"])  # params: the last query's MATCH expression
        return found

    monkeypatch.setattr(memory_search, "statement", spy)
    monkeypatch.setattr(memory_search, "_fts5_ranked", matched)
    monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 50)
    yield seen


def _ranked(store: Store, scope: Scope, query: str, coordinate: bool = False) -> list[Any]:
    with store.snapshot() as tx:
        return tx.memories.lexical(
            "acme", scope, ranking_terms(query), limit=30, coordinate=coordinate
        )


@pytest.mark.parametrize("coordinate", [False, True])
def test_a_dominant_partition_ranks_as_the_filtered_query(
    sqlite_store: Store, spied: list[str], monkeypatch: pytest.MonkeyPatch, coordinate: bool
) -> None:
    with sqlite_store.transaction() as tx:
        tx.memories.insert_new(
            [memory_row(BIG, c) for c in _texts("big", 300)]
            + [memory_row(SMALL, c) for c in _texts("small", 60)]
        )
    query = "harbour ferry violin bees"
    dominant = _ranked(sqlite_store, BIG, query, coordinate)
    assert spied[-1].startswith("MATCH (") and "part :" not in spied[-1]
    monkeypatch.setattr(memory_search, "DOMINANT_SHARE", 2.0)  # never: the token filters
    filtered = _ranked(sqlite_store, BIG, query, coordinate)
    assert spied[-1].startswith('MATCH part : "p')
    assert dominant == filtered and len(dominant) == 30
    assert [s for s, _ in dominant] == [s for s, _ in filtered]
    with sqlite_store.snapshot() as tx:
        rows = tx.memories.by_seqs("acme", BIG, [seq for seq, _ in dominant])
    assert len(rows) == 30 and all(m.content.startswith("big ") for m in rows.values())


def test_other_partitions_crowding_the_window_widen_it(
    sqlite_store: Store, spied: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The small partition's rows match the query better than the big one's (short, with
    every term), so the first window over the whole index holds mostly theirs: the window
    widens until the big partition's best rows are all in it."""
    monkeypatch.setattr(memory_search, "DOMINANT_SHARE", 0.5)
    crowd = [f"harbour ferry violin bees {i}" for i in range(350)]
    with sqlite_store.transaction() as tx:
        tx.memories.insert_new(
            [memory_row(BIG, c) for c in _texts("big", 400)] + [memory_row(SMALL, c) for c in crowd]
        )
    query = "harbour ferry violin bees"
    dominant = _ranked(sqlite_store, BIG, query)
    # The first window held the small partition's rows only: wider ones ran after it.
    *windows, matched = spied
    assert len(windows) >= 2 and all(x.startswith("SELECT") for x in windows)
    assert matched.startswith("MATCH (")
    monkeypatch.setattr(memory_search, "DOMINANT_SHARE", 2.0)
    assert dominant == _ranked(sqlite_store, BIG, query) and len(dominant) == 30
    # The small partition is not dominant: its own query keeps the token.
    monkeypatch.setattr(memory_search, "DOMINANT_SHARE", 0.5)
    small = _ranked(sqlite_store, SMALL, query)
    assert "part :" in spied[-1]
    with sqlite_store.snapshot() as tx:
        rows = tx.memories.by_seqs("acme", SMALL, [seq for seq, _ in small])
    assert len(rows) == len(small) == 30


@pytest.mark.parametrize("rows", [300, 30])  # the one-query path, and term by term
@pytest.mark.parametrize("coordinate", [False, True])
def test_a_partition_that_is_the_whole_index_is_counted_without_its_token(
    sqlite_store: Store,
    monkeypatch: pytest.MonkeyPatch,
    counted: list[str],
    rows: int,
    coordinate: bool,
) -> None:
    """A tenant with one scope: every row of the index is the partition's, so its terms are
    counted and ranked without the partition token, with the same result as with it."""
    from cairn.store import fts5_rank

    monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 50)
    with sqlite_store.transaction() as tx:
        tx.memories.insert_new([memory_row(BIG, c) for c in _texts("big", rows)])
    counted.clear()
    query = "harbour ferry violin bees"
    whole = _ranked(sqlite_store, BIG, query, coordinate)
    assert whole and counted
    if rows >= 50:  # (term by term, a term's rows are counted from its ranked rows)
        # Only the partition's own size is counted with its token; its terms alone.
        assert not any(" AND " in q for q in counted)
    # With the token, as for a partition among others: the same ranking and scores.
    token = fts5_rank.in_partition

    def always(part: str, total: int, rows_in_table: int) -> str:
        return token(part, total, rows_in_table + 1)

    monkeypatch.setattr(fts5_rank, "in_partition", always)
    counted.clear()
    filtered = _ranked(sqlite_store, BIG, query, coordinate)
    if rows >= 50:  # (term by term, a term's rows are counted from its ranked rows)
        assert any("part :" in q and " AND " in q for q in counted)
    assert filtered == whole


@pytest.mark.parametrize("share", [0.3, 0.9])  # among other partitions, and dominant
def test_a_short_window_filtered_short_widens_to_the_same_ranking(
    sqlite_store: Store, spied: list[str], share: float
) -> None:
    """Plain BM25 reads a window just over ``limit``; when superseded rows and other kinds
    fill it, it widens, and the rows returned are the first ``limit`` of the full ranking."""
    from sqlalchemy import text

    n_big = 400
    other = int(n_big * (1 - share) / share)
    with sqlite_store.transaction() as tx:
        tx.memories.insert_new(
            [memory_row(BIG, c) for c in _texts("big", n_big)]
            + [memory_row(SMALL, c) for c in _texts("small", other)]
        )
    terms = ranking_terms("harbour ferry violin bees")
    every = {"include_superseded": True, "coordinate": False}
    with sqlite_store.snapshot() as tx:
        best = [seq for seq, _ in tx.memories.lexical("acme", BIG, terms, limit=60, **every)]
    # The 60 best rows: every other one superseded, the rest of another kind.
    with sqlite_store.db.write() as conn:
        for i, seq in enumerate(best):
            change = "status = 'superseded'" if i % 2 == 0 else "kind = 'fact'"
            conn.execute(text(f"UPDATE memories SET {change} WHERE seq = :s"), {"s": seq})
    with sqlite_store.snapshot() as tx:
        for kinds, superseded in ((None, False), (["turn"], True), (["turn"], False)):
            asked = {"kinds": kinds, "include_superseded": superseded, "coordinate": False}
            before = len(spied)
            short = tx.memories.lexical("acme", BIG, terms, limit=30, **asked)
            windows = sum(x.startswith("SELECT") for x in spied[before:])
            full = tx.memories.lexical("acme", BIG, terms, limit=1000, **asked)
            assert len(short) == 30 and short == full[:30]
            assert windows >= 2  # the first window held too few rows that pass: it widened
    assert ("part :" in spied[-1]) == (share < 0.5)
