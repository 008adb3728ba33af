"""Single-item lifecycle of memories and episodes: history, correction, forgetting.

A forgotten memory stays as a tombstone: its row keeps the id and ``content_hash`` (both
derived from the content, so the next compile of the same episodes recognises the memory as
already stored and does not re-create it) while its text, summary, metadata and vector are
wiped. A deleted episode is removed outright, with the memories derived from it alone.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, or_, select, text, update

from cairn.core.memories import Memory, memory_id, moved_memory_id
from cairn.core.scope import Scope
from cairn.store import fts
from cairn.store.episodes import scope_filter
from cairn.store.memory_rows import row_to_memory
from cairn.store.memory_search import row_stems, search_text
from cairn.store.memory_vectors import bump_vector_version, wait_for_vectors
from cairn.store.partitions import PartitionSelector, drop_runs, erase, partitions, turn_runs
from cairn.store.repository import Repository
from cairn.store.run_reads import drop_runs_reading
from cairn.store.schema import episodes as episodes_t
from cairn.store.schema import memories as t
from cairn.store.schema import memory_embeddings, memory_vector_waits
from cairn.store.transfer_ids import repoint

log = logging.getLogger(__name__)

_COLUMNS = [c for c in t.c if c.name != "search_stems"]
# A chain longer than this is a cycle or corruption; history stops there.
MAX_CHAIN = 1000


class LifecycleRepository(Repository):
    # -- reads -------------------------------------------------------------------------------

    def memory(self, tenant_id: str, memory_id: uuid.UUID) -> Memory | None:
        """The tenant's memory ``memory_id`` in any status (tombstones included)."""
        conn = self._tx_read
        row = conn.execute(
            select(*_COLUMNS).where(t.c.tenant_id == tenant_id, t.c.id == memory_id)
        ).first()
        return row_to_memory(row) if row else None

    def replaced(self, tenant_id: str, memory: Memory) -> list[Memory]:
        """The versions ``memory`` replaced, newest first (each superseded by the next)."""
        conn = self._tx_read
        out: list[Memory] = []
        seen = {memory.id}
        current = memory
        while len(out) < MAX_CHAIN:
            row = conn.execute(
                select(*_COLUMNS)
                .where(
                    scope_filter(t, tenant_id, memory.scope),  # a chain stays in its subject
                    t.c.superseded_by == current.id,
                    t.c.status != "deleted",
                )
                .order_by(t.c.seq.desc())
                .limit(1)
            ).first()
            if row is None:
                break
            current = row_to_memory(row)
            if current.id in seen:
                break
            seen.add(current.id)
            out.append(current)
        return out

    def replaced_by(self, tenant_id: str, memory: Memory) -> list[Memory]:
        """The versions that replaced ``memory``, oldest first; the last is the current one."""
        out: list[Memory] = []
        seen = {memory.id}
        current = memory
        while current.superseded_by is not None and len(out) < MAX_CHAIN:
            nxt = self.memory(tenant_id, current.superseded_by)
            if nxt is None or nxt.id in seen or nxt.scope != memory.scope:
                break
            seen.add(nxt.id)
            out.append(nxt)
            current = nxt
        return out

    def naming(self, tenant_id: str, scope: Scope, name: str) -> list[Memory]:
        """The partition's stored memories (any status but tombstones) that carry a stated
        ``name`` the compiler put in: facts whose subject it is, turns with it among their
        keywords (callers check the speaker)."""
        conn = self._tx_read
        meta = t.c.metadata
        stmt = select(*_COLUMNS).where(
            scope_filter(t, tenant_id, scope),
            t.c.status != "deleted",
            or_(
                and_(t.c.kind == "profile_fact", meta["subject"].as_string() == name),
                and_(
                    t.c.kind == "turn",
                    meta["keywords"].as_string().contains(name, autoescape=True),
                ),
            ),
        )
        return [row_to_memory(r) for r in conn.execute(stmt)]

    def held_hashes(
        self, tenant_id: str, scope: Scope, kind: str, hashes: list[str]
    ) -> dict[str, tuple[str, str]]:
        """``content_hash → (status, content)`` of the partition's memories of ``kind`` (any
        status, tombstones included) holding one of ``hashes``."""
        conn = self._tx_read
        found: dict[str, tuple[str, str]] = {}
        for start in range(0, len(hashes), 500):
            stmt = select(t.c.content_hash, t.c.status, t.c.content).where(
                scope_filter(t, tenant_id, scope),
                t.c.kind == kind,
                t.c.content_hash.in_(hashes[start : start + 500]),
            )
            found.update({r[0]: (str(r[1]), str(r[2] or "")) for r in conn.execute(stmt)})
        return found

    # -- writes ------------------------------------------------------------------------------

    def forget(self, memory: Memory, deleted_by: str, now: datetime) -> None:
        """Turn ``memory`` into a tombstone: text, metadata and vector wiped, id and hash kept.

        The full-text triggers re-index the row on the content update (to nothing)."""
        conn = self._tx_write
        conn.execute(
            update(t)
            .where(t.c.id == memory.id)
            .values(
                status="deleted",
                content="",
                summary="",
                search_text="",
                metadata={"deleted_at": now.isoformat(), "deleted_by": deleted_by},
                search_stems=None,
                updated_at=now,
            )
        )
        seq = select(t.c.seq).where(t.c.id == memory.id).scalar_subquery()
        conn.execute(delete(memory_embeddings).where(memory_embeddings.c.seq == seq))
        conn.execute(delete(memory_vector_waits).where(memory_vector_waits.c.seq == seq))
        drop_runs_reading(conn, memory.tenant_id, [memory.id])  # runs that quote it
        self.bump_vectors(memory.tenant_id, memory.scope)
        self.purge_index(memory.tenant_id)

    def rewrite(
        self,
        memory: Memory,
        text: tuple[str, str, dict[str, Any]],
        content_hash: str | None,
        now: datetime,
    ) -> None:
        """Store new text for ``memory`` in place (no new version: what it said must not stay
        readable): ``text`` is ``(content, summary, metadata)``, analysed again, and the vector is
        dropped when the content changed (``content_hash`` given). A rewrite
        reading like another stored memory of the partition merges into that one. The ladder
        runs that read it go (they quote the old text)."""
        conn = self._tx_write
        drop_runs_reading(conn, memory.tenant_id, [memory.id])
        content, summary, metadata = text
        values: dict[str, Any] = {"metadata": metadata, "updated_at": now}
        if content_hash is not None:
            held = conn.execute(
                select(t.c.id, t.c.source_episode_ids).where(
                    scope_filter(t, memory.tenant_id, memory.scope),
                    t.c.kind == memory.kind,
                    t.c.content_hash == content_hash,
                    t.c.id != memory.id,
                )
            ).first()
            if held is not None:
                known = [str(x) for x in held[1] or []]
                extra = [str(x) for x in memory.source_episode_ids if str(x) not in known]
                conn.execute(
                    update(t).where(t.c.id == held[0]).values(source_episode_ids=known + extra)
                )
                where = scope_filter(t, memory.tenant_id, memory.scope)
                repoint(conn, where, {memory.id: held[0]})
                conn.execute(delete(t).where(t.c.id == memory.id))
                return
            values.update(content=content, summary=summary, content_hash=content_hash)
        analysed = search_text(content, metadata)
        values["search_text"] = analysed
        if self.db.is_sqlite:
            values["search_stems"] = row_stems(analysed, metadata, self.db.porter_stems)
        # The row first: on PostgreSQL its lock then keeps the embedding pass (``FOR UPDATE
        # SKIP LOCKED``) from storing a vector of the old text until this commits.
        seq = conn.execute(
            update(t).where(t.c.id == memory.id).values(**values).returning(t.c.seq)
        ).scalar()
        if seq is not None and content_hash is not None:  # (None: deleted meanwhile)
            # The old text's vector goes; the memory waits for one of the new text.
            conn.execute(delete(memory_embeddings).where(memory_embeddings.c.seq == seq))
            wait_for_vectors(conn, self.db, [int(seq)])
            self._rederive_id(conn, memory, content_hash)

    def _rederive_id(self, conn: Connection, memory: Memory, content_hash: str) -> None:
        """Give a rewritten memory the id its new text derives (``memory_id``), and point
        what referred to it there (compile jobs list memories by ``seq``): an id derived from
        the old text would let anyone holding it test guesses of what that text said (a
        deleted name)."""
        tenant_id, scope = memory.tenant_id, memory.scope
        derived = new_id = memory_id(tenant_id, scope, memory.kind, content_hash)
        attempt = 0  # (another partition may hold the derived id: an imported memory's)
        while new_id != memory.id and conn.execute(select(t.c.seq).where(t.c.id == new_id)).first():
            attempt += 1
            new_id = moved_memory_id(tenant_id, scope, derived, attempt)
        if new_id == memory.id:
            return
        conn.execute(update(t).where(t.c.id == memory.id).values(id=new_id))
        repoint(conn, scope_filter(t, tenant_id, scope), {memory.id: new_id})

    def delete_episode(
        self, tenant_id: str, episode_id: uuid.UUID
    ) -> list[tuple[str, dict[str, Any]]]:
        """Delete the episode and the memories derived from it alone (the episode is dropped
        from the sources of the others); returns ``(kind, metadata)`` of each memory deleted.
        A version those memories superseded takes their place (``_reconnect``). The caller
        merges the index segments (``purge_index``) once it has re-indexed what it changes."""
        conn = self._tx_write
        row = conn.execute(
            select(episodes_t.c.runtime_id, episodes_t.c.user_id, episodes_t.c.agent_id).where(
                episodes_t.c.tenant_id == tenant_id, episodes_t.c.id == episode_id
            )
        ).first()
        if row is None:
            return []
        scope = Scope.model_construct(runtime_id=row[0], user_id=row[1], agent_id=row[2])
        key = str(episode_id)
        only: list[tuple[uuid.UUID, str, dict[str, Any]]] = []
        # Runs that read the episode (a recent turn) or a memory made from it quote it.
        quoting: list[Any] = [episode_id]
        for mem_id, kind, sources, metadata in self._derived_from(conn, tenant_id, scope, key):
            ids = [str(x) for x in sources]
            if key not in ids:
                continue  # the text filter is a prefilter; the JSON decides
            quoting.append(mem_id)
            rest = [x for x in ids if x != key]
            # A session summary quotes the episode: it goes with it (the next compile of the
            # session summarises what is left).
            if rest and kind != "episode_summary":
                conn.execute(update(t).where(t.c.id == mem_id).values(source_episode_ids=rest))
            else:
                only.append((mem_id, kind, dict(metadata or {})))
        if only:
            self._reconnect(conn, tenant_id, scope, [m for m, _, _ in only])
            conn.execute(delete(t).where(t.c.id.in_([m for m, _, _ in only])))
            self.bump_vectors(tenant_id, scope)
        this = (episodes_t.c.tenant_id == tenant_id, episodes_t.c.id == episode_id)
        drop_runs(conn, tenant_id, turn_runs(*this))  # a run that committed it quotes it
        drop_runs_reading(conn, tenant_id, quoting)
        conn.execute(delete(episodes_t).where(*this))
        return [(kind, metadata) for _, kind, metadata in only]

    @staticmethod
    def _reconnect(
        conn: Connection, tenant_id: str, scope: Scope, removed: list[uuid.UUID]
    ) -> None:
        """Versions superseded by a memory about to be deleted: superseded by what replaced
        that memory in turn, or current again when nothing did ("I moved to Berlin" deleted,
        "User lives in Paris" holds again)."""
        gone = set(removed)
        successor = {
            r[0]: r[1]
            for r in conn.execute(select(t.c.id, t.c.superseded_by).where(t.c.id.in_(removed)))
        }
        stmt = select(
            t.c.id, t.c.superseded_by, t.c.metadata["slot"].as_string(), t.c.valid_from
        ).where(
            scope_filter(t, tenant_id, scope),
            t.c.status == "superseded",
            t.c.superseded_by.in_(removed),
        )
        revived: dict[Any, list[tuple[Any, uuid.UUID]]] = {}
        for mem_id, target, slot, valid_from in conn.execute(stmt).all():
            if mem_id in gone:
                continue
            seen: set[uuid.UUID] = set()
            while target in gone and target not in seen:
                seen.add(target)
                target = successor.get(target)
            if target is None or target in gone:
                # Current again; of several of one slot (a value stated late was stored
                # already superseded), only the latest.
                revived.setdefault(slot or mem_id, []).append((valid_from, mem_id))
            else:
                # Valid until its new successor began (as ``supersede`` marks a version).
                until = select(t.c.valid_from).where(t.c.id == target).scalar_subquery()
                conn.execute(
                    update(t)
                    .where(t.c.id == mem_id)
                    .values(superseded_by=target, valid_to=func.coalesce(until, t.c.valid_to))
                )
        for versions in revived.values():
            versions.sort(key=lambda v: (v[0] is not None, v[0]))
            latest = versions[-1][1]
            conn.execute(
                update(t)
                .where(t.c.id == latest)
                .values(status="active", valid_to=None, superseded_by=None)
            )
            for _, mem_id in versions[:-1]:
                conn.execute(update(t).where(t.c.id == mem_id).values(superseded_by=latest))

    def _derived_from(
        self, conn: Connection, tenant_id: str, scope: Scope, episode_key: str
    ) -> list[tuple[uuid.UUID, str, list[Any], Any]]:
        """``(id, kind, source_episode_ids, metadata)`` of the partition's memories citing
        the episode."""
        where = [
            t.c.tenant_id == tenant_id,
            t.c.runtime_id == scope.runtime_id,
            t.c.user_id == scope.user_id,
            t.c.agent_id == scope.agent_id,
        ]
        if self.db.is_sqlite:
            cites = text("CAST(memories.source_episode_ids AS TEXT) LIKE :pat").bindparams(
                pat=f'%"{episode_key}"%'
            )
        else:
            cites = text("memories.source_episode_ids @> CAST(:arr AS jsonb)").bindparams(
                arr=json.dumps([episode_key])
            )
        stmt = select(t.c.id, t.c.kind, t.c.source_episode_ids, t.c.metadata).where(*where, cites)
        return [(r[0], r[1], list(r[2] or []), r[3]) for r in conn.execute(stmt)]

    def partitions(self, selector: PartitionSelector) -> list[Scope]:
        """The partitions the selector matches that hold data, in a stable order."""
        found = partitions(self._tx_read, selector)
        return sorted(found, key=lambda s: (s.runtime_id, s.user_id, s.agent_id))

    def erase(self, selector: PartitionSelector) -> tuple[list[Scope], dict[str, int]]:
        """Delete everything of the selected partitions (``cairn.store.partitions``); the
        partitions that held data, and row counts per table."""
        conn = self._tx_write
        scopes = partitions(conn, selector)
        counts = erase(conn, selector)
        self.purge_index(selector.tenant_id)
        return scopes, counts

    def bump_vectors(self, tenant_id: str, scope: Scope) -> None:
        """Move the partition's vector version (and its count of clearings) on, so no cached
        matrix outlives a removed vector."""
        bump_vector_version(self._tx_write, self.db, tenant_id, scope, cleared=True)

    def purge_index(self, tenant_id: str) -> None:
        """SQLite: merge the tenant's FTS5 segments so deleted terms leave the index files
        (a contentless FTS5 delete only records a tombstone until segments merge)."""
        conn = self._tx_write
        if not self.db.is_sqlite:
            return
        for index in (fts.MEMORIES, fts.CHUNKS):
            table = self.db.fts.table_if_exists(conn, index, tenant_id)
            if table is not None:
                conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('optimize')")

    def forget_cached_text(self) -> None:
        """Drop what this process remembers of indexed words (the Porter stems coordination
        compares) and of queries' terms (the full-text match counts), so no word of erased
        data stays in memory."""
        self.db.porter_stems.clear()
        self.db.fts_counts.clear()

    def checkpoint(self) -> None:
        """SQLite: copy the write-ahead log into the database and truncate it, so page images
        holding deleted text leave the ``-wal`` file (best effort: a reader still inside an
        old snapshot keeps the log until it finishes; the next checkpoint completes it)."""
        if not self.db.is_sqlite:
            return
        raw = self.db.engine.raw_connection()
        driver: Any = raw.driver_connection
        try:
            # Never wait on readers or writers (a pooled connection waits up to 30 s): a log
            # in use is checkpointed as far as it can be, and the next checkpoint completes it.
            (waited,) = driver.execute("PRAGMA busy_timeout").fetchone()
            driver.execute("PRAGMA busy_timeout = 0")
            try:
                driver.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError as exc:
                # A statement still reading on another connection of this process ("table
                # is locked"): the deletion is committed; the next checkpoint completes it.
                log.info("write-ahead log checkpoint deferred: %s", exc)
            finally:
                driver.execute(f"PRAGMA busy_timeout = {int(waited)}")
        finally:
            raw.close()
