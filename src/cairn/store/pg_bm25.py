"""PostgreSQL's BM25 for the lexical lane of memories (``cairn.store.memory_search``): the SQL
that scores a candidate row from its stored ``tsvector`` the way FTS5's ``bm25`` scores a row
on SQLite, with the partition's statistics (``memory_term_stats``, read by
``partition_counts``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection

from cairn.store import fts5_rank
from cairn.store.statements import statement

# Weight of the words of neighbouring messages (indexed with a turn, not part of it)
# relative to the memory's own words (SQLite's is the FTS5 rank ``cairn.store.fts`` sets).
PG_CONTEXT_WEIGHT = 0.5
# PostgreSQL ranks by BM25 as FTS5 does (``fts5_aux.c``: k1 1.2, b 0.75). A row's length is
# its count of distinct lexemes (``length(fts)``), the partition's average from
# ``memory_term_stats`` (migration ``0016_memory_lengths``).
BM25_K1 = 1.2
BM25_B = 0.75
# ``ts_rank`` without normalisation of a term at one position of weight 1 (PostgreSQL's
# ``calc_rank_or``: ``(w + w - w) / 1.64493406685``). A term's frequency in a row is its
# ``ts_rank`` over this: 1 for one occurrence in the memory's own words, 0.5 in a neighbour's.
# ``ts_rank`` weighs the j-th occurrence by 1/j², so repeats add less than FTS5's count does
# (two occurrences 1.25, any number at most 1.64, against 2, 3, ...): BM25's saturation then
# applies on top, and a word said several times weighs somewhat less than on SQLite.
RANK_ONE = 1.0 / 1.64493406685
# A bound float may reach the server as a ``numeric`` literal, several times slower per row.
F8 = "CAST(:{} AS float8)"


def score_sql(
    keep: Sequence[int], params: dict[str, Any], total: int, lexemes: int, coordinate: bool
) -> tuple[str, str, str]:
    """SQL of ``memory_search._pg_ranked``'s scores for the terms ``keep`` (their IDF bound
    as ``w<i>``, the queries as ``q<i>``): the candidate query's columns (each term's
    frequency ``r<i>``, 0 where the row lacks the term), its length
    normalisation ``norm``, and the outer query's score over those columns. Binds what they
    use into ``params``."""
    weights = f"'{{{PG_CONTEXT_WEIGHT}, 0.2, 0.4, 1.0}}'"
    # Each term's weighted frequency in the row (``RANK_ONE``), read in the candidate query;
    # the outer query computes the scores from them (each ``ts_rank`` evaluated once).
    per_rank = F8.format("per_rank")
    # With several terms, ``ts_rank`` only where the row holds the term (``@@``, a lookup in
    # the row's sorted lexemes, costs less than a ``ts_rank`` call, and most candidates hold
    # one or two of the query's terms); elsewhere the frequency is 0, which is what
    # ``ts_rank`` gives for a word the row lacks (and, for a phrase the row does not hold,
    # instead of a tiny positive number). A lone term is held by every candidate.

    def frequency(i: int) -> str:
        rank = f"ts_rank({weights}, m.fts, q{i}, 0) * {per_rank}"
        return rank if len(keep) == 1 else f"CASE WHEN m.fts @@ q{i} THEN {rank} ELSE 0 END"

    columns = ", ".join(f"{frequency(i)} AS r{i}" for i in keep)
    norm = _bind_norm(params, total, lexemes).format(tsv="m.fts")
    summed = " + ".join(f":w{i} * m.r{i} * :k1p1 / (m.r{i} + m.norm)" for i in keep)
    score = f"({summed})"
    if coordinate:  # scaled by the share of the query the row matches, as on SQLite
        # (a frequency is positive exactly where the row holds the term: see above)
        held = " + ".join(f":w{i} * sign(m.r{i})" for i in keep)
        params["mass"] = sum(float(params[f"w{i}"]) for i in keep) or 1.0
        score = f"{score} * LEAST(1.0, ({held}) / :mass)"
    return columns, norm, score


def _bind_norm(params: dict[str, Any], total: int, lexemes: int) -> str:
    """Binds BM25's constants into ``params`` and returns the SQL of its length normalisation
    ``k1 (1 - b + b L / avgL)`` as ``na + nb L`` for a ``{tsv}`` column, in ``float8`` (a bound
    float may reach the server as a ``numeric`` literal: slower per row). ``lexemes`` is the
    sum of the ``total`` rows' ``length(tsv)``."""
    average = max(1.0, lexemes / total) if total else 1.0
    params["na"] = BM25_K1 * (1.0 - BM25_B)
    params["nb"] = BM25_K1 * BM25_B / average
    params["k1p1"] = BM25_K1 + 1.0
    params["per_rank"] = 1.0 / RANK_ONE
    return f"{F8.format('na')} + {F8.format('nb')} * length({{tsv}})"


def chunk_score_sql(
    counts: Sequence[int], params: dict[str, Any], total: int, lexemes: int
) -> tuple[str, str]:
    """SQL of a document chunk's BM25 (``c.tsv`` against ``q0``…) as FTS5's ``bm25`` scores
    it on SQLite: each term's FTS5 IDF in the partition's chunks (``total`` of them,
    ``counts`` holding each term, ``lexemes`` the sum of their ``length(tsv)``) times its
    saturated, length-normalised frequency, the frequency read with ``ts_rank`` as for
    memories (``RANK_ONE``; every lexeme of a chunk has weight D). Returns the inner query's
    columns (each term's frequency ``f<i>`` and the length normalisation ``norm``) and the
    score over them (as ``r.``); binds ``b<i>`` and the constants they use."""
    columns = [_bind_norm(params, total, lexemes).format(tsv="c.tsv") + " AS norm"]
    summed = []
    for i, n in enumerate(counts):
        params[f"b{i}"] = fts5_rank.fts5_idf(total, n)
        columns.append(
            f"CAST(ts_rank('{{1, 1, 1, 1}}', c.tsv, q{i}, 0) AS float8) "
            f"* {F8.format('per_rank')} AS f{i}"
        )
        summed.append(f"{F8.format(f'b{i}')} * r.f{i} * {F8.format('k1p1')} / (r.f{i} + r.norm)")
    return ", ".join(columns), "(" + " + ".join(summed) + ")"


# The partition-and-status key of ``ix_memories_part_fts`` (written as the index has it: the
# planner matches the expression as text).
PART_KEY = (
    "ARRAY[md5(m.tenant_id || chr(31) || m.runtime_id || chr(31) || m.user_id || chr(31) || "
    "m.agent_id || chr(31) || m.status)]"
)


def part_keys(statuses: Sequence[str]) -> str:
    """SQL of the ``PART_KEY`` values of the partition (bound as ``:tenant`` …) in each
    status."""
    sep = " || chr(31) || "
    scope = sep.join(f"CAST(:{p} AS text)" for p in ("tenant", "runtime", "user", "agent"))
    return "ARRAY[" + ", ".join(f"md5({scope}{sep}'{s}')" for s in statuses) + "]"


def partition_counts(
    conn: Connection,
    n_terms: int,
    params: dict[str, Any],
    statuses: Sequence[str],
    kinds: list[str],
) -> tuple[int, int, list[int]]:
    """``N`` (the partition's rows in ``statuses`` and kinds), the sum of those rows'
    ``length(fts)``, and each term's ``n`` (those rows whose ``fts`` matches it), as a pass
    over the rows would count them. A term whose query is one lexeme (every word) is read
    from ``memory_term_stats``; a term that parses to several (a phrase) is counted through
    the partition index; a stop word matches nothing."""
    stats = dict(params, statuses=list(statuses), kinds=kinds)
    stats["quoted"] = [params[f"t{i}"] for i in range(n_terms)]
    kind_sql = " AND s.kind = ANY(:kinds)" if kinds else ""
    # One round trip: each term's lexemes and, for a one-lexeme term, its count (one
    # primary-key read per term, in a lateral subquery: with ``term = ANY`` the planner may
    # scan the partition's whole key range); the row of ordinality 0 counts the partition.
    count_of = (
        "(SELECT sum(s.{}) FROM memory_term_stats s WHERE s.tenant_id = :tenant "
        "AND s.runtime_id = :runtime AND s.user_id = :user AND s.agent_id = :agent "
        f"AND s.term = {{}} AND s.status = ANY(:statuses){kind_sql})"
    )
    partition = f"{count_of.format('n', chr(39) * 2)}, {count_of.format('lexemes', chr(39) * 2)}"
    rows = conn.execute(
        statement(
            f"SELECT 0, 0, CAST(NULL AS text[]), {partition} UNION ALL "
            "SELECT t.i, v.nodes, v.lexes, CASE WHEN v.nodes = 1 AND cardinality(v.lexes) = 1 "
            f"THEN {count_of.format('n', 'v.lexes[1]')} END, NULL "
            "FROM unnest(CAST(:quoted AS text[])) WITH ORDINALITY t(q, i) CROSS JOIN LATERAL "
            "(SELECT numnode(to_tsquery('english'::regconfig, t.q)) AS nodes, "
            "tsvector_to_array(to_tsvector('english'::regconfig, t.q)) AS lexes) v"
        ),
        stats,
    ).all()
    total = lexemes = 0
    counts = [0] * n_terms
    phrases: list[int] = []
    for i, nodes, array, n, size in rows:
        if i == 0:
            total, lexemes = int(n or 0), int(size or 0)
        elif nodes == 1 and len(array or []) == 1:
            counts[i - 1] = int(n or 0)
        elif nodes > 0:
            phrases.append(i - 1)
    kind_where = " AND m.kind = ANY(:kinds)" if kinds else ""
    for i in phrases:
        counts[i] = int(
            conn.execute(
                statement(
                    f"SELECT count(*) FROM memories m WHERE {PART_KEY} && "
                    f"({part_keys(statuses)}) AND m.fts @@ to_tsquery('english'::regconfig, "
                    f":t{i}) AND m.tenant_id = :tenant AND m.runtime_id = :runtime "
                    f"AND m.user_id = :user AND m.agent_id = :agent{kind_where}"
                ),
                stats,
            ).scalar_one()
        )
    return total, lexemes, counts
