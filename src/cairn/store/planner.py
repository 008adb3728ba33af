"""PostgreSQL's planner statistics, kept current by the writer that grows tables fastest.

Right after a big load the planner has no statistics for ``episodes`` and ``memories``
(autovacuum analyses a table up to a minute later, and one that grew tenfold since is no
better). With every index of a table looking alike it then picks one by the partition's
columns alone and filters the partition's rows: a compile step's session read and metadata
refresh took 12 to 25 ms at 30,000 episodes instead of a few index probes, and more as the
subject grew. A compile step therefore asks whether a table changed by half its size since it
was last analysed and, if so, analyses it: a handful of times while a table grows tenfold.
SQLite's planner ranks indexes by their equality columns and needs none of this.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, text

from cairn.store.database import Database

# A table is analysed once this many rows changed since its last ANALYZE, and at least this
# share of its live rows.
ANALYZE_MIN_ROWS = 1_000
ANALYZE_SHARE = 0.5
_LOCK = 0x6361_6972_6E01  # one analyser at a time across processes (others skip)

_STALE = text(
    "SELECT relname, n_mod_since_analyze, n_live_tup FROM pg_stat_user_tables "
    "WHERE schemaname = current_schema() AND relname IN :tables"
).bindparams(bindparam("tables", expanding=True))


def analyze_if_stale(db: Database, tables: Sequence[str]) -> list[str]:
    """ANALYZE those of ``tables`` that changed much since their last statistics; returns
    the tables analysed (none on SQLite, none while another process is analysing)."""
    if db.is_sqlite or not tables:
        return []
    with db.read() as conn:
        rows = conn.execute(_STALE, {"tables": list(tables)}).all()
    stale = [
        str(name)
        for name, changed, live in rows
        if changed >= max(ANALYZE_MIN_ROWS, ANALYZE_SHARE * live)
    ]
    if not stale:
        return []
    with db.write() as conn:
        if not conn.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": _LOCK}).scalar():
            return []
        for name in sorted(stale):
            conn.execute(text(f'ANALYZE "{name}"'))  # a table owner's right; else a warning
    return sorted(stale)


__all__ = ["ANALYZE_MIN_ROWS", "analyze_if_stale"]
