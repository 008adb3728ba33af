"""What each ladder run read: ``ladder_run_reads``, so that deleting it deletes those runs.

A run's trace quotes the memories, turns and document chunks its context hooks recalled, from
whichever partition a hook names (``cairn.store.run_reads``). This revision adds the table
(one row per item a run read, with the item's partition) and fills it for the runs already
stored: their traces name the items they read (``prepare`` hooks' ``items``) but not the
partition, so each item is looked up among the stored memories, episodes and document chunks
of the run's tenant. A run that read an item no longer stored, or a memory since forgotten,
quotes what was deleted before this revision could tell: it is deleted now, with its write
claims, as it would have been with the deletion. Going down drops the table.

Revision ID: 0028_run_reads
"""

import json
import uuid
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0028_run_reads"
down_revision = "0027_light_stems"
branch_labels = None
depends_on = None

BATCH = 500
_PARTITION = ("runtime_id", "user_id", "agent_id")


def upgrade() -> None:
    op.create_table(
        "ladder_run_reads",
        sa.Column("tenant_id", sa.String(128), primary_key=True),
        sa.Column("run_id", sa.String(256), primary_key=True),
        sa.Column("item_id", sa.String(256), primary_key=True),
        sa.Column("runtime_id", sa.String(256), nullable=False),
        sa.Column("user_id", sa.String(256), nullable=False, server_default=""),
        sa.Column("agent_id", sa.String(256), nullable=False, server_default=""),
    )
    op.create_index("ix_ladder_run_reads_item", "ladder_run_reads", ["tenant_id", "item_id"])
    op.create_index(
        "ix_ladder_run_reads_partition",
        "ladder_run_reads",
        ["tenant_id", "user_id", "runtime_id", "agent_id"],
    )
    _fill(op.get_bind())


def _read_ids(trace: Any) -> list[str]:
    """The ids of the items a stored trace's context hooks recalled, each once."""
    if isinstance(trace, str):
        try:
            trace = json.loads(trace)
        except ValueError:
            return []
    hooks = trace.get("prepare") if isinstance(trace, dict) else None
    out: dict[str, None] = {}
    for hook in hooks if isinstance(hooks, list) else []:
        listed = hook.get("items") if isinstance(hook, dict) else None
        for item in listed if isinstance(listed, list) else []:
            if isinstance(item, dict) and item.get("id"):
                out.setdefault(str(item["id"]))
    return list(out)


def _partitions(conn: sa.Connection, tenant_id: str, ids: list[str]) -> dict[str, tuple[str, ...]]:
    """The partition of each of ``ids`` the tenant stores as a memory, episode or chunk."""
    keys: dict[uuid.UUID, str] = {}
    for i in ids:
        try:
            keys[uuid.UUID(i)] = i
        except ValueError:
            continue
    found: dict[str, tuple[str, ...]] = {}
    for name in ("memories", "episodes", "document_chunks"):
        table = sa.table(
            name,
            sa.column("id", sa.Uuid()),
            sa.column("tenant_id", sa.String()),
            sa.column("status", sa.String()),
            *(sa.column(c, sa.String()) for c in _PARTITION),
        )
        wanted = [k for k, v in keys.items() if v not in found]
        if not wanted:
            break
        where = [table.c.tenant_id == tenant_id, table.c.id.in_(wanted)]
        if name == "memories":  # a forgotten memory's tombstone keeps its id, not its text
            where.append(table.c.status != "deleted")
        rows = conn.execute(sa.select(table.c.id, *(table.c[c] for c in _PARTITION)).where(*where))
        for row in rows:
            found[keys[row[0]]] = tuple(row[1:])
    return found


def _fill(conn: sa.Connection) -> None:
    reads = sa.table(
        "ladder_run_reads",
        *(sa.column(c, sa.String()) for c in ("tenant_id", "run_id", "item_id", *_PARTITION)),
    )
    after = -1
    while True:
        runs = conn.execute(
            sa.text(
                "SELECT seq, tenant_id, id, trace FROM ladder_runs "
                "WHERE seq > :after AND trace IS NOT NULL ORDER BY seq LIMIT :n"
            ),
            {"after": after, "n": BATCH},
        ).all()
        if not runs:
            break
        after = runs[-1][0]
        rows, gone = [], []
        for _, tenant_id, run_id, trace in runs:
            ids = _read_ids(trace)
            if not ids:
                continue
            found = _partitions(conn, tenant_id, ids)
            if len(found) < len(ids):
                gone.append({"t": tenant_id, "r": run_id})
                continue
            for item_id, partition in found.items():
                values = dict(zip(_PARTITION, partition, strict=True))
                rows.append(
                    {"tenant_id": tenant_id, "run_id": run_id, "item_id": item_id, **values}
                )
        if rows:
            conn.execute(sa.insert(reads), rows)
        for table, column in (("ladder_runs", "id"), ("slate_applied_writes", "run_id")):
            if gone:
                conn.execute(
                    sa.text(f"DELETE FROM {table} WHERE tenant_id = :t AND {column} = :r"), gone
                )


def downgrade() -> None:
    op.drop_index("ix_ladder_run_reads_partition", "ladder_run_reads")
    op.drop_index("ix_ladder_run_reads_item", "ladder_run_reads")
    op.drop_table("ladder_run_reads")
