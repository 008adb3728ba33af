"""The unit of work: the repositories that take part in one transaction, bound to it.

``Store.transaction()`` opens a write transaction (on SQLite one at a time: the database's
single writer) and ``Store.snapshot()`` a read-only one (a consistent snapshot on both
backends); each yields a ``UnitOfWork`` whose repositories run every call in that one
transaction, which commits when the block ends and rolls back if it raises. No connection,
dialect or driver leaves this package: callers see repositories only.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING

from sqlalchemy import Connection

if TYPE_CHECKING:
    from cairn.store import Store
    from cairn.store.documents import DocumentRepository
    from cairn.store.episodes import EpisodeRepository
    from cairn.store.erasures import ErasureLog
    from cairn.store.jobs import CompileQueries
    from cairn.store.lifecycle import LifecycleRepository
    from cairn.store.memories import MemoryRepository
    from cairn.store.slate_history import SlateHistoryRepository
    from cairn.store.slates import SlateRepository


class UnitOfWork:
    """The transactional repositories of a ``Store``, bound to one open transaction.

    Repositories are bound on first use, so a unit that touches only memories binds only
    ``memories``. Outside the ``with`` block the transaction is over: do not keep a unit.
    """

    def __init__(self, store: Store, conn: Connection, *, writable: bool) -> None:
        self._store = store
        self._conn = conn
        self.writable = writable
        # When the transaction began (``time.monotonic``): what it reads is no older, so a
        # cache can tell data read before a clean-up (an erasure's) from data read after it.
        self.opened_at = time.monotonic()

    @cached_property
    def episodes(self) -> EpisodeRepository:
        return self._store.episodes.bound(self._conn, writable=self.writable)

    @cached_property
    def memories(self) -> MemoryRepository:
        return self._store.memories.bound(self._conn, writable=self.writable)

    @cached_property
    def compiling(self) -> CompileQueries:
        """The episode-side steps of compiling a partition (``store.jobs.compiling``)."""
        return self._store.jobs.compiling.bound(self._conn, writable=self.writable)

    @cached_property
    def lifecycle(self) -> LifecycleRepository:
        return self._store.lifecycle.bound(self._conn, writable=self.writable)

    @cached_property
    def documents(self) -> DocumentRepository:
        return self._store.documents.bound(self._conn, writable=self.writable)

    @cached_property
    def slates(self) -> SlateRepository:
        return self._store.slates.bound(self._conn, writable=self.writable)

    @cached_property
    def slate_history(self) -> SlateHistoryRepository:
        return self._store.slate_history.bound(self._conn, writable=self.writable)

    @cached_property
    def erasures(self) -> ErasureLog:
        return self._store.erasures.bound(self._conn, writable=self.writable)


__all__ = ["UnitOfWork"]
