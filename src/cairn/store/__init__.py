"""Storage port and its two adapters (SQLite, the embedded default; PostgreSQL).

Only this package imports database drivers. ``Store`` bundles one repository per concept over
one ``Database``; the backend-specific parts (engine set-up, write serialization, full-text
search) live beside them and are chosen by the URL.
"""

from __future__ import annotations

from cairn.store.database import Database
from cairn.store.documents import DocumentRepository
from cairn.store.episodes import EpisodeRepository
from cairn.store.items import ItemRepository
from cairn.store.jobs import JobRepository
from cairn.store.keys import KeyRepository
from cairn.store.lifecycle import LifecycleRepository
from cairn.store.memories import MemoryRepository
from cairn.store.rates import RateRepository
from cairn.store.retention import RetentionRepository
from cairn.store.sessions import SessionRepository
from cairn.store.subjects import SubjectRepository
from cairn.store.transfer import TransferRepository


class Store:
    """Every repository, over one database."""

    def __init__(self, db: Database) -> None:
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
        self.items = ItemRepository(db)

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def close(self) -> None:
        self.db.dispose()


def open_store(url: str, *, pool_size: int = 8, migrate: bool = True) -> Store:
    """Open (and by default migrate) the database at ``url``."""
    db = Database(url, pool_size=pool_size)
    if migrate:
        db.migrate()
    return Store(db)


__all__ = ["Database", "Store", "open_store"]
