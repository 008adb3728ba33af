"""The vector lane's partition matrices are kept within a byte budget
(``CAIRN_VECTOR_CACHE_MB``): the least recently searched partition goes first, the one being
searched always stays, and a dropped partition is read again when searched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.vectors import VectorIndex
from cairn.store import Store, open_store
from cairn.store.memory_vectors import MemoryVectors

TENANT = "default"
DIM = 4


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    yield s
    s.close()


def _partition(store: Store, name: str, memories: int) -> Scope:
    """A partition of ``memories`` memories, each with a vector of ``DIM`` floats."""
    scope = Scope.for_subject(name)
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(scope=scope, source="s", type="note", payload={"text": f"{name} fact {i}"})
            for i in range(memories)
        ],
    )
    while compile_scope(store, TENANT, scope).has_more:
        pass
    with store.snapshot() as tx:
        seqs = [seq for seq, _, _ in tx.memories.without_embedding(TENANT, scope)]
    blob = np.ones(DIM, dtype="<f4").tobytes()
    with store.transaction() as tx:
        tx.memories.set_embeddings(TENANT, scope, [(s, blob) for s in seqs])
    return scope


def test_matrices_stay_within_the_byte_budget(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = [_partition(store, f"p{i}", 3) for i in range(3)]
    big = _partition(store, "big", 12)
    per_row = 8 + 4 * DIM  # a seq (int64) and its vector
    reads: list[str] = []  # the partitions read whole
    original = MemoryVectors.vector_pages

    def counted(self: Any, tenant_id: str, scope: Scope, size: int) -> Any:
        reads.append(scope.user_id)
        return original(self, tenant_id, scope, size)

    monkeypatch.setattr(MemoryVectors, "vector_pages", counted)
    index = VectorIndex(max_partitions=64, max_bytes=2 * 3 * per_row)

    def search(scope: Scope) -> Any:
        with store.snapshot() as tx:
            return index.matrix(store, tx, TENANT, scope)

    sizes = {len(search(scope).seqs) for scope in small}
    assert sizes == {3}
    assert index.nbytes == 2 * 3 * per_row  # the third pushed the first out
    assert reads == ["p0", "p1", "p2"]
    search(small[2])
    search(small[1])
    assert reads == ["p0", "p1", "p2"]  # both still kept: no read
    search(small[0])
    assert reads[-1] == "p0"  # it was dropped, so it is read again
    assert index.nbytes == 2 * 3 * per_row
    # p0's return pushed out p2, searched before p1: the least recently searched goes.
    search(small[1])
    assert reads[-1] == "p0"  # kept
    search(small[2])
    assert reads[-1] == "p2"  # read again (and p0 pushed out)
    # A partition that grows is replaced in place: its bytes counted once, at the new size.
    blob = np.ones(DIM, dtype="<f4").tobytes()
    store.episodes.append_many(
        TENANT,
        [NewEpisode(scope=small[2], source="s", type="note", payload={"text": "p2 one more"})],
    )
    compile_scope(store, TENANT, small[2])
    with store.snapshot() as tx:
        (seq,) = [row[0] for row in tx.memories.without_embedding(TENANT, small[2])]
    with store.transaction() as tx:
        tx.memories.set_embeddings(TENANT, small[2], [(seq, blob)])
    assert len(search(small[2]).seqs) == 4
    assert index.nbytes == 4 * per_row  # p2 alone: with p1 beside it, 7 rows overrun 6
    # A partition bigger than the whole budget is kept alone while it is searched.
    assert len(search(big).seqs) == 12
    assert index.nbytes == 12 * per_row
    search(big)
    assert reads[-1] == "big" and reads.count("big") == 1
    index.drop(store, TENANT, big)
    assert index.nbytes == 0


def test_without_a_byte_budget_the_count_bounds(store: Store) -> None:
    scopes = [_partition(store, f"q{i}", 2) for i in range(3)]
    index = VectorIndex(max_partitions=2)
    for scope in scopes:
        with store.snapshot() as tx:
            index.matrix(store, tx, TENANT, scope)
    assert index.nbytes == 2 * 2 * (8 + 4 * DIM)
    index.clear()
    assert index.nbytes == 0


def test_a_matrix_read_before_an_erasure_is_not_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search reads the partition's vectors in a snapshot taken before an erasure and
    finishes after the erasure dropped the partition: what it read is answered but not kept."""
    from cairn.engine import vectors

    scope = _partition(store, "erased", 3)
    index = VectorIndex()
    original = vectors._read_matrix

    def erased_meanwhile(*args: Any) -> Any:
        built = original(*args)
        index.drop(store, TENANT, scope)  # the erasure's clean-up, while the search reads
        return built

    monkeypatch.setattr(vectors, "_read_matrix", erased_meanwhile)
    with store.snapshot() as tx:
        assert len(index.matrix(store, tx, TENANT, scope).seqs) == 3
    assert index.nbytes == 0 and not index._cache
    monkeypatch.setattr(vectors, "_read_matrix", original)
    with store.snapshot() as tx:
        index.matrix(store, tx, TENANT, scope)
    assert len(index._cache) == 1  # read again, and kept, once nothing is erased meanwhile


def test_a_matrix_read_in_a_snapshot_older_than_an_erasure_is_not_kept(store: Store) -> None:
    """The snapshot began before the erasure's clean-up dropped the partition, and the matrix
    is read from it only afterwards (a context request reads other lanes first)."""
    scope = _partition(store, "older", 3)
    index = VectorIndex()
    with store.snapshot() as tx:
        index.drop(store, TENANT, scope)
        assert len(index.matrix(store, tx, TENANT, scope).seqs) == 3
    assert not index._cache
    with store.snapshot() as tx:
        index.matrix(store, tx, TENANT, scope)
    assert len(index._cache) == 1
