"""What the searches of one process share (``SearchCaches``): partition matrices of vectors
and recent queries' embeddings, with the helper threads that embed a query while the lexical
lane runs. ``Services`` builds and closes one; a search without one caches nothing."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from cairn.core.scope import Scope
from cairn.engine.embedders import Embedder
from cairn.engine.embedders import query_vector as vector_of_query
from cairn.engine.vectors import VectorIndex
from cairn.engine.yielding import RequestGate
from cairn.store import Store


class QueryCache:
    """Query embeddings of recent searches, and the helper threads that embed a query while
    the lexical lane runs (started on first use, ended by ``close``). Kept per tenant: a query
    another tenant asked is embedded again (a hit answers faster, which would tell a tenant
    what text others sent), and an erasure in a tenant drops its queries (``forget``)."""

    def __init__(self, size: int = 1024, workers: int = 2) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, str, str], np.ndarray] = OrderedDict()
        self._size = size
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def cached(self, tenant_id: str, embedder: Embedder, query: str) -> np.ndarray | None:
        key = (tenant_id, embedder.name, query)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        return None

    def get(self, tenant_id: str, embedder: Embedder, query: str) -> np.ndarray:
        got = self.cached(tenant_id, embedder, query)
        if got is not None:
            return got
        key = (tenant_id, embedder.name, query)
        vec = np.asarray(vector_of_query(embedder, query), dtype="<f4")
        with self._lock:
            self._items[key] = vec
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return vec

    def prefetch(self, tenant_id: str, embedder: Embedder, query: str) -> Callable[[], np.ndarray]:
        """Start embedding ``query`` on a helper thread (unless cached) and return a call
        that waits for it, so the lexical lane runs while the model does: both release the
        GIL (SQLite while it steps, torch while it computes). Only for embedders that set
        ``overlap`` (the local model, which embeds one text at a time anyway): a remote
        embedder's requests would queue behind the pool's few threads. Once closed, the
        query is embedded when the caller waits for it."""
        got = self.cached(tenant_id, embedder, query)
        if got is not None:
            return lambda: got
        with self._lock:
            if self._closed:
                return lambda: self.get(tenant_id, embedder, query)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix="cairn-query-embed"
                )
            return self._pool.submit(self.get, tenant_id, embedder, query).result

    def forget_all(self) -> None:
        with self._lock:
            self._items.clear()

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's cached queries (after an erasure in it: a query can quote what
        was erased, and a context request without a task asks with the latest turn)."""
        with self._lock:
            for key in [k for k in self._items if k[0] == tenant_id]:
                del self._items[key]

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

        # Called with the tenant after an erasure in it (``forget``): whoever else holds text
        # of a tenant's memories (``Services`` adds its token counter) drops it too.
        self.on_erase: list[Callable[[str], None]] = []

    def forget(self, store: Store, tenant_id: str, scopes: Sequence[Scope] | None) -> None:
        """Drop what this process holds of erased data: the partitions' vector matrices
        (every one of the tenant's when ``scopes`` is None), the tenant's cached queries and
        what ``on_erase`` names."""
        if scopes is None:
            self.vectors.drop_tenant(tenant_id)
        for scope in scopes or ():
            self.vectors.drop(store, tenant_id, scope)
        self.queries.forget(tenant_id)
        for forget in self.on_erase:
            forget(tenant_id)

    def forget_all(self) -> None:
        """Drop every tenant's matrices, cached queries and what ``on_erase`` names (``""``)."""
        self.vectors.clear()
        self.queries.forget_all()
        for forget in self.on_erase:
            forget("")

    def close(self) -> None:
        self.queries.close()
        self.vectors.clear()
