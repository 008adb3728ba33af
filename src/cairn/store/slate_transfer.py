"""A subject's per-user slate state in an export, and its restore.

Per-user slates (``partition: user``) keep their folders in the subject's partition, so they
are part of what ``DELETE /v1/subjects/…`` erases and what an export must carry. A folder is
one record (``slate``) with its files and entries inside it: their rows point at the folder by
an internal id that means nothing in another database, and a folder is small (a slate has a
token budget), so it travels whole. Evictions and skipped writes, the slate's history, are one
record per row (``slate_eviction``, ``slate_skip``).

Restoring is idempotent like the rest of an import: a folder already present (same ladder,
slate and folder name for the user) is skipped whole, and a history row identical to a stored
one is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import Connection, Table, func, select

from cairn.core.scope import Scope
from cairn.errors import InvalidInput
from cairn.store.episodes import scope_filter
from cairn.store.slate_tables import (
    slate_entries,
    slate_evictions,
    slate_files,
    slate_folders,
    slate_skips,
)
from cairn.store.transfer_values import decode_values, jsonable

HISTORY: dict[str, Table] = {"slate_eviction": slate_evictions, "slate_skip": slate_skips}
SLATE_TYPES = ("slate", *HISTORY)
_INTERNAL = {"id", "folder_id", "tenant_id", "runtime_id", "user_id", "agent_id"}
PAGE = 200


def _columns(table: Table) -> dict[str, Any]:
    return {c.name: c for c in table.c if c.name not in _INTERNAL}


def export_slates(read: Any, tenant_id: str, scope: Scope) -> Iterator[dict[str, Any]]:
    """The partition's slate records; ``read()`` opens a read transaction (one per page, closed
    before its records are handed on: a slow reader holds no transaction open)."""
    yield from _pages(read, slate_folders, tenant_id, scope, _folder_records)
    for kind, table in HISTORY.items():

        def history(conn: Connection, rows: list[Any], kind: str = kind) -> list[dict[str, Any]]:
            return [{"type": kind, "row": _public(HISTORY[kind], r._mapping)} for r in rows]

        yield from _pages(read, table, tenant_id, scope, history)


def _pages(
    read: Any,
    table: Table,
    tenant_id: str,
    scope: Scope,
    records: Callable[[Connection, list[Any]], list[dict[str, Any]]],
) -> Iterator[dict[str, Any]]:
    """The records of the partition's rows of ``table`` in id order, a page at a time, each
    page built in its own read (what hangs off the rows is read in the same snapshot)."""
    after = 0
    while True:
        with read() as conn:
            rows = conn.execute(
                select(table)
                .where(scope_filter(table, tenant_id, scope), table.c.id > after)
                .order_by(table.c.id)
                .limit(PAGE)
            ).all()
            page = records(conn, list(rows))
        yield from page
        if len(rows) < PAGE:
            return
        after = rows[-1].id


def _folder_records(conn: Connection, folders: list[Any]) -> list[dict[str, Any]]:
    return [_folder_record(conn, f._mapping) for f in folders]


def _public(table: Table, row: Any) -> dict[str, Any]:
    return jsonable({name: row[name] for name in _columns(table)})


def _folder_record(conn: Connection, folder: Any) -> dict[str, Any]:
    files = conn.execute(
        select(slate_files)
        .where(slate_files.c.folder_id == folder["id"])
        .order_by(slate_files.c.ordinal, slate_files.c.id)
    ).all()
    entries = conn.execute(
        select(slate_entries)
        .where(slate_entries.c.folder_id == folder["id"])
        .order_by(slate_entries.c.id)
    ).all()
    row = _public(slate_folders, folder)
    row["files"] = [_public(slate_files, f._mapping) for f in files]
    row["entries"] = [_public(slate_entries, e._mapping) for e in entries]
    return {"type": "slate", "row": row}


def decode_slate(row: dict[str, Any], index: int) -> dict[str, Any]:
    """A ``slate`` record's folder values with its ``files`` and ``entries`` (checked)."""
    files, entries = row.get("files", []), row.get("entries", [])
    if not isinstance(files, list) or not isinstance(entries, list):
        raise InvalidInput(
            f"record {index}: files and entries must be lists", code="invalid_import"
        )
    rest = {k: v for k, v in row.items() if k not in ("files", "entries")}
    folder = decode_values(_columns(slate_folders), rest, index)
    folder["files"] = [_decode_part(slate_files, f, index) for f in files]
    folder["entries"] = [_decode_part(slate_entries, e, index) for e in entries]
    names = {f["name"] for f in folder["files"]}
    if len(names) != len(folder["files"]):
        raise InvalidInput(f"record {index}: a file name repeats", code="invalid_import")
    strays = sorted({e["file"] for e in folder["entries"]} - names)
    if strays:
        raise InvalidInput(
            f"record {index}: entries of a file the folder does not have: {', '.join(strays)}",
            code="invalid_import",
        )
    _check_counts(folder, index)
    return folder


def _check_counts(folder: dict[str, Any], index: int) -> None:
    """The counters a write relies on add up: a file's tokens and bytes are its entries',
    the folder's usage its files' (a file counted full with nothing in it could never be
    made to fit its limit again)."""
    for f in folder["files"]:
        entries = [e for e in folder["entries"] if e["file"] == f["name"]]
        size = sum(len(e["content"].encode()) for e in entries)
        if f.get("tokens", 0) < 0 or (entries and f.get("bytes", size) < 0):
            raise InvalidInput(f"record {index}: negative counts", code="invalid_import")
        if not entries and (f.get("tokens", 0) or f.get("bytes", 0)):
            raise InvalidInput(
                f"record {index}: file {f['name']!r} counts tokens but holds no entry",
                code="invalid_import",
            )
    usage = folder.get("usage", 0)
    if usage != sum(f.get("tokens", 0) for f in folder["files"]):
        raise InvalidInput(
            f"record {index}: the folder's usage is not the sum of its files' tokens",
            code="invalid_import",
        )


def _decode_part(table: Table, value: Any, index: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(
            f"record {index}: a slate's files and entries are objects", code="invalid_import"
        )
    return decode_values(_columns(table), value, index)


def decode_history(kind: str, row: dict[str, Any], index: int) -> dict[str, Any]:
    return decode_values(_columns(HISTORY[kind]), row, index)


def restore_slates(
    conn: Connection,
    insert: Any,
    tenant_id: str,
    scope: Scope,
    rows: dict[str, list[dict[str, Any]]],
) -> dict[str, int]:
    """Insert decoded slate records into the partition; counts of records restored."""
    owner = {
        "tenant_id": tenant_id,
        "runtime_id": scope.runtime_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
    }
    counts = dict.fromkeys(SLATE_TYPES, 0)
    for folder in rows.get("slate", []):
        values = {k: v for k, v in folder.items() if k not in ("files", "entries")}
        stmt = insert(slate_folders).values(**values, **owner).on_conflict_do_nothing()
        if not conn.execute(stmt).rowcount:
            continue  # this folder is already stored for the user: skipped whole
        folder_id = conn.execute(
            select(slate_folders.c.id).where(
                *(slate_folders.c[k] == v for k, v in owner.items()),
                *(slate_folders.c[k] == values[k] for k in ("ladder", "slate", "folder")),
            )
        ).scalar_one()
        for part, table in ((folder["files"], slate_files), (folder["entries"], slate_entries)):
            if part:
                conn.execute(table.insert(), [{**r, "folder_id": folder_id} for r in part])
        counts["slate"] += 1
    for kind, table in HISTORY.items():
        counts[kind] = _restore_history(conn, table, owner, rows.get(kind, []))
    return counts


def _restore_history(
    conn: Connection, table: Table, owner: dict[str, Any], rows: list[dict[str, Any]]
) -> int:
    """Insert history rows the partition does not hold yet. Such a row has no key of its own,
    and one write can evict several entries alike (same file and time), so rows are matched
    on every column and counted: three identical rows in the records and one stored add two."""
    wanted: dict[tuple[tuple[str, Any], ...], list[dict[str, Any]]] = {}
    for row in rows:
        wanted.setdefault(tuple(sorted(row.items())), []).append(row)
    added = 0
    for values, group in wanted.items():
        same = [table.c[k].is_(None) if v is None else table.c[k] == v for k, v in values]
        held = conn.execute(
            select(func.count())
            .select_from(table)
            .where(*(table.c[k] == v for k, v in owner.items()), *same)
        ).scalar_one()
        for row in group[int(held) :]:
            conn.execute(table.insert().values(**row, **owner))
            added += 1
    return added


__all__ = [
    "SLATE_TYPES",
    "decode_history",
    "decode_slate",
    "export_slates",
    "restore_slates",
]
