"""What each ladder run read, so that deleting it deletes the runs that hold a copy.

A run's trace (and its stored response, and its board) quotes the memories, turns and document
chunks its ``memory.context`` hooks recalled, from whatever partition a hook's ``scope`` names:
a ladder may read a shared agent's partition, or a fixed user's, whoever calls it. A run
belongs to the user who called it (``ladder_runs.user_id``), so deleting the partition it read
from would leave the quotes behind. ``ladder_run_reads`` holds one row per item a run read:
the item's id and the partition it came from, taken from the trace as soon as the prepare
hooks have run (``RunRepository.add_reads``) and again when the run's end is recorded
(``cairn.store.runs.trace_reads``). Deleting a partition, a memory, an episode (or what it
changes: neighbour words, a stated name), a document or expired rows then deletes every run
that read from it (``drop_reading_runs``, ``drop_runs_reading``), as a run that committed a
deleted turn goes (``cairn.store.partitions.drop_runs``): the trace, the response and the
run's write claims, whole. From before its hooks read until their reads are recorded
(milliseconds), a run holds a ``READING`` row instead: a deletion of anything in the tenant
then deletes it too (``RunRepository.mark_reading``; on PostgreSQL a mark and the deletions take
turns on a lock, ``cairn.store.runs.lock_reads``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, or_, select

from cairn.store.runs import READING, ladder_run_reads, ladder_runs, lock_reads
from cairn.store.slate_tables import slate_applied_writes

# Ids a statement names at most.
_PAGE = 500


def delete_runs(conn: Connection, tenant_id: str, run_ids: Sequence[str]) -> int:
    """Delete the tenant's runs ``run_ids`` with their write claims and reads; how many runs.

    The run rows go first, in id order (as every deleter takes them): a run's end being
    recorded at the same moment (``RunRepository.finish``, which updates the run and then adds
    its reads) waits for this and then finds no run, instead of the two waiting on each
    other."""
    deleted = 0
    ids = sorted(set(run_ids))
    for start in range(0, len(ids), _PAGE):
        page = ids[start : start + _PAGE]
        res = conn.execute(
            delete(ladder_runs).where(
                ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id.in_(page)
            )
        )
        deleted += int(res.rowcount or 0)
        _drop_dependents(conn, tenant_id, page)
    return deleted


def delete_user_runs(conn: Connection, tenant_id: str, user_id: str) -> int:
    """Delete every run of the tenant's user ``user_id`` (one statement), with their write
    claims and reads; how many."""
    gone = conn.execute(
        delete(ladder_runs)
        .where(ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.user_id == user_id)
        .returning(ladder_runs.c.id)
    ).scalars()
    ids = sorted(str(i) for i in gone)
    for start in range(0, len(ids), _PAGE):
        _drop_dependents(conn, tenant_id, ids[start : start + _PAGE])
    return len(ids)


def _drop_dependents(conn: Connection, tenant_id: str, run_ids: list[str]) -> None:
    for table, column in (
        (slate_applied_writes, slate_applied_writes.c.run_id),
        (ladder_run_reads, ladder_run_reads.c.run_id),
    ):
        conn.execute(delete(table).where(table.c.tenant_id == tenant_id, column.in_(run_ids)))


def drop_reading_runs(conn: Connection, tenant_id: str, *where: Any) -> int:
    """Delete the tenant's runs that read what ``where`` selects of ``ladder_run_reads`` (a
    partition's columns, or ``item_id``), and those whose hooks are reading now (``READING``);
    how many."""
    assert where, "a selection of ladder_run_reads"
    lock_reads(conn, tenant_id, marking=False)
    selected = or_(and_(*where), ladder_run_reads.c.item_id == READING)
    stmt = select(ladder_run_reads.c.run_id).where(
        ladder_run_reads.c.tenant_id == tenant_id, selected
    )
    return delete_runs(conn, tenant_id, list(conn.execute(stmt.distinct()).scalars()))


def drop_runs_reading(conn: Connection, tenant_id: str, item_ids: Sequence[Any]) -> int:
    """Delete the tenant's runs that read any of the items ``item_ids`` (memory, episode or
    chunk ids); how many."""
    ids = list(dict.fromkeys(str(i) for i in item_ids))
    dropped = 0
    for start in range(0, len(ids), _PAGE):
        dropped += drop_reading_runs(
            conn, tenant_id, ladder_run_reads.c.item_id.in_(ids[start : start + _PAGE])
        )
    return dropped


__all__ = ["delete_runs", "delete_user_runs", "drop_reading_runs", "drop_runs_reading"]
