"""SQLite's per-tenant full-text indexes (``cairn.store.fts``, migration 0007): each tenant's
rows live in its own FTS5 tables, search reads only them, and migrating an existing database
moves every tenant's rows over (and back on downgrade) without changing any result."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import DBAPIError

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.query import ranking_terms
from cairn.engine.search import search_memories
from cairn.store import Store, fts, open_store
from cairn.store.documents import NewChunk
from cairn.store.migrations import _config, current_revisions

SCOPE = Scope.for_subject("s1")
OTHER = Scope(runtime_id="rt", user_id="u2")


def _fill(store: Store) -> None:
    for tenant, words in (("acme", "Globex Oslo ferry"), ("umbrella", "Globex Bergen train")):
        for scope in (SCOPE, OTHER):
            store.episodes.append_many(
                tenant,
                [
                    NewEpisode(
                        scope=scope,
                        source="t",
                        type="conversation.turn",
                        payload={"messages": [{"role": "user", "content": f"{words} {i}"}]},
                    )
                    for i in range(5)
                ],
            )
            while compile_scope(store, tenant, scope).has_more:
                pass
            text = f"{words} handbook: the {words.split()[1]} office opens at nine."
            store.documents.put(
                tenant,
                scope,
                dataset_id="kb",
                document_id="d1",
                idempotency_key="d1",
                title="",
                metadata_={},
                chunks=[NewChunk(text, 0, len(text), 12)],
            )


def _key(scope: Scope) -> str:
    return f"{scope.runtime_id}/{scope.user_id}"


def _results(store: Store) -> dict[tuple[str, str], object]:
    out: dict[tuple[str, str], object] = {}
    for tenant in ("acme", "umbrella", "nobody"):
        for scope in (SCOPE, OTHER):
            found = search_memories(store, tenant, scope, "Globex Oslo train", limit=20)
            chunks = store.documents.search_chunks(
                tenant, scope, ["kb"], ranking_terms("Globex office")
            )
            out[(tenant, _key(scope))] = (
                [(m.memory.id, m.memory.content, m.score) for m in found],
                [(c.id, c.score) for c in chunks],
            )
    return out


def _fts_tables(conn: Connection) -> set[str]:
    return {
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5%'"
        )
    }


def test_each_tenant_has_its_own_index_and_search_reads_only_it(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        _fill(store)
        got = _results(store)
        with store.db.read() as conn:
            tables = _fts_tables(conn)
            assert tables == {
                ix.table(t) for ix in (fts.MEMORIES, fts.CHUNKS) for t in ("acme", "umbrella")
            }
            for tenant in ("acme", "umbrella"):
                rows = conn.exec_driver_sql(
                    f"SELECT count(*) FROM {fts.MEMORIES.table(tenant)}"
                ).scalar_one()
                stored = conn.exec_driver_sql(
                    "SELECT count(*) FROM memories WHERE tenant_id = ?", (tenant,)
                ).scalar_one()
                assert rows == stored > 0
    finally:
        store.close()
    acme = got[("acme", _key(SCOPE))]
    assert acme[0] and all("Oslo" in content for _, content, _ in acme[0])  # type: ignore[index]
    assert got[("umbrella", _key(SCOPE))][0]  # type: ignore[index]
    assert got[("nobody", _key(SCOPE))] == ([], [])  # never wrote: no index, no error
    # Scope partitions stay apart inside one tenant's index.
    ids = {k: {x[0] for x in v[0]} for k, v in got.items()}  # type: ignore[index]
    assert not ids[("acme", _key(SCOPE))] & ids[("acme", _key(OTHER))]


def test_migration_moves_rows_between_shared_and_per_tenant_indexes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = open_store(url)
    try:
        _fill(store)
        before = _results(store)
    finally:
        store.close()
    engine = create_engine(url)
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0006_memories_tsv")
        conn.commit()
        assert "0007_fts_per_tenant" not in current_revisions(conn)
        assert _fts_tables(conn) == {"memories_fts", "document_chunks_fts"}
        shared = conn.exec_driver_sql(
            "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH 'globex'"
        ).scalar_one()
        assert shared == conn.exec_driver_sql("SELECT count(*) FROM memories").scalar_one()
    engine.dispose()
    store = open_store(url)  # migrates again: 0007 builds the per-tenant indexes from the rows
    try:
        with store.db.read() as conn:
            assert "memories_fts" not in _fts_tables(conn)
        assert _results(store) == before
    finally:
        store.close()


def test_rows_of_a_tenant_without_an_index_are_refused(tmp_path: Path) -> None:
    """A writer that bypasses the repositories (raw SQL) cannot store rows search would never
    find: the guard trigger aborts, and nothing is written."""
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    try:
        with store.db.write() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM fts_tenants").scalar_one() == 0
        for table in ("memories", "document_chunks"):
            with (
                pytest.raises(DBAPIError, match="no full-text index for this tenant"),
                store.db.write() as conn,
            ):
                conn.exec_driver_sql(f"INSERT INTO {table} (tenant_id) VALUES ('raw-writer')")
            with store.db.read() as conn:
                assert conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one() == 0
    finally:
        store.close()


def test_a_rolled_back_first_write_leaves_no_false_memory_of_the_index(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tenant's first compile creates its index inside the compile's transaction (and checks
    for it again before the second batch of inserts). If that transaction rolls back, the
    index is gone: the next compile must create it again, and search must work."""
    store = open_store(f"sqlite:///{tmp_path / 'c.db'}")
    scope = Scope.for_subject("s1")
    try:
        store.episodes.append_many(
            "acme",
            [
                NewEpisode(
                    scope=scope,
                    source="t",
                    type="conversation.turn",
                    payload={
                        "messages": [
                            {
                                "role": "user",
                                "content": "I love the Oslo ferry, and I work at Globex.",
                            }
                        ]
                    },
                )
            ],
        )
        compiling = store.jobs.compiling

        def fail(*args: object, **kwargs: object) -> None:
            raise RuntimeError("transient failure after the inserts")

        monkeypatch.setattr(compiling, "mark_compiled", fail)
        with pytest.raises(RuntimeError, match="transient"):
            compile_scope(store, "acme", scope)
        monkeypatch.undo()
        with store.db.read() as conn:
            assert not _fts_tables(conn)  # the rollback took the index with it
        assert compile_scope(store, "acme", scope).memories_created >= 2
        found = search_memories(store, "acme", scope, "Oslo ferry", limit=5)
        assert found and "Oslo" in found[0].memory.content
    finally:
        store.close()
