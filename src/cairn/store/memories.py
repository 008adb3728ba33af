"""Memory repository: reads, idempotent writes, supersession, full-text and vector storage.

Writes are idempotent by the unique ``(tenant, scope, kind, content_hash)`` constraint: a memory
whose content is already stored is not stored twice, whoever writes it — two compiles of one
subject at once, in one process or two, cannot create a duplicate. Full-text search uses each
backend's own index (SQLite FTS5 with BM25, PostgreSQL ``tsvector`` with ``ts_rank``); the
vector lane reads float32 embeddings stored beside the memories (``memory_embeddings``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Connection,
    Select,
    bindparam,
    func,
    select,
    text,
    update,
)

from cairn.core.memories import Memory, moved_memory_id
from cairn.core.scope import Scope
from cairn.store import fts
from cairn.store.episodes import scope_filter
from cairn.store.memory_rows import content_key, memory_of, row_to_memory
from cairn.store.memory_search import lexical_ranked, row_stems, search_text
from cairn.store.memory_vectors import MemoryVectors
from cairn.store.run_reads import drop_runs_reading
from cairn.store.schema import episodes as episodes_t
from cairn.store.schema import memories as t

# Every column but the analysed text and its stems (which only full-text ranking reads).
_COLUMNS = [c for c in t.c if c.name not in ("search_text", "search_stems")]
# The statements of the search's per-request reads, built once (building and keying a
# statement cost more than running it). By primary key only: a scope predicate tempts SQLite
# into scanning the partition's index; the partition is checked on each row instead.
# The seqs travel as one parameter, so one statement serves any number of them: an expanding
# ``IN`` was rendered, and planned, afresh for each count. SQLite: a JSON array (``json_each``;
# the ranking facts of ~280 candidates 1.7 → 1.35 ms, docs/benchmarks.md, session 20);
# PostgreSQL: an array (``= ANY``; those of 100-160 candidates 1.4 → 1.0 ms, session 25).
_IN_SEQS = t.c.seq == func.any(bindparam("seqs", type_=ARRAY(BigInteger)))
_IN_JSON_SEQS = text("memories.seq IN (SELECT value FROM json_each(:seqs))")
_FACT_COLUMNS = (
    t.c.seq,
    t.c.confidence,
    t.c.status,
    t.c.kind,
    t.c.tenant_id,
    t.c.runtime_id,
    t.c.user_id,
    t.c.agent_id,
    t.c.metadata["speaker"].as_string(),
)
_BY_SEQS = select(*_COLUMNS).where(_IN_SEQS)
_BY_JSON_SEQS = select(*_COLUMNS).where(_IN_JSON_SEQS)
_RANK_FACTS = select(*_FACT_COLUMNS).where(_IN_SEQS)
_RANK_FACTS_JSON = select(*_FACT_COLUMNS).where(_IN_JSON_SEQS)


_list = list  # ``MemoryRepository.list`` shadows the builtin in its body


class MemoryRepository(MemoryVectors):
    # -- reads -------------------------------------------------------------------------------

    def list(
        self,
        tenant_id: str,
        scope: Scope,
        *,
        limit: int = 100,
        offset: int = 0,
        include_superseded: bool = True,
        kind: str | None = None,
        session_id: str | None = None,
        newest_first: bool = False,
    ) -> _list[Memory]:
        """Memories of one partition in time order (``valid_from``, then creation), of one
        ``kind`` and from one session (``session_id``) when given.

        ``newest_first`` takes the window from the newest end (``offset`` counts back from
        the newest row); the rows of the window are still returned oldest first.
        """
        stmt = select(*_COLUMNS).where(scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        if not include_superseded:
            stmt = stmt.where(t.c.status == "active")
        if kind is not None:
            stmt = stmt.where(t.c.kind == kind)
        if session_id is not None:
            stmt = stmt.where(t.c.session_id == session_id)
        if newest_first:
            stmt = stmt.order_by(t.c.valid_from.desc(), t.c.seq.desc())
        else:
            stmt = stmt.order_by(t.c.valid_from, t.c.seq)
        stmt = stmt.limit(limit).offset(offset)
        with self._reading() as conn:
            rows = [row_to_memory(r) for r in conn.execute(stmt)]
        return rows[::-1] if newest_first else rows

    def count(self, tenant_id: str, scope: Scope) -> int:
        stmt = (
            select(func.count())
            .select_from(t)
            .where(scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        )
        with self._reading() as conn:
            return int(conn.execute(stmt).scalar_one())

    def active_of_session(
        self, tenant_id: str, scope: Scope, session_id: str, kinds: Sequence[str], limit: int
    ) -> _list[Memory]:
        """The newest active memories of the given kinds made from one conversation."""
        stmt = (
            select(*_COLUMNS)
            .where(
                scope_filter(t, tenant_id, scope),
                t.c.session_id == session_id,
                t.c.status == "active",
                t.c.kind.in_(list(kinds)),
            )
            .order_by(t.c.created_at.desc(), t.c.seq.desc())
            .limit(limit)
        )
        with self._reading() as conn:
            return [row_to_memory(r) for r in conn.execute(stmt)]

    def facets(self, tenant_id: str, scope: Scope) -> tuple[_list[str], _list[str]]:
        """The partition's memory kinds and the sessions of its memories and episodes, sorted
        (the inspector's filter choices)."""
        conn = self._tx_read
        live = (scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        kinds = conn.execute(select(t.c.kind).where(*live).distinct()).scalars().all()
        sessions = set(
            conn.execute(
                select(t.c.session_id).where(*live, t.c.session_id.is_not(None)).distinct()
            ).scalars()
        )
        sessions.update(
            conn.execute(
                select(episodes_t.c.session_id)
                .where(
                    scope_filter(episodes_t, tenant_id, scope), episodes_t.c.session_id.is_not(None)
                )
                .distinct()
            ).scalars()
        )
        return sorted(kinds), sorted(sessions)

    def get(self, tenant_id: str, memory_id: uuid.UUID) -> Memory | None:
        with self._reading() as conn:
            row = conn.execute(
                select(*_COLUMNS).where(t.c.tenant_id == tenant_id, t.c.id == memory_id)
            ).first()
        return row_to_memory(row) if row else None

    def by_seqs(self, tenant_id: str, scope: Scope, seqs: Sequence[int]) -> dict[int, Memory]:
        """Memories of one partition by ``seq`` (others' rows are never returned)."""
        conn = self._tx_read
        if not seqs:
            return {}
        key = (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        out = {}
        for r in conn.execute(*self._seqs_statement(_BY_SEQS, _BY_JSON_SEQS, seqs)):
            m = r._mapping
            if (m["tenant_id"], m["runtime_id"], m["user_id"], m["agent_id"]) == key:
                out[int(m["seq"])] = memory_of(m, m["seq"])
        return out

    def rank_facts(
        self, tenant_id: str, scope: Scope, seqs: Sequence[int]
    ) -> dict[int, tuple[float, str, str, str]]:
        """``seq → (confidence, status, kind, speaker)`` of the partition's rows among
        ``seqs`` (``speaker``: the compiler's ``metadata.speaker`` of a turn or fact, else
        empty)."""
        conn = self._tx_read
        key = (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        out: dict[int, tuple[float, str, str, str]] = {}
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            for r in conn.execute(*self._seqs_statement(_RANK_FACTS, _RANK_FACTS_JSON, chunk)):
                if (r[4], r[5], r[6], r[7]) == key:
                    out[int(r[0])] = (float(r[1]), str(r[2]), str(r[3]), str(r[8] or ""))
        return out

    def _seqs_statement(
        self, array: Select[Any], json_array: Select[Any], seqs: Sequence[int]
    ) -> tuple[Select[Any], dict[str, Any]]:
        """The statement reading rows by ``seqs`` and its parameters, for this backend."""
        if self.db.is_sqlite:
            return json_array, {"seqs": json.dumps([int(seq) for seq in seqs])}
        return array, {"seqs": [int(seq) for seq in seqs]}

    def by_ids(self, tenant_id: str, ids: Sequence[uuid.UUID]) -> _list[Memory]:
        conn = self._tx_read
        if not ids:
            return []
        stmt = select(*_COLUMNS).where(t.c.tenant_id == tenant_id, t.c.id.in_(list(ids)))
        found = {m.id: m for m in (row_to_memory(r) for r in conn.execute(stmt))}
        return [found[i] for i in ids if i in found]

    def active_of_kind(self, tenant_id: str, scope: Scope, kind: str) -> _list[Memory]:
        conn = self._tx_read
        stmt = (
            select(*_COLUMNS)
            .where(scope_filter(t, tenant_id, scope), t.c.kind == kind, t.c.status == "active")
            .order_by(t.c.seq)
        )
        return [row_to_memory(r) for r in conn.execute(stmt)]

    def active_in_slots(
        self,
        tenant_id: str,
        scope: Scope,
        kind: str,
        *,
        slots: Sequence[str] | None = None,
        suffix: str | None = None,
    ) -> _list[Memory]:
        """The active memories of ``kind`` (in ``seq`` order) whose ``metadata.slot`` is one of
        ``slots``, or (``suffix``) ends like that (SQLite may also return other cases of the
        suffix: check it). A compile step reads only the slots it writes, not the partition's
        every summary and fact."""
        conn = self._tx_read
        slot = t.c.metadata["slot"].as_string()
        stmt = select(*_COLUMNS).where(
            scope_filter(t, tenant_id, scope), t.c.kind == kind, t.c.status == "active"
        )
        if slots is not None:
            if not slots:
                return []
            stmt = stmt.where(slot.in_(sorted(set(slots))))
        if suffix is not None:
            stmt = stmt.where(slot.endswith(suffix, autoescape=True))
        return [row_to_memory(r) for r in conn.execute(stmt.order_by(t.c.seq))]

    # -- writes ------------------------------------------------------------------------------

    def prepare_tenant(self, tenant_id: str) -> None:
        """Make the tenant's memories searchable before its first insert (its own FTS5 index
        on SQLite: ``cairn.store.fts``; nothing on PostgreSQL). ``insert_new`` does this; a
        writer inserting rows itself must call it in the same transaction."""
        conn = self._tx_write
        if self.db.is_sqlite:
            self.db.fts.ensure(conn, fts.MEMORIES, tenant_id)

    def load_rows(self, tenant_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Insert prepared rows of one tenant as they are: no merging, no check for stored
        content (bulk loading of generated data, e.g. benchmarks)."""
        conn = self._tx_write
        self.prepare_tenant(tenant_id)
        if rows:
            conn.execute(t.insert(), [self._with_stems(dict(row)) for row in rows])

    def insert_new(self, rows: Sequence[dict[str, Any]]) -> _list[Memory]:
        """Insert rows whose content is not stored yet; returns the memories actually new.

        A row whose ``(tenant, scope, kind, content_hash)`` is already stored is recognised by
        that key (not by its id: rows hashed before migration 0009 keep their first id); its
        provenance is merged into the stored memory instead. The database enforces the rest:
        ``ON CONFLICT DO NOTHING`` on the unique constraint means two writers can never both
        store one memory. (The compiler holds the partition's lock, so what this returns as
        new is exact.)

        Every row is offered to the insert and only the ones it skips are looked up: a
        compile's rows are nearly all new, so the common case is one statement per 1,000 rows
        and no lookup.
        """
        conn = self._tx_write
        if not rows:
            return []
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            have = merged.get(content_key(row))
            if have is None:
                merged[content_key(row)] = dict(row)
            else:
                known: _list[str] = have["source_episode_ids"]
                extra = [x for x in row["source_episode_ids"] if x not in known]
                have["source_episode_ids"] = [*have["source_episode_ids"], *extra]
        for row in merged.values():
            if "search_text" not in row:
                row["search_text"] = search_text(row["content"], row["metadata"])
            self._with_stems(row)
        for tenant in {row["tenant_id"] for row in merged.values()}:
            self.prepare_tenant(tenant)
        # ``RETURNING`` also makes it one multi-row statement per 1,000 rows: without it an
        # ``ON CONFLICT`` insert is sent row by row, and PostgreSQL runs the statement trigger
        # of ``memory_term_stats`` (migration 0013) once per row.
        insert = self.db.insert(t).on_conflict_do_nothing().returning(t.c.id, t.c.seq)
        inserted = {str(i): int(seq) for i, seq in conn.execute(insert, list(merged.values()))}
        skipped = [key for key, row in merged.items() if str(row["id"]) not in inserted]
        stored_keys = self._stored_keys(conn, skipped)
        inserted |= self._insert_elsewhere_held(
            conn, insert, [merged[key] for key in skipped if key not in stored_keys]
        )
        new_rows = [row for row in merged.values() if str(row["id"]) in inserted]
        for key, (memory_id, stored) in stored_keys.items():
            row = merged[key]
            extra = [str(x) for x in row["source_episode_ids"] if str(x) not in stored]
            if extra:
                conn.execute(
                    update(t)
                    .where(t.c.id == memory_id)
                    .values(source_episode_ids=stored + extra, updated_at=row["updated_at"])
                )
        return [memory_of(row, inserted[str(row["id"])]) for row in new_rows]

    @staticmethod
    def _insert_elsewhere_held(
        conn: Connection, insert: Any, rows: _list[dict[str, Any]]
    ) -> dict[str, int]:
        """Insert rows whose content is new to their partition but whose id another partition
        holds (an imported row may carry any id): each under its partition's moved id
        (``moved_memory_id``), so no row of another tenant or subject can keep a memory from
        being stored. Returns the ids inserted with their seqs (the rows' ``id`` is
        updated)."""
        done: dict[str, int] = {}
        first = [row["id"] for row in rows]
        for attempt in range(1, 4):
            if not rows:
                break
            for row, old in zip(rows, first, strict=True):
                scope = Scope.model_construct(
                    runtime_id=row["runtime_id"], user_id=row["user_id"], agent_id=row["agent_id"]
                )
                row["id"] = moved_memory_id(row["tenant_id"], scope, old, attempt)
            done |= {str(i): int(seq) for i, seq in conn.execute(insert, rows)}
            first = [
                old for row, old in zip(rows, first, strict=True) if str(row["id"]) not in done
            ]
            rows = [row for row in rows if str(row["id"]) not in done]
        if rows:  # three different partitions hold this memory's ids: a database to look at
            raise RuntimeError(f"memory ids held elsewhere: {[str(r['id']) for r in rows]}")
        return done

    @staticmethod
    def _stored_keys(
        conn: Connection, keys: _list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], tuple[Any, _list[str]]]:
        """``content key → (id, provenance)`` of the stored memories among ``keys``."""
        # By partition and kind: the whole key of ``uq_memories_content``, so each lookup is a
        # few index probes, not a pass over the partition's part of the index.
        by_kind: dict[tuple[Any, ...], _list[str]] = {}
        for key in keys:
            by_kind.setdefault(key[:5], []).append(key[5])
        found: dict[tuple[Any, ...], tuple[Any, _list[str]]] = {}
        for (tenant, runtime, user, agent, kind), hashes in by_kind.items():
            for start in range(0, len(hashes), 500):
                stmt = select(t.c.content_hash, t.c.id, t.c.source_episode_ids).where(
                    t.c.tenant_id == tenant,
                    t.c.runtime_id == runtime,
                    t.c.user_id == user,
                    t.c.agent_id == agent,
                    t.c.kind == kind,
                    t.c.content_hash.in_(hashes[start : start + 500]),
                )
                for r in conn.execute(stmt):
                    key = (tenant, runtime, user, agent, kind, r[0])
                    found[key] = (r[1], [str(x) for x in r[2]])
        return found

    def _stems(self, analysed: str, metadata: Any) -> str | None:
        """SQLite: the stems coordination compares (``search_stems``) of a row's analysed
        text and neighbour words; PostgreSQL keeps none."""
        return row_stems(analysed, metadata, self.db.porter_stems) if self.db.is_sqlite else None

    def _with_stems(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with its ``search_stems`` (``_stems``) when it has none; on PostgreSQL
        the row is left without the key (a database migrated only up to an older revision
        has no such column)."""
        if row.get("search_stems") is None:
            stems = self._stems(row.get("search_text") or "", row.get("metadata"))
            if stems is not None:
                row["search_stems"] = stems
        return row

    def refresh_metadata(self, row: dict[str, Any]) -> None:
        """Replace the metadata of the stored memory ``row`` restates (same content); the
        row's ``search_text`` is used when it has one."""
        conn = self._tx_write
        analysed = row.get("search_text")
        if analysed is None:
            analysed = search_text(row["content"], row["metadata"])
        where = (
            t.c.tenant_id == row["tenant_id"],
            t.c.runtime_id == row["runtime_id"],
            t.c.user_id == row["user_id"],
            t.c.agent_id == row["agent_id"],
            t.c.kind == row["kind"],
            t.c.content_hash == row["content_hash"],
            t.c.status != "deleted",  # a forgotten memory's tombstone stays empty
        )
        self.keep_speakers_known(row, where)
        conn.execute(
            update(t)
            .where(*where)
            .values(
                metadata=row["metadata"],
                search_text=analysed,
                search_stems=self._stems(analysed, row["metadata"]),
                updated_at=row["updated_at"],
            )
        )

    def set_metadata(self, memory_id: uuid.UUID, metadata: dict[str, Any], now: datetime) -> None:
        conn = self._tx_write
        # (The neighbour words may change with it: the stems are read off the text again.)
        conn.execute(
            update(t)
            .where(t.c.id == memory_id)
            .values(metadata=metadata, search_stems=None, updated_at=now)
        )

    def drop_context_words(
        self, tenant_id: str, scope: Scope, session_id: str | None, words: set[str], now: datetime
    ) -> _list[int]:
        """Take ``words`` (a deleted episode's) out of the neighbour words indexed with the
        session's memories, and forget those memories' vectors (they embedded the words);
        returns the seqs changed. Nothing of a deleted episode stays searchable, nor in the
        ladder runs that read those memories (they go)."""
        conn = self._tx_write
        rows = conn.execute(
            select(t.c.seq, t.c.metadata, t.c.search_text, t.c.id).where(
                scope_filter(t, tenant_id, scope),
                t.c.session_id.is_(None) if session_id is None else t.c.session_id == session_id,
                t.c.status != "deleted",
            )
        ).all()
        changed: _list[int] = []
        quoting: _list[Any] = []  # runs that read them hold the words (the item's metadata)
        for seq, metadata, analysed, memory_id in rows:
            terms = str((metadata or {}).get("context_terms") or "").split()
            kept = [w for w in terms if w not in words]
            if len(kept) == len(terms):
                continue
            metadata = {**metadata, "context_terms": " ".join(kept)}
            conn.execute(
                update(t)
                .where(t.c.seq == seq)
                .values(
                    metadata=metadata,
                    search_stems=self._stems(analysed or "", metadata),
                    updated_at=now,
                )
            )
            changed.append(int(seq))
            quoting.append(memory_id)
        self.clear_vectors(changed)
        drop_runs_reading(conn, tenant_id, quoting)
        return changed

    def set_sources(self, memory_id: uuid.UUID, sources: _list[str], now: datetime) -> None:
        conn = self._tx_write
        conn.execute(
            update(t).where(t.c.id == memory_id).values(source_episode_ids=sources, updated_at=now)
        )

    def supersede(self, old_id: uuid.UUID, new_id: uuid.UUID, at: datetime, now: datetime) -> None:
        """Mark ``old_id`` superseded by ``new_id`` from ``at`` on (history stays stored)."""
        conn = self._tx_write
        conn.execute(
            update(t)
            .where(t.c.id == old_id, t.c.status == "active")
            .values(status="superseded", valid_to=at, superseded_by=new_id, updated_at=now)
        )

    # -- search ------------------------------------------------------------------------------

    def lexical(
        self,
        tenant_id: str,
        scope: Scope,
        terms: Sequence[str],
        *,
        limit: int,
        kinds: Sequence[str] | None = None,
        include_superseded: bool = False,
        facts: dict[int, tuple[float, str, str, str]] | None = None,
        coordinate: bool = True,
    ) -> _list[tuple[int, float]]:
        """``(seq, raw score)`` of the best full-text matches, any term matching (OR), and
        their ``rank_facts`` into ``facts`` if given: see ``cairn.store.memory_search``."""
        with self._reading() as conn:
            found = lexical_ranked(
                conn, self.db, tenant_id, scope, terms, limit, kinds, include_superseded, coordinate
            )
        if facts is not None:
            facts.update({seq: got for seq, _, got in found})
        return [(seq, score) for seq, score, _ in found]
