"""Migration 0019 (PostgreSQL): a memory's ``fts`` stays in its row, so ranking never reads
it from the TOAST table, even when the row is past the 2 KB threshold; the downgrade puts the
old storage back."""

from __future__ import annotations

from alembic import command
from sqlalchemy import Connection, create_engine, text

from cairn.store import open_store
from cairn.store.database import normalize_url
from cairn.store.migrations import _config
from tests.store.rows import memory_row
from tests.store.test_fts_counts import A


def _storage(conn: Connection) -> str:
    return str(
        conn.execute(
            text(
                "SELECT attstorage FROM pg_attribute "
                "WHERE attrelid = 'memories'::regclass AND attname = 'fts'"
            )
        ).scalar_one()
    )


def _toast_blocks(conn: Connection) -> int:
    conn.execute(text("SELECT pg_stat_force_next_flush()"))
    conn.commit()
    conn.execute(text("SELECT pg_stat_clear_snapshot()"))
    return int(
        conn.execute(
            text(
                "SELECT coalesce(toast_blks_hit, 0) + coalesce(toast_blks_read, 0) "
                "FROM pg_statio_user_tables WHERE relname = 'memories'"
            )
        ).scalar_one()
    )


def _store_big_row(url: str, word: str) -> None:
    """A row past the threshold: many distinct words (a big tsvector) and big metadata
    (written without migrating the database first)."""
    row = memory_row(A, " ".join(f"{word}{i}x{i * 7}" for i in range(260)))
    row["metadata"] = {"context_terms": " ".join(f"near{i}" for i in range(120))}
    store = open_store(url, migrate=False)
    try:
        with store.transaction() as tx:
            tx.memories.insert_new([row])
    finally:
        store.close()


def _toast_blocks_ranking(conn: Connection, word: str) -> int:
    """TOAST blocks read while ranking the row holding ``word`` by its ``fts``."""
    before = _toast_blocks(conn)
    length, rank = conn.execute(
        text(
            "SELECT length(fts), ts_rank(fts, to_tsquery('simple', :w)) FROM memories "
            "WHERE fts @@ to_tsquery('simple', :w)"
        ),
        {"w": word},
    ).one()
    assert length > 300 and rank > 0
    return _toast_blocks(conn) - before


def test_0019_keeps_fts_in_the_row(pg_url: str) -> None:
    _store_big_row(pg_url, "alpha")
    engine = create_engine(normalize_url(pg_url))
    try:
        with engine.connect() as conn:
            assert _storage(conn) == "m"
            size = conn.execute(text("SELECT max(pg_column_size(m.*)) FROM memories m"))
            assert size.scalar_one() > 2100  # a row the toaster works on
            assert _toast_blocks_ranking(conn, "alpha7x49") == 0  # read from the row itself

            command.downgrade(_config(conn), "0018_vector_rewrites")
            conn.commit()
            assert _storage(conn) == "x"
        # The old storage: the same row's fts is moved out, and ranking reads it back.
        _store_big_row(pg_url, "beta")
        with engine.connect() as conn:
            assert _toast_blocks_ranking(conn, "beta7x49") > 0
            command.upgrade(_config(conn), "heads")
            conn.commit()
            assert _storage(conn) == "m"
    finally:
        with engine.begin() as conn:  # the session's database: leave no rows for later tests
            conn.execute(
                text("DELETE FROM memories WHERE content LIKE 'alpha%' OR content LIKE 'beta%'")
            )
        engine.dispose()
