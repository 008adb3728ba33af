"""Memories' vectors: kept beside the memories (``memory_embeddings``, one row per memory that
has one; a memory waiting for one has a row in ``memory_vector_waits``), read per partition by
the vector lane, written by the background embedding pass; a version per partition tells the
lane's in-memory matrix when they changed. Writing a vector never touches its memory's row."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    String,
    Table,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)

from cairn.core.scope import Scope
from cairn.store.episodes import scope_filter
from cairn.store.repository import Repository
from cairn.store.schema import memories as t
from cairn.store.schema import memory_embeddings as e
from cairn.store.schema import memory_vector_waits as w
from cairn.store.schema import metadata

if TYPE_CHECKING:
    from cairn.store.database import Database

# One row per partition with vectors; ``version`` grows whenever its vectors change, so the
# vector lane's in-memory matrix is checked with one primary-key read.
vector_versions = Table(
    "memory_vector_versions",
    metadata,
    Column("tenant_id", String(128), primary_key=True),
    Column("runtime_id", String(256), primary_key=True),
    Column("user_id", String(256), primary_key=True, server_default=""),
    Column("agent_id", String(256), primary_key=True, server_default=""),
    Column("version", BigInteger(), nullable=False),
    # Grows whenever a vector of the partition is cleared (not only added): a cached matrix
    # may then only be read again, not extended (``cairn.engine.vectors``).
    Column("rewrites", BigInteger(), nullable=False, server_default="0"),
)


# Read on every vector-lane request: built once (built per call, a read took 220 µs on SQLite
# instead of 19).
_STAMP = select(vector_versions.c.version, vector_versions.c.rewrites).where(
    vector_versions.c.tenant_id == bindparam("tenant_id"),
    vector_versions.c.runtime_id == bindparam("runtime_id"),
    vector_versions.c.user_id == bindparam("user_id"),
    vector_versions.c.agent_id == bindparam("agent_id"),
)


def _partition_key(tenant_id: str, scope: Scope) -> dict[str, str]:
    """A partition's key columns as the parameters of ``_STAMP`` and of the version's upsert."""
    return {
        "tenant_id": tenant_id,
        "runtime_id": scope.runtime_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
    }


def _waiting(tenant_id: str, scope: Scope) -> tuple[Any, ...]:
    """The conditions of a partition's rows still waiting for a vector, joined to their
    memories (a deleted row never gets one)."""
    return (scope_filter(w, tenant_id, scope), t.c.seq == w.c.seq, t.c.status != "deleted")


def wait_for_vectors(conn: Connection, db: Database, seqs: Sequence[int]) -> None:
    """Put these memories (those stored and not deleted) back among those waiting for a
    vector: their text changed, or their vector was another embedder's."""
    if not seqs:
        return
    rows = select(t.c.seq, t.c.tenant_id, t.c.runtime_id, t.c.user_id, t.c.agent_id).where(
        t.c.seq.in_(list(seqs)), t.c.status != "deleted"
    )
    columns = ["seq", "tenant_id", "runtime_id", "user_id", "agent_id"]
    # Still waiting (claimed by a pass embedding the text before): free for the next pass
    # at once, not when that claim runs out.
    again = db.insert(w).from_select(columns, rows)
    conn.execute(again.on_conflict_do_update(index_elements=["seq"], set_={"claimed_until": None}))


def bump_vector_version(
    conn: Connection, db: Database, tenant_id: str, scope: Scope, *, cleared: bool
) -> None:
    """Move the partition's vector version on; ``cleared``: a vector of it was cleared, so
    ``rewrites`` grows too. The version is a clock value, not a counter: a subject deleted and
    rebuilt never repeats a version a cache may still hold."""
    key = _partition_key(tenant_id, scope)
    version = time.time_ns() // 1000
    stmt = db.insert(vector_versions).values(**key, version=version, rewrites=int(cleared))
    grown: dict[str, Any] = {"version": version}
    if cleared:
        grown["rewrites"] = vector_versions.c.rewrites + 1
    conn.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=grown))


@dataclass(frozen=True, slots=True)
class VectorRows:
    """Embeddings of one partition: parallel lists of ``seq`` and float32 bytes, and the
    distinct ``metadata.speaker`` of those rows ("" for a row without one)."""

    seqs: list[int]
    blobs: list[bytes]
    speakers: frozenset[str] = frozenset()

    @classmethod
    def of(cls, rows: Sequence[Any]) -> VectorRows:
        """From ``(seq, embedding, speaker)`` rows (``_VECTOR_COLUMNS``; a speaker as text, as
        ``rank_facts`` gives it, whatever JSON value the metadata holds)."""
        return cls(
            [int(r[0]) for r in rows],
            [bytes(r[1]) for r in rows],
            frozenset(str(r[2] or "") for r in rows),
        )


# What the vector lane reads of a row: its vector, and its speaker (the search needs the
# speakers of rows it may leave unread: ``cairn.engine.search``).
_VECTOR_COLUMNS = (t.c.seq, e.c.embedding, t.c.metadata["speaker"].as_string())


class MemoryVectors(Repository):
    """The vector methods of ``MemoryRepository``."""

    def set_embeddings(
        self,
        tenant_id: str,
        scope: Scope,
        items: Iterable[tuple[int, bytes]],
        made_from: dict[int, tuple[str, str]] | None = None,
    ) -> int:
        """Store vectors of the partition's rows (those still stored and not forgotten: a
        row erased or forgotten since it was read gets none) and bump its vector version.
        ``made_from``: the ``(content, context terms)`` each vector was computed from; a row
        whose text changed since (a name erased from it, say) gets none and keeps waiting,
        so no vector of text that is gone is stored. Returns how many were stored."""
        conn = self._tx_write
        blobs = dict(items)
        if not blobs:
            return 0
        # PostgreSQL: the rows are locked for this write (``FOR UPDATE``), so a deletion waits
        # for it instead of landing between the read and the insert (a foreign key
        # violation); rows another pass is writing now are skipped (``SKIP LOCKED``: it
        # writes them), so two passes never wait on each other (a shared lock that both then
        # upgraded deadlocked).
        stored = conn.execute(
            select(t.c.seq, t.c.content, t.c.metadata)
            .where(
                t.c.seq.in_(list(blobs)), scope_filter(t, tenant_id, scope), t.c.status != "deleted"
            )
            .order_by(t.c.seq)
            .with_for_update(skip_locked=True)
        ).all()
        # (The terms read as ``without_embedding`` gives them to the pass: a row that did not
        # change compares equal, so it is never left waiting for ever.)
        kept = [
            int(seq)
            for seq, content, meta in stored
            if made_from is None
            or made_from.get(int(seq)) == (content, str((meta or {}).get("context_terms") or ""))
        ]
        if not kept:
            return 0
        insert = self.db.insert(e)
        excluded = insert.excluded.embedding
        conn.execute(
            insert.on_conflict_do_update(index_elements=[e.c.seq], set_={"embedding": excluded}),
            [{"seq": seq, "embedding": blobs[seq]} for seq in kept],
        )
        conn.execute(delete(w).where(w.c.seq.in_(kept)))
        bump_vector_version(conn, self.db, tenant_id, scope, cleared=False)
        return len(kept)

    def clear_vectors(self, seqs: list[int]) -> None:
        """Forget the vectors of these rows, which wait for new ones (the caller bumps their
        partitions' versions)."""
        if not seqs:
            return
        conn = self._tx_write
        conn.execute(delete(e).where(e.c.seq.in_(seqs)))
        wait_for_vectors(conn, self.db, seqs)

    def drop_vectors_of_other_size(self, nbytes: int, limit: int = 5_000) -> int:
        """Forget up to ``limit`` vectors that are not ``nbytes`` long (another embedder's),
        so the background pass embeds those memories again; returns how many."""
        found = self._tx_write.execute(
            select(t.c.seq, t.c.tenant_id, t.c.runtime_id, t.c.user_id, t.c.agent_id)
            .join(e, e.c.seq == t.c.seq)
            .where(func.length(e.c.embedding) != nbytes)
            .limit(limit)
        ).all()
        self.clear_vectors([int(r[0]) for r in found])
        for tenant_id, runtime_id, user_id, agent_id in {tuple(r[1:]) for r in found}:
            scope = Scope.model_construct(runtime_id=runtime_id, user_id=user_id, agent_id=agent_id)
            bump_vector_version(self._tx_write, self.db, tenant_id, scope, cleared=True)
        return len(found)

    def keep_speakers_known(self, row: dict[str, Any], where: Sequence[Any]) -> None:
        """Before the stored memory ``where`` selects takes ``row``'s metadata: the vector lane's
        cached matrices know their rows' speakers (``VectorRows.speakers``), so a speaker that
        changes moves the partition's vector version on, as a cleared vector does (the
        matrix is read again)."""
        conn = self._tx_write
        speaker = str(row["metadata"].get("speaker") or "")
        was = conn.execute(select(t.c.metadata["speaker"].as_string()).where(*where)).first()
        if was is not None and str(was[0] or "") != speaker:
            scope = Scope.model_construct(
                runtime_id=row["runtime_id"], user_id=row["user_id"], agent_id=row["agent_id"]
            )
            bump_vector_version(conn, self.db, row["tenant_id"], scope, cleared=True)

    def vector_stamp(self, tenant_id: str, scope: Scope) -> tuple[int, int]:
        """The partition's vector version (0: none yet), which changes when its vectors do,
        and how many times a vector of it was cleared (``rewrites``)."""
        row = self._tx_read.execute(_STAMP, _partition_key(tenant_id, scope)).first()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    def vectors(self, tenant_id: str, scope: Scope, after: int = 0) -> VectorRows:
        """The partition's vectors in ``seq`` order (only rows after ``after`` if given)."""
        conn = self._tx_read
        rows = conn.execute(
            select(*_VECTOR_COLUMNS)
            .join(e, e.c.seq == t.c.seq)
            .where(scope_filter(t, tenant_id, scope), t.c.seq > after)
            .order_by(t.c.seq)
        ).all()
        return VectorRows.of(rows)

    def vector_pages(self, tenant_id: str, scope: Scope, size: int) -> Iterator[VectorRows]:
        """The partition's vectors in ``seq`` order, ``size`` rows at a time, streamed from
        one query (a server-side cursor on PostgreSQL): a big partition's vectors are never
        all in memory at once (100,000 of the multilingual embedder's are 358 MB, of e5's 154,
        and PostgreSQL's driver holds a result whole, as text, before it is read)."""
        stmt = (
            select(*_VECTOR_COLUMNS)
            .join(e, e.c.seq == t.c.seq)
            .where(scope_filter(t, tenant_id, scope))
            .order_by(t.c.seq)
            .execution_options(yield_per=size)
        )
        for rows in self._tx_read.execute(stmt).partitions(size):
            yield VectorRows.of(rows)

    def vector_count(self, tenant_id: str, scope: Scope) -> int:
        """How many of the partition's rows have a vector."""
        return int(
            self._tx_read.execute(
                select(func.count())
                .select_from(t)
                .join(e, e.c.seq == t.c.seq)
                .where(scope_filter(t, tenant_id, scope))
            ).scalar_one()
        )

    def unembedded_count(self, tenant_id: str, scope: Scope, cap: int) -> int:
        """How many of the partition's rows (deleted ones aside) have no vector yet, counted
        up to ``cap``: each row counted is one row read of ``memory_vector_waits`` and one of
        ``memories``."""
        waiting = select(w.c.seq).where(*_waiting(tenant_id, scope)).limit(max(0, cap)).subquery()
        return int(self._tx_read.execute(select(func.count()).select_from(waiting)).scalar_one())

    def partitions_without_embedding(self, limit: int = 1_000) -> list[tuple[str, Scope]]:
        """``(tenant, scope)`` of partitions that hold a memory with no vector yet (the
        background embedding pass starts from these after a restart)."""
        conn = self._tx_read
        rows = conn.execute(
            select(w.c.tenant_id, w.c.runtime_id, w.c.user_id, w.c.agent_id)
            .join(t, t.c.seq == w.c.seq)
            .where(t.c.status != "deleted")
            .distinct()
            .limit(limit)
        ).all()
        return [
            (str(r[0]), Scope.model_construct(runtime_id=r[1], user_id=r[2], agent_id=r[3]))
            for r in rows
        ]

    def claim_waiting(
        self, tenant_id: str, scope: Scope, limit: int, now: datetime, lease: timedelta
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """``without_embedding`` for a process about to embed them: the oldest ``limit``
        waiting memories nobody has claimed (or whose claim ran out), claimed until ``now +
        lease``, so the other processes of a fleet take others meanwhile. PostgreSQL skips
        rows another transaction is claiming (``SKIP LOCKED``); SQLite has one writer."""
        conn = self._tx_write
        free = or_(w.c.claimed_until.is_(None), w.c.claimed_until < now)
        pick = (
            select(w.c.seq)
            .where(scope_filter(w, tenant_id, scope), free)
            .order_by(w.c.seq)
            .limit(limit)
        )
        if not self.db.is_sqlite:
            pick = pick.with_for_update(skip_locked=True)
        seqs = [int(r[0]) for r in conn.execute(pick)]
        if not seqs:
            return []
        conn.execute(update(w).where(w.c.seq.in_(seqs)).values(claimed_until=now + lease))
        rows = conn.execute(
            select(t.c.seq, t.c.content, t.c.metadata)
            .where(t.c.seq.in_(seqs), t.c.status != "deleted")
            .order_by(t.c.seq)
        ).all()
        return [(int(r[0]), str(r[1]), dict(r[2] or {})) for r in rows]

    def release_claims(self, seqs: Sequence[int]) -> None:
        """End the claims on these memories: those still waiting (their vector was not
        stored: the text changed while it was embedded) are free for the next pass at once."""
        if seqs:
            self._tx_write.execute(
                update(w).where(w.c.seq.in_(list(seqs))).values(claimed_until=None)
            )

    def without_embedding(
        self, tenant_id: str, scope: Scope, limit: int = 10_000
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """``(seq, content, metadata)`` of memories that have no vector yet."""
        conn = self._tx_read
        rows = conn.execute(
            select(t.c.seq, t.c.content, t.c.metadata)
            .select_from(w)
            .join(t, t.c.seq == w.c.seq)
            .where(*_waiting(tenant_id, scope))
            .order_by(w.c.seq)
            .limit(limit)
        ).all()
        return [(int(r[0]), str(r[1]), dict(r[2] or {})) for r in rows]
