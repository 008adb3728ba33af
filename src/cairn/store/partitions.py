"""Which tables hold a scope partition's data: one static registry, and erasure over it.

Every table with a partition column (``tenant_id``, ``runtime_id``, ``user_id``,
``agent_id``) is listed here exactly once — as scoped, as keyed by tenant and user alone, or
as exempt with the reason. ``tests/store/test_partitions.py`` inspects the migrated schema of
both backends and fails when a table is in none of the three, so a feature adding a table
must decide here how its rows are erased.

Full-text entries live in the rows (the FTS5 triggers follow them); a memory's vector
(``memory_embeddings``) and per-user slate files and entries go with their memory or folder
(``ON DELETE CASCADE``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Select, Table, delete, func, select

from cairn.core.memory import TURN_SOURCE
from cairn.core.scope import DEFAULT_RUNTIME, Scope
from cairn.store.documents import document_chunks, documents
from cairn.store.items import items
from cairn.store.jobs import compile_jobs
from cairn.store.memory_search import term_stats
from cairn.store.memory_vectors import vector_versions
from cairn.store.run_reads import delete_runs, delete_user_runs, drop_reading_runs
from cairn.store.runs import ladder_run_reads, ladder_runs
from cairn.store.schema import episodes, memories
from cairn.store.slate_tables import (
    slate_evictions,
    slate_folders,
    slate_skips,
)

# Tables with all four partition columns; a partition's rows are those matching its key.
SCOPED_TABLES: tuple[Table, ...] = (
    episodes,
    memories,
    vector_versions,
    term_stats,
    compile_jobs,
    documents,
    document_chunks,
    slate_folders,
    slate_evictions,
    slate_skips,
    items,
)

# Tables keyed by tenant and user only: their rows belong to the subject ``("default", user,
# "")`` (ladder runs: their ``trace`` and ``response`` hold the user's messages).
USER_TABLES: tuple[Table, ...] = (ladder_runs,)

# Tables with a partition column that hold no data of one partition, and why.
EXEMPT: dict[str, str] = {
    "tenants": "the tenant itself, not any partition's data",
    "api_keys": "credentials of the tenant",
    "fts_tenants": "which tenants have a full-text index (no content)",
    "slate_applied_writes": "effect keys of a run (no content); erased with the user's runs",
    "ladder_run_reads": "ids a run read and their partitions (no content); erasing a "
    "partition erases the runs that read it, with these rows",
    "tenant_retention": "the tenant's retention policy",
    "retention_sweeps": "counts of expired rows per tenant (the audit; no content)",
    "ui_sessions": "inspector sign-ins of an API key (hashed tokens; no content)",
    "erasure_log": "which tenants had data erased, and when (no content): every process "
    "drops its caches of them",
    "memory_vector_waits": "which memories wait for a vector (no content); deleted with "
    "their memory (ON DELETE CASCADE), and renamed with it should a partition be renamed",
}


@dataclass(frozen=True, slots=True)
class PartitionSelector:
    """The partitions of one user in a tenant; ``None`` for runtime or agent matches all."""

    tenant_id: str
    user_id: str
    runtime_id: str | None = None
    agent_id: str | None = None

    @classmethod
    def of_scope(cls, tenant_id: str, scope: Scope) -> PartitionSelector:
        return cls(tenant_id, scope.user_id, scope.runtime_id, scope.agent_id)

    def where(self, table: Table) -> list[object]:
        clauses: list[object] = [table.c.tenant_id == self.tenant_id]
        clauses.append(table.c.user_id == self.user_id)
        if self.runtime_id is not None:
            clauses.append(table.c.runtime_id == self.runtime_id)
        if self.agent_id is not None:
            clauses.append(table.c.agent_id == self.agent_id)
        return clauses

    @property
    def covers_subject(self) -> bool:
        """Whether the selection includes the user's subject partition ``("default", user,
        "")``, where user-keyed tables (ladder runs) belong."""
        return self.runtime_id in (None, DEFAULT_RUNTIME) and self.agent_id in (None, "")


def partitions(conn: Connection, selector: PartitionSelector) -> list[Scope]:
    """The partitions the selector matches that hold episodes, memories, documents or items."""
    found: set[tuple[str, str, str]] = set()
    for table in (episodes, memories, documents, vector_versions, items):
        stmt = select(table.c.runtime_id, table.c.user_id, table.c.agent_id).where(
            *selector.where(table)  # type: ignore[arg-type]
        )
        found.update((r[0], r[1], r[2]) for r in conn.execute(stmt.distinct()))
    return [Scope.model_construct(runtime_id=r, user_id=u, agent_id=a) for r, u, a in sorted(found)]


def erase(conn: Connection, selector: PartitionSelector) -> dict[str, int]:
    """Delete every row the selector matches from every registered table; counts per table."""
    counts: dict[str, int] = {}
    # Runs that committed a turn to these partitions quote it, and so do runs that read from
    # them: they go with them (whoever the run's own user was).
    dropped = drop_runs(conn, selector.tenant_id, turn_runs(*selector.where(episodes)))
    dropped += drop_reading_runs(conn, selector.tenant_id, *selector.where(ladder_run_reads))
    # (PostgreSQL: the memories' trigger takes their term statistics with them, so the
    # partition's rows are counted before, or the answer would say 0 of them went.)
    in_partition = selector.where(term_stats)
    stats = conn.execute(
        select(func.count()).select_from(term_stats).where(*in_partition)  # type: ignore[arg-type]
    ).scalar_one()
    for table in SCOPED_TABLES:
        res = conn.execute(delete(table).where(*selector.where(table)))  # type: ignore[arg-type]
        counts[table.name] = int(res.rowcount or 0)
    counts[term_stats.name] = max(counts[term_stats.name], int(stats))
    for table in USER_TABLES:
        counts[table.name] = 0
    if selector.covers_subject:
        counts[ladder_runs.name] = delete_user_runs(conn, selector.tenant_id, selector.user_id)
    counts[ladder_runs.name] += dropped
    return counts


def turn_runs(*where: Any) -> Select[Any]:
    """``(run id, episode id)`` of the turns among the episodes ``where`` selects that name
    the ladder run that committed them (``metadata.run_id``)."""
    run_id = episodes.c.metadata["run_id"].as_string()
    return select(run_id, episodes.c.id).where(
        *where, episodes.c.source == TURN_SOURCE, run_id.is_not(None)
    )


def drop_runs(conn: Connection, tenant_id: str, turns: Select[Any]) -> int:
    """Delete the tenant's ladder runs that committed the turns ``turns`` selects (as
    ``turn_runs`` does), with their effect keys; how many.

    A turn's ``metadata.run_id`` only points at a run: the caller of ``POST /v1/scopes/turns``
    writes the metadata (and the key), and could name another scope's run. A run goes when its
    own record (its trace's ``commit`` hooks, written by the server) names the turn's episode;
    a run whose trace names none (it failed after its hook stored one) is taken by no turn."""
    wanted: dict[str, set[str]] = {}
    for run_id, episode_id in conn.execute(turns):
        if run_id:
            wanted.setdefault(str(run_id), set()).add(_uuid(episode_id))
    if not wanted:
        return 0
    found = conn.execute(
        select(ladder_runs.c.id, ladder_runs.c.trace).where(
            ladder_runs.c.tenant_id == tenant_id, ladder_runs.c.id.in_(list(wanted))
        )
    )
    ids = [str(rid) for rid, trace in found if _committed(trace) & wanted[str(rid)]]
    return delete_runs(conn, tenant_id, ids)


def _committed(trace: Any) -> set[str]:
    """The episode ids a run's trace says its commit hooks stored."""
    hooks = trace.get("commit") if isinstance(trace, dict) else None
    out = set()
    for hook in hooks if isinstance(hooks, list) else []:
        episode = hook.get("episode_id") if isinstance(hook, dict) else None
        if episode:
            out.add(_uuid(episode))
    return out


def _uuid(value: Any) -> str:
    """An episode id in one spelling (hex, as stored or as shown)."""
    try:
        return uuid.UUID(str(value)).hex
    except ValueError:
        return str(value)
