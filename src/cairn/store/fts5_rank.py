"""SQLite: FTS5's BM25 with the partition's IDF, as PostgreSQL ranks (``memory_search``).

FTS5's built-in ``bm25`` takes each term's IDF over its whole table, and a tenant's memories
share one table (``cairn.store.fts``), so a word common in one subject and rare in another
weighed the same in both. PostgreSQL weighs each term by its IDF in the partition
(``memory_term_stats``), and that ranks better on LoCoMo and the held-out set (docs:
"PostgreSQL lexical at 100k and backend parity"). Here each term's matches in the partition
are ranked by FTS5's ``bm25`` of that term alone; dividing by FTS5's IDF of the term leaves
the term's saturated, length-normalised frequency, which is weighted by the partition's IDF
(PostgreSQL's form, ``ln(1 + (N - n + 0.5) / (n + 0.5))``) and summed over the terms.

A row's sum is then scaled by the share of the query it matches (``coordination``): the IDF of
the terms the row holds over the IDF of all the query's terms. BM25 alone lets a short row that
holds one common term (a speaker's name, in every one of their turns) outrank a long one that
holds the rare words a question is about, because its length normalisation favours short rows;
scaled, a row that holds one term of five keeps about a fifth of its score.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import Stemmer
from sqlalchemy import Connection

from cairn.store import fts
from cairn.store.statements import statement

# At most this many of a term's rows (its best by its own BM25) are read; a term with more
# (a common one, kept in a partition too small for ``COMMON_TERM_SHARE``, or just under the
# share in a big one) adds its weight to those only.
TERM_ROWS = 5000


Counter = Callable[[str], int]


def ranked(
    conn: Connection,
    table: str,
    part: str,
    terms: Sequence[str],
    total: int,
    rows_in_table: int,
    where: list[str],
    params: dict[str, Any],
    limit: int,
    counter: Counter | None = None,
    facts: str = "NULL",
    coordinate: bool = True,
) -> list[tuple[int, float, tuple[Any, ...]]]:
    """``(seq, score, facts)`` of the partition's best ``limit`` rows passing ``where``:
    ``facts`` are the values of the SQL ``facts`` over ``m``, the memory row. ``total`` is
    the partition's row count in the index, ``rows_in_table`` the index's (``table_rows``);
    ``counter`` counts a MATCH query's rows (``MatchCounts.counter``; by default a ``count``
    query each time). ``coordinate``: scale each score by the share of the query the row
    holds (``coordination``). Each term's rows are ranked by the memory index's own
    ``bm25`` (``FtsIndex.rank_sql``: faster than FTS5's ``rank`` column)."""
    rank = fts.MEMORIES.rank_sql(table)
    counted = counter or (lambda query: count(conn, table, query))
    part_q = in_partition(part, total, rows_in_table)
    scores: dict[int, float] = {}
    held: dict[int, float] = {}  # the IDF of the query's terms each row holds
    mass = 0.0  # the IDF of all of them
    for term in dict.fromkeys(terms):
        quoted = '"' + term.replace('"', '""') + '"'
        rows = conn.execute(
            statement(
                f"SELECT rowid, -({rank}) AS s FROM {table} WHERE {table} MATCH :q "
                "ORDER BY s DESC, rowid LIMIT :cap"
            ),
            {"q": part_q + quoted, "cap": TERM_ROWS},
        ).all()
        if not rows:  # a word the partition lacks: no row holds that share of the query
            mass += idf(total, 0)
            continue
        n = len(rows) if len(rows) < TERM_ROWS else counted(part_q + quoted)
        n_table = counted(quoted)
        # FTS5's own IDF of the term, to take back out of its score.
        fts_idf = fts5_idf(rows_in_table, n_table)
        term_idf = idf(total, n)
        mass += term_idf
        weight = term_idf / fts_idf
        for rowid, score in rows:
            seq = int(rowid)
            scores[seq] = scores.get(seq, 0.0) + float(score) * weight
            held[seq] = held.get(seq, 0.0) + term_idf
    for seq in scores if coordinate else ():
        scores[seq] *= coordination(held[seq], mass)
    order = sorted(scores, key=lambda seq: (-scores[seq], seq))
    out: list[tuple[int, float, tuple[Any, ...]]] = []
    # Best first, in chunks, until ``limit`` rows pass the partition, status and kind.
    step = max(limit * 2, 100)
    checks = " AND ".join(where)
    names = ", ".join(f":s{i}" for i in range(step))
    for start in range(0, len(order), step):
        chunk = order[start : start + step]
        bound = dict(params, **{f"s{i}": seq for i, seq in enumerate(_padded(chunk, step))})
        passed = {
            int(r[0]): tuple(r[1:])
            for r in conn.execute(
                statement(
                    f"SELECT m.seq, {facts} FROM memories m WHERE m.seq IN ({names}) AND {checks}"
                ),
                bound,
            )
        }
        out += [(seq, scores[seq], passed[seq]) for seq in chunk if seq in passed]
        if len(out) >= limit:
            break
    return out[:limit]


def in_partition(part: str, total: int, rows_in_table: int) -> str:
    """The MATCH prefix that keeps a term's rows to partition ``part`` (``total`` of the
    index's ``rows_in_table`` rows): its token, ANDed; nothing when the partition is the
    whole index (a tenant with one scope), where a term's rows are all the partition's and
    FTS5 need not walk the token's posting list beside the term's (a count then takes a
    fifth of the time; the ``part`` column weighs nothing in ``bm25``, so scores are the
    same). For a read snapshot: inside a write transaction the averages record
    ``rows_in_table`` comes from lags the rows written in it."""
    return "" if total >= rows_in_table else f'part : "{part}" AND '


def idf(total: int, n: int) -> float:
    """A term's BM25 IDF in a partition of ``total`` rows, ``n`` of which hold it (the form
    PostgreSQL's ranking uses too: never negative)."""
    return math.log(1.0 + (total - n + 0.5) / (n + 0.5))


def fts5_idf(total: int, n: int) -> float:
    """FTS5's own IDF of a term held by ``n`` of ``total`` rows (``fts5_aux.c``: never below
    1e-6), which its ``bm25`` ranks by; PostgreSQL uses it for document chunks too."""
    return max(1e-6, math.log((total - n + 0.5) / (n + 0.5)))


def coordination(held: float, mass: float) -> float:
    """The share of a query a row matches: the IDF of the query's terms it holds over the IDF
    of all of them (1 when the query has no weight at all)."""
    return min(1.0, held / mass) if mass > 0 else 1.0


def porter_terms(terms: Sequence[str]) -> dict[str, str]:
    """``term → its stem`` as FTS5's ``porter`` tokenizer would index it: ASCII words stemmed
    with the Porter algorithm, others as they are (the analysis already stemmed them)."""
    ascii_terms = [t for t in dict.fromkeys(terms) if t.isascii()]
    stems = dict(zip(ascii_terms, Stemmer.Stemmer("porter").stemWords(ascii_terms), strict=True))
    return {t: stems.get(t, t) for t in terms}


def indexed_stems(text: str, stems: PorterStems | None = None) -> str:
    """The distinct words of ``text`` (a row's analysed words and its neighbour words) as
    ``porter_terms`` stems them, each once, space-separated with a space at either end (a
    stem is looked up as `` stem ``): what ``QueryShare.of_stems`` reads off a stored row
    (``memories.search_stems``, written with the row on SQLite)."""
    words = list(dict.fromkeys(text.split()))
    stem = stems.of(words) if stems is not None else porter_terms(words)
    return " " + " ".join(dict.fromkeys(stem[w] for w in words)) + " " if words else " "


class PorterStems:
    """``porter_terms`` remembered: the words of the rows a query coordinates (``QueryShare``)
    are a partition's vocabulary, the same request after request, and stemming them afresh
    was most of a hybrid context request's time (some 10,000 words a request, 1.5 µs each).
    Up to ``size`` words, then it starts again. Owned by the ``Database``; thread-safe."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._stems: dict[str, str] = {}

    def clear(self) -> None:
        """Forget every word (after an erasure: the memo holds words of indexed text)."""
        with self._lock:
            self._stems = {}

    def of(self, words: Collection[str]) -> Mapping[str, str]:
        """``word → stem`` for each of ``words`` (to look words up in, not to iterate: it may
        be the memo itself, which other threads add to)."""
        known = self._stems  # (replaced, never cleared, when full: a read keeps its own)
        new = [w for w in words if w not in known]
        if not new:
            return known
        got = porter_terms(new)
        with self._lock:
            if len(self._stems) + len(got) > self.size:
                self._stems = {}
            if len(got) <= self.size:
                self._stems.update(got)
        got.update((w, known[w]) for w in words if w in known)
        return got


class QueryShare:
    """The share of a query (``coordination``) that a row holds, read off the row's indexed
    text: for rows ranked by one ``bm25`` query, where FTS5 cannot say which terms of an OR
    matched without a query per term (1 to 3 ms each at 100,000 rows). Terms are compared as
    FTS5's ``porter`` stems them (through the database's ``PorterStems``); ``counts`` are each
    term's rows among ``total``."""

    def __init__(
        self, terms: Sequence[str], counts: dict[str, int], total: int, stems: PorterStems
    ) -> None:
        self._weights = {t: idf(total, counts.get(t, 0)) for t in dict.fromkeys(terms)}
        self._stems = stems
        self._mass = sum(self._weights.values())

    def of_stems(self, rows: Sequence[str]) -> list[float]:
        """The share each row holds, from its stored stems (``indexed_stems``): the same
        share ``all`` reads off the row's text, without splitting and stemming its words."""
        stem = self._stems.of(list(self._weights))
        wanted = [(f" {stem[t]} ", w) for t, w in self._weights.items()]
        mass = self._mass
        return [coordination(sum(w for s, w in wanted if s in row), mass) for row in rows]

    def all(self, texts: Sequence[str]) -> list[float]:
        """The share each of ``texts`` (a row's analysed terms) holds, each distinct word
        among them stemmed once."""
        # Each row's words as a list and the window's distinct words in one set: a set per
        # row cost more than the splitting (some 300 rows of 100 words a request).
        rows = [text.split() for text in texts]
        words = set(self._weights)
        for row in rows:
            words.update(row)
        stem = self._stems.of(words)
        wanted = [(stem[t], w) for t, w in self._weights.items()]
        stems = {s for s, _ in wanted}
        # The words that stem to a query term's stem; a row holds what it shares with them.
        matching = {w for w in words if stem[w] in stems}
        shares = []
        for row in rows:
            held = {stem[w] for w in row if w in matching}
            shares.append(coordination(sum(w for s, w in wanted if s in held), self._mass))
        return shares


def _padded(chunk: list[int], size: int) -> list[int]:
    """``chunk`` filled up to ``size`` with a seq no row has (seqs start at 1), so every
    chunk of a step is the same statement: one entry in SQLAlchemy's compiled cache and in the
    driver's statement cache instead of one per chunk length. Each length kept some 130 KB of
    bound-parameter objects there (about 20 MB after the scale benchmark's contexts)."""
    return chunk + [0] * (size - len(chunk))


def count(conn: Connection, table: str, query: str) -> int:
    """Rows of the FTS5 ``table`` matching ``query``."""
    return int(
        conn.execute(
            statement(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), {"q": query}
        ).scalar_one()
    )


def table_rows(conn: Connection, table: str) -> int:
    """The row count FTS5's ``bm25`` uses: the first varint of the index's "averages" record
    (rowid 1 of ``<table>_data``); a count of the table if that cannot be read."""
    block = conn.execute(statement(f"SELECT block FROM {table}_data WHERE id = 1")).scalar()
    if isinstance(block, bytes) and block:
        value = 0
        for i, byte in enumerate(block[:9]):
            if i == 8:
                return (value << 8) | byte
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                return value
    return int(conn.execute(statement(f"SELECT count(*) FROM {table}")).scalar_one())


class MatchCounts:
    """Row counts of FTS5 ``MATCH`` queries, remembered while the index is unchanged: a
    query's IDF counts (the partition's rows, each term's rows) cost a count over the term's
    posting list each, about 1.5 ms of a context request at 10,000 memories, and the same
    terms come back request after request.

    The counts of a table are kept under its stamp (``_stamp``): the database's schema
    version (a dropped and re-created index is a new one) and the index's structure and
    averages records, which every committed write to the index changes (a flush writes a new
    segment and advances the structure's write counter). A read under another stamp (a newer
    snapshot, or an older one still open) starts the table's counts afresh; each read only
    ever sees counts of its own stamp. Inside a write transaction (whose own pending rows
    the records do not show yet) nothing is remembered. Owned by the ``Database``;
    thread-safe."""

    def __init__(self, size: int = 16_384) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._tables: dict[str, tuple[tuple[Any, ...], dict[str, int]]] = {}

    def clear(self) -> None:
        """Forget every count (after an erasure: the keys quote the queries' terms)."""
        with self._lock:
            self._tables = {}

    def counter(self, conn: Connection, table: str) -> Counter:
        """A ``count`` of ``table`` for the snapshot ``conn`` reads, through the cache."""
        stamp = None
        if conn.get_execution_options().get("sqlite_begin") != "IMMEDIATE":
            stamp = _stamp(conn, table)
        if stamp is None:
            return lambda query: count(conn, table, query)
        with self._lock:
            held = self._tables.get(table)
            if held is None or held[0] != stamp:
                held = (stamp, {})
                self._tables[table] = held
        counts = held[1]

        def counted(query: str) -> int:
            n = counts.get(query)
            if n is None:
                n = count(conn, table, query)
                with self._lock:
                    if sum(len(c) for _, c in self._tables.values()) >= self.size:
                        for _, c in self._tables.values():
                            c.clear()
                    counts[query] = n
            return n

        return counted


def _stamp(conn: Connection, table: str) -> tuple[Any, ...] | None:
    """What changes whenever the rows of the FTS5 ``table`` change (see ``MatchCounts``);
    None (nothing is remembered) if the index's records cannot be read."""
    row = conn.execute(
        statement(
            "SELECT (SELECT schema_version FROM pragma_schema_version), "
            f"(SELECT block FROM {table}_data WHERE id = 10), "
            f"(SELECT block FROM {table}_data WHERE id = 1)"
        )
    ).one()
    return tuple(row) if row[1] is not None and row[2] is not None else None
