"""The background embedding pass takes turns between the partitions waiting for vectors, but a
partition in which a search found memories without a vector goes first: a subject asked about
right after its compile gets its vectors before the others compiled at the same time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.backfill import EmbeddingBackfill
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.search import search_memories
from cairn.services import Services
from tests.conftest import make_settings

SUBJECTS = [Scope.for_subject(f"s{i}") for i in range(4)]


class _Counting(HashingEmbedder):
    """Records which texts each call embedded (a batch is one partition's)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: Any) -> list[list[float]]:
        self.calls.append(list(texts))
        return super().embed(texts)


def _compiled(services: Services) -> None:
    for n, scope in enumerate(SUBJECTS):
        notes = [
            NewEpisode(
                scope=scope, source="chat", type="note", payload={"text": f"s{n} note {i} tea"}
            )
            for i in range(12)
        ]
        services.store.episodes.append_many("default", notes)
        while compile_scope(services.store, "default", scope).has_more:
            pass


@pytest.fixture
def compiled(tmp_path: Path) -> Iterator[tuple[Services, _Counting, EmbeddingBackfill]]:
    """Services with a counting embedder, four subjects compiled, no vector written yet."""
    embedder = _Counting()
    services = Services.from_settings(make_settings(tmp_path), embedder=embedder)
    try:
        _compiled(services)
        backfill = services.embedding_backfill
        assert isinstance(backfill, EmbeddingBackfill)
        yield services, embedder, backfill
    finally:
        services.close()


def test_a_searched_partition_is_embedded_first(
    compiled: tuple[Services, _Counting, EmbeddingBackfill],
) -> None:
    services, embedder, backfill = compiled
    for scope in SUBJECTS:  # as the compiles would, in order
        backfill.notify("default", scope)
    # A hybrid search in the last subject finds memories without vectors.
    found = search_memories(
        services.store,
        "default",
        SUBJECTS[3],
        "tea",
        embedder=embedder,
        caches=services.search_caches,
    )
    assert found
    backfill.batch = 4
    backfill.run_until_idle()
    owners = [call[0].split()[0] for call in embedder.calls]
    assert owners[:3] == ["s3", "s3", "s3"]  # its 12 notes first, in batches of 4
    assert set(owners[3:]) == {"s0", "s1", "s2"}
    assert owners[3:6] == ["s0", "s1", "s2"]  # then the others take turns


def test_without_a_search_the_partitions_take_turns(
    compiled: tuple[Services, _Counting, EmbeddingBackfill],
) -> None:
    _, embedder, backfill = compiled
    for scope in SUBJECTS:
        backfill.notify("default", scope)
    backfill.batch = 4
    backfill.run_until_idle()
    owners = [call[0].split()[0] for call in embedder.calls]
    assert owners[:4] == ["s0", "s1", "s2", "s3"]


def test_a_correction_leaves_the_partitions_vectors_to_the_background(
    compiled: tuple[Services, _Counting, EmbeddingBackfill],
) -> None:
    """A correction embeds its new version on the request, and nothing else: the memories a
    compile left without vectors (thousands, after a big one) are the background pass's."""
    from cairn.engine.lifecycle import MemoryCorrection, correct_memory

    services, embedder, backfill = compiled
    with services.store.snapshot() as tx:
        old = tx.memories.list("default", SUBJECTS[0], limit=1)[0]
    change = MemoryCorrection(content="s0 now drinks coffee")
    new = correct_memory(
        services.store,
        "default",
        old.id,
        change,
        "test",
        embedder=embedder,
        backfill=backfill,
    )
    assert embedder.calls == [["s0 now drinks coffee"]]  # the new version alone
    with services.store.snapshot() as tx:
        assert tx.memories.vector_count("default", SUBJECTS[0]) == 1
    backfill.run_until_idle()
    with services.store.snapshot() as tx:
        assert tx.memories.vector_count("default", SUBJECTS[0]) >= 12
    assert new.content == "s0 now drinks coffee"
