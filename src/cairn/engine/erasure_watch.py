"""Every process forgets erased data, not only the one that erased it.

An erasure (a subject, a scope, an episode, a memory, a document, retention's expiry) clears
the caches of the process that ran it at once (``forget_locally``) and logs the tenant
(``cairn.store.erasures``). ``ErasureWatch``, a daemon thread in every server and worker
process, reads the log about once a second and clears the same caches for each tenant
logged since it last looked: the tenant's partition matrices, cached query embeddings,
token counts, and the process-wide memos of texts' words, names and subject scopes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from cairn.core.ids import utcnow
from cairn.core.scope import Scope, forget_scope_memo
from cairn.engine.compile.heuristic import forget_word_memo
from cairn.engine.failures import FailureLog
from cairn.engine.query import forget_name_memo
from cairn.engine.search_caches import SearchCaches
from cairn.store import Store, UnitOfWork
from cairn.store.erasures import KEEP

log = logging.getLogger(__name__)

POLL_S = 1.0


def forget_locally(
    store: Store,
    caches: SearchCaches | None,
    tenant_id: str,
    scopes: Sequence[Scope] | None = None,
) -> None:
    """Drop what this process holds of the tenant's erased data: ``caches`` (the partitions
    ``scopes``, or all the tenant's), the memos of texts' words, names and subject scopes
    (shared by every tenant: emptied whole, cheap to fill again), and the words the store
    remembers for ranking."""
    if caches is not None:
        caches.forget(store, tenant_id, scopes)
    _forget_memos(store)


def _forget_memos(store: Store) -> None:
    forget_word_memo()
    forget_name_memo()
    forget_scope_memo()
    store.lifecycle.forget_cached_text()


def announce(tx: UnitOfWork, tenant_id: str) -> None:
    """Log an erasure in the tenant for the other processes, in the erasure's transaction
    ``tx`` (the log row commits with it)."""
    tx.erasures.record(tenant_id, utcnow())


class ErasureWatch:
    """Reads the erasure log every ``interval_s`` and forgets the tenants logged since."""

    def __init__(
        self, store: Store, caches: SearchCaches | None, interval_s: float = POLL_S
    ) -> None:
        self.store = store
        self.caches = caches
        self.interval_s = interval_s
        self._seen: int | None = None  # the newest seq read (kept across stop and start)
        self._read_at = 0.0  # when the log was last read (``time.monotonic``)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        if self._seen is None:
            self._seen = self.store.erasures.latest()
            self._read_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="cairn-erasure-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def check(self) -> set[str]:
        """Forget the tenants logged since the last check; returns them. After a gap longer
        than the log keeps its rows (``KEEP``, halved for safety: the database was away, the
        process suspended), some may be gone unread, so every cache is emptied."""
        if self._seen is None:
            self._seen = self.store.erasures.latest()
        stale = time.monotonic() - self._read_at > KEEP.total_seconds() / 2
        newest, tenants = self.store.erasures.since(self._seen)
        if stale:
            forget_everything(self.store, self.caches)
        for tenant_id in sorted(tenants):
            forget_locally(self.store, self.caches, tenant_id)
        self._seen, self._read_at = newest, time.monotonic()
        return tenants

    def _run(self) -> None:
        failures = FailureLog(log, "reading the erasure log", self.interval_s)
        wait = self.interval_s
        while not self._stop.wait(wait):
            try:
                self.check()
                failures.succeeded()
                wait = self.interval_s
            except Exception:  # the database away for a while: read again later
                wait = failures.failed()


def forget_everything(store: Store, caches: SearchCaches | None) -> None:
    """Empty every cache of every tenant (``forget_locally`` for all)."""
    if caches is not None:
        caches.forget_all()
    _forget_memos(store)


__all__ = ["POLL_S", "ErasureWatch", "announce", "forget_everything", "forget_locally"]
