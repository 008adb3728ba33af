"""Text of every script: Unicode content hashes and an analysed full-text column.

Content hashes were taken over ``[a-z0-9]`` only, so texts in other scripts collapsed into one
memory. They are recomputed with ``cairn.core.analysis.content_digest`` (NFKC, case folding,
whitespace; every character kept). Ids stay as they are — clients may hold them; the compiler
finds a stored memory by its content key, not by its id. Two rows of one partition and kind
whose contents now share a hash (``Straße`` and ``strasse``) both stay: the later one gets a
hash of its own (the content's digest with its id), so nothing is merged or lost.

Full-text indexes now read ``search_text``, the content (and date keywords) as the analysis
cuts it: CJK as bigrams, accents folded. SQLite re-creates each tenant's FTS5 tables with a
tokenizer that splits only at the analysis's spaces; PostgreSQL re-generates ``fts`` and
``tsv`` from ``search_text``. Both re-index every row.

Revision ID: 0009_text_analysis
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

from cairn.core.analysis import content_digest, index_text
from cairn.store import fts
from cairn.store.schema import JsonType, UTCDateTime

revision = "0009_text_analysis"
down_revision = "0007_fts_per_tenant"
branch_labels = None
depends_on = None

BATCH = 1000

MEMORIES_TSV = (
    "setweight(to_tsvector('english'::regconfig, search_text), 'A') || "
    "setweight(to_tsvector('english'::regconfig, coalesce(metadata->>'context_terms', '')), 'D')"
)
CHUNKS_TSV = "to_tsvector('english'::regconfig, search_text)"
# The indexes as 0006 and 0004 defined them (for downgrade).
OLD_MEMORIES_TSV = (
    "setweight(to_tsvector('english'::regconfig, content || ' ' || "
    "coalesce(metadata->>'keywords', '')), 'A') || "
    "setweight(to_tsvector('english'::regconfig, "
    "coalesce(metadata->>'context_terms', '')), 'D')"
)
OLD_MEMORIES, OLD_CHUNKS = fts.RAW_MEMORIES, fts.RAW_CHUNKS

_meta = sa.MetaData()
_memories = sa.Table(
    "memories",
    _meta,
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("id", sa.Uuid()),
    sa.Column("tenant_id", sa.String()),
    sa.Column("runtime_id", sa.String()),
    sa.Column("user_id", sa.String()),
    sa.Column("agent_id", sa.String()),
    sa.Column("kind", sa.String()),
    sa.Column("content", sa.Text()),
    sa.Column("valid_from", UTCDateTime()),
    sa.Column("metadata", JsonType),
    sa.Column("content_hash", sa.String()),
    sa.Column("search_text", sa.Text()),
)
_chunks = sa.Table(
    "document_chunks",
    _meta,
    sa.Column("seq", sa.BigInteger(), primary_key=True),
    sa.Column("content", sa.Text()),
    sa.Column("search_text", sa.Text()),
)


def _pages(bind: sa.Connection, table: sa.Table, columns: list[Any]) -> Iterator[Any]:
    """Rows in ``seq`` order, a page at a time (keyset paging: updates do not disturb it)."""
    last = -1
    while True:
        rows = bind.execute(
            sa.select(*columns).where(table.c.seq > last).order_by(table.c.seq).limit(BATCH)
        ).all()
        if not rows:
            return
        yield rows
        last = rows[-1].seq


def _rehash_and_analyse_memories(bind: sa.Connection) -> None:
    m = _memories
    taken: dict[tuple[Any, ...], set[str]] = {}
    cols = [m.c.seq, m.c.id, m.c.tenant_id, m.c.runtime_id, m.c.user_id, m.c.agent_id]
    cols += [m.c.kind, m.c.content, m.c.valid_from, m.c.metadata]
    stmt = (
        sa.update(m)
        .where(m.c.seq == sa.bindparam("s"))
        .values(content_hash=sa.bindparam("h"), search_text=sa.bindparam("x"))
    )
    for rows in _pages(bind, m, cols):
        params = []
        for r in rows:
            meta = r.metadata or {}
            digest = content_digest(r.content, r.valid_from if meta.get("slot") else None)
            used = taken.setdefault(
                (r.tenant_id, r.runtime_id, r.user_id, r.agent_id, r.kind), set()
            )
            if digest in used:
                digest = hashlib.sha256(f"{digest}\x1f{r.id}".encode()).hexdigest()
            used.add(digest)
            keywords = meta.get("keywords")
            extra = " " + keywords if isinstance(keywords, str) and keywords else ""
            params.append({"s": r.seq, "h": digest, "x": index_text(r.content + extra)})
        bind.execute(stmt, params)


def _analyse_chunks(bind: sa.Connection) -> None:
    c = _chunks
    stmt = sa.update(c).where(c.c.seq == sa.bindparam("s")).values(search_text=sa.bindparam("x"))
    for rows in _pages(bind, c, [c.c.seq, c.c.content]):
        bind.execute(stmt, [{"s": r.seq, "x": index_text(r.content)} for r in rows])


def _sqlite_rebuild(
    bind: sa.Connection,
    drop: tuple[fts.FtsIndex, ...],
    make: tuple[fts.FtsIndex, ...],
    between: Any,
) -> None:
    """Drop every tenant's indexes, run ``between``, then create and fill the new ones."""
    tenants = {
        index.base: [
            r[0]
            for r in bind.exec_driver_sql(
                "SELECT tenant_id FROM fts_tenants WHERE base = ?", (index.base,)
            )
        ]
        for index in drop
    }
    for index in drop:
        for tenant in tenants[index.base]:
            for stmt in index.drop_ddl(tenant):
                op.execute(stmt)
    op.execute("DELETE FROM fts_tenants")
    between()
    for index in make:
        for tenant in tenants[index.base]:
            fts.TenantIndexes().ensure(bind, index, tenant)  # creates and fills it


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if not sqlite:
        op.execute("ALTER TABLE memories DROP COLUMN fts")  # its GIN index goes with it
        op.execute("ALTER TABLE document_chunks DROP COLUMN tsv")

    def analyse() -> None:
        for table in ("memories", "document_chunks"):
            op.execute(f"ALTER TABLE {table} ADD COLUMN search_text TEXT NOT NULL DEFAULT ''")
        _rehash_and_analyse_memories(bind)
        _analyse_chunks(bind)

    if sqlite:
        _sqlite_rebuild(bind, (OLD_MEMORIES, OLD_CHUNKS), (fts.MEMORIES, fts.CHUNKS), analyse)
        return
    analyse()
    op.execute(
        f"ALTER TABLE memories ADD COLUMN fts tsvector GENERATED ALWAYS AS ({MEMORIES_TSV}) STORED"
    )
    op.execute("CREATE INDEX ix_memories_fts ON memories USING gin (fts)")
    op.execute(
        f"ALTER TABLE document_chunks ADD COLUMN tsv tsvector GENERATED ALWAYS AS ({CHUNKS_TSV}) "
        "STORED"
    )
    op.execute("CREATE INDEX ix_document_chunks_tsv ON document_chunks USING GIN (tsv)")


def downgrade() -> None:
    """Indexes read the raw content again. Hashes keep the new scheme: they stay unique, and
    the older code only ever compares hashes it computed itself."""
    bind = op.get_bind()

    def drop_columns() -> None:
        for table in ("memories", "document_chunks"):
            op.execute(f"ALTER TABLE {table} DROP COLUMN search_text")

    if bind.dialect.name == "sqlite":
        _sqlite_rebuild(bind, (fts.MEMORIES, fts.CHUNKS), (OLD_MEMORIES, OLD_CHUNKS), drop_columns)
        return
    op.execute("ALTER TABLE memories DROP COLUMN fts")
    op.execute("ALTER TABLE document_chunks DROP COLUMN tsv")
    drop_columns()
    op.execute(
        f"ALTER TABLE memories ADD COLUMN fts tsvector GENERATED ALWAYS AS ({OLD_MEMORIES_TSV}) "
        "STORED"
    )
    op.execute("CREATE INDEX ix_memories_fts ON memories USING gin (fts)")
    op.execute(
        "ALTER TABLE document_chunks ADD COLUMN tsv tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english', content)) STORED"
    )
    op.execute("CREATE INDEX ix_document_chunks_tsv ON document_chunks USING GIN (tsv)")
