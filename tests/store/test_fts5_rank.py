"""SQLite: the rows a full-text ranking checks are read with one statement whatever their
number (``fts5_rank._padded``), so SQLAlchemy's compiled cache and the driver's statement
cache keep one entry for it, not one per chunk length (each held ~130 KB of bound parameters)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from cairn.store import Store, open_store
from cairn.store.memory_search import lexical
from tests.store.rows import memory_row
from tests.store.test_fts_counts import A


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'cairn.db'}")
    yield s
    s.close()


def test_rows_of_any_count_are_read_with_one_statement(sqlite_store: Store) -> None:
    store = sqlite_store
    # "oslo" matches 1 row, "bergen" 7, "harbour" 23: three chunk lengths.
    rows = [memory_row(A, "oslo harbour")]
    rows += [memory_row(A, f"bergen harbour {i}") for i in range(6)]
    rows += [memory_row(A, f"bergen quay {i}") for i in range(1)]
    rows += [memory_row(A, f"harbour crane {i}") for i in range(16)]
    with store.transaction() as tx:
        tx.memories.insert_new(rows)
    seen: list[str] = []

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if "WHERE m.seq IN" in statement:
            seen.append(statement)

    event.listen(store.db.engine, "before_cursor_execute", on_execute)
    found = {}
    with store.db.read() as conn:
        for term in ("oslo", "bergen", "harbour", "nowhere"):
            found[term] = lexical(conn, store.db, "acme", A, [term], limit=50)
    event.remove(store.db.engine, "before_cursor_execute", on_execute)

    assert [len(found[t]) for t in ("oslo", "bergen", "harbour", "nowhere")] == [1, 7, 23, 0]
    assert len(seen) == 3  # one read per term that matched
    assert len(set(seen)) == 1


def test_ranking_statements_are_built_once(sqlite_store: Store) -> None:
    """A repeated search builds no new statement (``cairn.store.statements``): the same
    string gives the same ``TextClause``, and the ranking is unchanged by the reuse."""
    from cairn.store import statements

    store = sqlite_store
    with store.transaction() as tx:
        tx.memories.insert_new(
            [memory_row(A, "Zürich harbour"), memory_row(A, "harbour 北京 crane")]
        )
    assert statements.statement("SELECT 1") is statements.statement("SELECT 1")
    with store.db.read() as conn:
        first = lexical(conn, store.db, "acme", A, ["harbour", "北京"], limit=10)
    built = statements.statement.cache_info().misses
    with store.db.read() as conn:
        again = lexical(conn, store.db, "acme", A, ["harbour", "北京"], limit=10)
    assert statements.statement.cache_info().misses == built
    assert again == first
    assert len(first) == 2
    assert first[0][1] >= first[1][1] > 0


def test_the_explicit_rank_scores_as_the_rank_column(sqlite_store: Store) -> None:
    """``FtsIndex.rank_sql`` (what the ranking queries sort by) is the index's configured
    ``rank``: the same score for every row, body and neighbour words weighed as configured."""
    from sqlalchemy import text

    from cairn.store import fts

    with sqlite_store.transaction() as tx:
        tx.memories.insert_new(
            [memory_row(A, f"harbour {'ferry ' * (i % 4)}note {i}") for i in range(40)]
            + [
                {**memory_row(A, f"quay note {i}"), "metadata": {"context_terms": "harbour ferry"}}
                for i in range(10)
            ]
        )
    table = fts.MEMORIES.table("acme")
    rank = fts.MEMORIES.rank_sql(table)
    assert rank == f"bm25({table}, 1.0, 0.5, 0.0)"
    with sqlite_store.db.read() as conn:
        rows = conn.execute(
            text(f"SELECT rowid, rank, {rank} FROM {table} WHERE {table} MATCH :q"),
            {"q": '"harbour" OR "ferry"'},
        ).all()
    assert len(rows) == 50
    assert all(r[1] == pytest.approx(r[2], rel=1e-12) for r in rows)
    assert len({round(r[1], 9) for r in rows}) > 3  # lengths and neighbour words score apart
