"""SQLite: after a deletion the write-ahead log is checkpointed so deleted text leaves the
``-wal`` file; a log still in use is checkpointed as far as it can be, never an error."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cairn.store import open_store


def test_a_checkpoint_that_meets_a_pending_statement_is_deferred(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A pooled connection still inside a statement (a cursor read halfway) makes SQLite
    refuse the checkpoint ("database table is locked"): the deletion it follows is committed,
    so the checkpoint is logged as deferred, and the next one empties the log."""
    path = tmp_path / "cairn.db"
    store = open_store(f"sqlite:///{path}")
    try:
        store.keys.ensure_tenant("t1")  # something written: the log holds pages
        raw = store.db.engine.raw_connection()
        pending = raw.driver_connection.execute("SELECT name FROM sqlite_master")
        assert pending.fetchone() is not None  # more rows to come: the statement stays open
        raw.close()  # back to the pool, the most recent: the next checkout gets it
        with caplog.at_level(logging.INFO, logger="cairn.store.lifecycle"):
            store.lifecycle.checkpoint()
        assert "checkpoint deferred" in caplog.text and "locked" in caplog.text
        pending.close()
        store.lifecycle.checkpoint()
        assert Path(f"{path}-wal").stat().st_size == 0
        # The connection's busy timeout is back to the pool's after each checkpoint.
        with store.db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        store.close()
