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
from typing import TYPE_CHECKING, Any

from cairn.core.episodes import Episode
from cairn.core.ids import utcnow
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.engine.compile.drafts import CompileInput, Compiler, MemoryDraft, memory_id
from cairn.engine.compile.heuristic import HeuristicCompiler
from cairn.engine.compile.legacy import adopt_legacy_hashes
from cairn.engine.compile.text import normalize_for_hash
from cairn.engine.embedders import Embedder
from cairn.engine.yielding import pause_point
from cairn.store import Store, UnitOfWork
from cairn.store.memory_search import search_text
from cairn.tracing import Tracing

if TYPE_CHECKING:
    from cairn.engine.backfill import EmbeddingBackfill

# Episodes per compile step. Each step's write transaction holds SQLite's single writer lock,
# so a small step keeps other writers (a single ingest) waiting tens of milliseconds, not
# seconds, while a big compile runs; measured no slower overall than 5,000 (bench memories:
# 2,098 episodes/s at 100, 2,114 at 200, 1,758-2,114 at 5,000).
DEFAULT_BATCH = 100
# Episodes one compile request covers (in steps of DEFAULT_BATCH) before it answers has_more.
REQUEST_LIMIT = 5000
# Plans made outside the write lock for one step at most: an episode the plan read deleted
# before the write makes it plan again. Should the last one find the same, the heuristic
# compiler (milliseconds) plans once more inside the write transaction, under the partition's
# lock, where no deletion of an episode can land; any other compiler (a model call: seconds,
# which must never run under the lock) writes nothing this step and leaves the episodes for
# the next (``has_more``).
PLAN_ATTEMPTS = 3


@dataclass
class CompileResult:
    """What one compile call did; ``has_more`` when episodes are left for another call."""

    memories_created: int
    memories: list[Memory] = field(default_factory=list)
    has_more: bool = False
    remaining_episodes: int = 0
    episodes_compiled: int = 0


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
        "created_at": now,
        "updated_at": now,
        "search_text": search_text(draft.content, metadata),
    }


def stated_names(tx: UnitOfWork, tenant_id: str, scope: Scope) -> dict[str, str]:
    """``speaker label → name`` from the partition's current name facts (slot ``x:name``), so
    facts of a later compile name the person ("Maya works at Initech", not "User …")."""
    return names_of(tx.memories.active_in_slots(tenant_id, scope, "profile_fact", suffix=":name"))


def names_of(facts: list[Memory]) -> dict[str, str]:
    """``speaker label → name`` of name facts."""
    out: dict[str, str] = {}
    for m in facts:
        slot = str(m.metadata.get("slot") or "")
        value = m.metadata.get("value")
        if slot.endswith(":name") and isinstance(value, str) and value:
            out[slot[: -len(":name")]] = value
    return out


def compile_scope(
    store: Store,
    tenant_id: str,
    scope: Scope,
    *,
    compiler: Compiler | None = None,
    embedder: Embedder | None = None,
    backfill: EmbeddingBackfill | None = None,
    max_episodes: int = DEFAULT_BATCH,
    tracing: Tracing | None = None,
    count_remaining: bool = True,
) -> CompileResult:
    """Compile up to ``max_episodes`` uncompiled episodes of one partition into memories.

    ``compiler`` defaults to the heuristic one. An ``embedder`` given here embeds the new
    memories before returning; otherwise a ``backfill`` (a server's background embedding
    pass) is told about them. Without ``count_remaining`` the step only checks whether any
    episode remains (``remaining_episodes`` is then 1 for "some"): counting reads every
    waiting row, a cost per step that grows with the subject.
    """
    compiler = compiler or HeuristicCompiler()
    tracing = tracing or Tracing()

    with tracing.span("cairn.compile.step", {"cairn.tenant": tenant_id}) as span:
        for attempt in range(PLAN_ATTEMPTS):
            plan = _plan(store, tenant_id, scope, compiler, max_episodes, tracing)
            if plan is None:
                return CompileResult(memories_created=0)
            pause_point()  # ... and again before it takes the writer lock
            with tracing.span("cairn.compile.write"), store.transaction() as tx:
                tx.compiling.lock_scope(tenant_id, scope)
                # An episode read for the plan (the batch, its sessions' others) deleted since
                # (an erasure, an episode deleted): the plan quotes it in a summary or in
                # neighbour words, so it is made again without it.
                if not plan.whole(tx):
                    if attempt + 1 < PLAN_ATTEMPTS:
                        continue
                    if not isinstance(compiler, HeuristicCompiler):
                        return CompileResult(
                            memories_created=0, has_more=True, remaining_episodes=1
                        )
                    read = _read(tx, tenant_id, scope, max_episodes, tracing)
                    plan = _planned(read, tenant_id, scope, compiler, tracing)
                    if plan is None:
                        return CompileResult(memories_created=0)
                fresh, created, remaining = _write(tx, tenant_id, scope, plan, count_remaining)
            break
        if fresh:
            store.refresh_statistics()  # a table that grew much gets fresh planner statistics
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


@dataclass
class _Plan:
    """A compile step's plan: the batch, every episode read for it, the drafts and their rows."""

    batch: list[Any]
    read: list[uuid.UUID]
    drafts: list[MemoryDraft]
    rows: dict[int, dict[str, Any]]
    now: Any

    def whole(self, tx: UnitOfWork) -> bool:
        """Whether every episode the plan read is still stored."""
        return tx.compiling.count_present(self.read) == len(self.read)


def _plan(
    store: Store,
    tenant_id: str,
    scope: Scope,
    compiler: Compiler,
    max_episodes: int,
    tracing: Tracing,
) -> _Plan | None:
    """Read the next batch (and the sessions it touches) and compile it, outside any write
    transaction; None when no episode waits."""
    pause_point()  # a background compile lets the requests in flight go first
    with store.snapshot() as tx:
        read = _read(tx, tenant_id, scope, max_episodes, tracing)
    return _planned(read, tenant_id, scope, compiler, tracing)


# What a plan reads: the batch, every episode of the sessions it touches, the name facts.
_Read = tuple[list[Episode], dict[str, list[Episode]], list[Memory]]


def _read(
    tx: UnitOfWork, tenant_id: str, scope: Scope, max_episodes: int, tracing: Tracing
) -> _Read:
    """The next batch of uncompiled episodes, the sessions it touches and the name facts."""
    with tracing.span("cairn.compile.read"):
        batch = tx.compiling.uncompiled(tenant_id, scope, max_episodes)
        sessions = tx.compiling.sessions(tenant_id, scope, batch)
        facts = (
            tx.memories.active_in_slots(tenant_id, scope, "profile_fact", suffix=":name")
            if batch
            else []
        )
    return batch, sessions, facts


def _planned(
    read_: _Read, tenant_id: str, scope: Scope, compiler: Compiler, tracing: Tracing
) -> _Plan | None:
    """The plan of what ``_read`` gave; None when no episode waits."""
    batch, sessions, facts = read_
    if not batch:
        return None
    now = utcnow()
    with tracing.span("cairn.compile.plan"):
        drafts = compiler.compile(CompileInput(batch, sessions, names_of(facts)))
        # Rows (with their analysed search text) are built before the write transaction:
        # it holds SQLite's one writer lock, which a single ingest waits on meanwhile.
        rows = {id(d): _row(tenant_id, scope, d, compiler, now) for d in drafts}
    read = {ep.id for ep in batch} | {ep.id for eps in sessions.values() for ep in eps}
    read |= {i for m in facts for i in m.source_episode_ids}  # (the names it gives speakers)
    return _Plan(batch, sorted(read), drafts, rows, now)


def _write(
    tx: UnitOfWork, tenant_id: str, scope: Scope, plan: _Plan, count_remaining: bool
) -> tuple[set[uuid.UUID], list[Memory], int]:
    """Store the plan's memories of the episodes nobody compiled meanwhile (under the
    partition's lock); ``(episodes compiled, memories created, episodes remaining)``."""
    batch = plan.batch
    fresh = tx.compiling.still_uncompiled([ep.id for ep in batch])
    fresh_sessions = {ep.session_id for ep in batch if ep.id in fresh}
    drafts = [
        d
        for d in plan.drafts
        if any(i in fresh for i in d.source_episode_ids)
        or ((d.kind == "episode_summary" or d.refresh) and d.session_id in fresh_sessions)
    ]
    created = _apply(tx, tenant_id, scope, drafts, plan.rows, plan.now)
    tx.compiling.mark_compiled([ep.id for ep in batch if ep.id in fresh])
    if count_remaining or not fresh:
        remaining = tx.compiling.count_uncompiled(tenant_id, scope)
    else:
        remaining = int(tx.compiling.any_uncompiled(tenant_id, scope))
    return fresh, created, remaining


def compile_request(
    store: Store,
    tenant_id: str,
    scope: Scope,
    limit: int | None = None,
    *,
    compiler: Compiler | None = None,
    backfill: EmbeddingBackfill | None = None,
    tracing: Tracing | None = None,
) -> CompileResult:
    """Compile up to ``limit`` (default ``REQUEST_LIMIT``) episodes of one partition in steps
    of ``DEFAULT_BATCH``, each its own short write transaction; the summed result. Only the
    last step counts the episodes left (an earlier one that finds none left is exact too)."""
    limit = REQUEST_LIMIT if limit is None else limit
    total = CompileResult(memories_created=0)
    while total.episodes_compiled < limit:
        left = limit - total.episodes_compiled
        step = compile_scope(
            store,
            tenant_id,
            scope,
            compiler=compiler,
            backfill=backfill,
            max_episodes=min(DEFAULT_BATCH, left),
            tracing=tracing,
            count_remaining=left <= DEFAULT_BATCH,
        )
        total.memories_created += step.memories_created
        total.memories.extend(step.memories)
        total.episodes_compiled += step.episodes_compiled
        total.has_more, total.remaining_episodes = step.has_more, step.remaining_episodes
        if not step.has_more or step.episodes_compiled == 0:
            break
    return total


def _apply(
    tx: UnitOfWork,
    tenant_id: str,
    scope: Scope,
    drafts: list[MemoryDraft],
    rows: dict[int, dict[str, Any]],
    now: Any,
) -> list[Memory]:
    """Insert drafts in order (``rows``: each draft's row, by ``id(draft)``); slot facts first
    supersede a different current value."""
    adopt_legacy_hashes(tx, tenant_id, scope, rows.values())
    for d in drafts:
        if d.refresh:
            tx.memories.refresh_metadata(rows[id(d)])
    plain = [d for d in drafts if not d.slot and not d.refresh]
    created = tx.memories.insert_new([rows[id(d)] for d in plain])
    slotted = sorted((d for d in drafts if d.slot), key=lambda d: d.valid_from)
    if not slotted:
        return created
    current: dict[str, Memory] = {}
    for kind in sorted({d.kind for d in slotted}):
        slots = [d.slot for d in slotted if d.kind == kind and d.slot]
        for m in tx.memories.active_in_slots(tenant_id, scope, kind, slots=slots):
            slot = m.metadata.get("slot")
            if slot:
                current[slot] = m
    for draft in slotted:
        assert draft.slot is not None
        old = current.get(draft.slot)
        row = dict(rows[id(draft)])
        if old is not None and normalize_for_hash(old.content) == normalize_for_hash(draft.content):
            _add_sources(tx, old, draft.source_episode_ids, now)
            if draft.kind == "episode_summary" and old.metadata != row["metadata"]:
                tx.memories.set_metadata(old.id, row["metadata"], now)
            continue
        if old is not None and old.valid_from and old.valid_from > draft.valid_from:
            # An older statement that arrives late never replaces the newer value; it is
            # stored as history, already superseded by it.
            row.update(status="superseded", valid_to=old.valid_from, superseded_by=old.id)
            created.extend(tx.memories.insert_new([row]))
            continue
        inserted = tx.memories.insert_new([row])
        if not inserted:
            continue
        if old is not None:
            tx.memories.supersede(old.id, inserted[0].id, draft.valid_from, now)
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


def _add_sources(tx: UnitOfWork, memory: Memory, sources: tuple[uuid.UUID, ...], now: Any) -> None:
    have = [str(i) for i in memory.source_episode_ids]
    extra = [str(i) for i in sources if str(i) not in have]
    if extra:
        tx.memories.set_sources(memory.id, have + extra, now)
        memory.source_episode_ids.extend(uuid.UUID(i) for i in extra)
