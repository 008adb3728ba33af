"""SQLite: FTS5's BM25 with the partition's IDF, as PostgreSQL ranks (``memory_search``).

FTS5's built-in ``bm25`` takes each term's IDF over its whole table, and a tenant's memories
share one table (``cairn.store.fts``), so a word common in one subject and rare in another
weighed the same in both. PostgreSQL weighs each term by its IDF in the partition
(``memory_term_stats``), and that ranks better on LoCoMo and the held-out set (docs:
"PostgreSQL lexical at 100k and backend parity"). Here each term's matches in the partition
are ranked by FTS5's ``bm25`` of that term alone; dividing by FTS5's IDF of the term leaves
the term's saturated, length-normalised frequency, which is weighted by the partition's IDF
(PostgreSQL's form, ``ln(1 + (N - n + 0.5) / (n + 0.5))``) and summed over the terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

# At most this many of a term's rows (its best by its own BM25) are read; a term with more
# (a common one, kept in a partition too small for ``COMMON_TERM_SHARE``, or just under the
# share in a big one) adds its weight to those only.
TERM_ROWS = 5000


def ranked(
    conn: Connection,
    table: str,
    part: str,
    terms: Sequence[str],
    total: int,
    where: list[str],
    params: dict[str, Any],
    limit: int,
) -> list[tuple[int, float]]:
    """``(seq, score)`` of the partition's best ``limit`` rows passing ``where``; ``total``
    is the partition's row count in the index."""
    part_q = f'part : "{part}"'
    rows_in_table = _table_rows(conn, table)
    scores: dict[int, float] = {}
    for term in dict.fromkeys(terms):
        quoted = '"' + term.replace('"', '""') + '"'
        rows = conn.execute(
            text(
                f"SELECT rowid, -rank FROM {table} WHERE {table} MATCH :q ORDER BY rank LIMIT :cap"
            ),
            {"q": f"{part_q} AND {quoted}", "cap": TERM_ROWS},
        ).all()
        if not rows:
            continue
        n = len(rows) if len(rows) < TERM_ROWS else count(conn, table, f"{part_q} AND {quoted}")
        n_table = count(conn, table, quoted)
        # FTS5's own IDF of the term (``fts5_aux.c``), to take back out of its score.
        fts_idf = max(1e-6, math.log((rows_in_table - n_table + 0.5) / (n_table + 0.5)))
        weight = math.log(1.0 + (total - n + 0.5) / (n + 0.5)) / fts_idf
        for rowid, score in rows:
            scores[int(rowid)] = scores.get(int(rowid), 0.0) + float(score) * weight
    order = sorted(scores, key=lambda seq: (-scores[seq], seq))
    out: list[tuple[int, float]] = []
    # Best first, in chunks, until ``limit`` rows pass the partition, status and kind.
    step = max(limit * 2, 100)
    checks = " AND ".join(where)
    for start in range(0, len(order), step):
        chunk = order[start : start + step]
        names = ", ".join(f":s{i}" for i in range(len(chunk)))
        bound = dict(params, **{f"s{i}": seq for i, seq in enumerate(chunk)})
        passed = {
            int(r[0])
            for r in conn.execute(
                text(f"SELECT m.seq FROM memories m WHERE m.seq IN ({names}) AND {checks}"),
                bound,
            )
        }
        out += [(seq, scores[seq]) for seq in chunk if seq in passed]
        if len(out) >= limit:
            break
    return out[:limit]


def count(conn: Connection, table: str, query: str) -> int:
    """Rows of the FTS5 ``table`` matching ``query``."""
    return int(
        conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), {"q": query}
        ).scalar_one()
    )


def _table_rows(conn: Connection, table: str) -> int:
    """The row count FTS5's ``bm25`` uses: the first varint of the index's "averages" record
    (rowid 1 of ``<table>_data``); a count of the table if that cannot be read."""
    block = conn.execute(text(f"SELECT block FROM {table}_data WHERE id = 1")).scalar()
    if isinstance(block, bytes) and block:
        value = 0
        for i, byte in enumerate(block[:9]):
            if i == 8:
                return (value << 8) | byte
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                return value
    return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
