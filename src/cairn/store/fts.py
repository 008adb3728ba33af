"""SQLite full-text indexes, one FTS5 table per tenant.

FTS5's BM25 takes its corpus statistics (row count, average length, how many rows hold a
term) from the whole FTS table. With one table for everyone, another tenant's writes would
move a tenant's scores — a side channel telling B whether a word occurs in A's data. So each
tenant gets its own contentless FTS5 table for memories and one for document chunks, kept in
step with the base table by triggers that fire only for that tenant's rows. Inside a tenant,
a ``part`` token per row still narrows a query to one scope partition (runtime, user, agent),
so FTS5 ranks inside it without visiting the others' rows. (The scopes of one tenant share
statistics; one key reads them all anyway.)

Indexes are created the first time a tenant writes a memory or a chunk, inside that write's
transaction (``CREATE ... IF NOT EXISTS``, serialized by SQLite's write lock, so two
processes cannot race). Each tenant adds one virtual table, its shadow tables and three
triggers; that suits the embedded backend's tens of tenants — a fleet with thousands of
tenants belongs on PostgreSQL, whose ``ts_rank`` uses no corpus statistics at all.

Table and trigger names carry a hash of the tenant id, and triggers compare against the id as
a hex blob literal, so no tenant id is ever spliced into SQL as text.

``fts_tenants`` lists the tenants whose indexes exist, and a guard trigger on each base table
refuses a row of any other tenant: a writer that skipped ``ensure`` (raw SQL, a future code
path) fails loudly instead of storing rows that search can never find.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from sqlalchemy import Connection

from cairn.store.statements import statement

# The indexed text is already analysed (``cairn.core.analysis``): terms separated by spaces.
# Marks (``M*``) count as token characters so that FTS5 splits it only where the analysis did
# (a Devanagari vowel sign is part of its word); ``porter`` stems English words.
TOKENIZE = "porter unicode61 remove_diacritics 2 categories 'L* M* N* Co'"

# The partition token of a row: a letter, then the hex of the scope key (FTS5's unicode61
# tokenizer keeps it as one token).
PART_SQL = (
    "'p' || hex({r}.tenant_id || char(31) || {r}.runtime_id || char(31) || "
    "{r}.user_id || char(31) || {r}.agent_id)"
)


def part_token(tenant_id: str, runtime_id: str, user_id: str, agent_id: str) -> str:
    """The ``part`` token ``PART_SQL`` gives the rows of one partition."""
    key = "\x1f".join((tenant_id, runtime_id, user_id, agent_id))
    return "p" + key.encode().hex().upper()


@dataclass(frozen=True)
class FtsIndex:
    """How one base table is indexed: FTS5 columns, the values a row gives them (SQL over
    ``{r}``, the row), the columns whose update re-indexes a row, and the ranking."""

    base: str
    columns: tuple[str, ...]
    values: str
    update_of: str
    rank: str
    tokenize: str = TOKENIZE

    def table(self, tenant_id: str) -> str:
        digest = hashlib.sha256(tenant_id.encode()).hexdigest()[:24]
        return f"{self.base}_fts_{digest}"

    def ddl(self, tenant_id: str) -> list[str]:
        name = self.table(tenant_id)
        tenant = "X'" + tenant_id.encode().hex() + "'"
        when = f"CAST({{r}}.tenant_id AS BLOB) = {tenant}"
        cols = ", ".join(self.columns)
        insert = f"INSERT INTO {name}(rowid, {cols}) VALUES ({self.values.format(r='new')});"
        delete = (
            f"INSERT INTO {name}({name}, rowid, {cols}) "
            f"VALUES ('delete', {self.values.format(r='old')});"
        )
        return [
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5({cols}, content='', "
            f'tokenize="{self.tokenize}")',
            f"INSERT INTO {name}({name}, rank) VALUES ('rank', '{self.rank}')",
            f"CREATE TRIGGER IF NOT EXISTS {name}_ai AFTER INSERT ON {self.base} "
            f"WHEN {when.format(r='new')} BEGIN {insert} END",
            f"CREATE TRIGGER IF NOT EXISTS {name}_ad AFTER DELETE ON {self.base} "
            f"WHEN {when.format(r='old')} BEGIN {delete} END",
            f"CREATE TRIGGER IF NOT EXISTS {name}_au AFTER UPDATE OF {self.update_of} "
            f"ON {self.base} WHEN {when.format(r='old')} BEGIN {delete} {insert} END",
        ]

    def rank_sql(self, table: str) -> str:
        """The index's ``rank`` as an explicit call for ``table``, e.g. ``bm25(t, 1.0, 0.5, 0.0)``.

        The same scores as FTS5's ``rank`` column, sorted by SQLite's own sorter: FTS5 orders
        by ``rank`` through a nested statement of its own, which made the ranking queries of a
        10,000-memory partition 30-40 % slower (docs/benchmarks.md, session 15)."""
        name, _, args = self.rank.partition("(")
        return f"{name}({table}, {args}"

    def drop_ddl(self, tenant_id: str) -> list[str]:
        name = self.table(tenant_id)
        return [f"DROP TRIGGER IF EXISTS {name}_{s}" for s in ("ai", "ad", "au")] + [
            f"DROP TABLE IF EXISTS {name}"
        ]


MEMORIES = FtsIndex(
    base="memories",
    columns=("body", "context", "part"),
    values=(
        "{r}.seq, {r}.search_text, coalesce(json_extract({r}.metadata, '$.context_terms'), ''), "
        + PART_SQL
    ),
    update_of="search_text, metadata",
    # Body words weigh 1, neighbouring messages' words 0.5, the partition token nothing.
    rank="bm25(1.0, 0.5, 0.0)",
)

CHUNKS = FtsIndex(
    base="document_chunks",
    columns=("content", "part"),
    values="{r}.seq, {r}.search_text, " + PART_SQL,
    update_of="search_text",
    rank="bm25(1.0, 0.0)",
)

# The indexes as migration 0007 made them, over the raw text (before 0009's ``search_text``):
# 0007 builds these, 0009 replaces them (and its downgrade brings them back).
RAW_TOKENIZE = "porter unicode61 remove_diacritics 2"
RAW_MEMORIES = FtsIndex(
    base="memories",
    columns=("body", "context", "part"),
    values=(
        "{r}.seq, {r}.content || ' ' || coalesce(json_extract({r}.metadata, '$.keywords'), "
        "''), coalesce(json_extract({r}.metadata, '$.context_terms'), ''), " + PART_SQL
    ),
    update_of="content, metadata",
    rank="bm25(1.0, 0.5, 0.0)",
    tokenize=RAW_TOKENIZE,
)
RAW_CHUNKS = FtsIndex(
    base="document_chunks",
    columns=("content", "part"),
    values="{r}.seq, {r}.content, " + PART_SQL,
    update_of="content",
    rank="bm25(1.0, 0.0)",
    tokenize=RAW_TOKENIZE,
)

REGISTRY_DDL = (
    "CREATE TABLE IF NOT EXISTS fts_tenants (base TEXT NOT NULL, tenant_id TEXT NOT NULL, "
    "PRIMARY KEY (base, tenant_id)) WITHOUT ROWID"
)
GUARD_MESSAGE = "no full-text index for this tenant: call cairn.store.fts ensure() first"


def guard_ddl(index: FtsIndex) -> str:
    """A trigger refusing rows of tenants without an index (see the module's docstring)."""
    return (
        f"CREATE TRIGGER IF NOT EXISTS {index.base}_fts_guard BEFORE INSERT ON {index.base} "
        "WHEN NOT EXISTS (SELECT 1 FROM fts_tenants WHERE base = "
        f"'{index.base}' AND tenant_id = new.tenant_id) "
        f"BEGIN SELECT RAISE(ABORT, '{GUARD_MESSAGE}'); END"
    )


class TenantIndexes:
    """Which tenants' indexes exist, remembered per database (an index is never dropped
    while the database is in use). Only what a read connection saw is remembered: a write
    transaction may see its own uncommitted index and still roll back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: set[tuple[str, str]] = set()

    def ensure(self, conn: Connection, index: FtsIndex, tenant_id: str) -> None:
        """Create the tenant's index and triggers if missing. Call inside the write
        transaction that is about to insert the tenant's first rows."""
        with self._lock:
            if (index.base, tenant_id) in self._known:
                return
        if self._exists(conn, index, tenant_id):
            return  # not remembered: this transaction (or the one that made it) may roll back
        for stmt in index.ddl(tenant_id):
            conn.exec_driver_sql(stmt)
        conn.exec_driver_sql(
            "INSERT OR IGNORE INTO fts_tenants (base, tenant_id) VALUES (?, ?)",
            (index.base, tenant_id),
        )
        # Rows written before the index existed (by the migration's predecessors) are
        # indexed now; normally there are none.
        conn.exec_driver_sql(
            f"INSERT INTO {index.table(tenant_id)}(rowid, {', '.join(index.columns)}) "
            f"SELECT {index.values.format(r='b')} FROM {index.base} b "
            "WHERE b.tenant_id = ?",
            (tenant_id,),
        )

    def table_if_exists(self, conn: Connection, index: FtsIndex, tenant_id: str) -> str | None:
        """The tenant's index table, or None when the tenant has never written such rows."""
        with self._lock:
            if (index.base, tenant_id) in self._known:
                return index.table(tenant_id)
        if not self._exists(conn, index, tenant_id):
            return None
        if conn.get_execution_options().get("sqlite_begin") != "IMMEDIATE":
            with self._lock:  # a read transaction sees committed rows only
                self._known.add((index.base, tenant_id))
        return index.table(tenant_id)

    @staticmethod
    def _exists(conn: Connection, index: FtsIndex, tenant_id: str) -> bool:
        return (
            conn.execute(
                statement("SELECT 1 FROM fts_tenants WHERE base = :b AND tenant_id = :t"),
                {"b": index.base, "t": tenant_id},
            ).first()
            is not None
        )
