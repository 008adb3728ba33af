"""PostgreSQL's lexical search reads its BM25 statistics from ``memory_term_stats``
(migrations 0013 and 0016): the triggers keep the counts and the partitions' lexeme sums equal
to a pass over the rows through inserts, status and kind changes, deletes and a partition's
erasure, and the ranking equals BM25 computed from such a pass."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, create_engine, delete, text, update

from cairn.core.scope import Scope
from cairn.store import Store, open_store
from cairn.store.database import normalize_url
from cairn.store.memory_search import lexical, search_text
from cairn.store.migrations import _config, current_revisions
from cairn.store.partitions import PartitionSelector, erase
from cairn.store.pg_bm25 import BM25_B, BM25_K1, PG_CONTEXT_WEIGHT, RANK_ONE
from cairn.store.schema import memories
from tests.conftest import database_url
from tests.store.rows import memory_row

A = Scope.for_subject("alice")
B = Scope.for_subject("bob")
WORDS = "ferry oslo bergen train coffee ferry tea harbour mountain bike Ferry кофе 咖啡馆 don't"


def _row(tenant: str, scope: Scope, i: int, kind: str = "turn") -> dict[str, Any]:
    words = WORDS.split()
    content = " ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 5))
    metadata = {"context_terms": words[i % len(words)]} if i % 3 == 0 else {}
    return memory_row(
        scope,
        content,
        tenant_id=tenant,
        kind=kind,
        metadata=metadata,
        search_text=search_text(content, metadata),
        content_hash=hashlib.sha256(f"{i}{kind}{content}".encode()).hexdigest(),
    )


def _counts_by_pass(conn: Connection) -> set[tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, count(*), "
            "sum(l) FROM (SELECT m.*, u.lexeme AS term, 0 AS l FROM memories m, unnest(m.fts) u "
            "UNION ALL SELECT m.*, '', length(m.fts) FROM memories m) t "
            "WHERE status IN ('active', 'superseded') GROUP BY 1, 2, 3, 4, 5, 6, 7"
        )
    )
    return {tuple(r) for r in rows}


def _counts_kept(conn: Connection) -> set[tuple[Any, ...]]:
    rows = conn.execute(
        text(
            "SELECT tenant_id, runtime_id, user_id, agent_id, term, kind, status, n, lexemes "
            "FROM memory_term_stats"
        )
    )
    return {tuple(r) for r in rows}


def _ranked_by_pass(
    conn: Connection, tenant: str, scope: Scope, terms: Sequence[str], kinds: list[str] | None
) -> list[tuple[int, float]]:
    """BM25 computed from one pass over the rows (no kept statistics), each row's sum
    coordinated by the share of the query it holds."""
    params: dict[str, Any] = {
        "tenant": tenant,
        "runtime": scope.runtime_id,
        "user": scope.user_id,
        "agent": scope.agent_id,
        "kinds": kinds or [],
    }
    where = (
        "m.tenant_id = :tenant AND m.runtime_id = :runtime AND m.user_id = :user "
        "AND m.agent_id = :agent AND m.status = 'active'"
        + (" AND m.kind = ANY(:kinds)" if kinds else "")
    )
    quoted = ["'" + t.replace("'", "''") + "'" for t in terms]
    queries = ", ".join(f"to_tsquery('english', :t{i}) q{i}" for i in range(len(terms)))
    for i, q in enumerate(quoted):
        params[f"t{i}"] = q
    counts = ", ".join(f"count(*) FILTER (WHERE m.fts @@ q{i})" for i in range(len(terms)))
    row = conn.execute(
        text(
            f"SELECT count(*), avg(length(m.fts)), {counts} FROM memories m, {queries} "
            f"WHERE {where}"
        ),
        params,
    ).one()
    for i in range(len(terms)):
        n = int(row[i + 2])
        params[f"w{i}"] = math.log(1.0 + (int(row[0]) - n + 0.5) / (n + 0.5))
    params["q"] = " | ".join(quoted)
    params["avgdl"] = float(row[1])
    weights = f"'{{{PG_CONTEXT_WEIGHT}, 0.2, 0.4, 1.0}}'"
    # BM25 (k1, b as FTS5's): a term's weighted frequency is its unnormalised ts_rank over
    # that of one occurrence, a row's length its count of lexemes.
    freq = [f"(ts_rank({weights}, m.fts, q{i}, 0) / {RANK_ONE!r})" for i in range(len(terms))]
    norm = f"{BM25_K1} * (1 - {BM25_B} + {BM25_B} * length(m.fts) / :avgdl)"
    summed = " + ".join(f":w{i} * {f} * {BM25_K1 + 1} / ({f} + {norm})" for i, f in enumerate(freq))
    # Coordinated: times the share of the query's IDF the row holds.
    held = " + ".join(f":w{i} * CAST(m.fts @@ q{i} AS integer)" for i in range(len(terms)))
    params["mass"] = sum(params[f"w{i}"] for i in range(len(terms)))
    score = f"({summed}) * ({held}) / :mass"
    sql = (
        f"SELECT m.seq, {score} AS s FROM memories m, to_tsquery('english', :q) q, {queries} "
        f"WHERE m.fts @@ q AND {where} ORDER BY s DESC, m.seq LIMIT 50"
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(text(sql), params)]


@pytest.fixture
def pg_store(pg_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    """PostgreSQL only (SQLite's FTS5 keeps its own statistics)."""
    store = open_store(database_url("postgres", tmp_path, request))
    yield store
    store.close()


def _load(store: Store) -> None:
    rows = [
        _row("acme", s, i, "turn" if i % 4 else "profile_fact") for s in (A, B) for i in range(60)
    ]
    rows += [_row("umbrella", A, i) for i in range(20)]
    with store.transaction() as tx:
        tx.memories.insert_new(rows)


def test_counts_follow_every_write(pg_store: Store) -> None:
    store = pg_store
    _load(store)
    with store.db.read() as conn:
        assert _counts_kept(conn) == _counts_by_pass(conn)
        assert _counts_kept(conn)  # something was counted
    with store.db.write() as conn:
        seqs = [r[0] for r in conn.execute(text("SELECT seq FROM memories ORDER BY seq LIMIT 9"))]
        conn.execute(
            update(memories).where(memories.c.seq.in_(seqs[:3])).values(status="superseded")
        )
        conn.execute(update(memories).where(memories.c.seq.in_(seqs[3:5])).values(status="deleted"))
        conn.execute(update(memories).where(memories.c.seq == seqs[5]).values(kind="episode"))
        conn.execute(
            update(memories).where(memories.c.seq == seqs[6]).values(search_text="harbour tea")
        )
        # An update of no counted column (status, kind, partition, text) fires nothing.
        conn.execute(update(memories).where(memories.c.seq.in_(seqs)).values(confidence=0.5))
        conn.execute(delete(memories).where(memories.c.seq.in_(seqs[7:])))
    with store.db.read() as conn:
        assert _counts_kept(conn) == _counts_by_pass(conn)
    with store.db.write() as conn:
        erase(conn, PartitionSelector.of_scope("acme", B))
    with store.db.read() as conn:
        kept = _counts_kept(conn)
        assert kept == _counts_by_pass(conn)
        assert not [r for r in kept if r[0] == "acme" and r[2] == B.user_id]  # nothing remains
        assert [r for r in kept if r[0] == "acme" and r[2] == A.user_id]


@pytest.mark.parametrize(
    "query",
    [
        "ferry",
        "oslo ferry coffee",
        "кофе tea",
        "咖啡馆",
        "don't bike",
        "mountain harbour bergen",
        "2e5kg ferry",  # a term that parses to a phrase ('2e5' <-> 'kg') no row holds
    ],
)
@pytest.mark.parametrize("kinds", [None, ["profile_fact"]])
def test_ranking_equals_a_pass_over_the_rows(
    pg_store: Store, query: str, kinds: list[str] | None
) -> None:
    store = pg_store
    _load(store)
    from cairn.engine.query import ranking_terms

    terms = ranking_terms(query)
    with store.db.read() as conn:
        got = lexical(conn, store.db, "acme", A, terms, 50, kinds)
        want = _ranked_by_pass(conn, "acme", A, terms, kinds)
    assert got or kinds, query  # every query matches some memory of any kind
    assert [s for s, _ in got] == [s for s, _ in want]
    assert [round(x, 9) for _, x in got] == [round(x, 9) for _, x in want]


def test_a_big_partition_ranks_a_bounded_candidate_set(
    pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``COMMON_TERM_MIN_ROWS`` rows, a query whose terms match more than
    ``CANDIDATE_ROWS`` rows ranks the rows whose terms' IDF sum is highest, about that many,
    with the scores of the full ranking: here every row of the rare term, then (with a
    larger bound) the rows holding both common terms, never a row holding one common term
    only; a single common term fills the result up to the bound."""
    store = pg_store
    rows = []
    for i in range(240):
        row = _row("acme", A, 0, "profile_fact" if i % 5 == 0 else "turn")
        words = ["ferry"] + (["harbour"] if i % 2 == 0 else []) + (["tea"] if i % 3 == 0 else [])
        words += ["oslo"] if i % 40 == 0 else []
        row["content"] = " ".join(words) + f" filler{i}"
        row["search_text"] = search_text(row["content"], {})
        row["metadata"] = {}
        row["content_hash"] = hashlib.sha256(f"big{i}".encode()).hexdigest()
        rows.append(row)
    with store.transaction() as tx:
        tx.memories.insert_new(rows)
    from cairn.engine.query import ranking_terms
    from cairn.store import memory_search

    terms = ranking_terms("oslo harbour tea")
    with store.db.read() as conn:
        full = lexical(conn, store.db, "acme", A, terms, 240)
        monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 100)
        monkeypatch.setattr(memory_search, "COMMON_TERM_SHARE", 0.0)
        monkeypatch.setattr(memory_search, "CANDIDATE_ROWS", 10)
        rare_only = lexical(conn, store.db, "acme", A, terms, 5)
        monkeypatch.setattr(memory_search, "CANDIDATE_ROWS", 50)
        with_pairs = lexical(conn, store.db, "acme", A, terms, 10)
        # What it ranks: the rare term's rows and the rows holding both common terms.
        counts = [6, 120, 80]
        idf = {i: math.log(1.0 + (240 - n + 0.5) / (n + 0.5)) for i, n in enumerate(counts)}
        sets = memory_search._candidate_sets(
            ["'oslo'", "'harbour'", "'tea'"], [0, 1, 2], counts, idf, 240, 10
        )
        wide = lexical(conn, store.db, "acme", A, terms, 240)
        one = lexical(conn, store.db, "acme", A, ranking_terms("harbour"), 5)
        monkeypatch.setattr(memory_search, "COMMON_TERM_MIN_ROWS", 40)  # 48 facts
        monkeypatch.setattr(memory_search, "CANDIDATE_ROWS", 10)
        seen: list[Any] = []
        sets_of = memory_search._candidate_sets
        monkeypatch.setattr(
            memory_search, "_candidate_sets", lambda *a: seen.append(sets_of(*a)) or seen[-1]
        )
        facts = lexical(conn, store.db, "acme", A, terms, 5, ["profile_fact"])
        content = {
            int(r[0]): set(str(r[1]).split())
            for r in conn.execute(text("SELECT seq, content FROM memories WHERE tenant_id='acme'"))
        }
    assert len(full) == 160  # every row holding a term
    assert wide == full  # 4 * limit rows or more: every matching row is ranked
    scores = dict(full)
    for got in (rare_only, with_pairs):  # each row ranked keeps its full score
        assert all(abs(scores[seq] - x) < 1e-9 for seq, x in got)
    assert all("oslo" in content[s] for s, _ in rare_only)
    assert rare_only == full[:5]  # the best rows hold the rare term
    want = {s for s, w in content.items() if "oslo" in w or {"harbour", "tea"} <= w}
    assert sets == [("('oslo') | ('tea' & 'harbour')", 100)]  # rarest first
    assert with_pairs == [p for p in full if p[0] in want][:10]
    # The kinds asked for are counted and read, and no other (oslo: rows 0, 40 … 200).
    kinds = {int(r[0]): str(r[1]) for r in _kinds(store)}
    assert seen and seen[0][0][1] is not None  # the bounded path, over the facts' counts
    assert len(facts) == 5 and all(kinds[s] == "profile_fact" for s, _ in facts)
    assert all("oslo" in content[s] for s, _ in facts)
    # Too few rows expected to fill the result: rows holding the common term fill it.
    assert len(one) == 5 and all("harbour" in content[s] for s, _ in one)


def _kinds(store: Store) -> list[Any]:
    with store.db.read() as conn:
        return list(conn.execute(text("SELECT seq, kind FROM memories WHERE tenant_id='acme'")))


def test_0016_sums_the_lengths_of_stored_rows_and_down_keeps_counting(
    pg_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Rows written under 0015's triggers (no lengths) get their partitions' sums when 0016
    runs, and the triggers keep them after; going down drops the column and keeps counting."""
    url = database_url("postgres", tmp_path, request)
    open_store(url).close()
    engine = create_engine(normalize_url(url))
    with engine.connect() as conn:
        command.downgrade(_config(conn), "0015_turn_confidence")
        conn.commit()
        assert "0016_memory_lengths" not in current_revisions(conn)
    store = open_store(url, migrate=False)
    try:
        _load(store)  # counted by 0013's triggers, without lengths
    finally:
        store.close()
    with engine.connect() as conn:
        columns = conn.execute(
            text(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'memory_term_stats'"
            )
        ).scalars()
        assert "lexemes" not in set(columns)
        assert conn.execute(text("SELECT sum(n) FROM memory_term_stats")).scalar()
    store = open_store(url)  # migrates: 0016 sums the stored rows
    try:
        with store.db.read() as conn:
            assert _counts_kept(conn) == _counts_by_pass(conn)
            assert conn.execute(text("SELECT sum(lexemes) FROM memory_term_stats")).scalar()
        with store.transaction() as tx:
            tx.memories.insert_new([_row("acme", A, i) for i in range(60, 70)])
        with store.db.write() as conn:
            conn.execute(delete(memories).where(memories.c.content.like("ferry%")))
        with store.db.read() as conn:
            assert _counts_kept(conn) == _counts_by_pass(conn)
    finally:
        store.close()
    engine.dispose()
