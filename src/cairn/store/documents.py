"""Documents and their chunks (DocumentSink), and the reads context assembly needs.

Chunks are indexed for full-text search by each backend's own engine: on SQLite the tenant's
own FTS5 table kept in step by triggers (``cairn.store.fts``, migration ``0007_fts_per_tenant``),
on PostgreSQL a generated ``tsvector`` column with a GIN index (migrations ``0004_context``,
``0009_text_analysis``). Both index ``search_text``, the content as ``cairn.core.analysis``
cuts it, and queries are cut the same way (the engine's terms, ``cairn.engine.query``).
Scores are raw BM25, computed as FTS5 does on both backends; the engine calibrates them to
[0, 1].
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    delete,
    select,
    text,
)

from cairn.core.analysis import index_text
from cairn.core.ids import utcnow, uuid7
from cairn.core.scope import Scope
from cairn.store import fts, fts5_rank, pg_bm25
from cairn.store.episodes import scope_filter
from cairn.store.repository import Repository
from cairn.store.run_reads import drop_runs_reading
from cairn.store.schema import (
    JsonType,
    SeqType,
    UTCDateTime,
    metadata,
    scope_columns,
)

documents = Table(
    "documents",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", Uuid(), nullable=False, unique=True),
    *scope_columns(),
    Column("dataset_id", String(256), nullable=False),
    Column("document_id", String(256), nullable=False),
    Column("idempotency_key", String(256), nullable=False),
    Column("title", Text(), nullable=False, server_default=""),
    Column("metadata", JsonType, nullable=False),
    Column("chunk_count", Integer(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    UniqueConstraint(
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "dataset_id",
        "idempotency_key",
        name="uq_documents_key",
    ),
)

document_chunks = Table(
    "document_chunks",
    metadata,
    Column("seq", SeqType, primary_key=True, autoincrement=True),
    Column("id", Uuid(), nullable=False, unique=True),
    *scope_columns(),
    Column("dataset_id", String(256), nullable=False),
    Column("document_uid", Uuid(), nullable=False),
    Column("document_id", String(256), nullable=False),
    Column("ordinal", Integer(), nullable=False),
    Column("content", Text(), nullable=False),
    # ``content`` as ``cairn.core.analysis`` cuts it: what full-text indexes read (0009).
    Column("search_text", Text(), nullable=False, server_default=""),
    Column("char_start", Integer(), nullable=False),
    Column("char_end", Integer(), nullable=False),
    Column("token_count", Integer(), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Index(
        "ix_document_chunks_scope_dataset",
        "tenant_id",
        "runtime_id",
        "user_id",
        "agent_id",
        "dataset_id",
    ),
)


@dataclass(frozen=True, slots=True)
class ChunkRow:
    id: uuid.UUID
    dataset_id: str
    document_id: str
    document_uid: uuid.UUID
    ordinal: int
    content: str
    token_count: int
    created_at: datetime
    score: float


@dataclass(frozen=True, slots=True)
class NewChunk:
    content: str
    char_start: int
    char_end: int
    token_count: int


@dataclass(frozen=True, slots=True)
class StoredDocument:
    id: uuid.UUID
    dataset_id: str
    document_id: str
    idempotency_key: str
    chunk_count: int
    created: bool


class DocumentRepository(Repository):
    def put(
        self,
        tenant_id: str,
        scope: Scope,
        *,
        dataset_id: str,
        document_id: str,
        idempotency_key: str,
        title: str,
        metadata_: dict[str, Any],
        chunks: Sequence[NewChunk],
    ) -> StoredDocument:
        """Store a document and its chunks in one transaction; a repeated key returns the
        original and writes nothing."""
        now = utcnow()
        doc_uid = uuid7()
        with self._writing() as conn:
            existing = self._by_key(conn, tenant_id, scope, dataset_id, idempotency_key)
            if existing is not None:
                return existing
            stmt = (
                self.db.insert(documents)
                .values(
                    id=doc_uid,
                    tenant_id=tenant_id,
                    runtime_id=scope.runtime_id,
                    user_id=scope.user_id,
                    agent_id=scope.agent_id,
                    dataset_id=dataset_id,
                    document_id=document_id,
                    idempotency_key=idempotency_key,
                    title=title,
                    metadata=metadata_,
                    chunk_count=len(chunks),
                    created_at=now,
                )
                .on_conflict_do_nothing(
                    index_elements=[
                        "tenant_id",
                        "runtime_id",
                        "user_id",
                        "agent_id",
                        "dataset_id",
                        "idempotency_key",
                    ]
                )
                .returning(documents.c.id)
            )
            if conn.execute(stmt).first() is None:  # a concurrent writer won the key
                found = self._by_key(conn, tenant_id, scope, dataset_id, idempotency_key)
                assert found is not None
                return found
            if chunks:
                if self.db.is_sqlite:
                    self.db.fts.ensure(conn, fts.CHUNKS, tenant_id)
                conn.execute(
                    document_chunks.insert(),
                    [
                        {
                            "id": uuid7(),
                            "tenant_id": tenant_id,
                            "runtime_id": scope.runtime_id,
                            "user_id": scope.user_id,
                            "agent_id": scope.agent_id,
                            "dataset_id": dataset_id,
                            "document_uid": doc_uid,
                            "document_id": document_id,
                            "ordinal": i,
                            "content": c.content,
                            "search_text": index_text(c.content),
                            "char_start": c.char_start,
                            "char_end": c.char_end,
                            "token_count": c.token_count,
                            "created_at": now,
                        }
                        for i, c in enumerate(chunks)
                    ],
                )
        return StoredDocument(doc_uid, dataset_id, document_id, idempotency_key, len(chunks), True)

    def delete(
        self, tenant_id: str, scope: Scope, dataset_id: str, document_id: str
    ) -> tuple[int, int]:
        """Delete every stored version of the scope's document ``document_id`` of the dataset
        (each key stored one) with its chunks and their index entries; ``(documents,
        chunks)`` removed."""
        removed: list[int] = []
        with self._writing() as conn:
            chunk_ids = conn.execute(
                select(document_chunks.c.id).where(
                    scope_filter(document_chunks, tenant_id, scope),
                    document_chunks.c.dataset_id == dataset_id,
                    document_chunks.c.document_id == document_id,
                )
            ).scalars()
            drop_runs_reading(conn, tenant_id, list(chunk_ids))  # runs that quote a chunk
            for table in (document_chunks, documents):  # (chunks first: they name the rows)
                res = conn.execute(
                    delete(table).where(
                        scope_filter(table, tenant_id, scope),
                        table.c.dataset_id == dataset_id,
                        table.c.document_id == document_id,
                    )
                )
                removed.append(int(res.rowcount or 0))
        chunks, docs = removed
        return docs, chunks

    def _by_key(
        self, conn: Connection, tenant_id: str, scope: Scope, dataset_id: str, key: str
    ) -> StoredDocument | None:
        row = conn.execute(
            select(documents.c.id, documents.c.document_id, documents.c.chunk_count).where(
                scope_filter(documents, tenant_id, scope),
                documents.c.dataset_id == dataset_id,
                documents.c.idempotency_key == key,
            )
        ).first()
        if row is None:
            return None
        return StoredDocument(row[0], dataset_id, row[1], key, int(row[2]), False)

    def chunks(self, tenant_id: str, scope: Scope, document_uid: uuid.UUID) -> list[ChunkRow]:
        t = document_chunks
        with self._reading() as conn:
            rows = conn.execute(
                select(*[c for c in t.c if c.name != "search_text"])
                .where(scope_filter(t, tenant_id, scope), t.c.document_uid == document_uid)
                .order_by(t.c.ordinal)
            ).all()
        return [_chunk(r._mapping, 0.0) for r in rows]

    def search_chunks(
        self,
        tenant_id: str,
        scope: Scope,
        dataset_ids: Sequence[str],
        terms: Sequence[str],
        *,
        limit: int = 20,
    ) -> list[ChunkRow]:
        """Chunks of the named datasets matching any of ``terms`` (the engine's query terms,
        ``cairn.engine.query``), best first; ties break by chunk order. ``score`` is the raw
        full-text score, BM25 as FTS5 computes it on both backends (PostgreSQL:
        ``pg_bm25.chunk_score_sql``): the engine calibrates it, as it does the memories'."""
        terms = [t for t in terms if t.strip()]  # an empty one is no term (see lexical)
        if not terms or not dataset_ids or limit <= 0:
            return []
        with self._reading() as conn:
            return self._search(conn, tenant_id, scope, list(dataset_ids), terms, limit)

    def _search(
        self,
        conn: Connection,
        tenant_id: str,
        scope: Scope,
        dataset_ids: list[str],
        terms: list[str],
        limit: int,
    ) -> list[ChunkRow]:
        params: dict[str, Any] = {
            "tenant": tenant_id,
            "runtime": scope.runtime_id,
            "user": scope.user_id,
            "agent": scope.agent_id,
            "limit": limit,
        }
        names = []
        for i, ds in enumerate(dataset_ids):
            params[f"ds{i}"] = ds
            names.append(f":ds{i}")
        cols = (
            "c.id, c.dataset_id, c.document_id, c.document_uid, c.ordinal, c.content, "
            "c.token_count, c.created_at"
        )
        in_scope = (
            "c.tenant_id = :tenant AND c.runtime_id = :runtime AND c.user_id = :user "
            "AND c.agent_id = :agent"
        )
        where = f"{in_scope} AND c.dataset_id IN ({', '.join(names)})"
        if self.db.is_sqlite:
            return self._search_sqlite(conn, tenant_id, scope, terms, cols, where, params)
        # Each chunk's BM25 as FTS5 computes it on SQLite (``pg_bm25.chunk_score_sql``),
        # scaled by the share of the query's IDF it holds, as memories are ranked
        # (``fts5_rank.coordination``). Both from the partition's chunks, every dataset of
        # it, as on SQLite (where FTS5's own statistics are the tenant's whole index).
        quoted = ["'" + w.replace("'", "''") + "'" for w in terms]
        queries = ", ".join(
            f"to_tsquery('english'::regconfig, :t{i}) q{i}" for i in range(len(terms))
        )
        for i, q in enumerate(quoted):
            params[f"t{i}"] = q
        counted = ", ".join(f"count(*) FILTER (WHERE c.tsv @@ q{i})" for i in range(len(terms)))
        got = conn.execute(
            text(
                f"SELECT count(*), coalesce(sum(length(c.tsv)), 0), {counted} "
                f"FROM document_chunks c, {queries} WHERE {in_scope}"
            ),
            params,
        ).one()
        total, lexemes, counts = int(got[0]), int(got[1]), [int(n) for n in got[2:]]
        weights = [fts5_rank.idf(total, n) for n in counts]
        for i, w in enumerate(weights):
            params[f"w{i}"] = w
        params["mass"] = sum(weights) or 1.0
        columns, bm25 = pg_bm25.chunk_score_sql(counts, params, total, lexemes)
        held = " + ".join(f":w{i} * CAST(c.tsv @@ q{i} AS integer)" for i in range(len(terms)))
        params["tsq"] = " | ".join(quoted)
        sql = (
            f"SELECT r.*, {bm25} * r.share AS score FROM (SELECT {cols}, c.seq AS chunk_seq, "
            f"{columns}, LEAST(1.0, ({held}) / :mass) AS share "
            f"FROM document_chunks c, to_tsquery('english'::regconfig, :tsq) AS q, {queries} "
            f"WHERE c.tsv @@ q AND {where}) r ORDER BY score DESC, r.chunk_seq LIMIT :limit"
        )
        found = []
        for r in conn.execute(text(sql), params):
            m = r._mapping
            chunk = _coerce({k: m[k] for k in _CHUNK_COLUMNS})
            found.append(_chunk(chunk, max(float(m["score"]), 0.0)))
        return found

    def _search_sqlite(
        self,
        conn: Connection,
        tenant_id: str,
        scope: Scope,
        terms: list[str],
        cols: str,
        where: str,
        params: dict[str, Any],
    ) -> list[ChunkRow]:
        """SQLite: FTS5's ``bm25`` in the tenant's own index, narrowed to the partition by its
        token (weight 0), over a window of the best matches, each scaled by the share of the
        query's IDF (in the partition's chunks) it holds (``fts5_rank.QueryShare``)."""
        table = self.db.fts.table_if_exists(conn, fts.CHUNKS, tenant_id)
        if table is None:
            return []  # the tenant has never stored a chunk
        part = fts.part_token(tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        quoted = {w: '"' + w.replace('"', '""') + '"' for w in terms}
        params["match"] = f'part : "{part}" AND ({" OR ".join(quoted.values())})'
        params["window"] = int(params["limit"]) * 2 + 50
        sql = (
            f"SELECT {cols}, c.search_text, -{fts.CHUNKS.rank_sql(table)} AS raw FROM {table} "
            f"JOIN document_chunks c ON c.seq = {table}.rowid "
            f"WHERE {table} MATCH :match AND {where} "
            "ORDER BY raw DESC, c.seq LIMIT :window"
        )
        rows = [dict(r._mapping) for r in conn.execute(text(sql), params)]
        counter = self.db.fts_counts.counter(conn, table)
        in_part = f'part : "{part}"'
        counts = {w: counter(f"{in_part} AND {q}") for w, q in quoted.items()}
        share = fts5_rank.QueryShare(terms, counts, counter(in_part), self.db.porter_stems)
        shares = share.all([m.pop("search_text") or "" for m in rows])
        found = [
            _chunk(_coerce(m), max(float(m.pop("raw") or 0.0), 0.0) * held)
            for m, held in zip(rows, shares, strict=True)
        ]
        found.sort(key=lambda c: -c.score)  # stable: equal scores keep chunk order
        return found[: int(params["limit"])]


# The columns of a chunk row read back from a search (``_chunk``'s fields but the score).
_CHUNK_COLUMNS = (
    "id",
    "dataset_id",
    "document_id",
    "document_uid",
    "ordinal",
    "content",
    "token_count",
    "created_at",
)


def _coerce(m: dict[str, Any]) -> dict[str, Any]:
    """Raw-SQL rows on SQLite return ids and times as text; bring them to the table types."""
    for key in ("id", "document_uid"):
        if not isinstance(m[key], uuid.UUID):
            m[key] = uuid.UUID(str(m[key]))
    created = m["created_at"]
    if isinstance(created, str):
        m["created_at"] = UTCDateTime().process_result_value(
            datetime.fromisoformat(created),
            None,  # type: ignore[arg-type]
        )
    else:
        m["created_at"] = UTCDateTime().process_result_value(created, None)  # type: ignore[arg-type]
    return m


def _chunk(m: Any, score: float) -> ChunkRow:
    return ChunkRow(
        id=m["id"],
        dataset_id=m["dataset_id"],
        document_id=m["document_id"],
        document_uid=m["document_uid"],
        ordinal=int(m["ordinal"]),
        content=m["content"],
        token_count=int(m["token_count"]),
        created_at=m["created_at"],
        score=score,
    )


__all__ = [
    "ChunkRow",
    "DocumentRepository",
    "NewChunk",
    "StoredDocument",
    "document_chunks",
    "documents",
]
