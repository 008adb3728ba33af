"""Full-text search of memories on each backend: the candidate query of the lexical lane.

SQLite ranks with FTS5's BM25 inside the partition, in the tenant's own index; PostgreSQL
computes BM25 over the stored ``tsvector`` with the partition's statistics, so both backends
rank alike and on one scale, which the engine calibrates one way. Terms come from the engine
(``cairn.engine.query``: the same analysis that built the index, ``cairn.core.analysis``).

On PostgreSQL the IDF counts and the partition's average length are read from
``memory_term_stats`` (kept exact by triggers, migrations ``0013_memory_term_stats`` and
``0016_memory_lengths``) and the matching rows are found through the
partition's own GIN posting lists (``ix_memories_part_fts``), so a query's cost follows the
rows its terms match in the partition, not the partition's or the tenant's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

from cairn.core.analysis import index_text
from cairn.core.scope import Scope
from cairn.store import fts, fts5_rank, pg_bm25
from cairn.store.database import Database
from cairn.store.schema import metadata
from cairn.store.statements import statement

# A query term in more than this share of a partition's rows is left out (see
# ``_without_common_terms``); 0 keeps every term.
COMMON_TERM_SHARE = 0.2
COMMON_TERM_MIN_ROWS = 2000
# SQLite: a big partition holding at least this share of its tenant's index is matched
# without its ``part`` token, the window widened by the index's rows per partition row and
# the partition checked in the join: BM25 gives the partition token no weight, so the scores
# are the same, and FTS5 no longer walks the token's posting list (one entry per row of the
# partition) beside the terms' (measured at 10,000 memories: 2.9 -> 1.9 ms p50 for the query).
DOMINANT_SHARE = 0.5
# PostgreSQL: a query ranks at most about this many rows of a big partition (or ``4 * limit``):
# see ``_candidate_sets``.
CANDIDATE_ROWS = 1000
CANDIDATE_TERMS = 8
# PostgreSQL: per partition, term, kind and status, how many memories hold the term (its
# lexeme in ``fts``; ``term`` '' counts the memories). Kept by triggers (migration 0013); empty
# on SQLite, where FTS5 keeps its own statistics.
term_stats = Table(
    "memory_term_stats",
    metadata,
    Column("tenant_id", String(128), nullable=False),
    Column("runtime_id", String(256), nullable=False),
    Column("user_id", String(256), nullable=False, server_default=""),
    Column("agent_id", String(256), nullable=False, server_default=""),
    Column("term", Text(), nullable=False),
    Column("kind", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    Column("n", BigInteger(), nullable=False),
    # On term ``''``: the sum of those memories' ``length(fts)`` (0 on every other term).
    Column("lexemes", BigInteger(), nullable=False, server_default="0"),
    PrimaryKeyConstraint(
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "term",
        "kind",
        "status",
        name="pk_memory_term_stats",
    ),
)
# What ranking reads of each candidate besides its score (``MemoryRepository.rank_facts``,
# the same expressions): confidence, status, kind and the compiler's speaker, read with the
# match instead of in one more query.
FACTS = "m.confidence, m.status, m.kind, CAST({} AS VARCHAR)"
SQLITE_FACTS = FACTS.format("""JSON_EXTRACT(m.metadata, '$."speaker"')""")
PG_FACTS = FACTS.format("m.metadata ->> 'speaker'")
Facts = tuple[float, str, str, str]
Ranked = tuple[int, float, Facts]


def facts_of(row: Sequence[Any]) -> Facts:
    """The ``FACTS`` columns of a row as ``rank_facts`` returns them."""
    return float(row[0]), str(row[1]), str(row[2]), str(row[3] or "")


def search_text(content: str, metadata: dict[str, Any]) -> str:
    """What the full-text index of a memory reads: its content and date keywords, analysed."""
    keywords = metadata.get("keywords")
    if not (isinstance(keywords, str) and keywords):
        return index_text(content)
    # Analysed apart (a space separates them anyway), so a long content cut by the index's
    # cap keeps its date keywords.
    return f"{index_text(content)} {index_text(keywords)}".strip()


def row_stems(analysed: str, metadata: Any, stems: fts5_rank.PorterStems | None = None) -> str:
    """SQLite's ``search_stems`` of a memory: the stems of its analysed text (``search_text``)
    and its neighbour words (``context_terms``), the two columns its full-text entry holds
    (``fts5_rank.indexed_stems``)."""
    context = metadata.get("context_terms") if isinstance(metadata, dict) else None
    return fts5_rank.indexed_stems(
        f"{analysed} {context if isinstance(context, str) else ''}", stems
    )


def lexical(
    conn: Connection,
    db: Database,
    tenant_id: str,
    scope: Scope,
    terms: Sequence[str],
    limit: int,
    kinds: Sequence[str] | None = None,
    include_superseded: bool = False,
    coordinate: bool = True,
) -> list[tuple[int, float]]:
    """``(seq, raw score)`` of the best full-text matches (``lexical_ranked`` without the
    facts)."""
    found = lexical_ranked(
        conn, db, tenant_id, scope, terms, limit, kinds, include_superseded, coordinate
    )
    return [(seq, score) for seq, score, _ in found]


def lexical_ranked(
    conn: Connection,
    db: Database,
    tenant_id: str,
    scope: Scope,
    terms: Sequence[str],
    limit: int,
    kinds: Sequence[str] | None = None,
    include_superseded: bool = False,
    coordinate: bool = True,
) -> list[Ranked]:
    """``(seq, raw score, facts)`` of the best full-text matches, any term matching (OR);
    ``facts`` are what ``MemoryRepository.rank_facts`` reads of the row (``FACTS``).
    ``coordinate``: each score scaled by the share of the query's IDF the row holds
    (``fts5_rank.coordination``); search asks for it only beside a vector lane (see
    ``cairn.engine.search``).

    ``terms`` are terms of ``cairn.core.analysis`` (letters, marks and digits; CJK bigrams);
    the backend stems English words. Scores are BM25 on both backends (larger is better).
    An empty term (none of the analysis's, but a caller's) is no term: PostgreSQL would read
    its quoted form as a tsquery syntax error.
    """
    terms = [t for t in terms if t.strip()]
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
        statuses = ("active", "superseded") if include_superseded else ("active",)
        return _pg_ranked(conn, terms, where, params, statuses, list(kinds or []), coordinate)
    table = db.fts.table_if_exists(conn, fts.MEMORIES, tenant_id)
    if table is None:
        return []  # the tenant has never stored a memory
    part = fts.part_token(tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
    counter = db.fts_counts.counter(conn, table)
    stems = db.porter_stems if coordinate else None
    return _fts5_ranked(conn, table, part, terms, where, params, limit, counter, stems)


def _fts5_ranked(
    conn: Connection,
    table: str,
    part: str,
    terms: Sequence[str],
    where: list[str],
    params: dict[str, Any],
    limit: int,
    counter: fts5_rank.Counter,
    stems: fts5_rank.PorterStems | None = None,
) -> list[Ranked]:
    """FTS5 ranks inside the partition (its ``part`` token) in the tenant's own index; the
    rows returned pass partition, status and kind (``counter`` counts a query's rows: see
    ``fts5_rank.MatchCounts``). A partition under
    ``COMMON_TERM_MIN_ROWS`` rows is ranked term by term with the partition's IDF, as
    PostgreSQL ranks (``cairn.store.fts5_rank``); a bigger one by one ``bm25`` query, whose
    IDF is the tenant's (one query instead of one per term: at 100,000 memories the per-term
    ranking doubled a request's time). With ``stems`` scores are coordinated (the share of
    the query a row holds: ``fts5_rank.QueryShare``), without them plain BM25."""
    coordinate = stems is not None
    total = counter(f'part : "{part}"')
    if not total:  # nothing indexed in the partition (a new subject): no term can match
        return []
    rows_in_table = fts5_rank.table_rows(conn, table)
    if total < COMMON_TERM_MIN_ROWS:
        found = fts5_rank.ranked(
            conn,
            table,
            part,
            terms,
            total,
            rows_in_table,
            where,
            params,
            limit,
            counter,
            SQLITE_FACTS,
            coordinate,
        )
        return [(seq, score, facts_of(got)) for seq, score, got in found]
    in_part = fts5_rank.in_partition(part, total, rows_in_table)
    counts = {t: counter(in_part + '"' + t.replace('"', '""') + '"') for t in terms}
    if COMMON_TERM_SHARE and len(terms) > 1:
        terms = _without_common_terms(counts, terms, total)
    quoted = ('"' + term.replace('"', '""') + '"' for term in terms)
    match = "(" + " OR ".join(quoted) + ")"
    # A partition holding most of the tenant's index is matched without its token (see
    # ``DOMINANT_SHARE``): ``scale`` is how many rows of the index stand for one of its own.
    dominant = total >= DOMINANT_SHARE * rows_in_table
    scale = rows_in_table / total if dominant else 1.0
    params["q"] = match if dominant else f'part : "{part}" AND {match}'
    # Coordination re-ranks the window, so its size is part of the ranking; plain BM25 takes
    # the window's first ``limit`` rows that pass ``where``, so its window only leaves room for
    # the rows the join drops (superseded, other kinds) and widens below when that is short.
    inner = limit * 2 + 50 if coordinate else limit + limit // 8 + 10
    # Coordination reads the share a row holds off its stored stems, or off its indexed text
    # where it has none (``_coordinated``).
    indexed = f", m.search_stems, {_UNSTEMMED}" if coordinate else ""
    sql = (
        f"SELECT m.seq, -f.r AS s, {SQLITE_FACTS}{indexed} "
        f"FROM (SELECT rowid, {fts.MEMORIES.rank_sql(table)} AS r FROM {table} "
        f"WHERE {table} MATCH :q ORDER BY r, rowid LIMIT :wide) f "
        f"JOIN memories m ON m.seq = f.rowid WHERE {' AND '.join(where)} "
        "ORDER BY f.r, m.seq LIMIT :inner"
    )
    while True:
        params["inner"] = inner
        params["wide"] = int(inner * scale) + 10 if dominant else inner
        rows = conn.execute(statement(sql), params).all()
        if len(rows) >= limit or inner >= 1_000_000 or counter(params["q"]) <= params["wide"]:
            # (Fewer than asked: either that is all there is, or filters ate the window.)
            if stems is not None:
                return _coordinated(rows, terms, counts, total, stems)[:limit]
            return [(int(r[0]), float(r[1]), facts_of(r[2:])) for r in rows[:limit]]
        inner *= 4


# A row's indexed text (analysed words and neighbour words), read only when it has no stored
# stems (``CASE`` reads the columns it needs, so rows with stems never touch their text).
_UNSTEMMED = (
    "CASE WHEN m.search_stems IS NULL THEN "
    "m.search_text || ' ' || coalesce(JSON_EXTRACT(m.metadata, '$.context_terms'), '') END"
)


def _coordinated(
    rows: Sequence[Any],
    terms: Sequence[str],
    counts: dict[str, int],
    total: int,
    stems: fts5_rank.PorterStems,
) -> list[Ranked]:
    """The big-partition window (``seq, score, facts…, search_stems, unstemmed text`` rows,
    best by BM25) with each score scaled by the share of the query the row holds
    (``fts5_rank.QueryShare``: from the row's stored stems, or its text if it has none),
    best first."""
    share = fts5_rank.QueryShare(terms, counts, total, stems)
    shares = share.of_stems([r[-2] or "" for r in rows])
    unstemmed = [i for i, r in enumerate(rows) if r[-2] is None]
    if unstemmed:
        for i, held in zip(
            unstemmed, share.all([rows[i][-1] or "" for i in unstemmed]), strict=True
        ):
            shares[i] = held
    out = [
        (int(r[0]), float(r[1]) * held, facts_of(r[2:-2]))
        for r, held in zip(rows, shares, strict=True)
    ]
    out.sort(key=lambda got: (-got[1], got[0]))
    return out


def _pg_ranked(
    conn: Connection,
    terms: Sequence[str],
    where: list[str],
    params: dict[str, Any],
    statuses: Sequence[str],
    kinds: list[str],
    coordinate: bool = True,
) -> list[Ranked]:
    """PostgreSQL: BM25 with FTS5's constants, summed over the terms: each term's IDF in the
    partition (``ln(1 + (N - n + 0.5) / (n + 0.5))``) times its saturated, length-normalised
    frequency in the row, ``f (k1 + 1) / (f + k1 (1 - b + b L / avgL))``, and the sum scaled by
    the share of the query's IDF the row holds (``fts5_rank.coordination``, as on SQLite).
    ``f`` counts an occurrence in the memory's own words 1 and in a neighbour's half, read
    with ``ts_rank`` (repeats count less than FTS5 counts them: ``cairn.store.pg_bm25``);
    ``L`` is the row's ``length(fts)``, its distinct lexemes (FTS5 counts tokens). ``N``,
    ``n`` and ``avgL`` come from ``memory_term_stats`` (``pg_bm25.partition_counts``); as on
    SQLite, a big partition's common terms are left out (``COMMON_TERM_SHARE``).

    (It ranked with ``ts_rank``'s own normalisation before, dividing by the log of a row's
    length: longer rows came first, fewer fitted a budget, and recall was 1 to 2 points below
    SQLite's at small budgets: docs/benchmarks.md, session 10.)

    The candidates are the partition's rows that match a term, read through
    ``ix_memories_part_fts`` (a materialised CTE, so the plan does not depend on the table's
    statistics being current); the outer query scores them and re-checks partition, status
    and kind."""
    # Each term quoted as a tsquery lexeme: analysed terms are words, but quoting keeps any
    # character of any script from being read as tsquery syntax.
    quoted = ["'" + term.replace("'", "''") + "'" for term in terms]
    params = dict(params)
    for i, term in enumerate(quoted):
        params[f"t{i}"] = term
    limit = int(params["limit"])
    total, lexemes, counts = pg_bm25.partition_counts(conn, len(terms), params, statuses, kinds)
    keep = list(range(len(terms)))
    if COMMON_TERM_SHARE and len(terms) > 1 and total >= COMMON_TERM_MIN_ROWS:
        keep = [i for i in keep if counts[i] <= COMMON_TERM_SHARE * total] or keep
    for i in keep:
        n = counts[i]
        params[f"w{i}"] = math.log(1.0 + (total - n + 0.5) / (n + 0.5))
    queries = ", ".join(f"to_tsquery('english'::regconfig, :t{i}) q{i}" for i in keep)
    columns, norm, score = pg_bm25.score_sql(keep, params, total, lexemes, coordinate)
    # ``fts`` is the stored tsvector (migration 0006): ranking reads it, no re-parse.
    kind_sql = " AND m.kind = ANY(:kinds)" if kinds else ""
    params["kinds"] = kinds
    branches = []
    idf = {i: float(params[f"w{i}"]) for i in keep}
    for b, (clause, bound) in enumerate(_candidate_sets(quoted, keep, counts, idf, total, limit)):
        params[f"q_{b}"] = clause
        branches.append(
            f"(SELECT {_CANDIDATE_COLUMNS}, {norm} AS norm, {columns} "
            f"FROM memories m, to_tsquery('english'::regconfig, :q_{b}) q, {queries} "
            f"WHERE {pg_bm25.PART_KEY} && ({pg_bm25.part_keys(statuses)}) AND m.fts @@ q{kind_sql}"
            + (f" LIMIT {int(bound)})" if bound is not None else ")")
        )
    # Rows in several candidate sets are scored once; one set holds each row once, and
    # sorting and grouping its rows by seq cost about a tenth of the query.
    best = (
        f"{score} AS s FROM m WHERE {' AND '.join(where)}"
        if len(branches) == 1
        else f"max({score}) AS s FROM m WHERE {' AND '.join(where)} GROUP BY m.seq"
    )
    sql = (
        f"WITH m AS MATERIALIZED ({' UNION ALL '.join(branches)}) "
        f"SELECT r.seq, r.s, {PG_FACTS} FROM (SELECT m.seq, {best} "
        "ORDER BY s DESC, m.seq LIMIT :limit) r "
        "JOIN memories m ON m.seq = r.seq ORDER BY r.s DESC, r.seq"
    )
    return [(int(r[0]), float(r[1]), facts_of(r[2:])) for r in conn.execute(statement(sql), params)]


def _candidate_sets(
    quoted: Sequence[str],
    keep: Sequence[int],
    counts: Sequence[int],
    idf: dict[int, float],
    total: int,
    limit: int,
) -> list[tuple[str, int | None]]:
    """The rows ranked, as tsquery text over ``quoted`` terms, each with a bound on the rows
    it may read (``None``: all).

    A query whose terms match at most ``CANDIDATE_ROWS`` rows (or ``4 * limit``), or any
    query in a partition under ``COMMON_TERM_MIN_ROWS`` rows, ranks every matching row.
    Otherwise ranking every match would cost time in proportion to the common terms' rows
    (thousands each at 100,000 memories). A row's score is at most about the sum of the IDF
    of the terms it holds, so, as MaxScore and WAND do, only rows whose terms' IDF sum
    reaches a threshold are ranked: the sets of terms in order of IDF sum, each with the
    rows expected to hold exactly that set (from the counts, terms taken as independent),
    until about that many rows; the query is the OR of each chosen set's AND (GIN reads the
    posting lists and only the rows that qualify). If fewer than ``limit`` rows are
    expected, rows holding the next set fill the result. Bounds keep terms that occur
    together more often than by chance from reading more than twice that many rows.
    """
    every = " | ".join(quoted[i] for i in keep)
    budget = max(CANDIDATE_ROWS, 4 * limit)
    if total < COMMON_TERM_MIN_ROWS or sum(counts[i] for i in keep) <= budget:
        return [(every, None)]
    # A term that matches nothing (a stop word) adds no row.
    live = sorted((i for i in keep if counts[i] > 0), key=lambda i: (-idf[i], i))
    live = live[:CANDIDATE_TERMS]
    share = [min(1.0, counts[i] / total) for i in live]
    sets = []
    for mask in range(1, 1 << len(live)):
        rows = float(total)
        for k, p in enumerate(share):
            rows *= p if mask >> k & 1 else 1.0 - p
        mass = sum(idf[i] for k, i in enumerate(live) if mask >> k & 1)
        sets.append((-mass, mask, rows))
    sets.sort()
    chosen: set[int] = set()
    expected = 0.0
    for _, mask, rows in sets:
        if expected + rows > budget:
            break
        chosen.add(mask)
        expected += rows
    # The chosen sets hold every superset of each (a superset's IDF sum is larger), so the
    # query needs only the minimal ones.
    minimal = [m for m in chosen if not any(m & ~(1 << k) in chosen for k in _bits(m))]

    def clause(mask: int) -> str:
        return "(" + " & ".join(quoted[live[k]] for k in _bits(mask)) + ")"

    out: list[tuple[str, int | None]] = []
    if minimal:
        out.append((" | ".join(clause(m) for m in sorted(minimal)), 2 * budget))
    if expected < limit and len(chosen) < len(sets):
        out.append((clause(sets[len(chosen)][1]), max(limit, budget - int(expected))))
    return out


def _bits(mask: int) -> list[int]:
    return [k for k in range(mask.bit_length()) if mask >> k & 1]


_CANDIDATE_COLUMNS = ", ".join(
    f"m.{c}" for c in ("seq", "tenant_id", "runtime_id", "user_id", "agent_id", "kind", "status")
)


def _without_common_terms(counts: dict[str, int], terms: Sequence[str], total: int) -> list[str]:
    """In a partition of ``COMMON_TERM_MIN_ROWS`` (``total``) rows or more, drop terms found
    in more than ``COMMON_TERM_SHARE`` of its rows when rarer terms remain: their BM25 weight
    is small, yet scoring their matches is most of a query's cost (e.g. a speaker's name, in
    every one of their turns). Measured on LoCoMo (where it is off: ~630 rows a subject),
    forcing it on costs about 0.013 of recall at 1,000 tokens."""
    keep = [t for t in terms if counts[t] <= COMMON_TERM_SHARE * total]
    return keep or list(terms)
