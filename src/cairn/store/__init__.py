"""Storage port and its two adapters (SQLite, the embedded default; PostgreSQL).

Only this package imports database drivers, and no connection, dialect or driver leaves it.
``Store`` exposes one repository per persisted concept over one ``Database``; each call of an
unbound repository is its own transaction. ``Store.transaction()`` and ``Store.snapshot()``
open a unit of work (``cairn.store.unit``) whose repositories share one transaction. The
backend-specific parts (engine set-up, write serialization, full-text search) live beside
them and are chosen by the URL; what callers may need to know of the backend is a named
capability (``single_writer``), never its dialect.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cairn.store.database import Database
from cairn.store.documents import DocumentRepository
from cairn.store.episodes import EpisodeRepository
from cairn.store.erasures import ErasureLog
from cairn.store.items import ItemRepository
from cairn.store.jobs import JobRepository
from cairn.store.keys import KeyRepository
from cairn.store.lifecycle import LifecycleRepository
from cairn.store.memories import MemoryRepository
from cairn.store.planner import analyze_if_stale
from cairn.store.rates import RateRepository
from cairn.store.repository import NotInTransaction
from cairn.store.retention import RetentionRepository
from cairn.store.runs import RunRepository
from cairn.store.sessions import SessionRepository
from cairn.store.slate_history import SlateHistoryRepository
from cairn.store.slates import SlateRepository
from cairn.store.stats import QueueStats, queue_stats
from cairn.store.subjects import SubjectRepository
from cairn.store.transfer import TransferRepository
from cairn.store.unit import UnitOfWork


class Store:
    """Every repository, over one database, and units of work over it."""

    def __init__(self, db: Database) -> None:
        # The adapter itself: for this package and for white-box tests, not for callers.
        self.db = db
        self.keys = KeyRepository(db)
        self.episodes = EpisodeRepository(db)
        self.memories = MemoryRepository(db)
        self.jobs = JobRepository(db)
        self.subjects = SubjectRepository(db)
        self.documents = DocumentRepository(db)
        self.lifecycle = LifecycleRepository(db)
        self.transfer = TransferRepository(db)
        self.retention = RetentionRepository(db)
        self.sessions = SessionRepository(db)
        self.rates = RateRepository(db)
        self.slates = SlateRepository(db)
        self.slate_history = SlateHistoryRepository(db)
        self.runs = RunRepository(db)
        self.items = ItemRepository(db)
        self.erasures = ErasureLog(db)

    # --- units of work ----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[UnitOfWork]:
        """A write transaction as a unit of work: commits when the block ends, rolls back if
        it raises. On a ``single_writer`` backend it holds the database's one writer: keep it
        short (no model calls, no waiting inside)."""
        with self.db.write() as conn:
            yield UnitOfWork(self, conn, writable=True)

    @contextmanager
    def snapshot(self) -> Iterator[UnitOfWork]:
        """A read-only unit of work: every read in the block sees one consistent snapshot;
        a write step raises ``NotInTransaction``."""
        with self.db.read() as conn:
            yield UnitOfWork(self, conn, writable=False)

    # --- capabilities -------------------------------------------------------------------------

    @property
    def single_writer(self) -> bool:
        """True when the backend admits one writer at a time (SQLite): work that writes much
        (a compile worker) belongs in the process that holds the database, and concurrent
        writers queue instead of running side by side."""
        return self.db.is_sqlite

    @property
    def backend(self) -> str:
        """The backend's name for reports (``sqlite`` or ``postgresql``); not for choosing
        behaviour (use a capability)."""
        return self.db.dialect

    @property
    def location(self) -> str:
        """Which database this is (its URL): a key for caches shared by several stores."""
        return self.db.url

    def ping(self) -> bool:
        """Whether the database answers."""
        return self.db.ping()

    def refresh_statistics(self) -> list[str]:
        """Refresh the planner's statistics of the tables a compile grows, when they changed
        much since (PostgreSQL; ``cairn.store.planner``); returns the tables analysed."""
        return analyze_if_stale(self.db, ("episodes", "memories"))

    def queue_stats(self) -> QueueStats:
        """The compile queue across every tenant."""
        return queue_stats(self.db)

    def migrate(self) -> list[str]:
        """Apply every migration not yet applied; returns the revisions applied."""
        return self.db.migrate()

    def close(self) -> None:
        self.db.dispose()


def open_store(url: str, *, pool_size: int = 8, migrate: bool = True) -> Store:
    """Open (and by default migrate) the database at ``url``."""
    db = Database(url, pool_size=pool_size)
    if migrate:
        db.migrate()
    return Store(db)


__all__ = ["Database", "NotInTransaction", "Store", "UnitOfWork", "open_store"]
