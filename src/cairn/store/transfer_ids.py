"""Which id an imported memory is stored under.

A memory's id is derived from its tenant, partition, kind and content hash
(``cairn.core.memories.memory_id``), so anyone can compute the id another tenant's memory
would have. Were an import to store a record under whatever id it carries, a tenant could
take ids that another tenant's compile will need (that memory would then never be stored) and
learn, from a refusal, whether the other tenant holds a memory. So a record keeps its id only
when it is the id this partition derives for it (a subject restored where it was, or into
another Cairn under the same tenant and subject id); any other record is stored under its
**moved** id, a function of the importing partition and the old id alone
(``moved_memory_id``), which no other tenant's memory can have. References between memories
(``superseded_by``, a correction's ``replaces``) follow their record, whichever call of a
paged import brings it.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, select, update

from cairn.core.memories import memory_id, moved_memory_id
from cairn.core.scope import Scope
from cairn.store.episodes import scope_filter
from cairn.store.schema import memories


def place_memories(
    conn: Connection, tenant_id: str, scope: Scope, rows: list[dict[str, Any]]
) -> dict[uuid.UUID, uuid.UUID]:
    """Give decoded memory ``rows`` their ids in the partition and point their references at
    the ids their targets have (or will have); returns ``old id → moved id`` of the rows moved,
    for ``repair_references`` after they are inserted."""
    moved = {
        row["id"]: moved_memory_id(tenant_id, scope, row["id"])
        for row in rows
        if row["id"] != memory_id(tenant_id, scope, row["kind"], row["content_hash"])
    }
    kept = {row["id"] for row in rows} - set(moved)

    def target(old: uuid.UUID) -> uuid.UUID:
        if old in moved:
            return moved[old]
        if old in kept:
            return old
        # Brought by an earlier call: stored moved, or under its own id. Not brought yet: its
        # own id for now, repaired when it comes (``repair_references``) if it moves.
        other = moved_memory_id(tenant_id, scope, old)
        return other if _stored(conn, tenant_id, scope, other) else old

    for row in rows:
        row["id"] = moved.get(row["id"], row["id"])
        if row.get("superseded_by") is not None:
            row["superseded_by"] = target(row["superseded_by"])
        correction = row["metadata"].get("correction")
        if isinstance(correction, dict) and isinstance(correction.get("replaces"), str):
            try:
                replaces = uuid.UUID(correction["replaces"])
            except ValueError:
                continue
            row["metadata"] = {
                **row["metadata"],
                "correction": {**correction, "replaces": str(target(replaces))},
            }
    return moved


def repair_references(
    conn: Connection, tenant_id: str, scope: Scope, moved: dict[uuid.UUID, uuid.UUID]
) -> None:
    """Point rows of earlier import calls that named a moved record by its old id at its new
    one: ``superseded_by`` of the versions it replaced, and the ``replaces`` of the
    correction that replaced it."""
    t = memories
    for old, new in moved.items():
        conn.execute(
            update(t)
            .where(scope_filter(t, tenant_id, scope), t.c.superseded_by == old)
            .values(superseded_by=new)
        )
        newer = conn.execute(
            select(t.c.superseded_by).where(scope_filter(t, tenant_id, scope), t.c.id == new)
        ).scalar()
        if newer is None:
            continue
        row = conn.execute(
            select(t.c.id, t.c.metadata).where(scope_filter(t, tenant_id, scope), t.c.id == newer)
        ).first()
        if row is None:
            continue
        correction = (row.metadata or {}).get("correction")
        if isinstance(correction, dict) and correction.get("replaces") == str(old):
            metadata = {**row.metadata, "correction": {**correction, "replaces": str(new)}}
            conn.execute(update(t).where(t.c.id == row.id).values(metadata=metadata))


def _stored(conn: Connection, tenant_id: str, scope: Scope, memory: uuid.UUID) -> bool:
    t = memories
    stmt = select(t.c.id).where(scope_filter(t, tenant_id, scope), t.c.id == memory)
    return conn.execute(stmt).first() is not None


__all__ = ["place_memories", "repair_references"]
