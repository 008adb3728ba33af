"""``compile_scope``: take a partition's uncompiled episodes, compile them, store the memories.

Three phases, so a slow compiler (an LLM) never holds the write lock:

1. read the next batch of uncompiled episodes (and the sessions they touch);
2. compile them into drafts, outside any transaction;
3. in one write transaction, under a per-partition lock: keep only episodes nobody compiled in
   the meantime, supersede changed single-valued facts, insert the rest (the unique constraint
   skips anything already stored) and mark the episodes compiled.

Whoever runs it, however often and concurrently, a memory is stored once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from cairn.core.ids import utcnow
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.engine.compile.drafts import CompileInput, Compiler, MemoryDraft, memory_id
from cairn.engine.compile.heuristic import HeuristicCompiler
from cairn.engine.compile.text import normalize_for_hash
from cairn.store import Store
from cairn.store.memory_search import search_text
from cairn.tracing import Tracing

# Episodes per compile step. Each step's write transaction holds SQLite's single writer lock,
# so a small step keeps other writers (a single ingest) waiting tens of milliseconds, not
# seconds, while a big compile runs; measured no slower overall than 5,000 (bench memories:
# 2,098 episodes/s at 100, 2,114 at 200, 1,758-2,114 at 5,000).
DEFAULT_BATCH = 100
# Episodes one compile request covers (in steps of DEFAULT_BATCH) before it answers has_more.
REQUEST_LIMIT = 5000


@dataclass
class CompileResult:
    """What one compile call did; ``has_more`` when episodes are left for another call."""

    memories_created: int
    memories: list[Memory] = field(default_factory=list)
    has_more: bool = False
    remaining_episodes: int = 0
    episodes_compiled: int = 0


def _store_of(services_or_store: Any) -> Store:
    return services_or_store if isinstance(services_or_store, Store) else services_or_store.store


def default_compiler(services_or_store: Any) -> Compiler:
    compiler = getattr(services_or_store, "compiler", None)
    return compiler if compiler is not None else HeuristicCompiler()


def _row(
    tenant_id: str, scope: Scope, draft: MemoryDraft, compiler: Compiler, now: Any
) -> dict[str, Any]:
    """The memory row of a draft, with the text its full-text index reads."""
    content_hash = draft.content_hash()
    metadata = dict(draft.metadata)
    metadata.setdefault("compiler", compiler.name)
    metadata.setdefault("compiler_version", compiler.version)
    if draft.slot:
        metadata["slot"] = draft.slot
    return {
        "id": memory_id(tenant_id, scope, draft.kind, content_hash),
        "tenant_id": tenant_id,
        "runtime_id": scope.runtime_id,
        "user_id": scope.user_id,
        "agent_id": scope.agent_id,
        "session_id": draft.session_id,
        "kind": draft.kind,
        "content": draft.content,
        "summary": draft.summary,
        "confidence": max(0.0, min(1.0, draft.confidence)),
        "valid_from": draft.valid_from,
        "valid_to": None,
        "status": "active",
        "source_episode_ids": [str(i) for i in draft.source_episode_ids],
        "metadata": metadata,
        "content_hash": content_hash,
        "superseded_by": None,
        "embedding": None,
        "created_at": now,
        "updated_at": now,
        "search_text": search_text(draft.content, metadata),
    }


def stated_names(store: Store, conn: Any, tenant_id: str, scope: Scope) -> dict[str, str]:
    """``speaker label → name`` from the partition's current name facts (slot ``x:name``), so
    facts of a later compile name the person ("Maya works at Initech", not "User …")."""
    out: dict[str, str] = {}
    for m in store.memories.active_of_kind(conn, tenant_id, scope, "profile_fact"):
        slot = str(m.metadata.get("slot") or "")
        value = m.metadata.get("value")
        if slot.endswith(":name") and isinstance(value, str) and value:
            out[slot[: -len(":name")]] = value
    return out


def compile_scope(
    services_or_store: Any,
    tenant_id: str,
    scope: Scope,
    *,
    compiler: Compiler | None = None,
    embedder: Any = None,
    max_episodes: int = DEFAULT_BATCH,
) -> CompileResult:
    """Compile up to ``max_episodes`` uncompiled episodes of one partition into memories.

    Accepts ``Services`` (its compiler is used unless given; its background embedding pass is
    told about new memories) or a bare ``Store`` (heuristic compiler, no embeddings). An
    ``embedder`` given here embeds the new memories before returning.
    """
    store = _store_of(services_or_store)
    compiler = compiler or default_compiler(services_or_store)
    backfill = getattr(services_or_store, "embedding_backfill", None)
    metrics = getattr(services_or_store, "metrics", None)
    tracing = metrics.tracing if metrics is not None else Tracing()
    q = store.jobs.compiling

    with tracing.span("cairn.compile.step", {"cairn.tenant": tenant_id}) as span:
        with tracing.span("cairn.compile.read"), store.db.read() as conn:
            batch = q.uncompiled(conn, tenant_id, scope, max_episodes)
            sessions = q.sessions(conn, tenant_id, scope, batch)
            names = stated_names(store, conn, tenant_id, scope) if batch else {}
        if not batch:
            return CompileResult(memories_created=0)
        now = utcnow()
        with tracing.span("cairn.compile.plan"):
            drafts = compiler.compile(CompileInput(batch, sessions, names))
            # Rows (with their analysed search text) are built before the write transaction:
            # it holds SQLite's one writer lock, which a single ingest waits on meanwhile.
            rows = {id(d): _row(tenant_id, scope, d, compiler, now) for d in drafts}
        with tracing.span("cairn.compile.write"), store.db.write() as conn:
            q.lock_scope(conn, tenant_id, scope)
            fresh = q.still_uncompiled(conn, [ep.id for ep in batch])
            fresh_sessions = {ep.session_id for ep in batch if ep.id in fresh}
            drafts = [
                d
                for d in drafts
                if any(i in fresh for i in d.source_episode_ids)
                or ((d.kind == "episode_summary" or d.refresh) and d.session_id in fresh_sessions)
            ]
            created = _apply(store, conn, tenant_id, scope, drafts, rows, now)
            q.mark_compiled(conn, [ep.id for ep in batch if ep.id in fresh])
            remaining = q.count_uncompiled(conn, tenant_id, scope)
        if span is not None:
            span.set_attribute("cairn.episodes_compiled", len(fresh))
            span.set_attribute("cairn.memories_created", len(created))
    if created and embedder is not None:
        # An embedder passed by the caller (benches, scripts) embeds now; a server's or
        # worker's vectors follow in the background, off the request.
        from cairn.engine.search import embed_memories

        embed_memories(store, embedder, tenant_id, scope)
    elif created and backfill is not None:
        backfill.notify(tenant_id, scope)
    return CompileResult(
        memories_created=len(created),
        memories=created,
        has_more=remaining > 0,
        remaining_episodes=remaining,
        episodes_compiled=len(fresh),
    )


def compile_request(
    services_or_store: Any, tenant_id: str, scope: Scope, limit: int | None = None
) -> CompileResult:
    """Compile up to ``limit`` (default ``REQUEST_LIMIT``) episodes of one partition in steps
    of ``DEFAULT_BATCH``, each its own short write transaction; the summed result."""
    limit = REQUEST_LIMIT if limit is None else limit
    total = CompileResult(memories_created=0)
    while total.episodes_compiled < limit:
        step = compile_scope(
            services_or_store,
            tenant_id,
            scope,
            max_episodes=min(DEFAULT_BATCH, limit - total.episodes_compiled),
        )
        total.memories_created += step.memories_created
        total.memories.extend(step.memories)
        total.episodes_compiled += step.episodes_compiled
        total.has_more, total.remaining_episodes = step.has_more, step.remaining_episodes
        if not step.has_more or step.episodes_compiled == 0:
            break
    return total


def _apply(
    store: Store,
    conn: Any,
    tenant_id: str,
    scope: Scope,
    drafts: list[MemoryDraft],
    rows: dict[int, dict[str, Any]],
    now: Any,
) -> list[Memory]:
    """Insert drafts in order (``rows``: each draft's row, by ``id(draft)``); slot facts first
    supersede a different current value."""
    for d in drafts:
        if d.refresh:
            store.memories.refresh_metadata(conn, rows[id(d)])
    plain = [d for d in drafts if not d.slot and not d.refresh]
    created = store.memories.insert_new(conn, [rows[id(d)] for d in plain])
    slotted = sorted((d for d in drafts if d.slot), key=lambda d: d.valid_from)
    if not slotted:
        return created
    current: dict[str, Memory] = {}
    for kind in sorted({d.kind for d in slotted}):
        for m in store.memories.active_of_kind(conn, tenant_id, scope, kind):
            slot = m.metadata.get("slot")
            if slot:
                current[slot] = m
    for draft in slotted:
        assert draft.slot is not None
        old = current.get(draft.slot)
        row = dict(rows[id(draft)])
        if old is not None and normalize_for_hash(old.content) == normalize_for_hash(draft.content):
            _add_sources(store, conn, old, draft.source_episode_ids, now)
            if draft.kind == "episode_summary" and old.metadata != row["metadata"]:
                store.memories.set_metadata(conn, old.id, row["metadata"], now)
            continue
        if old is not None and old.valid_from and old.valid_from > draft.valid_from:
            # An older statement that arrives late never replaces the newer value; it is
            # stored as history, already superseded by it.
            row.update(status="superseded", valid_to=old.valid_from, superseded_by=old.id)
            created.extend(store.memories.insert_new(conn, [row]))
            continue
        inserted = store.memories.insert_new(conn, [row])
        if not inserted:
            continue
        if old is not None:
            store.memories.supersede(conn, old.id, inserted[0].id, draft.valid_from, now)
            # The response shows what is stored: ``old`` may be new in this very compile.
            created = [
                m.model_copy(
                    update={
                        "status": "superseded",
                        "valid_to": draft.valid_from,
                        "superseded_by": inserted[0].id,
                        "updated_at": now,
                    }
                )
                if m.id == old.id
                else m
                for m in created
            ]
        current[draft.slot] = inserted[0]
        created.extend(inserted)
    return created


def _add_sources(
    store: Store, conn: Any, memory: Memory, sources: tuple[uuid.UUID, ...], now: Any
) -> None:
    have = [str(i) for i in memory.source_episode_ids]
    extra = [str(i) for i in sources if str(i) not in have]
    if extra:
        store.memories.set_sources(conn, memory.id, have + extra, now)
        memory.source_episode_ids.extend(uuid.UUID(i) for i in extra)
