"""PostgreSQL: a pooled connection is checked before use only after sitting idle
(``PING_AFTER_IDLE_S``), not on every checkout; a connection that broke while idle is
replaced without failing the request."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from cairn.store import database
from cairn.store.database import Database


def _backend_pid(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())


def _pings(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = db.engine.dialect.do_ping

    def spy(dbapi_conn: Any) -> bool:
        calls.append(1)
        return bool(real(dbapi_conn))

    monkeypatch.setattr(db.engine.dialect, "do_ping", spy)
    return calls


def test_a_connection_in_steady_use_is_not_pinged(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 3600.0)
    db = Database(pg_url, pool_size=1)
    try:
        pings = _pings(db, monkeypatch)
        first = _backend_pid(db)
        assert [_backend_pid(db) for _ in range(5)] == [first] * 5
        assert pings == []
    finally:
        db.dispose()


def test_a_connection_broken_while_idle_is_replaced(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(database, "PING_AFTER_IDLE_S", 0.0)  # every reuse counts as idle
    db = Database(pg_url, pool_size=1)
    admin = Database(pg_url, pool_size=1)
    try:
        pings = _pings(db, monkeypatch)
        first = _backend_pid(db)
        with admin.read() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:p, 5000)"), {"p": first})  # waits
        second = _backend_pid(db)  # the ping finds it dead: a new connection, no error
        assert second != first
        assert pings
    finally:
        db.dispose()
        admin.dispose()
