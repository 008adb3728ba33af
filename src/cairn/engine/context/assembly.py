"""Cairn's built-in ``memory.Assembly`` (impl ``cairn``): recall, turns and documents over one
store, for one tenant.

``context`` gathers candidates from every lane (see ``lanes``), drops non-recent items below
``min_score``, and packs the rest under the budget (see ``packing``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from cairn.engine.context.packing import Overhead, apply_min_score, pack_context
from cairn.engine.documents import ChunkSettings, put_document
from cairn.engine.embedders import Embedder
from cairn.engine.ingest import IngestListener
from cairn.engine.turns import commit_turn
from cairn.store import Store
from cairn.store.documents import ChunkRow

if TYPE_CHECKING:
    from cairn.config import Settings
    from cairn.engine.search import SearchCaches
    from cairn.metrics import Metrics


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
        """Every lane's candidates, before ``min_score`` and packing."""
        s, tok, scope = self.settings, self.tokenizer, request.scope
        limit = s.candidates or candidate_limit(request.budget)
        out = Assembled(ContextResult(items=[], token_count=0, truncated=False))
        items: list[ContextItem] = []
        # The lanes and the search share one read (a pool checkout and a commit less).
        with self.store.snapshot() as tx:
            with self._lane("recent"):
                recent, episodes = lanes.recent_items(
                    self.store,
                    self.tenant_id,
                    scope,
                    request.conversation_id,
                    request.recent_turns,
                    tok,
                )
            items += recent
            out.episodes = {str(e.id): e for e in episodes}
            if request.recent_only:
                out.result = ContextResult(items=items, token_count=0, truncated=False)
                return out
            # Without a query, the conversation's latest turn is what to recall for.
            query = request.query or (recent[0].content if recent else "")
            with self._lane("summary"):
                sm, smems = lanes.summary_items(
                    tx,
                    self.tenant_id,
                    scope,
                    request.conversation_id,
                    s.summary_score,
                    s.summaries,
                    self.memory_counts,
                )
            # Each long-term lane is asked for one more than it may give: the extra one
            # tells whether the limit cut anything off.
            with self._lane("documents"):
                ch, chunks = lanes.chunk_items(
                    tx, self.tenant_id, scope, request.dataset_ids, query, limit + 1
                )
            with self._lane("long_term"):
                lt, mems = lanes.long_term_items(
                    self.store,
                    self.tenant_id,
                    scope,
                    query,
                    limit + 1,
                    self.memory_counts,
                    embedder=self.embedder,
                    exclude_episodes={e.id for e in episodes},
                    caches=self.search_caches,
                    tx=tx,
                )
        out.overflow = [*lt[limit : limit + 1], *ch[limit : limit + 1]]
        lt, ch = lt[:limit], ch[:limit]
        mems = {i.id: mems[i.id] for i in lt}
        chunks = {i.id: chunks[i.id] for i in ch}
        # A summary found by both lanes keeps its better score (packing keeps the first).
        items += sorted([*lt, *sm], key=lambda i: -i.score) + ch
        out.memories = {**smems, **mems}
        out.chunks = chunks
        out.result = ContextResult(items=items, token_count=0, truncated=False)
        return out

    def assemble(
        self,
        request: ContextRequest,
        *,
        reserved: int = 0,
        overhead: Overhead | None = None,
    ) -> Assembled:
        """Candidates → ``min_score`` → packing, with the stored objects behind the items.
        ``reserved`` and ``overhead`` charge a rendering's tokens (see ``pack_context``)."""
        found = self.candidates(request)
        with self._lane("pack"):
            kept = apply_min_score(found.result.items, request.min_score)
            found.result = pack_context(kept, request.budget, reserved=reserved, overhead=overhead)
        if not found.result.truncated and apply_min_score(found.overflow, request.min_score):
            found.result = found.result.model_copy(update={"truncated": True})
        return found


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
