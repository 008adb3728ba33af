"""The database: engine set-up for each backend, transactions, migrations, health.

SQLite (the embedded default) runs in WAL mode: readers never block, and every write
transaction is serialized — by a lock inside the process and ``BEGIN IMMEDIATE`` across
processes. PostgreSQL (production) relies on its own MVCC, unique constraints and row locks.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError, SQLAlchemyError

from cairn.errors import ConfigError, Unavailable
from cairn.store.fts import TenantIndexes
from cairn.store.fts5_rank import MatchCounts, PorterStems

SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
    # Each pooled connection has its own page cache (malloc'd: it counts in the server's RSS);
    # the OS caches the file for all of them. Two or three connections fill theirs during the
    # scale benchmark: 8 MiB each kept the server 20 MB smaller than 16 MiB, with the same
    # context and search CPU time (docs/benchmarks.md, "Server memory, session 7"); at 64 MiB
    # a server's RSS grew by tens of MB per connection a compile used.
    "PRAGMA cache_size=-8192",
    "PRAGMA temp_store=MEMORY",
    # Erasure: freed pages are zeroed, so deleted text does not linger in the file.
    "PRAGMA secure_delete=ON",
)

# Key of the PostgreSQL advisory lock held while migrating, so that several processes
# starting at once migrate one after another.
_MIGRATION_LOCK_KEY = 0x6361_6972_6E00


def normalize_url(url: str) -> str:
    """Pick our drivers: the stdlib sqlite3 and psycopg2 (measured fastest: bench/drivers.py)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
    if backend == "sqlite":
        return parsed.set(drivername="sqlite").render_as_string(hide_password=False)
    raise ConfigError(f"unsupported database URL {parsed.drivername!r}: use sqlite or postgresql")


class Database:
    """One database: an engine, a way to read, and a way to write."""

    def __init__(self, url: str, *, pool_size: int = 8, echo: bool = False) -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        self._write_lock = threading.Lock()
        # SQLite: which tenants' full-text indexes exist (see cairn.store.fts).
        self.fts = TenantIndexes()
        # SQLite: counts of full-text queries while the index is unchanged (the IDF inputs).
        self.fts_counts = MatchCounts()
        # SQLite: the Porter stems of indexed words (coordination compares them).
        self.porter_stems = PorterStems()
        if self.dialect == "sqlite":
            self.engine = self._sqlite_engine(parsed.database, echo)
            self._write_engine = self.engine.execution_options(sqlite_begin="IMMEDIATE")
        else:
            self.engine = create_engine(
                self.url, pool_size=pool_size, max_overflow=pool_size * 2, echo=echo
            )
            _ping_when_idle(self.engine)
            self._write_engine = self.engine  # type: ignore[assignment]
        self._read_engine = self._reader(self.engine, self.dialect)

    @staticmethod
    def _reader(engine: Engine, dialect: str) -> Engine:
        """The engine reads go through. SQLite's ``BEGIN`` already holds one snapshot for the
        whole transaction; PostgreSQL's default (READ COMMITTED) takes a new one per statement,
        so a context request's lanes could see a compile land between them. REPEATABLE READ
        READ ONLY holds one snapshot from the first statement on, and a write there fails
        instead of passing unnoticed. psycopg2 sends both in the ``BEGIN`` itself (no extra
        round trip); the pool resets the connection when it is returned."""
        if dialect == "sqlite":
            return engine
        return engine.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @staticmethod
    def _sqlite_engine(path: str | None, echo: bool) -> Engine:
        memory = not path or path == ":memory:"
        if memory:
            raise ConfigError("an in-memory SQLite database cannot be shared; use a file path")
        Path(path).parent.mkdir(parents=True, exist_ok=True)  # type: ignore[arg-type]
        engine = create_engine(
            f"sqlite:///{path}",
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=16,
            max_overflow=16,
            # The most recently returned connection first: sequential requests reuse one warm
            # page cache instead of warming every pooled connection's own.
            pool_use_lifo=True,
            echo=echo,
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Autocommit at the driver level: we emit BEGIN ourselves (see _on_begin).
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            for pragma in SQLITE_PRAGMAS:
                cursor.execute(pragma)
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: one consistent snapshot for the whole block, on both backends
        (see ``_reader``)."""
        try:
            with self._read_engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            if _is_connection_error(exc):
                raise Unavailable("the database is unavailable") from exc
            raise

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction; on SQLite, one at a time."""
        try:
            if self.is_sqlite:
                with self._write_lock, self._write_engine.begin() as conn:
                    yield conn
            else:
                with self._write_engine.begin() as conn:
                    yield conn
        except SQLAlchemyError as exc:
            if _is_connection_error(exc):
                raise Unavailable("the database is unavailable") from exc
            raise

    def insert(self, table: Table) -> Any:
        """An INSERT construct of this backend (it has ``on_conflict_do_nothing``); typed as
        Any because the two dialects' Insert classes share no declared base with it."""
        if self.is_sqlite:
            return sqlite.insert(table)
        return postgresql.insert(table)

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    def migrate(self) -> list[str]:
        """Apply every migration not yet applied; returns the revisions applied."""
        from cairn.store.migrations import upgrade

        if self.is_sqlite:
            with (
                self._write_lock,
                # (the real path: a link or a relative path to the file is the same file)
                _file_lock(f"{os.path.realpath(str(make_url(self.url).database))}.migrate-lock"),
                self._write_engine.connect() as conn,
            ):
                return upgrade(conn)
        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
            conn.commit()
            try:
                return upgrade(conn)
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK_KEY})
                conn.commit()

    def dispose(self) -> None:
        self.engine.dispose()


@contextmanager
def _file_lock(path: str) -> Iterator[None]:
    """An exclusive lock between processes on ``path`` (created if missing, never removed:
    removing a lock file lets a third process lock a new one while the second holds the old).
    SQLite migrations take it, as PostgreSQL's take an advisory lock: each migration runs in
    its own transaction, so two processes starting at once on a file each planned the same
    revisions, and the second failed on a table the first had made."""
    try:
        import fcntl
    except ImportError:  # (not on Windows: one process migrates at a time there by hand)
        yield
        return
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# PostgreSQL: a pooled connection idle longer than this is checked (``SELECT 1``) before use.
PING_AFTER_IDLE_S = 1.0


def _ping_when_idle(engine: Engine) -> None:
    """Check a pooled connection before use only when it sat idle for ``PING_AFTER_IDLE_S``
    (after a database restart, failover or an idle timeout), instead of on every checkout
    as ``pool_pre_ping`` does: that round trip was a tenth of a context request, twice over
    (the context's and the search's reads). A connection in steady use is not pinged; one
    that broke since its last use fails its request (a 503) and SQLAlchemy then replaces
    every pooled connection of that age."""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is None or time.monotonic() - since < PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)  # as pool_pre_ping does (outside a transaction)
        except Exception as exc:  # any driver error: the pool reconnects (up to 3 tries)
            raise DisconnectionError() from exc


def _is_connection_error(exc: SQLAlchemyError) -> bool:
    from sqlalchemy.exc import DBAPIError

    return (isinstance(exc, DBAPIError) and bool(exc.connection_invalidated)) or (
        type(exc).__name__ == "OperationalError" and "connect" in str(exc).lower()
    )


__all__ = ["Database", "normalize_url"]
