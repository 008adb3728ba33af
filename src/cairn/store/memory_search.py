"""Full-text search of memories on each backend: the candidate query of the lexical lane.

SQLite ranks with FTS5's BM25 inside the partition, in the tenant's own index; PostgreSQL sums
each term's ``ts_rank`` weighted by the term's BM25 IDF in the partition, so both backends
rank alike; its scores are brought to BM25's scale (``PG_TO_BM25``), so the engine calibrates
both backends' scores one way. Terms come from the engine (``cairn.engine.query``: the same
analysis that built the index, ``cairn.core.analysis``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from cairn.core.analysis import index_text
from cairn.core.scope import Scope
from cairn.store import fts
from cairn.store.database import Database

# Weight of the words of neighbouring messages (indexed with a turn, not part of it)
# relative to the memory's own words (SQLite's is the FTS5 rank ``cairn.store.fts`` sets).
PG_CONTEXT_WEIGHT = 0.5
# A query term in more than this share of a partition's rows is left out (see
# ``_without_common_terms``); 0 keeps every term.
COMMON_TERM_SHARE = 0.2
COMMON_TERM_MIN_ROWS = 2000
# PostgreSQL's IDF-weighted ``ts_rank`` sum to BM25's scale: a memory PostgreSQL scores 0.7 is
# worth what SQLite's BM25 scores 6 (the half-saturation points the engine's calibration had
# per backend before it had one).
PG_TO_BM25 = 6.0 / 0.7


def search_text(content: str, metadata: dict[str, Any]) -> str:
    """What the full-text index of a memory reads: its content and date keywords, analysed."""
    keywords = metadata.get("keywords")
    extra = " " + keywords if isinstance(keywords, str) and keywords else ""
    return index_text(content + extra)


def lexical(
    conn: Connection,
    db: Database,
    tenant_id: str,
    scope: Scope,
    terms: Sequence[str],
    limit: int,
    kinds: Sequence[str] | None = None,
    include_superseded: bool = False,
) -> list[tuple[int, float]]:
    """``(seq, raw score)`` of the best full-text matches, any term matching (OR).

    ``terms`` are terms of ``cairn.core.analysis`` (letters, marks and digits; CJK bigrams);
    the backend stems English words. SQLite scores are BM25 (larger is better), PostgreSQL's
    the IDF-weighted ``ts_rank`` sum times ``PG_TO_BM25``.
    """
    if not terms:
        return []
    params: dict[str, Any] = {
        "tenant": tenant_id,
        "runtime": scope.runtime_id,
        "user": scope.user_id,
        "agent": scope.agent_id,
        "limit": limit,
    }
    where = [
        "m.tenant_id = :tenant",
        "m.runtime_id = :runtime",
        "m.user_id = :user",
        "m.agent_id = :agent",
        "m.status IN ('active', 'superseded')" if include_superseded else "m.status = 'active'",
    ]
    if kinds:
        names = []
        for i, kind in enumerate(kinds):
            params[f"k{i}"] = kind
            names.append(f":k{i}")
        where.append(f"m.kind IN ({', '.join(names)})")
    if not db.is_sqlite:
        return _pg_ranked(conn, terms, where, params)
    table = db.fts.table_if_exists(conn, fts.MEMORIES, tenant_id)
    if table is None:
        return []  # the tenant has never stored a memory
    part = fts.part_token(tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
    return _fts5_ranked(conn, table, part, terms, where, params, limit)


def _fts5_ranked(
    conn: Connection,
    table: str,
    part: str,
    terms: Sequence[str],
    where: list[str],
    params: dict[str, Any],
    limit: int,
) -> list[tuple[int, float]]:
    """FTS5 ranks inside the partition (its ``part`` token) in the tenant's own index and
    returns the best ``inner`` rows; the join re-checks partition, status and kind. If
    filtering leaves fewer than ``limit`` while more matches may exist, it asks again for
    more."""
    if COMMON_TERM_SHARE and len(terms) > 1:
        terms = _without_common_terms(conn, table, part, terms)
    quoted = ('"' + term.replace('"', '""') + '"' for term in terms)
    params["q"] = f'part : "{part}" AND (' + " OR ".join(quoted) + ")"
    inner = limit * 2 + 50
    while True:
        params["inner"] = inner
        sql = (
            f"SELECT m.seq, -f.rank AS s FROM (SELECT rowid, rank FROM {table} "
            f"WHERE {table} MATCH :q ORDER BY rank LIMIT :inner) f "
            f"JOIN memories m ON m.seq = f.rowid WHERE {' AND '.join(where)} "
            "ORDER BY f.rank, m.seq LIMIT :limit"
        )
        rows = conn.execute(text(sql), params).all()
        if len(rows) >= limit or inner >= 1_000_000:
            return [(int(r[0]), float(r[1])) for r in rows]
        # Fewer than asked: either that is all there is, or filters ate the window.
        total = conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), params
        ).scalar_one()
        if total <= inner:
            return [(int(r[0]), float(r[1])) for r in rows]
        inner *= 4


def _pg_ranked(
    conn: Connection, terms: Sequence[str], where: list[str], params: dict[str, Any]
) -> list[tuple[int, float]]:
    """PostgreSQL: each term's ``ts_rank`` weighted by its rarity in the partition (BM25's
    IDF, ``ln(1 + (N - n + 0.5) / (n + 0.5))``), summed. ``ts_rank`` alone reads no corpus
    statistics, so a word in most rows (a speaker's name, in every one of their turns) would
    weigh as much as the rare word a question is about, and PostgreSQL would rank unlike
    SQLite's BM25. The counts are one pass over the partition's rows (the stored ``fts``)."""
    # Each term quoted as a tsquery lexeme: analysed terms are words, but quoting keeps any
    # character of any script from being read as tsquery syntax.
    quoted = ["'" + term.replace("'", "''") + "'" for term in terms]
    params = dict(params, q=" | ".join(quoted))
    queries = ", ".join(f"to_tsquery('english'::regconfig, :t{i}) q{i}" for i in range(len(terms)))
    for i, term in enumerate(quoted):
        params[f"t{i}"] = term
    counts = ", ".join(f"count(*) FILTER (WHERE m.fts @@ q{i})" for i in range(len(terms)))
    row = conn.execute(
        text(f"SELECT count(*), {counts} FROM memories m, {queries} WHERE {' AND '.join(where)}"),
        params,
    ).one()
    total = int(row[0])
    for i in range(len(terms)):
        n = int(row[i + 1])
        params[f"w{i}"] = math.log(1.0 + (total - n + 0.5) / (n + 0.5))
    weights = f"'{{{PG_CONTEXT_WEIGHT}, 0.2, 0.4, 1.0}}'"
    score = " + ".join(f":w{i} * ts_rank({weights}, m.fts, q{i}, 1)" for i in range(len(terms)))
    # ``fts`` is the stored tsvector (migration 0006): ranking reads it, no re-parse.
    sql = (
        f"SELECT m.seq, {score} AS s "
        f"FROM memories m, to_tsquery('english'::regconfig, :q) q, {queries} "
        f"WHERE m.fts @@ q AND {' AND '.join(where)} "
        "ORDER BY s DESC, m.seq LIMIT :limit"
    )
    return [(int(r[0]), float(r[1]) * PG_TO_BM25) for r in conn.execute(text(sql), params)]


def _without_common_terms(
    conn: Connection, table: str, part: str, terms: Sequence[str]
) -> list[str]:
    """In a partition of ``COMMON_TERM_MIN_ROWS`` rows or more, drop terms found in more
    than ``COMMON_TERM_SHARE`` of its rows when rarer terms remain: their BM25 weight is
    small, yet scoring their matches is most of a query's cost (e.g. a speaker's name, in
    every one of their turns). Measured on LoCoMo (where it is off: ~630 rows a subject),
    forcing it on costs about 0.013 of recall at 1,000 tokens."""

    def count(q: str) -> int:
        return int(
            conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), {"q": q}
            ).scalar_one()
        )

    total = count(f'part : "{part}"')
    if total < COMMON_TERM_MIN_ROWS:
        return list(terms)  # small partitions are cheap to score in full
    share = {t: count(f'part : "{part}" AND "' + t.replace('"', '""') + '"') for t in terms}
    keep = [t for t in terms if share[t] <= COMMON_TERM_SHARE * total]
    return keep or list(terms)
