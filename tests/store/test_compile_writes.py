"""The store side of a compile step on both backends: ``insert_new`` offers every row to one
multi-row insert and merges the provenance of rows already stored; ``active_in_slots`` reads
only the slots asked for; migration 0014 (episode indexes, cheaper term-count triggers) runs on
a database that already holds data, and the term counts stay exact through a compile."""

from __future__ import annotations

import hashlib
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from alembic import command
from sqlalchemy import create_engine, event, inspect, text

from cairn.core.episodes import NewEpisode
from cairn.core.memories import moved_memory_id
from cairn.core.scope import Scope
from cairn.engine.compile import compile_request, compile_scope
from cairn.store import Store, open_store
from cairn.store.database import normalize_url
from cairn.store.memory_search import search_text
from cairn.store.migrations import _config, current_revisions
from cairn.store.planner import ANALYZE_MIN_ROWS

TENANT = "t1"
SCOPE = Scope.for_subject("maya")
NOW = datetime(2024, 5, 1, tzinfo=UTC)


def _row(content: str, sources: list[str], *, kind: str = "turn", slot: str = "") -> dict[str, Any]:
    metadata = {"slot": slot} if slot else {}
    return {
        "id": uuid.uuid4(),
        "tenant_id": TENANT,
        "runtime_id": SCOPE.runtime_id,
        "user_id": SCOPE.user_id,
        "agent_id": SCOPE.agent_id,
        "session_id": "s",
        "kind": kind,
        "content": content,
        "search_text": search_text(content, metadata),
        "summary": content,
        "confidence": 1.0,
        "valid_from": NOW,
        "valid_to": None,
        "status": "active",
        "source_episode_ids": sources,
        "metadata": metadata,
        "content_hash": hashlib.sha256(f"{kind}{content}".encode()).hexdigest(),
        "superseded_by": None,
        "created_at": NOW,
        "updated_at": NOW,
    }


def test_insert_new_returns_the_new_rows_and_merges_the_known_ones(store: Store) -> None:
    e1, e2, e3 = (str(uuid.uuid4()) for _ in range(3))
    with store.transaction() as tx:
        first = tx.memories.insert_new([_row("ferry to Oslo", [e1]), _row("tea in Bergen", [e2])])
    assert [m.content for m in first] == ["ferry to Oslo", "tea in Bergen"]
    # The same content again (another id, one more source), a repeat inside the batch, a new row.
    again = [_row("ferry to Oslo", [e1, e3]), _row("bike rides", [e2]), _row("bike rides", [e3])]
    with store.transaction() as tx:
        created = tx.memories.insert_new(again)
    assert [(m.content, [str(i) for i in m.source_episode_ids]) for m in created] == [
        ("bike rides", [e2, e3])
    ]
    stored = {m.content: m for m in store.memories.list(TENANT, SCOPE)}
    assert len(stored) == 3
    assert [str(i) for i in stored["ferry to Oslo"].source_episode_ids] == [e1, e3]
    assert stored["ferry to Oslo"].id == first[0].id  # the stored memory, not a second one


def test_a_row_whose_id_another_partition_holds_is_stored_under_a_moved_id(store: Store) -> None:
    """A memory is never dropped because some other tenant's row carries its id (as an import
    could once store): it is stored under the partition's moved id."""
    squatter = {**_row("ferry to Oslo", [str(uuid.uuid4())]), "tenant_id": "other"}
    with store.transaction() as tx:
        tx.memories.insert_new([squatter])
    wanted = {**_row("ferry to Oslo", [str(uuid.uuid4())]), "id": squatter["id"]}
    with store.transaction() as tx:
        made = tx.memories.insert_new([wanted, _row("tea in Bergen", [str(uuid.uuid4())])])
    assert [m.content for m in made] == ["ferry to Oslo", "tea in Bergen"]
    assert made[0].id == moved_memory_id(TENANT, SCOPE, squatter["id"], 1)
    with store.snapshot() as tx:
        assert tx.memories.count(TENANT, SCOPE) == 2
        assert tx.memories.count("other", SCOPE) == 1


def test_insert_new_sends_one_statement_for_many_rows(store: Store) -> None:
    """Not row by row: on PostgreSQL each statement runs the term-count trigger once."""
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        if sql.lstrip().upper().startswith("INSERT INTO MEMORIES ("):
            statements.append(sql)

    event.listen(store.db.engine, "before_cursor_execute", count)
    try:
        with store.transaction() as tx:
            created = tx.memories.insert_new([_row(f"turn {i}", []) for i in range(250)])
    finally:
        event.remove(store.db.engine, "before_cursor_execute", count)
    assert len(created) == 250
    # One statement carrying every row (an executemany of one-row statements would show one
    # call here too, with one row's VALUES).
    assert len(statements) == 1
    assert statements[0].count("), (") == 249


def test_active_in_slots_reads_only_the_slots_asked_for(store: Store) -> None:
    rows = [
        _row("Maya works at Initech", [], kind="profile_fact", slot="maya:employer"),
        _row("Maya is called Maya", [], kind="profile_fact", slot="maya:name"),
        _row("Jon is called Jon", [], kind="profile_fact", slot="jon:NAME"),
        _row("Maya likes tea", [], kind="profile_fact"),
        _row("Session one", [], kind="episode_summary", slot="session:s1"),
    ]
    with store.transaction() as tx:
        tx.memories.insert_new(rows)
    with store.snapshot() as tx:
        by_slot = tx.memories.active_in_slots(
            TENANT, SCOPE, "profile_fact", slots=["maya:employer", "nobody:age"]
        )
        named = tx.memories.active_in_slots(TENANT, SCOPE, "profile_fact", suffix=":name")
        none = tx.memories.active_in_slots(TENANT, SCOPE, "profile_fact", slots=[])
    assert [m.content for m in by_slot] == ["Maya works at Initech"]
    # SQLite's LIKE ignores case: the caller checks the suffix itself.
    assert "Maya is called Maya" in [m.content for m in named]
    assert {m.metadata["slot"].lower() for m in named} <= {"maya:name", "jon:name"}
    assert none == []


def _episodes(n: int, start: int = 0) -> list[NewEpisode]:
    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    lines = ["I work at Initech.", "I work at Globex now.", "We took the ferry to Oslo."]
    return [
        NewEpisode(
            scope=SCOPE,
            source="test",
            type="conversation.turn",
            payload={"messages": [{"role": "user", "name": "Maya", "content": lines[i % 3]}]},
            session_id=f"s{i // 7}",
            idempotency_key=f"k{i}",
            occurred_at=t0 + timedelta(minutes=i),
        )
        for i in range(start, start + n)
    ]


_PASS = """
    SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, count(*) FROM (
        SELECT tenant_id, runtime_id, user_id, agent_id, u.lexeme AS term, kind, status
        FROM memories CROSS JOIN LATERAL unnest(fts) u WHERE status IN ('active', 'superseded')
        UNION ALL
        SELECT tenant_id, runtime_id, user_id, agent_id, '', kind, status
        FROM memories WHERE status IN ('active', 'superseded')
    ) t GROUP BY 1, 2, 3, 4, 5, 6, 7 ORDER BY 1, 2, 3, 4, 5, 6, 7
"""
_KEPT = (
    "SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, n "
    "FROM memory_term_stats ORDER BY 1, 2, 3, 4, 5, 6, 7"
)


def test_0014_upgrades_a_database_with_data_and_counts_stay_exact(db_url: str) -> None:
    store = open_store(db_url)
    try:
        store.episodes.append_many(TENANT, _episodes(30))
        compile_scope(store, TENANT, SCOPE, max_episodes=20)
    finally:
        store.close()
    engine = create_engine(normalize_url(db_url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0013_memory_term_stats")
        conn.commit()
        assert "0014_compile_indexes" not in current_revisions(conn)
        assert "ix_episodes_session" not in {
            i["name"] for i in inspect(conn).get_indexes("episodes")
        }
    engine.dispose()

    store = open_store(db_url)  # migrates: 0014 runs over the stored rows
    try:
        with store.db.read() as conn:
            indexes = {i["name"]: i for i in inspect(conn).get_indexes("episodes")}
            assert indexes["ix_episodes_uncompiled"]["column_names"][-2:] == ["occurred_at", "seq"]
            assert "ix_episodes_session" in indexes
        store.episodes.append_many(TENANT, _episodes(30, start=30))
        while compile_scope(store, TENANT, SCOPE, max_episodes=20).has_more:
            pass
        assert store.episodes.count(TENANT, SCOPE) == 60
        statuses = [m.status for m in store.memories.list(TENANT, SCOPE, limit=1000)]
        assert "superseded" in statuses  # the employer changed: supersede ran through 0014
        if not store.db.is_sqlite:
            with store.db.read() as conn:
                kept = [tuple(r) for r in conn.execute(text(_KEPT))]
                assert kept == [tuple(r) for r in conn.execute(text(_PASS))]
                assert all(r[-1] > 0 for r in kept)
                body = conn.execute(
                    text("SELECT prosrc FROM pg_proc WHERE proname = 'cairn_memory_terms_insert'")
                ).scalar_one()
                assert 'COLLATE "C"' in body
                options = conn.execute(
                    text("SELECT reloptions FROM pg_class WHERE relname = 'ix_memories_part_fts'")
                ).scalar_one()
                assert set(options) == {"fastupdate=on", "gin_pending_list_limit=64"}
    finally:
        store.close()


def test_a_compile_request_counts_what_is_left_once(store: Store) -> None:
    store.episodes.append_many(TENANT, _episodes(330))
    step = compile_scope(store, TENANT, SCOPE, count_remaining=False)
    assert (step.episodes_compiled, step.has_more, step.remaining_episodes) == (100, True, 1)
    first = compile_request(store, TENANT, SCOPE, limit=150)
    assert (first.episodes_compiled, first.has_more, first.remaining_episodes) == (150, True, 80)
    rest = compile_request(store, TENANT, SCOPE)
    assert (rest.episodes_compiled, rest.has_more, rest.remaining_episodes) == (80, False, 0)


def test_a_compile_refreshes_the_statistics_of_a_table_that_grew(store: Store) -> None:
    """PostgreSQL: once ``episodes`` changed by more than ``ANALYZE_MIN_ROWS`` and half its
    size, the next compile step analyses it (SQLite: nothing to do)."""
    store.episodes.append_many(TENANT, _episodes(ANALYZE_MIN_ROWS + 200))
    if store.db.is_sqlite:
        assert store.refresh_statistics() == []
        return
    query = text(
        "SELECT n_mod_since_analyze, last_analyze FROM pg_stat_user_tables "
        "WHERE relname = 'episodes' AND schemaname = current_schema()"
    )
    for _ in range(100):  # the server publishes a transaction's counts within a second
        with store.db.read() as conn:
            changed, analysed = conn.execute(query).one()
        if changed > ANALYZE_MIN_ROWS:
            break
        time.sleep(0.05)
    compile_scope(store, TENANT, SCOPE)
    with store.db.read() as conn:
        after = conn.execute(query).one()[1]
    assert after is not None and (analysed is None or after > analysed)  # by the compile step
    # The compile's own writes (episodes marked compiled) may be published by the server after
    # its ANALYZE (counts reach pg_stat within a second) and count once more; after that,
    # nothing changed much, so no step analyses the table again.
    time.sleep(1.2)
    store.refresh_statistics()
    time.sleep(1.2)
    assert "episodes" not in store.refresh_statistics()
