"""What the revisions that analyse stored text again share (``0024``, ``0027``, ``0031``,
``0034``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from cairn.core.analysis import index_text
from cairn.store.fts5_rank import indexed_stems
from cairn.store.memory_search import search_text as memory_search_text

BATCH = 1_000


def reanalyse_rows(
    conn: sa.Connection,
    table: str,
    column: str,
    analyse: Callable[[str], str],
    affected: Callable[[str], bool],
) -> None:
    """``search_text`` of ``table``'s rows whose ``column`` is ``affected``, made again as
    ``analyse`` of it, in batches by ``seq``."""
    after = 0
    while True:
        rows = conn.execute(
            sa.text(f"SELECT seq, {column} FROM {table} WHERE seq > :after ORDER BY seq LIMIT :n"),
            {"after": after, "n": BATCH},
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        changed = [
            {"q": seq, "x": analyse(text or "")} for seq, text in rows if affected(text or "")
        ]
        if changed:
            conn.execute(sa.text(f"UPDATE {table} SET search_text = :x WHERE seq = :q"), changed)


def reanalyse_holding(conn: sa.Connection, chars: str) -> None:
    """Analyse again the memories (not deleted) and document chunks whose content holds one of
    ``chars`` (found by the database, so no other row is read). SQLite's ``search_stems``
    follow, and the full-text indexes follow their columns (the SQLite triggers, PostgreSQL's
    generated ``tsv``). A memory's neighbour words were cut from texts not stored, and an
    item's terms from fields not stored: they keep their old terms until compiled or put
    again."""
    holds = " OR ".join(f"content LIKE :c{i}" for i in range(len(chars)))
    args = {f"c{i}": f"%{c}%" for i, c in enumerate(chars)}
    sqlite = conn.dialect.name == "sqlite"
    rows = conn.execute(
        sa.text(
            f"SELECT seq, content, metadata FROM memories WHERE status != 'deleted' AND ({holds})"
        ),
        args,
    ).all()
    for seq, content, raw in rows:
        meta: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        analysed = memory_search_text(content or "", meta)
        change: dict[str, Any] = {"q": seq, "x": analysed}
        sets = "search_text = :x"
        if sqlite:
            change["s"] = indexed_stems(f"{analysed} {meta.get('context_terms') or ''}")
            sets += ", search_stems = :s"
        conn.execute(sa.text(f"UPDATE memories SET {sets} WHERE seq = :q"), change)
    chunks = conn.execute(
        sa.text(f"SELECT seq, content FROM document_chunks WHERE {holds}"), args
    ).all()
    for seq, content in chunks:
        conn.execute(
            sa.text("UPDATE document_chunks SET search_text = :x WHERE seq = :q"),
            {"q": seq, "x": index_text(content or "")},
        )
