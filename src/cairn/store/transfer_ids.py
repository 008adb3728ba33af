"""Which id an imported memory is stored under.

A memory's id is derived from its tenant, partition, kind and content hash
(``cairn.core.memories.memory_id``), so anyone can compute the id another tenant's memory
would have. Were an import to store a record under whatever id it carries, a tenant could
take ids that another tenant's compile will need (that memory would then never be stored) and
learn, from a refusal, whether the other tenant holds a memory. So a record keeps its id only
when it is the id this partition derives for it (a subject restored where it was, or into
another Cairn under the same tenant and subject id); any other record is stored under its
**moved** id, a function of the importing partition and the old id alone
(``moved_memory_id``), which no other tenant's memory can have.

References between memories (``superseded_by``, a correction's ``replaces``) follow their
target, whichever call of a paged import brings it: a reference to a record not seen yet
points at the target's moved id (never at the old id, which may be another subject's
memory), and is pointed back at the old id if the target, when it comes, keeps it — or at the
stored memory, if the partition already held the target's content under another id.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection, case, select, update

from cairn.core.memories import memory_id, moved_memory_id
from cairn.core.scope import Scope
from cairn.store.episodes import scope_filter
from cairn.store.schema import memories

t = memories


def place_memories(
    conn: Connection, tenant_id: str, scope: Scope, rows: list[dict[str, Any]]
) -> list[uuid.UUID]:
    """Give decoded memory ``rows`` their ids in the partition and point their references at
    the ids their targets have, or will have; returns each row's id as exported."""
    final: dict[uuid.UUID, uuid.UUID] = {}
    olds = [row["id"] for row in rows]
    for old, row in zip(olds, rows, strict=True):
        derived = memory_id(tenant_id, scope, row["kind"], row["content_hash"])
        final[old] = old if old == derived else moved_memory_id(tenant_id, scope, old)
    named = {r for row in rows for r in _references(row)} - set(final)
    stored = _stored_ids(conn, tenant_id, scope, named)

    def target(old: uuid.UUID) -> uuid.UUID:
        if old in final:
            return final[old]
        return old if old in stored else moved_memory_id(tenant_id, scope, old)

    for old, row in zip(olds, rows, strict=True):
        row["id"] = final[old]
        if row.get("superseded_by") is not None:
            row["superseded_by"] = target(row["superseded_by"])
        replaces = _replaces(row)
        if replaces is not None:
            correction = {**row["metadata"]["correction"], "replaces": str(target(replaces))}
            row["metadata"] = {**row["metadata"], "correction": correction}
    return olds


def repair_references(
    conn: Connection,
    tenant_id: str,
    scope: Scope,
    rows: list[dict[str, Any]],
    olds: list[uuid.UUID],
) -> None:
    """After the rows are inserted: point references that earlier calls (or this one) made to a
    target's moved id at where the target really is — its own id when it kept it, or the
    stored memory with its content when the partition held that already."""
    where = scope_filter(t, tenant_id, scope)
    inserted = _stored_ids(conn, tenant_id, scope, {row["id"] for row in rows})
    remap: dict[uuid.UUID, uuid.UUID] = {}
    for old, row in zip(olds, rows, strict=True):
        placed = row["id"]
        if placed not in inserted:  # the partition held its content under another id
            held = conn.execute(
                select(t.c.id).where(
                    where, t.c.kind == row["kind"], t.c.content_hash == row["content_hash"]
                )
            ).scalar()
            if held is not None and held != placed:
                remap[placed] = held
        pending = moved_memory_id(tenant_id, scope, old)
        final = remap.get(placed, placed)
        if pending != final:
            remap[pending] = final
    repoint(conn, where, remap)


def repoint(conn: Connection, where: Any, remap: dict[uuid.UUID, uuid.UUID]) -> None:
    """Point the references of the memories ``where`` selects (``superseded_by``, a
    correction's ``replaces``) at ``remap[old]`` instead of ``old``."""
    if not remap:
        return
    conn.execute(
        update(t)
        .where(where, t.c.superseded_by.in_(list(remap)))
        .values(superseded_by=case(remap, value=t.c.superseded_by))
    )
    # A correction names what it replaced in its metadata.
    names = {str(a): str(b) for a, b in remap.items()}
    replaces = t.c.metadata["correction"]["replaces"].as_string()
    for row_id, metadata in conn.execute(
        select(t.c.id, t.c.metadata).where(where, replaces.in_(list(names)))
    ).all():
        correction = metadata["correction"]
        fixed = {**correction, "replaces": names[correction["replaces"]]}
        conn.execute(
            update(t).where(t.c.id == row_id).values(metadata={**metadata, "correction": fixed})
        )


def _references(row: dict[str, Any]) -> list[uuid.UUID]:
    found = [row["superseded_by"]] if row.get("superseded_by") is not None else []
    replaces = _replaces(row)
    return [*found, replaces] if replaces is not None else found


def _replaces(row: dict[str, Any]) -> uuid.UUID | None:
    correction = row["metadata"].get("correction")
    if not isinstance(correction, dict) or not isinstance(correction.get("replaces"), str):
        return None
    try:
        return uuid.UUID(correction["replaces"])
    except ValueError:
        return None


def _stored_ids(
    conn: Connection, tenant_id: str, scope: Scope, ids: set[uuid.UUID]
) -> set[uuid.UUID]:
    """Those of ``ids`` stored in the partition."""
    found: set[uuid.UUID] = set()
    wanted = list(ids)
    for start in range(0, len(wanted), 500):
        stmt = select(t.c.id).where(
            scope_filter(t, tenant_id, scope), t.c.id.in_(wanted[start : start + 500])
        )
        found.update(conn.execute(stmt).scalars())
    return found


__all__ = ["place_memories", "repair_references", "repoint"]
