"""What the searches of one process share (``SearchCaches``): partition matrices of vectors
and recent queries' embeddings, with the helper threads that embed a query while the lexical
lane runs. ``Services`` builds and closes one; a search without one caches nothing."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cairn.core.scope import Scope
from cairn.engine.embedders import Embedder
from cairn.engine.embedders import query_vector as vector_of_query
from cairn.engine.vectors import VectorIndex
from cairn.engine.yielding import RequestGate


class QueryCache:
    """Query embeddings of recent searches, and the helper threads that embed a query while
    the lexical lane runs (started on first use, ended by ``close``)."""

    def __init__(self, size: int = 1024, workers: int = 2) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._size = size
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def cached(self, embedder: Embedder, query: str) -> np.ndarray | None:
        key = (embedder.name, query)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def get(self, embedder: Embedder, query: str) -> np.ndarray:
        got = self.cached(embedder, query)
        if got is not None:
            return got
        key = (embedder.name, query)
        vec = np.asarray(vector_of_query(embedder, query), dtype="<f4")
        with self._lock:
            self._items[key] = vec
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return vec

    def prefetch(self, embedder: Embedder, query: str) -> Callable[[], np.ndarray]:
        """Start embedding ``query`` on a helper thread (unless cached) and return a call
        that waits for it, so the lexical lane runs while the model does: both release the
        GIL (SQLite while it steps, torch while it computes). Only for embedders that set
        ``overlap`` (the local model, which embeds one text at a time anyway): a remote
        embedder's requests would queue behind the pool's few threads. Once closed, the
        query is embedded when the caller waits for it."""
        got = self.cached(embedder, query)
        if got is not None:
            return lambda: got
        with self._lock:
            if self._closed:
                return lambda: self.get(embedder, query)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix="cairn-query-embed"
                )
            return self._pool.submit(self.get, embedder, query).result

    def close(self) -> None:
        """End the helper threads (waiting for embeddings under way) and drop the cache."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            self._items.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class SearchCaches:
    """What searches of one process share: partition matrices and query embeddings."""

    def __init__(
        self,
        max_partitions: int = 64,
        queries: int = 1024,
        *,
        max_vector_bytes: int | None = None,
        requests: RequestGate | None = None,
        on_missing_vectors: Callable[[str, Scope], None] | None = None,
    ) -> None:
        self.vectors = VectorIndex(max_partitions, max_vector_bytes)
        self.queries = QueryCache(queries)
        # Search and context requests in flight: the background embedding pass steps aside.
        self.requests = requests or RequestGate()
        # Told when a search finds memories of a partition without a vector yet (the
        # background pass then embeds that partition first).
        self.on_missing_vectors = on_missing_vectors

    def close(self) -> None:
        self.queries.close()
        self.vectors.clear()
