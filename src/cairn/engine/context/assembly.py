"""Cairn's built-in ``memory.Assembly`` (impl ``cairn``): recall, turns and documents over one
store, for one tenant.

``context`` gathers candidates from every lane (see ``lanes``), drops non-recent items below
``min_score``, and packs the rest under the budget (see ``packing``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.episodes import Episode
from cairn.core.memories import Memory
from cairn.core.memory import (
    Budget,
    ContextItem,
    ContextRequest,
    ContextResult,
    Document,
    DocumentCommit,
    Turn,
    TurnCommit,
)
from cairn.core.tokens import CountingTokenizer, Tokenizer, get_tokenizer
from cairn.engine.context import lanes
from cairn.engine.context.packing import Overhead, apply_min_score, pack_with_cost
from cairn.engine.documents import ChunkSettings, put_document
from cairn.engine.embedders import Embedder
from cairn.engine.ingest import IngestListener
from cairn.engine.turns import commit_turn
from cairn.store import Store, UnitOfWork
from cairn.store.documents import ChunkRow

if TYPE_CHECKING:
    from cairn.config import Settings
    from cairn.engine.search_caches import SearchCaches
    from cairn.metrics import Metrics


# The long-term lane is read in pages (``CairnAssembly.assemble``): the first holds about
# as many memories as the budget at ``PAGE_TOKENS`` each; more are read while the packed items
# charge less than ``FILL`` of the budget.
PAGE_TOKENS = 40
MIN_PAGE = 10
FILL = 0.95


def candidate_limit(budget: Budget) -> int:
    """Candidates per long-term lane when the settings leave it to the budget: about as many
    items as can fit (by count, and by tokens at ~16 per item) plus a margin for skipped ones,
    between 20 and 200. Fetching more costs time on every request and rarely changes the pack.
    """
    limits = budget.resolved()
    return max(20, min(min(limits.max_items, limits.max_tokens // 16) + 10, 200))


class AssemblySettings(BaseModel):
    """Settings of the ``cairn`` impl (the YAML of a resource's ``settings: {file:}``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int = Field(default=200, ge=16, le=8192, description="Largest chunk, in tokens.")
    chunk_overlap: int = Field(default=40, ge=0, description="Tokens shared by consecutive chunks.")
    candidates: int = Field(
        default=0,
        ge=0,
        le=1000,
        description="Candidates per long-term lane; 0: sized from the budget (20-200).",
    )
    summaries: int = Field(default=2, ge=0, le=50, description="Conversation summaries considered.")
    summary_score: float = Field(
        default=0.6, ge=0.0, le=1.0, description="Score of those summaries."
    )
    tokenizer: str = Field(
        default="", description="tiktoken encoding; empty: the server's setting."
    )

    def chunking(self) -> ChunkSettings:
        return ChunkSettings(chunk_tokens=self.chunk_tokens, chunk_overlap=self.chunk_overlap)


@dataclass
class Assembled:
    """A context result with the stored objects behind its items (for API shapes)."""

    result: ContextResult
    memories: dict[str, Memory] = field(default_factory=dict)
    episodes: dict[str, Episode] = field(default_factory=dict)
    chunks: dict[str, ChunkRow] = field(default_factory=dict)
    # The best candidate a long-term lane had beyond its limit (not packed): if it passes
    # ``min_score``, something relevant was left out, so the result is ``truncated``.
    overflow: list[ContextItem] = field(default_factory=list)


class CairnAssembly:
    """ContextProvider + TurnSink + DocumentSink over a Cairn store, bound to one tenant."""

    def __init__(
        self,
        store: Store,
        tenant_id: str,
        *,
        settings: AssemblySettings | None = None,
        tokenizer: Tokenizer | None = None,
        listeners: Sequence[IngestListener] = (),
        embedder: Embedder | None = None,
        turn_listeners: Sequence[IngestListener] = (),
        search_caches: SearchCaches | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        # Times each lane (cairn_context_lane_duration_seconds, and spans when tracing).
        self.metrics = metrics
        self.tenant_id = tenant_id
        self.settings = settings or AssemblySettings()
        # Memory contents come back on request after request, so their counts are remembered:
        # in the host's counting tokenizer when it passes one, else in this assembly's own.
        # Everything else (recent turns, documents, renderings) is counted afresh.
        counting = tokenizer if isinstance(tokenizer, CountingTokenizer) else None
        plain = counting.tokenizer if counting is not None else tokenizer
        self.tokenizer: Tokenizer = plain or get_tokenizer(self.settings.tokenizer or "cl100k_base")
        self.memory_counts = counting or CountingTokenizer(self.tokenizer)
        self.search_caches = search_caches
        self.listeners = list(listeners)
        # Told of committed turns only (the background compile that makes them recallable).
        self.turn_listeners = list(turn_listeners)
        self.embedder = embedder
        self._chunking = self.settings.chunking()

    def _lane(self, name: str) -> AbstractContextManager[None]:
        return self.metrics.lane(name) if self.metrics is not None else nullcontext()

    def context(self, request: ContextRequest) -> ContextResult:
        return self.assemble(request).result

    def commit_turn(self, turn: Turn) -> TurnCommit:
        return commit_turn(
            self.store, self.tenant_id, turn, [*self.listeners, *self.turn_listeners]
        )

    def put_document(self, document: Document) -> DocumentCommit:
        return put_document(self.store, self.tenant_id, document, self._chunking, self.tokenizer)

    def candidates(self, request: ContextRequest) -> Assembled:
        """Every lane's candidates, before ``min_score`` and packing (the long-term lane read
        to its limit)."""
        with self.store.snapshot() as tx:
            gathered = self._gather(request, tx, lambda _limits, limit: limit + 1)
        return gathered.assembled()

    def _gather(
        self, request: ContextRequest, tx: UnitOfWork, page: Callable[[Budget, int], int]
    ) -> _Gathered:
        """Every lane's candidates in ``tx``, the long-term lane ranked and its first
        ``page(limits, limit)`` memories read."""
        s, tok, scope = self.settings, self.tokenizer, request.scope
        limit = s.candidates or candidate_limit(request.budget)
        with self._lane("recent"):
            recent, episodes = lanes.recent_items(
                self.store,
                self.tenant_id,
                scope,
                request.conversation_id,
                request.recent_turns,
                tok,
            )
        out = _Gathered(recent=recent, episodes={str(e.id): e for e in episodes}, limit=limit)
        if request.recent_only:
            out.recent_only = True
            return out
        # Without a query, the conversation's latest turn is what to recall for.
        query = request.query or (recent[0].content if recent else "")
        with self._lane("summary"):
            out.summaries, out.summary_memories = lanes.summary_items(
                tx,
                self.tenant_id,
                scope,
                request.conversation_id,
                s.summary_score,
                s.summaries,
                self.memory_counts,
                exclude_episodes={e.id for e in episodes},
            )
        # Each long-term lane is asked for one more than it may give: the extra one tells
        # whether the limit cut anything off.
        with self._lane("documents"):
            out.chunk_items, out.chunks = lanes.chunk_items(
                tx, self.tenant_id, scope, request.dataset_ids, query, limit + 1
            )
        with self._lane("long_term"):
            out.lane = lanes.long_term_lane(
                self.store,
                self.tenant_id,
                scope,
                query,
                limit + 1,
                self.memory_counts,
                tx=tx,
                embedder=self.embedder,
                exclude_episodes={e.id for e in episodes},
                caches=self.search_caches,
            )
            if out.lane is not None:
                out.lane.read(page(request.budget.resolved(), limit))
        return out

    def assemble(
        self,
        request: ContextRequest,
        *,
        reserved: int = 0,
        overhead: Overhead | None = None,
    ) -> Assembled:
        """Candidates → ``min_score`` → packing, with the stored objects behind the items.
        ``reserved`` and ``overhead`` charge a rendering's tokens (see ``pack_context``).

        The long-term lane is read in pages: first about as many memories as the budget
        holds at ``PAGE_TOKENS`` each, then more while the packed items charge less than
        ``FILL`` of the budget, unread memories could pass ``min_score`` and the tokens left
        would hold the shortest memory read so far. Reading the whole lane packs
        the same items except where a shorter memory ranked beyond the pages read would have
        filled the last few tokens."""
        limits = request.budget.resolved()
        with self.store.snapshot() as tx:
            gathered = self._gather(request, tx, first_page)
            lane = gathered.lane
            # Pages read after the first count as packing's time (each lane is timed once).
            with self._lane("pack"):
                while True:
                    found = gathered.assembled()
                    kept = apply_min_score(found.result.items, request.min_score)
                    packed, charged = pack_with_cost(
                        kept, request.budget, reserved=reserved, overhead=overhead
                    )
                    if lane is None or not gathered.wants_more(
                        packed, charged, limits, request.min_score
                    ):
                        break
                    lane.read(next_page(limits, charged, lane))
        found.result = packed
        unread_passes = lane is not None and lane.unread and lane.best_unread() >= request.min_score
        left_out = unread_passes or bool(apply_min_score(found.overflow, request.min_score))
        if left_out and not packed.truncated:
            found.result = packed.model_copy(update={"truncated": True})
        return found


@dataclass
class _Gathered:
    """The lanes' candidates of one request (``CairnAssembly._gather``), the long-term lane
    read in pages (``assembled`` combines what is read so far)."""

    recent: list[ContextItem]
    episodes: dict[str, Episode]
    limit: int
    recent_only: bool = False
    summaries: list[ContextItem] = field(default_factory=list)
    summary_memories: dict[str, Memory] = field(default_factory=dict)
    chunk_items: list[ContextItem] = field(default_factory=list)
    chunks: dict[str, ChunkRow] = field(default_factory=dict)
    lane: lanes.LongTermLane | None = None

    def assembled(self) -> Assembled:
        """The candidates read so far: recent items, then the long-term lane's (up to the
        limit) and summaries by score, then document chunks; the best one beyond each lane's
        limit is the overflow."""
        out = Assembled(ContextResult(items=[], token_count=0, truncated=False))
        out.episodes = self.episodes
        if self.recent_only:
            out.result = ContextResult(items=list(self.recent), token_count=0, truncated=False)
            return out
        limit = self.limit
        lt = self.lane.items if self.lane is not None else []
        ch = self.chunk_items
        out.overflow = [*lt[limit : limit + 1], *ch[limit : limit + 1]]
        lt, ch = lt[:limit], ch[:limit]
        mems = self.lane.memories if self.lane is not None else {}
        out.memories = {**self.summary_memories, **{i.id: mems[i.id] for i in lt}}
        out.chunks = {i.id: self.chunks[i.id] for i in ch}
        # A summary found by both lanes keeps its better score (packing keeps the first).
        items = [*self.recent, *sorted([*lt, *self.summaries], key=lambda i: -i.score), *ch]
        out.result = ContextResult(items=items, token_count=0, truncated=False)
        return out

    def wants_more(
        self, packed: ContextResult, charged: int, limits: Budget, min_score: float
    ) -> bool:
        """Whether reading more of the long-term lane could add to ``packed``: the lane has
        unread memories within its limit that pass ``min_score``, and the packed items fill
        neither ``max_items`` nor ``FILL`` of the tokens (or characters), and the tokens left
        would hold a memory as short as the shortest one read so far."""
        lane = self.lane
        if lane is None or not lane.unread or len(lane.items) > self.limit:
            return False
        if lane.best_unread() < min_score or len(packed.items) >= limits.max_items:
            return False
        if charged >= FILL * limits.max_tokens:
            return False
        if lane.items and limits.max_tokens - charged < min(i.token_count for i in lane.items):
            return False
        chars = sum(len(i.content) for i in packed.items)
        return not (limits.max_chars and chars >= FILL * limits.max_chars)


def first_page(limits: Budget, limit: int) -> int:
    """How many long-term memories to read first: about as many as ``limits`` holds at
    ``PAGE_TOKENS`` each, plus a few, at least ``MIN_PAGE``."""
    return min(limit + 1, max(MIN_PAGE, limits.max_tokens // PAGE_TOKENS + 5))


def next_page(limits: Budget, charged: int, lane: lanes.LongTermLane) -> int:
    """How many more to read: twice as many as the tokens left would hold at the average
    size of the memories read so far, at least ``MIN_PAGE``."""
    read = lane.items
    average = max(8.0, sum(i.token_count for i in read) / len(read)) if read else PAGE_TOKENS
    left = max(0, limits.max_tokens - charged)
    return max(MIN_PAGE, int(2 * left / average) + 1)


class AssemblyHost(Protocol):
    """What ``build_assembly`` takes from its host (``Services`` is one): read-only."""

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def tokenizer(self) -> Tokenizer: ...

    @property
    def ingest_listeners(self) -> Sequence[IngestListener]: ...

    @property
    def turn_listeners(self) -> Sequence[IngestListener]: ...

    @property
    def embedder(self) -> Embedder | None: ...

    @property
    def search_caches(self) -> SearchCaches: ...

    @property
    def metrics(self) -> Metrics: ...


def build_assembly(
    host: AssemblyHost,
    tenant_id: str = "default",
    deps: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> CairnAssembly:
    """The ``cairn`` impl factory: an Assembly over ``host.store`` for ``tenant_id``.
    ``deps`` are accepted and unused (Cairn needs no workspace or inference service)."""
    parsed = AssemblySettings.model_validate(dict(settings or {}))
    if not parsed.tokenizer:
        parsed = parsed.model_copy(update={"tokenizer": host.settings.tokenizer})
    # The host's tokenizer (and its counts) serves when the resource asks for the same one.
    same = parsed.tokenizer == host.tokenizer.name
    return CairnAssembly(
        host.store,
        tenant_id,
        settings=parsed,
        tokenizer=host.tokenizer if same else None,
        listeners=host.ingest_listeners,
        embedder=host.embedder,
        turn_listeners=host.turn_listeners,
        search_caches=host.search_caches,
        metrics=host.metrics,
    )
