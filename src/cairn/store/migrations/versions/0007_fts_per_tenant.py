"""SQLite: one FTS5 index per tenant, so BM25 statistics never mix tenants.

The shared ``memories_fts`` and ``document_chunks_fts`` tables (0002, 0004) let one tenant's
writes move another tenant's search scores. This moves every tenant's rows into its own
indexes (see ``cairn.store.fts``), lists them in ``fts_tenants``, guards both base tables
against rows of tenants without an index, and drops the shared tables and their triggers. PostgreSQL
is unchanged: ``ts_rank`` reads no corpus statistics.

Revision ID: 0007_fts_per_tenant
"""

from alembic import op

from cairn.store import fts

revision = "0007_fts_per_tenant"
down_revision = ("0006_memories_tsv", "0004_context")
branch_labels = None
depends_on = None

_SHARED = {
    "memories": ("memories_fts", ("memories_fts_ai", "memories_fts_ad", "memories_fts_au")),
    "document_chunks": ("document_chunks_fts", ("document_chunks_ai", "document_chunks_ad")),
}


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    op.execute(fts.REGISTRY_DDL)
    for index in (fts.RAW_MEMORIES, fts.RAW_CHUNKS):  # as they were then (0009 changes them)
        op.execute(fts.guard_ddl(index))
        table, triggers = _SHARED[index.base]
        for trigger in triggers:
            op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        op.execute(f"DROP TABLE IF EXISTS {table}")
        tenants = [
            r[0] for r in bind.exec_driver_sql(f"SELECT DISTINCT tenant_id FROM {index.base}")
        ]
        for tenant in tenants:
            fts.TenantIndexes().ensure(bind, index, tenant)  # creates and fills it


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    for index in (fts.RAW_MEMORIES, fts.RAW_CHUNKS):
        op.execute(f"DROP TRIGGER IF EXISTS {index.base}_fts_guard")
        names = [
            r[0]
            for r in bind.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'",
                (f"{index.base}\\_fts\\_%",),
            )
        ]
        # Names are hashes: drop each tenant's index by its name.
        for name in names:
            if name.count("_") != index.base.count("_") + 2:
                continue  # a shadow table (…_data, …_idx, …): dropped with its table
            for suffix in ("ai", "ad", "au"):
                op.execute(f"DROP TRIGGER IF EXISTS {name}_{suffix}")
            op.execute(f"DROP TABLE IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS fts_tenants")
    # The shared indexes of 0002 and 0004, rebuilt from the base tables.
    op.execute(
        "CREATE VIRTUAL TABLE memories_fts USING fts5(body, context, part, content='', "
        "tokenize='porter unicode61 remove_diacritics 2')"
    )
    op.execute(
        "INSERT INTO memories_fts(memories_fts, rank) VALUES ('rank', 'bm25(1.0, 0.5, 0.0)')"
    )
    values = fts.RAW_MEMORIES.values
    op.execute(
        "INSERT INTO memories_fts(rowid, body, context, part) "
        f"SELECT {values.format(r='m')} FROM memories m"
    )
    insert = (
        f"INSERT INTO memories_fts(rowid, body, context, part) VALUES ({values.format(r='new')});"
    )
    delete = (
        "INSERT INTO memories_fts(memories_fts, rowid, body, context, part) "
        f"VALUES ('delete', {values.format(r='old')});"
    )
    op.execute(f"CREATE TRIGGER memories_fts_ai AFTER INSERT ON memories BEGIN {insert} END")
    op.execute(f"CREATE TRIGGER memories_fts_ad AFTER DELETE ON memories BEGIN {delete} END")
    op.execute(
        "CREATE TRIGGER memories_fts_au AFTER UPDATE OF content, metadata ON memories "
        f"BEGIN {delete} {insert} END"
    )
    op.execute(
        "CREATE VIRTUAL TABLE document_chunks_fts USING fts5(content, "
        "content='document_chunks', content_rowid='seq', tokenize='porter unicode61')"
    )
    op.execute("INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('rebuild')")
    op.execute(
        "CREATE TRIGGER document_chunks_ai AFTER INSERT ON document_chunks BEGIN "
        "INSERT INTO document_chunks_fts(rowid, content) VALUES (new.seq, new.content); END"
    )
    op.execute(
        "CREATE TRIGGER document_chunks_ad AFTER DELETE ON document_chunks BEGIN "
        "INSERT INTO document_chunks_fts(document_chunks_fts, rowid, content) "
        "VALUES ('delete', old.seq, old.content); END"
    )
