"""Candidate lanes of context assembly, each scored in [0, 1].

- recent: the conversation's latest turns (any episode of the conversation), newest first,
  score 1 and exempt from ``min_score``;
- long_term: compiled memories ranked by the search engine (lexical, plus vectors when an
  embedder is configured), and chunks of the datasets the request names;
- summary: summary memories of the conversation (a fixed lane score) and summary memories the
  search returned (their search score).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cairn.core.construct import construct
from cairn.core.episodes import Episode
from cairn.core.memories import Memory
from cairn.core.memory import ContextItem, SourceRef
from cairn.core.scope import Scope
from cairn.core.tokens import Tokenizer
from cairn.engine.compile.heuristic import restates_turns
from cairn.engine.query import ranking_terms
from cairn.engine.ranking import CHUNK_HALF, calibrate
from cairn.engine.turns import TURN_EPISODE_TYPE, episode_text
from cairn.store import Store, UnitOfWork
from cairn.store.documents import ChunkRow

# What a lane reads through: the store (each read its own snapshot) or a unit of work (the
# lanes of one request share one snapshot).
Repos = Store | UnitOfWork

if TYPE_CHECKING:
    from cairn.engine.search import Ranking
    from cairn.engine.search_caches import SearchCaches

SUMMARY_KINDS = frozenset({"episode_summary", "session_summary", "conversation_summary", "summary"})


def recent_items(
    repos: Repos,
    tenant_id: str,
    scope: Scope,
    conversation_id: str,
    limit: int,
    tokenizer: Tokenizer,
) -> tuple[list[ContextItem], list[Episode]]:
    """The conversation's latest ``limit`` episodes as items, newest first."""
    if not conversation_id or limit <= 0:
        return [], []
    episodes = repos.episodes.latest_of_session(tenant_id, scope, conversation_id, limit)
    items = []
    for ep in episodes:
        content = episode_text(ep)
        is_turn = ep.type == TURN_EPISODE_TYPE
        items.append(
            ContextItem(
                id=str(ep.id),
                kind="turn" if is_turn else ep.type,
                content=content,
                score=1.0,
                source_class="recent",
                token_count=tokenizer.count(content),
                created_at=ep.created_at,
                occurred_at=ep.occurred_at,
                provenance=[SourceRef(type="turn" if is_turn else "episode", id=str(ep.id))],
                metadata={"conversation_id": conversation_id, "episode_type": ep.type},
            )
        )
    return items, episodes


def memory_item(
    memory: Memory, score: float, tokenizer: Tokenizer, source_class: str | None = None
) -> ContextItem:
    """A stored memory as a context item. Built without re-validation: every field comes from
    the store, and the score is clamped to [0, 1] here."""
    cls = source_class or ("summary" if memory.kind in SUMMARY_KINDS else "long_term")
    refs = [
        construct(
            SourceRef, {"type": "episode", "id": str(e), "document_id": None, "dataset_id": None}
        )
        for e in memory.source_episode_ids
    ]
    return construct(
        ContextItem,
        {
            "id": str(memory.id),
            "kind": memory.kind,
            "content": memory.content,
            "score": min(max(float(score), 0.0), 1.0),
            "source_class": cls,
            "token_count": tokenizer.count(memory.content),
            "created_at": memory.created_at,
            "occurred_at": memory.valid_from,
            "provenance": refs,
            "metadata": {"session_id": memory.session_id, **(memory.metadata or {})},
        },
    )


SearchFn = Callable[..., Any]


def rank_function() -> SearchFn | None:
    """The compile/search engine's ``rank_memories``, if that engine is installed."""
    try:
        from cairn.engine.search import rank_memories
    except ImportError:
        return None
    return rank_memories


class LongTermLane:
    """The long-term lane: memories ranked at once, then read and built into items in pages
    (``read``). A context request packs a third or less of the candidates its budget allows
    for (22 of 72 at 1,000 tokens in the scale benchmark), and reading and building a memory
    was a third of the request; packing reads more only while the budget has room
    (``CairnAssembly.assemble``). Left out, as they add nothing: a memory made only from
    episodes of the recent lane, and the heuristic compiler's session summaries
    (``restates_turns``), whose sentences are turns the lane ranks on their own. Those
    summaries took 9 % of the tokens packed at 250 and 21 % at 1,000 on the held-out recall
    sets; without them more questions were recalled there and on LoCoMo, none fewer
    (docs/benchmarks.md, session 18)."""

    def __init__(
        self,
        tx: UnitOfWork,
        tenant_id: str,
        scope: Scope,
        ranking: Ranking,
        tokenizer: Tokenizer,
        exclude_episodes: set[uuid.UUID],
    ) -> None:
        self._tx, self._tenant_id, self._scope = tx, tenant_id, scope
        self._ranking = ranking
        self._unread: list[int] = list(ranking.order)
        self._tokenizer = tokenizer
        self._exclude = exclude_episodes
        self.items: list[ContextItem] = []
        self.memories: dict[str, Memory] = {}

    @property
    def unread(self) -> int:
        return len(self._unread)

    def best_unread(self) -> float:
        """The score of the best memory not read yet (ranked first among them); 0 when every
        one is read."""
        return self._ranking.final[self._unread[0]] if self._unread else 0.0

    def read(self, n: int) -> None:
        """Read the next ``n`` ranked memories into ``items`` and ``memories``."""
        take, self._unread = self._unread[:n], self._unread[n:]
        for s in self._ranking.results(self._tx, self._tenant_id, self._scope, take):
            m = s.memory
            ids = m.source_episode_ids
            if (self._exclude and ids and set(ids) <= self._exclude) or restates_turns(m):
                continue
            item = memory_item(m, s.score, self._tokenizer)
            self.items.append(item)
            self.memories[item.id] = m


def long_term_lane(
    store: Store,
    tenant_id: str,
    scope: Scope,
    query: str,
    limit: int,
    tokenizer: Tokenizer,
    *,
    tx: UnitOfWork,
    embedder: Any = None,
    exclude_episodes: set[uuid.UUID],
    caches: SearchCaches | None = None,
) -> LongTermLane | None:
    """The ``limit`` memories the search ranks best for ``query``, none read yet (None when
    there is nothing to search: no query, no search engine, or ``limit`` 0). ``caches`` are
    the search's (``SearchCaches``); ``tx`` the read the ranking and the reads happen in."""
    rank = rank_function()
    if rank is None or not query or limit <= 0:
        return None
    kwargs: dict[str, Any] = {"limit": limit, "tx": tx}
    if embedder is not None:
        kwargs["embedder"] = embedder
    if caches is not None:
        kwargs["caches"] = caches
    ranking = rank(store, tenant_id, scope, query, **kwargs)
    return LongTermLane(tx, tenant_id, scope, ranking, tokenizer, exclude_episodes)


def chunk_items(
    repos: Repos,
    tenant_id: str,
    scope: Scope,
    dataset_ids: Sequence[str],
    query: str,
    limit: int,
) -> tuple[list[ContextItem], dict[str, ChunkRow]]:
    """Chunks of the named datasets that match ``query``, ranked as memories are (the same
    terms, ``cairn.engine.query``, and calibration, ``cairn.engine.ranking``)."""
    if not dataset_ids:  # no dataset named: nothing to analyse the query for
        return [], {}
    rows = repos.documents.search_chunks(
        tenant_id, scope, dataset_ids, ranking_terms(query), limit=limit
    )
    scores = calibrate(((r.id, r.score) for r in rows), CHUNK_HALF)
    items, sources = [], {}
    for r in rows:
        item = ContextItem(
            id=str(r.id),
            kind="document_chunk",
            content=r.content,
            score=scores[r.id],
            source_class="long_term",
            token_count=r.token_count,
            created_at=r.created_at,
            provenance=[
                SourceRef(
                    type="chunk", id=str(r.id), document_id=r.document_id, dataset_id=r.dataset_id
                )
            ],
            metadata={
                "dataset_id": r.dataset_id,
                "document_id": r.document_id,
                "ordinal": r.ordinal,
            },
        )
        items.append(item)
        sources[item.id] = r
    return items, sources


def summary_items(
    repos: Repos,
    tenant_id: str,
    scope: Scope,
    conversation_id: str,
    score: float,
    limit: int,
    tokenizer: Tokenizer,
    exclude_episodes: set[uuid.UUID] | None = None,
) -> tuple[list[ContextItem], dict[str, Memory]]:
    """The newest active summary memories of the conversation, at a fixed lane score; not a
    summary made only from ``exclude_episodes`` (the recent lane's turns, shown whole: it
    repeated them, word for word in the heuristic compiler's summaries)."""
    if not conversation_id or limit <= 0:
        return [], {}
    found = repos.memories.active_of_session(
        tenant_id, scope, conversation_id, sorted(SUMMARY_KINDS), limit
    )
    if exclude_episodes:
        found = [
            m
            for m in found
            if not (m.source_episode_ids and set(m.source_episode_ids) <= exclude_episodes)
        ]
    items = [memory_item(m, score, tokenizer, "summary") for m in found]
    return items, {i.id: m for i, m in zip(items, found, strict=True)}
