"""What the revisions that analyse stored text again share (``0024``, ``0027``)."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa

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
