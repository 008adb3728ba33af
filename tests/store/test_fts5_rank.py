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
from tests.store.test_fts_counts import A, _row


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'cairn.db'}")
    yield s
    s.close()


def test_rows_of_any_count_are_read_with_one_statement(sqlite_store: Store) -> None:
    store = sqlite_store
    # "oslo" matches 1 row, "bergen" 7, "harbour" 23: three chunk lengths.
    rows = [_row("oslo harbour")]
    rows += [_row(f"bergen harbour {i}") for i in range(6)]
    rows += [_row(f"bergen quay {i}") for i in range(1)]
    rows += [_row(f"harbour crane {i}") for i in range(16)]
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
