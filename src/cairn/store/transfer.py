"""Export and import of one subject's rows, for moving a subject to another Cairn.

A record is one row as JSON (``{"type": ..., "row": {...}}``) with its id, times and
provenance as stored; the partition columns and the internal ``seq`` are left out, so a record
can be imported into any tenant and subject (the importer's). Embeddings are not exported (a
Cairn with an embedder makes memories' again; an imported item is found by its text until it
is put again); compile jobs are not either (nothing to resume). Per-user slates travel as
records of their own (``cairn.store.slate_transfer``).
Imports are idempotent: a row whose id (or unique key) is already stored is skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import Table, select
from sqlalchemy.exc import DBAPIError, StatementError

from cairn.core.analysis import index_text
from cairn.core.memories import KINDS, SUMMARY_CHARS, moved_memory_id, validity_problem
from cairn.core.scope import Scope
from cairn.errors import Conflict, InvalidInput
from cairn.store import fts
from cairn.store.documents import document_chunks, documents
from cairn.store.episodes import scope_filter
from cairn.store.items import item_address, items, live_items, namespace_labels
from cairn.store.memory_search import row_stems, search_text
from cairn.store.repository import Repository
from cairn.store.runs import ladder_run_reads, ladder_runs, record_reads, trace_reads
from cairn.store.schema import episodes, memories
from cairn.store.slate_reads import item_rows, trace_slate_items
from cairn.store.slate_transfer import SLATE_TYPES, decode_history, decode_slate, export_slates
from cairn.store.transfer_ids import place_memories, repair_references
from cairn.store.transfer_skips import (
    ImportOutcome,
    SkippedRecord,
    restore_slate_records,
    skip_reason,
)
from cairn.store.transfer_values import decode_values, jsonable

# Exported in this order, so an import meets documents before their chunks and episodes
# before the memories citing them.
TABLES: dict[str, Table] = {
    "episode": episodes,
    "memory": memories,
    "document": documents,
    "chunk": document_chunks,
    "run": ladder_runs,
    "item": items,
}
_PARTITION = {"tenant_id", "runtime_id", "user_id", "agent_id"}
_LEFT_OUT = {"seq", "embedding", "search_stems"}
# An item's address and depth follow from its namespace and key (made again on import); its
# vectors, like every embedding, are not exported.
_DERIVED = {"address", "depth", "embedding_dims", "embedding_source"}
PAGE = 500
_TOMBSTONE_KEYS = ("deleted_at", "deleted_by")  # what forgetting keeps of a memory
MEMORY_STATUSES = ("active", "superseded", "deleted")
# A record's type and decoded row -> what the importer's own write paths would refuse of it.
RecordCheck = Callable[[str, dict[str, Any]], str | None]


# A memory's and a chunk's analysed text is made again from its content on import (an
# export of an older release holds that release's analysis), so it is not exported: it would
# double a record's size, and a memory of a long message would no longer fit in a request.
_ANALYSED = {"search_text"}


def _exported_columns(table: Table) -> list[Any]:
    left_out = _PARTITION | _LEFT_OUT | (_DERIVED if table is items else set())
    if table is memories or table is document_chunks:
        left_out |= _ANALYSED
    return [c for c in table.c if c.name not in left_out]


def _key(table: Table) -> Any:
    return table.c.seq


class TransferRepository(Repository):
    def export(self, tenant_id: str, scope: Scope, now: datetime) -> Iterator[dict[str, Any]]:
        """Every exported row of the subject, one page (own read transaction) at a time; items
        expired at ``now`` are left out, as every read leaves them."""
        for kind, table in TABLES.items():
            after = -1
            while True:
                where = [self._owner(table, tenant_id, scope), _key(table) > after]
                if table is items:
                    where.append(live_items(now))
                stmt = select(_key(table), *_exported_columns(table)).where(*where)
                with self._reading() as conn:
                    rows = conn.execute(stmt.order_by(_key(table)).limit(PAGE)).all()
                for r in rows:
                    m = dict(r._mapping)
                    after = m.pop("seq")
                    yield {"type": kind, "row": jsonable(m)}
                if len(rows) < PAGE:
                    break
        yield from export_slates(self._reading, tenant_id, scope)

    @staticmethod
    def _owner(table: Table, tenant_id: str, scope: Scope) -> Any:
        if table is ladder_runs:
            assert scope.subject_id is not None  # runs belong to subjects only
            return (table.c.tenant_id == tenant_id) & (table.c.user_id == scope.user_id)
        return scope_filter(table, tenant_id, scope)

    def import_records(
        self,
        tenant_id: str,
        scope: Scope,
        records: Sequence[dict[str, Any]],
        check: RecordCheck | None = None,
    ) -> ImportOutcome:
        """Insert the records into the tenant's partition ``scope``; rows already stored (by
        id or unique key) are skipped. ``check(type, row)`` may name a problem of a decoded
        row (the limits of the caller's own write paths): that record is refused. Counts of
        inserted rows per record type, and which records were skipped and why."""
        rows, places = _decode_records(records, tenant_id, scope, check)
        try:
            with self._writing() as conn:
                if self.db.is_sqlite:
                    self.db.fts.ensure(conn, fts.MEMORIES, tenant_id)
                    self.db.fts.ensure(conn, fts.CHUNKS, tenant_id)
                self._refuse_foreign_ids(conn, tenant_id, rows)
                self._move_episodes(conn, tenant_id, scope, rows)
                olds = place_memories(conn, tenant_id, scope, rows["memory"])
                outcome = self._insert_rows(conn, tenant_id, scope, (rows, places))
                repair_references(conn, tenant_id, scope, rows["memory"], olds)
                slates = restore_slate_records(
                    conn, self.db.insert, tenant_id, scope, (rows, places)
                )
        except (StatementError, DBAPIError) as exc:
            _refuse_unfit(exc, None)
        skipped = sorted([*outcome.skipped, *slates.skipped], key=lambda s: s.record)
        return ImportOutcome(outcome.imported | slates.imported, skipped)

    def _insert_rows(
        self,
        conn: Any,
        tenant_id: str,
        scope: Scope,
        batch: tuple[dict[str, list[dict[str, Any]]], dict[str, list[int]]],
    ) -> ImportOutcome:
        """Insert the rows of every table but the slates', each record's on its own, so that
        one that does not fit is named and one that adds nothing is told."""
        rows, places = batch
        outcome = ImportOutcome(dict.fromkeys(TABLES, 0), [])
        for kind, table in TABLES.items():
            for place, row in zip(places[kind], rows[kind], strict=True):
                if table is memories and self.db.is_sqlite:
                    analysed = row.get("search_text") or ""
                    row["search_stems"] = row_stems(analysed, row.get("metadata"))
                stmt = self.db.insert(table).values(**row).on_conflict_do_nothing()
                try:
                    added = int(conn.execute(stmt).rowcount or 0)
                except (StatementError, DBAPIError) as exc:
                    _refuse_unfit(exc, place)
                outcome.imported[kind] += added
                if not added:
                    reason = skip_reason(conn, table, tenant_id, scope, row)
                    outcome.skipped.append(SkippedRecord(place, kind, reason))
                elif table is ladder_runs:
                    reads = imported_reads(tenant_id, scope, row)
                    insert = self.db.insert(ladder_run_reads)
                    record_reads(conn, insert, tenant_id, row["id"], reads)
        return outcome

    @staticmethod
    def _move_episodes(
        conn: Any, tenant_id: str, scope: Scope, rows: dict[str, list[dict[str, Any]]]
    ) -> None:
        """Episodes whose ids another scope of the tenant holds (an export of another subject
        imported here: a copy) are stored under their moved ids (a function of this partition
        and the old id, so every call of a paged import maps alike), and the memories citing
        them cite the moved ids: the copy's provenance stays inside its own scope, and
        deleting the original's episodes leaves the copy whole (it was a 'skipped' row, and
        the copy's memories cited the other subject's episodes)."""
        cited = {uuid.UUID(str(e)) for row in rows["memory"] for e in row["source_episode_ids"]}
        wanted = sorted({row["id"] for row in rows["episode"]} | cited, key=str)
        elsewhere = ~scope_filter(episodes, tenant_id, scope)
        held = _episode_ids(conn, wanted, (episodes.c.tenant_id == tenant_id) & elsewhere)
        # Moved by an earlier import of the same records (the original may be gone since):
        # moved again, so importing a copy twice adds nothing.
        renamed = {moved_memory_id(tenant_id, scope, old): old for old in wanted}
        here = scope_filter(episodes, tenant_id, scope)
        held |= {renamed[i] for i in _episode_ids(conn, list(renamed), here)}
        if not held:
            return
        moved = {old: moved_memory_id(tenant_id, scope, old) for old in held}
        if _episode_ids(conn, list(moved.values()), episodes.c.tenant_id != tenant_id):
            raise Conflict(
                "some record ids are already used in this database outside your tenant; they "
                "cannot be restored with their ids",
                code="import_id_conflict",
            )
        for row in rows["episode"]:
            row["id"] = moved.get(row["id"], row["id"])
        for row in rows["memory"]:
            sources = [uuid.UUID(str(e)) for e in row["source_episode_ids"]]
            row["source_episode_ids"] = [str(moved.get(e, e)) for e in sources]

    @staticmethod
    def _refuse_foreign_ids(
        conn: Any, tenant_id: str, rows: dict[str, list[dict[str, Any]]]
    ) -> None:
        """Ids are unique across tenants: a record whose id another tenant holds cannot be
        restored with its id, so the import is refused (naming no tenant, no row)."""
        for kind, table in TABLES.items():
            if table is ladder_runs or table is memories:
                # Run ids are unique per tenant only; memories are placed under ids of this
                # partition (``cairn.store.transfer_ids``), so refusing could only tell the
                # importer what another tenant holds.
                continue
            ids = [row["id"] for row in rows[kind]]
            for start in range(0, len(ids), PAGE):
                taken = conn.execute(
                    select(table.c.id)
                    .where(
                        table.c.id.in_(ids[start : start + PAGE]), table.c.tenant_id != tenant_id
                    )
                    .limit(1)
                ).first()
                if taken is not None:
                    raise Conflict(
                        "some record ids are already used in this database outside your "
                        "tenant; they cannot be restored with their ids",
                        code="import_id_conflict",
                    )


def imported_reads(tenant_id: str, scope: Scope, run: dict[str, Any]) -> list[dict[str, str]]:
    """What an imported run read, so that deleting it here takes the run: each item its trace
    names, in the partition the trace names (this one when it names none: an older export),
    and the id the item has if it was imported here too (a memory or episode whose id was not
    this partition's to keep is stored under ``moved_memory_id``; a function of the partition
    and the old id, so every page of an import maps alike); and the slate files its steps read
    or wrote (``cairn.store.slate_reads``)."""
    here = {"runtime_id": scope.runtime_id, "user_id": scope.user_id, "agent_id": scope.agent_id}
    trace = run.get("trace")
    slates = trace_slate_items(trace, str(run.get("ladder") or ""), str(run.get("user_id") or ""))
    out = trace_reads(trace, unnamed=here) + item_rows(slates)
    for read in list(out):
        try:
            old = uuid.UUID(read["item_id"])
        except ValueError:
            continue
        out.append({**here, "item_id": str(moved_memory_id(tenant_id, scope, old))})
    return out


def _episode_ids(conn: Any, ids: list[uuid.UUID], where: Any) -> set[uuid.UUID]:
    """The ``ids`` of stored episodes that ``where`` also selects."""
    found: set[uuid.UUID] = set()
    for start in range(0, len(ids), PAGE):
        stmt = select(episodes.c.id).where(episodes.c.id.in_(ids[start : start + PAGE]), where)
        found.update(uuid.UUID(str(i)) for i in conn.execute(stmt).scalars())
    return found


def _decode_records(
    records: Sequence[dict[str, Any]], tenant_id: str, scope: Scope, check: RecordCheck | None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[int]]]:
    """The records as insertable rows per type, and each row's place in ``records``."""
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in (*TABLES, *SLATE_TYPES)}
    places: dict[str, list[int]] = {kind: [] for kind in rows}
    for i, record in enumerate(records):
        kind = record.get("type")
        if kind == "header":  # an export's first line: nothing to restore
            continue
        row = record.get("row")
        if kind not in rows or not isinstance(row, dict):
            raise InvalidInput(
                f"record {i}: needs a type ({', '.join(rows)}) and a row object",
                code="invalid_import",
            )
        if kind == "slate":
            decoded = decode_slate(row, i)
        elif kind in SLATE_TYPES:
            decoded = decode_history(kind, row, i)
        else:
            decoded = _decode(TABLES[kind], row, i, tenant_id, scope)
        problem = check(kind, decoded) if check is not None else None
        if problem:
            raise InvalidInput(f"record {i}: {problem}", code="invalid_import")
        rows[kind].append(decoded)
        places[kind].append(i)
    return rows, places


def _refuse_unfit(exc: StatementError | DBAPIError, place: int | None) -> NoReturn:
    """A row the database refused is a 422 naming its record (when known); a lost connection
    is no fault of the data and goes on as it is."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        raise exc
    what = "a record" if place is None else f"record {place}:"
    raise InvalidInput(
        f"{what} does not fit the schema: {str(exc.orig or exc)[:200]}", code="invalid_import"
    ) from exc


def _decode(
    table: Table, row: dict[str, Any], index: int, tenant_id: str, scope: Scope
) -> dict[str, Any]:
    """A record's row as insertable values, in the importer's partition."""
    if table is memories or table is document_chunks:  # (older exports carry it: made again)
        row = {k: v for k, v in row.items() if k not in _ANALYSED}
    out = decode_values({c.name: c for c in _exported_columns(table)}, row, index)
    if table is memories:
        _check_memory(out, index)
    if table is items:
        _derive_item(out, index)
    if table is document_chunks:
        # Analysed again from the chunk's text, as a memory's is: an export of an older
        # release holds the analysis of that release.
        out["search_text"] = index_text(str(out.get("content") or ""))
    if table is episodes and not str(out.get("source", "")).strip():
        raise InvalidInput(f"record {index}: source must not be blank", code="invalid_import")
    out["tenant_id"] = tenant_id
    out["user_id"] = scope.user_id
    if table is not ladder_runs:
        out["runtime_id"] = scope.runtime_id
        out["agent_id"] = scope.agent_id
    return out


def _derive_item(row: dict[str, Any], index: int) -> None:
    """An item's address and depth, from a namespace path as items store it (``a.b.``)."""
    path = row["namespace"]
    labels = namespace_labels(path)
    if not path.endswith(".") or not labels or not all(labels):
        raise InvalidInput(f"record {index}: bad item namespace", code="invalid_import")
    ttl = row.get("ttl_seconds")
    if ttl is not None and not ttl > 0:
        raise InvalidInput(f"record {index}: ttl_seconds must be > 0", code="invalid_import")
    row["depth"] = len(labels)
    row["address"] = item_address(path, row["key"])


def _check_memory(row: dict[str, Any], index: int) -> None:
    """What readers of a memory rely on beyond column types; what is derived from the text
    (its analysed ``search_text``) is made again, never taken from the record, and a
    forgotten memory's tombstone keeps nothing but its id and hash."""
    problem = _memory_problem(row)
    if problem:
        raise InvalidInput(f"record {index}: {problem}", code="invalid_import")
    if row["status"] == "deleted":
        kept = {k: str(v) for k, v in row["metadata"].items() if k in _TOMBSTONE_KEYS}
        row.update(content="", summary="", metadata=kept, search_text="")
    else:
        row["search_text"] = search_text(row["content"], row["metadata"])


def _memory_problem(row: dict[str, Any]) -> str | None:
    if row.get("status") not in MEMORY_STATUSES:
        return "unknown memory status"
    if row.get("kind") not in KINDS:
        return f"unknown memory kind (kinds are {', '.join(KINDS)})"
    if row.get("status") != "deleted" and not str(row.get("content", "")).strip():
        return "content must not be blank (only a forgotten memory's is empty)"
    if not 0.0 <= float(row.get("confidence", 0.0)) <= 1.0:
        return "confidence must be in [0, 1]"
    if not isinstance(row.get("metadata"), dict):
        return "metadata must be an object"
    if len(str(row.get("summary", ""))) > SUMMARY_CHARS:
        return f"summary is longer than {SUMMARY_CHARS} characters (a memory's short form)"
    sources = row.get("source_episode_ids")
    if not isinstance(sources, list) or not sources:
        return "source_episode_ids must list the episodes it was compiled from (never empty)"
    try:
        [uuid.UUID(str(x)) for x in sources]
    except ValueError:
        return "source_episode_ids must be UUIDs"
    return _link_problem(row) or validity_problem(row.get("valid_from"), row.get("valid_to"))


def _link_problem(row: dict[str, Any]) -> str | None:
    """A version link no write of Cairn makes. (A link to a memory that is neither stored nor
    imported is kept: the target may come in a later call of a paged import, or have expired
    under the tenant's retention.)"""
    successor = row.get("superseded_by")
    if successor is None:
        return None
    if successor == row["id"]:
        return "superseded_by names the memory itself (a version is replaced by a later one)"
    if row["status"] == "active":
        return "an active memory has no superseded_by (a replaced version's status is superseded)"
    return None
