"""Shared fixtures: a store on each backend, the app, and HTTP clients.

PostgreSQL tests use a database made for this test session on 127.0.0.1:5432 (override with
``CAIRN_TEST_PG_URL``), emptied before each test. They never skip: if PostgreSQL is not
reachable they fail, so CI always runs them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from cairn.app import create_app
from cairn.config import Settings
from cairn.services import Services
from cairn.store import Store, open_store
from cairn.store.database import normalize_url

PG_ADMIN_URL = os.environ.get("CAIRN_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")

# pytest-xdist starts its workers with COLUMNS=80 in the environment, and a Rich console takes
# its width from COLUMNS once, when it is made (cairn.cli's, at import): the CLI tests set the
# width a command needs in its own environment, as they can when COLUMNS is not set.
os.environ.pop("COLUMNS", None)
BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """``cairn serve``/``cairn worker`` run in-process by a test set up process logging; undo
    it, so later tests' captured output holds no log lines of theirs."""
    import logging

    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test session."""
    name = f"cairn_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(PG_ADMIN_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    store = open_store(url)
    store.close()
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


_RESET_ENGINES: dict[str, Engine] = {}


def _truncate_all(url: str) -> None:
    """Empty every table of the session database and restart its identity sequences, as one
    ``TRUNCATE ... RESTART IDENTITY CASCADE`` of every table would.

    Only the tables that hold a page (``pg_relation_size`` > 0) are truncated: a table no row
    ever reached since its last truncation has no page, and truncating it would change nothing
    but cost the server a new file for it and each of its indexes (a quarter to half a second
    per test for all of them, measured, against a few milliseconds for the few a test wrote).
    A sequence used without a row landing (a refused insert) is restarted on its own."""
    engine = _RESET_ENGINES.get(url)
    if engine is None:
        engine = _RESET_ENGINES[url] = create_engine(normalize_url(url), poolclass=NullPool)
    with engine.begin() as conn:
        written = conn.execute(
            text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
                " AND c.relname <> 'alembic_version' AND pg_relation_size(c.oid) > 0"
            )
        ).scalars()
        names = sorted(written)
        if names:
            conn.execute(
                text("TRUNCATE " + ", ".join(f'"{n}"' for n in names) + " RESTART IDENTITY CASCADE")
            )
        used = conn.execute(
            text(
                "SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename)"
                " FROM pg_sequences WHERE schemaname = current_schema()"
                " AND last_value IS NOT NULL"
            )
        ).scalars()
        for sequence in list(used):
            conn.execute(text(f"ALTER SEQUENCE {sequence} RESTART"))


@functools.cache
def _migrated_sqlite() -> Path:
    """A SQLite file migrated to every head, once per test process (removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="cairn-migrated-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "cairn.db"
    open_store(f"sqlite:///{path}").close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    assert not (folder / "cairn.db-wal").exists()
    return path


def migrated_sqlite(path: Path) -> Path:
    """Put a freshly migrated, empty SQLite database at ``path`` (unless a file is there).

    A copy of one file migrated for the session: the schema and rows migrating an empty file
    gives (the migrations write no random or time-dependent data), without applying every
    revision again for each test (0.2-0.4 s each, measured). Opening it still runs the
    migrations, which find nothing to apply. Applying them to a new file is tested where that
    is the subject: ``cairn migrate``, the start-up log, the migration tests, and every
    ``cairn serve`` and CLI command a test starts on a new data directory."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_migrated_sqlite(), path)
    return path


def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{migrated_sqlite(tmp_path / 'cairn.db')}"
    url: str = request.getfixturevalue("pg_url")
    _truncate_all(url)
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Parametrizes a test over both storage backends."""
    return str(request.param)


@pytest.fixture
def db_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return database_url(backend, tmp_path, request)


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A migrated, empty store on each backend."""
    s = open_store(db_url)
    yield s
    s.close()


def make_settings(tmp_path: Path, **overrides: object) -> Settings:
    # Lexical only unless a test asks for an embedder: with one, vectors arrive in the
    # background and hybrid scores would depend on timing. The default embedder has its own
    # tests (``semantic_services`` below, tests/engine/test_onnx_embedder.py).
    values: dict[str, object] = {"data_dir": tmp_path / "data", "embedder": "none"}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def compiled_notes(services: Services, subject: str, texts: list[str]) -> None:
    """``texts`` posted as notes of ``subject`` through the real app, compiled, and every vector
    written by the services' background pass (``services`` has an embedder)."""
    with TestClient(create_app(services=services)) as client:
        for i, text in enumerate(texts):
            r = client.post(
                "/v1/episodes",
                json={
                    "subject_id": subject,
                    "source": "chat",
                    "type": "note",
                    "payload": {"text": text},
                    "idempotency_key": f"k{i}",
                },
            )
            assert r.status_code in (200, 201), r.text
        r = client.post("/v1/memories/compile", json={"subject_id": subject})
        assert r.status_code == 200, r.text
        assert services.embedding_backfill is not None
        assert services.embedding_backfill.wait_idle(30)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a SQLite file in the test's own directory (no key: open mode)."""
    settings = make_settings(tmp_path)
    migrated_sqlite(settings.data_dir / "cairn.db")
    return settings


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    s = Services.from_settings(settings)
    yield s
    s.close()


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    """A client of the real ASGI app on SQLite, in open mode (tenant ``default``)."""
    with TestClient(create_app(services=services)) as c:
        yield c


@pytest.fixture
def backend_services(db_url: str, tmp_path: Path) -> Iterator[Services]:
    """Services on each backend (parametrized by ``backend``)."""
    s = Services.from_settings(make_settings(tmp_path, database_url=db_url))
    yield s
    s.close()


@pytest.fixture
def backend_client(backend_services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services=backend_services)) as c:
        yield c


@pytest.fixture(scope="session")
def onnx_embedder() -> Any:
    """all-MiniLM-L6-v2 on onnxruntime (``CAIRN_EMBEDDER=onnx``, the English half of the
    ``multilingual`` embedder), loaded once for the test session."""
    from cairn.engine.embedders import OnnxEmbedder

    return OnnxEmbedder()


@pytest.fixture(scope="session")
def multilingual_embedder(onnx_embedder: Any) -> Any:
    """The ``multilingual`` embedder (MiniLM beside the multilingual USE), loaded once for the
    test session."""
    from cairn.engine.embedders import UseEmbedder
    from cairn.engine.multilingual import MultilingualEmbedder

    return MultilingualEmbedder(onnx_embedder, UseEmbedder())


@pytest.fixture(scope="session")
def default_embedder() -> Any:
    """The default ``e5`` embedder (multilingual-e5-small), loaded once for the test session."""
    from cairn.engine.e5_model import E5Embedder

    return E5Embedder()


@pytest.fixture
def semantic_services(db_url: str, tmp_path: Path, default_embedder: Any) -> Iterator[Services]:
    """Services with the default embedder on each backend (parametrized by ``backend``)."""
    settings = make_settings(tmp_path, database_url=db_url, embedder="e5")
    s = Services.from_settings(settings, embedder=default_embedder)
    yield s
    s.close()


@pytest.fixture
def semantic_client(semantic_services: Services) -> Iterator[TestClient]:
    """The real app with the default embedder and its background embedding pass running."""
    with TestClient(create_app(services=semantic_services)) as c:
        yield c


@pytest.fixture
def two_tenants(backend_services: Services) -> dict[str, str]:
    """Keys of two tenants, ``a`` and ``b``; auth is required from then on."""
    key_a, _ = backend_services.store.keys.create("tenant-a")
    key_b, _ = backend_services.store.keys.create("tenant-b")
    return {"a": key_a, "b": key_b}
