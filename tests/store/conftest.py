"""Fixtures of the store tests."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.store import fts5_rank


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every FTS5 ``MATCH`` expression counted from here on (``fts5_rank.count``), in order;
    the counts are still made."""
    queries: list[str] = []
    real = fts5_rank.count

    def spy(conn: Any, table: str, query: str) -> int:
        queries.append(query)
        return real(conn, table, query)

    monkeypatch.setattr(fts5_rank, "count", spy)
    return queries
