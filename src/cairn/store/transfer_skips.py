"""Which records of an import were skipped, and why.

An import only ever adds rows: a record whose row, or a row under its unique key, the subject
holds already is skipped, and the stored row is kept as it is. The answer names each skipped
record by its place in the request and says which of these it met:

- ``stored``: the record's own row is stored (its id; for a slate history row, an identical
  row): a retried or repeated import.
- ``same_key``: the subject holds another row under the record's unique key (an episode's
  idempotency key, a document's dataset and idempotency key, an item's namespace and key, a
  slate folder's ladder, slate and name).
- ``same_content``: the subject holds a memory of the record's kind and content (its content
  hash) under another id, as a compile would have found it.
- ``another_subject``: another subject of the tenant holds the record's id (a document, chunk,
  item or run: their ids are not moved as an episode's or a memory's are).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import Connection, Table, literal, select

from cairn.core.scope import Scope
from cairn.store.episodes import scope_filter
from cairn.store.runs import ladder_runs
from cairn.store.schema import memories
from cairn.store.slate_transfer import HISTORY, restore_slates

SkipReason = Literal["stored", "same_key", "same_content", "another_subject"]


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    record: int  # its place in the request's records (the header line counts)
    type: str
    reason: SkipReason


@dataclass
class ImportOutcome:
    imported: dict[str, int]
    skipped: list[SkippedRecord]


def skip_reason(
    conn: Connection, table: Table, tenant_id: str, scope: Scope, row: dict[str, Any]
) -> SkipReason:
    """Why inserting ``row`` (as placed in the partition ``scope``) added nothing."""
    same_id = (table.c.tenant_id == tenant_id, table.c.id == row["id"])
    if table is ladder_runs:  # a run belongs to a subject: its user
        mine = table.c.user_id == scope.user_id
    else:
        mine = scope_filter(table, tenant_id, scope)
    if conn.execute(select(literal(1)).where(*same_id, mine)).first() is not None:
        return "stored"
    if conn.execute(select(literal(1)).where(*same_id)).first() is not None:
        return "another_subject"
    return "same_content" if table is memories else "same_key"


def restore_slate_records(
    conn: Connection,
    insert: Callable[[Table], Any],
    tenant_id: str,
    scope: Scope,
    batch: tuple[dict[str, list[dict[str, Any]]], dict[str, list[int]]],
) -> ImportOutcome:
    """Restore the decoded slate records ``batch`` (rows and their places per type), a folder
    at a time and identical history rows together (``restore_slates`` matches those by
    count), so that each skipped record is known."""
    rows, places = batch
    counts: dict[str, int] = {"slate": 0, **dict.fromkeys(HISTORY, 0)}
    skipped: list[SkippedRecord] = []
    for folder, place in zip(rows.get("slate", []), places.get("slate", []), strict=True):
        if restore_slates(conn, insert, tenant_id, scope, {"slate": [folder]})["slate"]:
            counts["slate"] += 1
        else:
            # (A folder is known by its key: the user holds it, as a repeat import finds it.)
            skipped.append(SkippedRecord(place, "slate", "stored"))
    for kind in HISTORY:
        alike: dict[tuple[tuple[str, Any], ...], list[tuple[int, dict[str, Any]]]] = {}
        for place, row in zip(places.get(kind, []), rows.get(kind, []), strict=True):
            alike.setdefault(tuple(sorted(row.items())), []).append((place, row))
        for group in alike.values():
            group_rows = {kind: [row for _, row in group]}
            added = restore_slates(conn, insert, tenant_id, scope, group_rows)[kind]
            counts[kind] += added
            # Of identical rows, those the partition held already are the first ones.
            skipped += [SkippedRecord(p, kind, "stored") for p, _ in group[: len(group) - added]]
    return ImportOutcome(counts, skipped)


__all__ = [
    "ImportOutcome",
    "SkipReason",
    "SkippedRecord",
    "restore_slate_records",
    "skip_reason",
]
