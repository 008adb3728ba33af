"""Partition ids in Unicode NFC: one subject per text, however it was typed.

From this revision the API keeps every runtime, user and agent id (and a per-user slate's
user, a ladder run's ``user``) in NFC (``cairn.core.subject_id.canonical_id``): ``José``
written with a combining accent and with ``é`` is one subject. Partitions stored before under
an id that is not NFC are renamed to its NFC form, in every table that holds partition data
(their full-text entries follow: on SQLite the rows are re-indexed under the new partition
token; on PostgreSQL the term statistics follow the memories by their trigger). Where the NFC
partition already holds data of its own the two are not merged: the old one is left as it
is and named in a warning; erasing the subject (``DELETE /v1/subjects/…``, ``DELETE
/v1/scopes``, by either spelling) erases both.

Revision ID: 0025_nfc_ids
"""

import logging
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0025_nfc_ids"
down_revision = "0024_grapheme_terms"
branch_labels = None
# The branches that made the other tables it renames in: slates, ladder runs, items, leases.
depends_on = ("0011_retention", "0005_ladders", "0013_items", "0012a_job_leases")

log = logging.getLogger("cairn.migrations")

# The tables with all four partition columns at this revision (``cairn.store.partitions``).
SCOPED = (
    "episodes",
    "memories",
    "memory_vector_versions",
    "memory_term_stats",
    "compile_jobs",
    "documents",
    "document_chunks",
    "slate_folders",
    "slate_evictions",
    "slate_skips",
    "items",
)
# Re-indexed when renamed on SQLite: touching the column their FTS5 trigger watches.
_REINDEX = {"memories": "search_text", "document_chunks": "search_text"}


def _nfc(value: str) -> str:
    return unicodedata.normalize("NFC", value)


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    found: set[tuple[str, str, str, str]] = set()
    for table in SCOPED:
        rows = conn.execute(
            sa.text(f"SELECT DISTINCT tenant_id, runtime_id, user_id, agent_id FROM {table}")
        ).all()
        found.update((r[0], r[1], r[2], r[3]) for r in rows if any(_nfc(v) != v for v in r[1:]))
    for tenant, runtime, user, agent in sorted(found):
        new = (_nfc(runtime), _nfc(user), _nfc(agent))
        if _holds_data(conn, tenant, *new):
            log.warning(
                "partition (%r, %r, %r) of tenant %r is kept as it is: its NFC form holds "
                "data of its own (erasing the subject erases both)",
                runtime,
                user,
                agent,
                tenant,
            )
            continue
        for table in SCOPED:
            if table == "memory_term_stats" and not sqlite:
                continue  # (PostgreSQL: moved by the memories' trigger)
            touch = (
                f", {_REINDEX[table]} = {_REINDEX[table]}" if sqlite and table in _REINDEX else ""
            )
            conn.execute(
                sa.text(
                    f"UPDATE {table} SET runtime_id = :nr, user_id = :nu, agent_id = :na{touch} "
                    "WHERE tenant_id = :t AND runtime_id = :r AND user_id = :u AND agent_id = :a"
                ),
                {"nr": new[0], "nu": new[1], "na": new[2], "t": tenant, "r": runtime, "u": user}
                | {"a": agent},
            )
    # A ladder run's ``user`` (the subject its per-user slates and erasure follow).
    for tenant, user in conn.execute(
        sa.text("SELECT DISTINCT tenant_id, user_id FROM ladder_runs")
    ):
        if _nfc(user) != user:
            conn.execute(
                sa.text(
                    "UPDATE ladder_runs SET user_id = :n WHERE tenant_id = :t AND user_id = :u"
                ),
                {"n": _nfc(user), "t": tenant, "u": user},
            )


def _holds_data(conn: sa.Connection, tenant: str, runtime: str, user: str, agent: str) -> bool:
    for table in SCOPED:
        hit = conn.execute(
            sa.text(
                f"SELECT 1 FROM {table} WHERE tenant_id = :t AND runtime_id = :r "
                "AND user_id = :u AND agent_id = :a LIMIT 1"
            ),
            {"t": tenant, "r": runtime, "u": user, "a": agent},
        ).first()
        if hit is not None:
            return True
    return False


def downgrade() -> None:
    """Nothing to undo: the renamed ids are ids an older release reads as well."""
