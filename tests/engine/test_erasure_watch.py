"""The erasure log and the watch that reads it: rows in seq order, each read once; a watch
that could not read the log for longer than it keeps rows empties every cache."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.core.ids import utcnow
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.erasure_watch import ErasureWatch
from cairn.engine.search_caches import SearchCaches
from cairn.store import Store, open_store
from cairn.store.erasures import KEEP


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = open_store(f"sqlite:///{tmp_path / 'e.db'}")
    yield s
    s.close()


def test_the_log_gives_each_erasure_once_in_order(store: Store) -> None:
    assert store.erasures.latest() == 0
    first = store.erasures.record("t1", utcnow())
    second = store.erasures.record("t2", utcnow())
    assert second > first
    assert store.erasures.since(0) == (second, {"t1", "t2"})
    assert store.erasures.since(first) == (second, {"t2"})
    assert store.erasures.since(second) == (second, set())


def test_old_rows_go_and_seqs_are_never_reused(store: Store) -> None:
    old = store.erasures.record("t1", utcnow() - KEEP * 2)
    new = store.erasures.record("t2", utcnow())  # removes the old row
    assert store.erasures.since(0) == (new, {"t2"})
    assert new > old
    with store.transaction() as tx:  # every row gone: the next seq still follows
        tx.erasures.record("t3", utcnow() + KEEP * 3)
    assert store.erasures.since(new)[1] == {"t3"}


def test_the_watch_forgets_the_tenants_logged_since_it_last_read(store: Store) -> None:
    caches = SearchCaches()
    embedder = HashingEmbedder()
    try:
        watch = ErasureWatch(store, caches)
        watch.check()  # from the log's end
        caches.queries.get("t1", embedder, "where is the key")
        caches.queries.get("t2", embedder, "where is the key")
        store.erasures.record("t1", utcnow())
        assert watch.check() == {"t1"}
        assert caches.queries.cached("t1", embedder, "where is the key") is None
        assert isinstance(caches.queries.cached("t2", embedder, "where is the key"), np.ndarray)
        assert watch.check() == set()

        # A watch that has not read the log for longer than half of ``KEEP`` empties all.
        watch._read_at = time.monotonic() - KEEP.total_seconds()
        watch.check()
        assert caches.queries.cached("t2", embedder, "where is the key") is None
    finally:
        caches.close()
