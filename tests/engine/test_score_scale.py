"""One score scale: the same data and query give close absolute scores on SQLite and
PostgreSQL, and the best hit of a weak query is not rescaled to 1."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.search import search_memories
from cairn.store import Store, open_store
from tests.conftest import _truncate_all

TENANT = "t"
SCOPE = Scope.for_subject("sam")
LINES = [
    ("Sam", "I started a pottery class on Tuesdays."),
    ("Ada", "That sounds relaxing. What do you make?"),
    ("Sam", "Mostly bowls, and a teapot that leaks."),
    ("Ada", "Haha, nice."),
    ("Sam", "My sister Rina moved to Porto last spring."),
    ("Ada", "Do you visit her often?"),
    ("Sam", "Twice a year, usually in October."),
    ("Ada", "Great, thanks."),
    ("Sam", "I adopted a cat called Miso from the shelter."),
    ("Ada", "Cats are great company."),
    ("Sam", "I run five kilometres every Sunday morning."),
    ("Ada", "Noted."),
]
QUERIES = ["What does Sam make in pottery class?", "Where did Rina move?", "zebra"]


@pytest.fixture
def both(tmp_path: Path, pg_url: str) -> Iterator[dict[str, Store]]:
    _truncate_all(pg_url)
    stores = {"sqlite": open_store(f"sqlite:///{tmp_path / 's.db'}"), "pg": open_store(pg_url)}
    t0 = datetime(2024, 3, 1, tzinfo=UTC)
    for store in stores.values():
        store.episodes.append_many(
            TENANT,
            [
                NewEpisode(
                    scope=SCOPE,
                    source="chat",
                    type="conversation.turn",
                    payload={"messages": [{"role": "user", "name": who, "content": text}]},
                    session_id="s1",
                    occurred_at=t0 + timedelta(minutes=i),
                )
                for i, (who, text) in enumerate(LINES)
            ],
        )
        compile_scope(store, TENANT, SCOPE)
    yield stores
    for store in stores.values():
        store.close()


def test_both_backends_give_close_absolute_scores(both: dict[str, Store]) -> None:
    """Same best hit, top scores within 0.2 of each other (the backends' ranking functions
    differ: BM25 vs IDF-weighted ``ts_rank``), and absolute: a best hit is not stretched to 1."""
    for query in QUERIES:
        got = {k: search_memories(s, TENANT, SCOPE, query, limit=5) for k, s in both.items()}
        if query == "zebra":
            assert got["sqlite"] == [] and got["pg"] == []
            continue
        top = {k: r[0] for k, r in got.items()}
        assert top["sqlite"].memory.content == top["pg"].memory.content, query
        assert abs(top["sqlite"].score - top["pg"].score) < 0.2, (query, top)
        assert all(0.1 < t.score < 0.6 for t in top.values()), (query, top)
