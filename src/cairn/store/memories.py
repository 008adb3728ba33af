"""Memory repository: reads, idempotent writes, supersession, full-text and vector storage.

Writes are idempotent by the unique ``(tenant, scope, kind, content_hash)`` constraint: a memory
whose content is already stored is not stored twice, whoever writes it — two compiles of one
subject at once, in one process or two, cannot create a duplicate. Full-text search uses each
backend's own index (SQLite FTS5 with BM25, PostgreSQL ``tsvector`` with ``ts_rank``); the
vector lane reads float32 embeddings stored with the memory.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Row,
    String,
    Table,
    bindparam,
    func,
    select,
    text,
    update,
)

from cairn.core.analysis import index_text
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.store import fts
from cairn.store.database import Database
from cairn.store.episodes import scope_filter
from cairn.store.schema import episodes as episodes_t
from cairn.store.schema import memories as t
from cairn.store.schema import metadata

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
)


def row_to_memory(row: Row[Any]) -> Memory:
    m = row._mapping
    return Memory.model_construct(
        id=m["id"],
        tenant_id=m["tenant_id"],
        scope=Scope.model_construct(
            runtime_id=m["runtime_id"], user_id=m["user_id"], agent_id=m["agent_id"]
        ),
        kind=m["kind"],
        content=m["content"],
        summary=m["summary"],
        confidence=m["confidence"],
        valid_from=m["valid_from"],
        valid_to=m["valid_to"],
        status=m["status"],
        source_episode_ids=[uuid.UUID(str(x)) for x in m["source_episode_ids"]],
        metadata=m["metadata"],
        session_id=m["session_id"],
        superseded_by=m["superseded_by"],
        created_at=m["created_at"],
        updated_at=m["updated_at"],
        seq=m["seq"],
    )


def _memory_of_row(row: dict[str, Any]) -> Memory:
    """The Memory a freshly inserted row stands for (without reading it back)."""
    return Memory.model_construct(
        id=row["id"],
        tenant_id=row["tenant_id"],
        scope=Scope.model_construct(
            runtime_id=row["runtime_id"], user_id=row["user_id"], agent_id=row["agent_id"]
        ),
        kind=row["kind"],
        content=row["content"],
        summary=row["summary"],
        confidence=row["confidence"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        status=row["status"],
        source_episode_ids=[uuid.UUID(str(x)) for x in row["source_episode_ids"]],
        metadata=row["metadata"],
        session_id=row["session_id"],
        superseded_by=row["superseded_by"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        seq=0,
    )


# Weight of the words of neighbouring messages (indexed with a turn, not part of it)
# relative to the memory's own words (SQLite's is the FTS5 rank ``cairn.store.fts`` sets).
PG_CONTEXT_WEIGHT = 0.5
# A query term in more than this share of a partition's rows is left out (see
# ``_without_common_terms``); 0 keeps every term.
COMMON_TERM_SHARE = 0.2
COMMON_TERM_MIN_ROWS = 2000

# Every column but the embedding (which only the vector lane reads, in bulk) and the analysed
# text (which only the full-text index reads).
_COLUMNS = [c for c in t.c if c.name not in ("embedding", "search_text")]


def search_text(content: str, metadata: dict[str, Any]) -> str:
    """What the full-text index of a memory reads: its content and date keywords, analysed."""
    keywords = metadata.get("keywords")
    extra = " " + keywords if isinstance(keywords, str) and keywords else ""
    return index_text(content + extra)


def _content_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """The unique ``(tenant, scope, kind, content_hash)`` key of a memory row."""
    return (
        row["tenant_id"],
        row["runtime_id"],
        row["user_id"],
        row["agent_id"],
        row["kind"],
        row["content_hash"],
    )


_list = list  # ``MemoryRepository.list`` shadows the builtin in its body


@dataclass(frozen=True, slots=True)
class VectorRows:
    """Embeddings of one partition: parallel lists of ``seq`` and float32 bytes."""

    seqs: list[int]
    blobs: list[bytes]


class MemoryRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

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
        conn: Connection | None = None,
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
        if conn is not None:
            rows = [row_to_memory(r) for r in conn.execute(stmt)]
        else:
            with self.db.read() as own:
                rows = [row_to_memory(r) for r in own.execute(stmt)]
        return rows[::-1] if newest_first else rows

    def count(self, tenant_id: str, scope: Scope, conn: Connection | None = None) -> int:
        stmt = (
            select(func.count())
            .select_from(t)
            .where(scope_filter(t, tenant_id, scope), t.c.status != "deleted")
        )
        if conn is not None:
            return int(conn.execute(stmt).scalar_one())
        with self.db.read() as own:
            return int(own.execute(stmt).scalar_one())

    def facets(
        self, tenant_id: str, scope: Scope, conn: Connection
    ) -> tuple[_list[str], _list[str]]:
        """The partition's memory kinds and the sessions of its memories and episodes, sorted
        (the inspector's filter choices)."""
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
        with self.db.read() as conn:
            row = conn.execute(
                select(*_COLUMNS).where(t.c.tenant_id == tenant_id, t.c.id == memory_id)
            ).first()
        return row_to_memory(row) if row else None

    def by_seqs(
        self, tenant_id: str, scope: Scope, seqs: Sequence[int], conn: Connection
    ) -> dict[int, Memory]:
        """Memories of one partition by ``seq`` (others' rows are never returned)."""
        if not seqs:
            return {}
        # By primary key only (a scope predicate tempts SQLite into scanning the partition's
        # index); the partition is checked on each row instead.
        stmt = select(*_COLUMNS).where(t.c.seq.in_(list(seqs)))
        out = {}
        for r in conn.execute(stmt):
            m = r._mapping
            if (
                m["tenant_id"] == tenant_id
                and m["runtime_id"] == scope.runtime_id
                and m["user_id"] == scope.user_id
                and m["agent_id"] == scope.agent_id
            ):
                out[int(m["seq"])] = row_to_memory(r)
        return out

    def rank_facts(
        self, tenant_id: str, scope: Scope, seqs: Sequence[int], conn: Connection
    ) -> dict[int, tuple[float, str, str]]:
        """``seq → (confidence, status, kind)`` of the partition's rows among ``seqs``."""
        out: dict[int, tuple[float, str, str]] = {}
        for start in range(0, len(seqs), 500):
            stmt = select(
                t.c.seq,
                t.c.confidence,
                t.c.status,
                t.c.kind,
                t.c.tenant_id,
                t.c.runtime_id,
                t.c.user_id,
                t.c.agent_id,
            ).where(t.c.seq.in_(list(seqs[start : start + 500])))
            for r in conn.execute(stmt):
                if (r[4], r[5], r[6], r[7]) == (
                    tenant_id,
                    scope.runtime_id,
                    scope.user_id,
                    scope.agent_id,
                ):
                    out[int(r[0])] = (float(r[1]), str(r[2]), str(r[3]))
        return out

    def by_ids(self, conn: Connection, tenant_id: str, ids: Sequence[uuid.UUID]) -> _list[Memory]:
        if not ids:
            return []
        stmt = select(*_COLUMNS).where(t.c.tenant_id == tenant_id, t.c.id.in_(list(ids)))
        found = {m.id: m for m in (row_to_memory(r) for r in conn.execute(stmt))}
        return [found[i] for i in ids if i in found]

    def active_of_kind(
        self, conn: Connection, tenant_id: str, scope: Scope, kind: str
    ) -> _list[Memory]:
        stmt = (
            select(*_COLUMNS)
            .where(scope_filter(t, tenant_id, scope), t.c.kind == kind, t.c.status == "active")
            .order_by(t.c.seq)
        )
        return [row_to_memory(r) for r in conn.execute(stmt)]

    # -- writes ------------------------------------------------------------------------------

    def prepare_tenant(self, conn: Connection, tenant_id: str) -> None:
        """Make the tenant's memories searchable before its first insert (its own FTS5 index
        on SQLite: ``cairn.store.fts``; nothing on PostgreSQL). ``insert_new`` does this; a
        writer inserting rows itself must call it in the same transaction."""
        if self.db.is_sqlite:
            self.db.fts.ensure(conn, fts.MEMORIES, tenant_id)

    def insert_new(self, conn: Connection, rows: Sequence[dict[str, Any]]) -> _list[Memory]:
        """Insert rows whose content is not stored yet; returns the memories actually new.

        A row whose ``(tenant, scope, kind, content_hash)`` is already stored is recognised by
        that key (not by its id: rows hashed before migration 0009 keep their first id); its
        provenance is merged into the stored memory instead. The database enforces the rest:
        ``ON CONFLICT DO NOTHING`` on the unique constraint means two writers can never both
        store one memory. (The compiler holds the partition's lock, so what this returns as
        new is exact.)
        """
        if not rows:
            return []
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in rows:
            have = merged.get(_content_key(row))
            if have is None:
                merged[_content_key(row)] = dict(row)
            else:
                known: _list[str] = have["source_episode_ids"]
                extra = [x for x in row["source_episode_ids"] if x not in known]
                have["source_episode_ids"] = [*have["source_episode_ids"], *extra]
        existing = self._stored_keys(conn, list(merged))
        new_rows = [row for key, row in merged.items() if key not in existing]
        if new_rows:
            for row in new_rows:
                if "search_text" not in row:
                    row["search_text"] = search_text(row["content"], row["metadata"])
            for tenant in {row["tenant_id"] for row in new_rows}:
                self.prepare_tenant(conn, tenant)
            insert = self.db.insert(t).on_conflict_do_nothing()
            conn.execute(insert, new_rows)
        for key, (memory_id, stored) in existing.items():
            row = merged[key]
            extra = [str(x) for x in row["source_episode_ids"] if str(x) not in stored]
            if extra:
                conn.execute(
                    update(t)
                    .where(t.c.id == memory_id)
                    .values(source_episode_ids=stored + extra, updated_at=row["updated_at"])
                )
        return [_memory_of_row(row) for row in new_rows]

    @staticmethod
    def _stored_keys(
        conn: Connection, keys: _list[tuple[Any, ...]]
    ) -> dict[tuple[Any, ...], tuple[Any, _list[str]]]:
        """``content key → (id, provenance)`` of the stored memories among ``keys``."""
        by_scope: dict[tuple[Any, ...], _list[str]] = {}
        for key in keys:
            by_scope.setdefault(key[:4], []).append(key[5])
        found: dict[tuple[Any, ...], tuple[Any, _list[str]]] = {}
        for (tenant, runtime, user, agent), hashes in by_scope.items():
            for start in range(0, len(hashes), 500):
                stmt = select(t.c.kind, t.c.content_hash, t.c.id, t.c.source_episode_ids).where(
                    t.c.tenant_id == tenant,
                    t.c.runtime_id == runtime,
                    t.c.user_id == user,
                    t.c.agent_id == agent,
                    t.c.content_hash.in_(hashes[start : start + 500]),
                )
                for r in conn.execute(stmt):
                    key = (tenant, runtime, user, agent, r[0], r[1])
                    found[key] = (r[2], [str(x) for x in r[3]])
        return found

    def refresh_metadata(self, conn: Connection, row: dict[str, Any]) -> None:
        """Replace the metadata of the stored memory ``row`` restates (same content)."""
        conn.execute(
            update(t)
            .where(
                t.c.tenant_id == row["tenant_id"],
                t.c.runtime_id == row["runtime_id"],
                t.c.user_id == row["user_id"],
                t.c.agent_id == row["agent_id"],
                t.c.kind == row["kind"],
                t.c.content_hash == row["content_hash"],
                t.c.status != "deleted",  # a forgotten memory's tombstone stays empty
            )
            .values(
                metadata=row["metadata"],
                search_text=search_text(row["content"], row["metadata"]),
                updated_at=row["updated_at"],
            )
        )

    def set_metadata(
        self, conn: Connection, memory_id: uuid.UUID, metadata: dict[str, Any], now: datetime
    ) -> None:
        conn.execute(update(t).where(t.c.id == memory_id).values(metadata=metadata, updated_at=now))

    def set_sources(
        self, conn: Connection, memory_id: uuid.UUID, sources: _list[str], now: datetime
    ) -> None:
        conn.execute(
            update(t).where(t.c.id == memory_id).values(source_episode_ids=sources, updated_at=now)
        )

    def supersede(
        self, conn: Connection, old_id: uuid.UUID, new_id: uuid.UUID, at: datetime, now: datetime
    ) -> None:
        """Mark ``old_id`` superseded by ``new_id`` from ``at`` on (history stays stored)."""
        conn.execute(
            update(t)
            .where(t.c.id == old_id, t.c.status == "active")
            .values(status="superseded", valid_to=at, superseded_by=new_id, updated_at=now)
        )

    def set_embeddings(
        self, conn: Connection, tenant_id: str, scope: Scope, items: Iterable[tuple[int, bytes]]
    ) -> None:
        """Store vectors of the partition's rows and bump its vector version."""
        params = [{"s": seq, "e": blob} for seq, blob in items]
        if not params:
            return
        conn.execute(
            update(t).where(t.c.seq == bindparam("s")).values(embedding=bindparam("e")),
            params,
        )
        key = {
            "tenant_id": tenant_id,
            "runtime_id": scope.runtime_id,
            "user_id": scope.user_id,
            "agent_id": scope.agent_id,
        }
        # A clock value, not a counter: a subject deleted and rebuilt never repeats a version
        # that a cache may still hold.
        version = time.time_ns() // 1000
        stmt = self.db.insert(vector_versions).values(**key, version=version)
        stmt = stmt.on_conflict_do_update(index_elements=list(key), set_={"version": version})
        conn.execute(stmt)

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
        conn: Connection | None = None,
    ) -> _list[tuple[int, float]]:
        """``(seq, raw score)`` of the best full-text matches, any term matching (OR).

        ``terms`` are terms of ``cairn.core.analysis`` (letters, marks and digits; CJK
        bigrams); the backend stems English words. SQLite scores are BM25 (larger is
        better), PostgreSQL's ``ts_rank``.
        """
        if not terms:
            return []
        params: dict[str, Any] = {
            "tenant": tenant_id,
            "runtime": scope.runtime_id,
            "user": scope.user_id,
            "agent": scope.agent_id,
            "limit": limit,
        }
        where = [
            "m.tenant_id = :tenant",
            "m.runtime_id = :runtime",
            "m.user_id = :user",
            "m.agent_id = :agent",
        ]
        where.append(
            "m.status IN ('active', 'superseded')" if include_superseded else "m.status = 'active'"
        )
        if kinds:
            names = []
            for i, kind in enumerate(kinds):
                params[f"k{i}"] = kind
                names.append(f":k{i}")
            where.append(f"m.kind IN ({', '.join(names)})")
        if self.db.is_sqlite:
            return self._fts5(tenant_id, scope, terms, where, params, limit, conn)
        if conn is not None:
            return _pg_ranked(conn, terms, where, params)
        with self.db.read() as own:
            return _pg_ranked(own, terms, where, params)

    def _fts5(
        self,
        tenant_id: str,
        scope: Scope,
        terms: Sequence[str],
        where: _list[str],
        params: dict[str, Any],
        limit: int,
        conn: Connection | None,
    ) -> _list[tuple[int, float]]:
        if conn is None:
            with self.db.read() as own:
                return self._fts5(tenant_id, scope, terms, where, params, limit, own)
        table = self.db.fts.table_if_exists(conn, fts.MEMORIES, tenant_id)
        if table is None:
            return []  # the tenant has never stored a memory
        part = fts.part_token(tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        return _fts5_ranked(conn, table, part, terms, where, params, limit)

    def vector_stamp(self, conn: Connection, tenant_id: str, scope: Scope) -> tuple[int, int]:
        """The partition's vector version (0: none yet): changes when its vectors do."""
        version = conn.execute(
            select(vector_versions.c.version).where(scope_filter(vector_versions, tenant_id, scope))
        ).scalar()
        return int(version or 0), 0

    def vectors(self, conn: Connection, tenant_id: str, scope: Scope) -> VectorRows:
        rows = conn.execute(
            select(t.c.seq, t.c.embedding)
            .where(scope_filter(t, tenant_id, scope), t.c.embedding.is_not(None))
            .order_by(t.c.seq)
        ).all()
        return VectorRows([int(r[0]) for r in rows], [bytes(r[1]) for r in rows])

    def partitions_without_embedding(
        self, conn: Connection, limit: int = 1_000
    ) -> _list[tuple[str, Scope]]:
        """``(tenant, scope)`` of partitions that hold a memory with no vector yet (the
        background embedding pass starts from these after a restart)."""
        rows = conn.execute(
            select(t.c.tenant_id, t.c.runtime_id, t.c.user_id, t.c.agent_id)
            .where(t.c.embedding.is_(None), t.c.status != "deleted")
            .distinct()
            .limit(limit)
        ).all()
        return [
            (str(r[0]), Scope.model_construct(runtime_id=r[1], user_id=r[2], agent_id=r[3]))
            for r in rows
        ]

    def without_embedding(
        self, conn: Connection, tenant_id: str, scope: Scope, limit: int = 10_000
    ) -> _list[tuple[int, str, dict[str, Any]]]:
        """``(seq, content, metadata)`` of memories that have no vector yet."""
        rows = conn.execute(
            select(t.c.seq, t.c.content, t.c.metadata)
            .where(
                scope_filter(t, tenant_id, scope), t.c.embedding.is_(None), t.c.status != "deleted"
            )
            .order_by(t.c.seq)
            .limit(limit)
        ).all()
        return [(int(r[0]), str(r[1]), dict(r[2] or {})) for r in rows]


def _fts5_ranked(
    conn: Connection,
    table: str,
    part: str,
    terms: Sequence[str],
    where: _list[str],
    params: dict[str, Any],
    limit: int,
) -> _list[tuple[int, float]]:
    """FTS5 ranks inside the partition (its ``part`` token) in the tenant's own index and
    returns the best ``inner`` rows; the join re-checks partition, status and kind. If
    filtering leaves fewer than ``limit`` while more matches may exist, it asks again for
    more."""
    if COMMON_TERM_SHARE and len(terms) > 1:
        terms = _without_common_terms(conn, table, part, terms)
    quoted = ('"' + term.replace('"', '""') + '"' for term in terms)
    params["q"] = f'part : "{part}" AND (' + " OR ".join(quoted) + ")"
    inner = limit * 2 + 50
    while True:
        params["inner"] = inner
        sql = (
            f"SELECT m.seq, -f.rank AS s FROM (SELECT rowid, rank FROM {table} "
            f"WHERE {table} MATCH :q ORDER BY rank LIMIT :inner) f "
            f"JOIN memories m ON m.seq = f.rowid WHERE {' AND '.join(where)} "
            "ORDER BY f.rank, m.seq LIMIT :limit"
        )
        rows = conn.execute(text(sql), params).all()
        if len(rows) >= limit or inner >= 1_000_000:
            return [(int(r[0]), float(r[1])) for r in rows]
        # Fewer than asked: either that is all there is, or filters ate the window.
        total = conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), params
        ).scalar_one()
        if total <= inner:
            return [(int(r[0]), float(r[1])) for r in rows]
        inner *= 4


def _pg_ranked(
    conn: Connection, terms: Sequence[str], where: _list[str], params: dict[str, Any]
) -> _list[tuple[int, float]]:
    """PostgreSQL: each term's ``ts_rank`` weighted by its rarity in the partition (BM25's
    IDF, ``ln(1 + (N - n + 0.5) / (n + 0.5))``), summed. ``ts_rank`` alone reads no corpus
    statistics, so a word in most rows (a speaker's name, in every one of their turns) would
    weigh as much as the rare word a question is about, and PostgreSQL would rank unlike
    SQLite's BM25. The counts are one pass over the partition's rows (the stored ``fts``)."""
    # Each term quoted as a tsquery lexeme: analysed terms are words, but quoting keeps any
    # character of any script from being read as tsquery syntax.
    quoted = ["'" + term.replace("'", "''") + "'" for term in terms]
    params = dict(params, q=" | ".join(quoted))
    queries = ", ".join(f"to_tsquery('english'::regconfig, :t{i}) q{i}" for i in range(len(terms)))
    for i, term in enumerate(quoted):
        params[f"t{i}"] = term
    counts = ", ".join(f"count(*) FILTER (WHERE m.fts @@ q{i})" for i in range(len(terms)))
    row = conn.execute(
        text(f"SELECT count(*), {counts} FROM memories m, {queries} WHERE {' AND '.join(where)}"),
        params,
    ).one()
    total = int(row[0])
    for i in range(len(terms)):
        n = int(row[i + 1])
        params[f"w{i}"] = math.log(1.0 + (total - n + 0.5) / (n + 0.5))
    weights = f"'{{{PG_CONTEXT_WEIGHT}, 0.2, 0.4, 1.0}}'"
    score = " + ".join(f":w{i} * ts_rank({weights}, m.fts, q{i}, 1)" for i in range(len(terms)))
    # ``fts`` is the stored tsvector (migration 0006): ranking reads it, no re-parse.
    sql = (
        f"SELECT m.seq, {score} AS s "
        f"FROM memories m, to_tsquery('english'::regconfig, :q) q, {queries} "
        f"WHERE m.fts @@ q AND {' AND '.join(where)} "
        "ORDER BY s DESC, m.seq LIMIT :limit"
    )
    return [(int(r[0]), float(r[1])) for r in conn.execute(text(sql), params)]


def _without_common_terms(
    conn: Connection, table: str, part: str, terms: Sequence[str]
) -> _list[str]:
    """In a partition of ``COMMON_TERM_MIN_ROWS`` rows or more, drop terms found in more
    than ``COMMON_TERM_SHARE`` of its rows when rarer terms remain: their BM25 weight is
    small, yet scoring their matches is most of a query's cost (e.g. a speaker's name, in
    every one of their turns). Measured on LoCoMo (where it is off: ~630 rows a subject),
    forcing it on costs about 0.013 of recall at 1,000 tokens."""

    def count(q: str) -> int:
        return int(
            conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE {table} MATCH :q"), {"q": q}
            ).scalar_one()
        )

    total = count(f'part : "{part}"')
    if total < COMMON_TERM_MIN_ROWS:
        return list(terms)  # small partitions are cheap to score in full
    share = {t: count(f'part : "{part}" AND "' + t.replace('"', '""') + '"') for t in terms}
    keep = [t for t in terms if share[t] <= COMMON_TERM_SHARE * total]
    return keep or list(terms)
