"""Shared fixtures: a store on each backend, the app, and HTTP clients.

PostgreSQL tests use a database made for this test session on 127.0.0.1:5432 (override with
``CAIRN_TEST_PG_URL``), emptied before each test. They never skip: if PostgreSQL is not
reachable they fail, so CI always runs them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text

from cairn.app import create_app
from cairn.config import Settings
from cairn.services import Services
from cairn.store import Store, open_store
from cairn.store.database import normalize_url

PG_ADMIN_URL = os.environ.get("CAIRN_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
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


def _truncate_all(url: str) -> None:
    engine = create_engine(normalize_url(url))
    with engine.begin() as conn:
        names = [n for n in inspect(conn).get_table_names() if n != "alembic_version"]
        if names:
            conn.execute(
                text("TRUNCATE " + ", ".join(f'"{n}"' for n in names) + " RESTART IDENTITY CASCADE")
            )
    engine.dispose()


def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'cairn.db'}"
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


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a SQLite file in the test's own directory (no key: open mode)."""
    return make_settings(tmp_path)


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
    """all-MiniLM-L6-v2 on onnxruntime (``CAIRN_EMBEDDER=onnx``, the default embedder's
    English half), loaded once for the test session."""
    from cairn.engine.embedders import OnnxEmbedder

    return OnnxEmbedder()


@pytest.fixture(scope="session")
def default_embedder(onnx_embedder: Any) -> Any:
    """The default ``multilingual`` embedder (MiniLM beside the multilingual USE), loaded once
    for the test session."""
    from cairn.engine.embedders import MultilingualEmbedder, UseEmbedder

    return MultilingualEmbedder(onnx_embedder, UseEmbedder())


@pytest.fixture
def semantic_services(db_url: str, tmp_path: Path, default_embedder: Any) -> Iterator[Services]:
    """Services with the default embedder on each backend (parametrized by ``backend``)."""
    settings = make_settings(tmp_path, database_url=db_url, embedder="multilingual")
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
