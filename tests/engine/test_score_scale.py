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


DOCS = {
    "ferries": "The Oslo ferry leaves at nine. The Bergen ferry leaves at noon on Sundays.",
    "trains": "Night trains from Oslo to Bergen take seven hours and sell out in summer.",
    "museum": "The Munch museum in Oslo opens at ten and closes early on Mondays.",
    "hotel": "Our hotel in Bergen has a harbour view and serves breakfast until eleven.",
    "food": "Try the fish soup at the Bergen market; it is the best in Norway.",
    "weather": "Bergen sees rain on most days of the year, so pack a good jacket.",
    "budget": "Norway is expensive: a coffee costs about fifty kroner in Oslo.",
    "hikes": "Preikestolen is a four hour hike; start early to avoid the crowds.",
}
CHUNK_QUERIES = [
    "When does the ferry to Bergen leave?",
    "When is the Oslo museum open?",
    "Where is the best fish soup?",
    "Should I pack a rain jacket?",
    "How long is the hike, and when are the crowds?",
]


GARDEN = [
    f"Water the tomatoes {i} in the garden at dawn; mulch keeps the soil damp." for i in range(40)
]


def test_both_backends_score_document_chunks_alike(tmp_path: Path, pg_url: str) -> None:
    """Chunks are ranked by BM25 on both backends (FTS5's on SQLite, the same formula over
    ``tsvector`` on PostgreSQL, over the partition's chunks of every dataset): the same best
    chunk and raw scores within a fifth of each other, so one calibration (``CHUNK_HALF``)
    means the same on both; also for a dataset of one chunk searched beside others, and for
    several datasets searched at once."""
    from cairn.engine.query import ranking_terms
    from cairn.store.documents import NewChunk

    _truncate_all(pg_url)
    stores = {"sqlite": open_store(f"sqlite:///{tmp_path / 'c.db'}"), "pg": open_store(pg_url)}
    corpus = [("kb", key, text) for key, text in DOCS.items()]
    corpus += [("garden", f"g{i}", text) for i, text in enumerate(GARDEN)]
    corpus += [("tiny", "ferry-only", "The night ferry to Bergen leaves at ten.")]
    try:
        for store in stores.values():
            for dataset, key, text in corpus:
                store.documents.put(
                    TENANT,
                    SCOPE,
                    dataset_id=dataset,
                    document_id=key,
                    idempotency_key=key,
                    title="",
                    metadata_={},
                    chunks=[NewChunk(text, 0, len(text), 16)],
                )
        searches = [(["kb"], q) for q in CHUNK_QUERIES]
        searches += [(["tiny"], CHUNK_QUERIES[0]), (["kb", "garden"], CHUNK_QUERIES[0])]
        for datasets, query in searches:
            terms = ranking_terms(query)
            got = {
                k: s.documents.search_chunks(TENANT, SCOPE, datasets, terms, limit=3)
                for k, s in stores.items()
            }
            best = {k: r[0] for k, r in got.items()}
            assert best["sqlite"].document_id == best["pg"].document_id, (query, got)
            lo, hi = sorted((best["sqlite"].score, best["pg"].score))
            assert lo > 1.0 and hi <= lo * 1.2, (datasets, query, best)
    finally:
        for store in stores.values():
            store.close()
