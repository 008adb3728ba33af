"""Search memories of one partition: lexical and vector lanes, calibrated to [0, 1], fused.

- **lexical**: the backend's full-text index (SQLite FTS5 BM25 / PostgreSQL ``ts_rank``) over
  the query's terms, OR-ed (see ``cairn.engine.query``). Beside a vector lane (the partition
  has vectors) each raw score is scaled by the share of the query's IDF the match holds
  (``cairn.store.fts5_rank.coordination``): meaning carries a paraphrase, so words reward
  matching all of the question; alone, lexical search keeps BM25's partial matches, which
  coordination cost 1 to 3 points on every set (docs/benchmarks.md). The raw score is calibrated by
  ``cairn.engine.ranking`` (``s / (s + 6)`` on BM25's scale): monotone, 0 for no match,
  approaching 1 for strong matches.
- **vector**: cosine similarity between the query's embedding and each memory's, over all
  vectors of the partition, held in a per-partition matrix refreshed when vectors change
  (exact below 4,096 memories, to within about 0.003 above: ``cairn.engine.int8_dots``);
  calibrated as ``max(0, cos)``.
- **fusion**: a weighted mean of the lane scores a memory has (lexical 0.7, vector 0.3; for a
  query outside English script with a multilingual embedder 0.4 / 0.6, ``lane_weights``; a
  lane that did not return it counts 0; a memory whose vector is not written yet is averaged
  over the lanes that could see it), so the result stays in [0, 1], times the memory's
  confidence. When the query names a speaker of the partition, memories not said by that
  speaker are discounted (``OTHER_SPEAKER_WEIGHT``). Ties break by ``seq`` (older first), so
  the same corpus and query always give the same order.

The caches (partition matrices, query embeddings) and the helper threads that embed a query
while the lexical lane runs belong to a ``SearchCaches``, which ``Services`` builds and closes;
a search without one (a script, a test) caches nothing and starts no thread.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from cairn.core.ids import utcnow
from cairn.core.languages import english_text
from cairn.core.memories import Memory
from cairn.core.scope import Scope
from cairn.engine.embedders import Embedder
from cairn.engine.embedders import query_vector as vector_of_query
from cairn.engine.fusion import fuse
from cairn.engine.int8_dots import Int8Dots
from cairn.engine.query import named_speakers, ranking_terms
from cairn.engine.ranking import MEMORY_HALF, calibrate
from cairn.engine.search_caches import SearchCaches
from cairn.engine.vectors import VectorIndex, _Matrix, without_vectors
from cairn.errors import InvalidInput
from cairn.store import Store

if TYPE_CHECKING:
    from cairn.store import UnitOfWork

DEFAULT_WEIGHTS = {"lexical": 0.7, "vector": 0.3}
# A query outside English script, with a multilingual embedder: the lexical analysis of those
# languages is weaker (no stemming; CJK bigrams; Arabic clitics stay attached) while the model
# was trained across them, so the vector lane leads.
MULTILINGUAL_WEIGHTS = {"lexical": 0.4, "vector": 0.6}
# ``seq → (confidence, status, kind, speaker)``: what ranking reads of a candidate.
Facts = dict[int, tuple[float, str, str, str]]


@dataclass(frozen=True)
class ScoredMemory:
    """A search result: the memory, its fused score in [0, 1] (larger is better) and the
    calibrated score of each lane that saw it."""

    memory: Memory
    score: float
    lanes: dict[str, float] = field(default_factory=dict)


def lexical_lane(
    repos: Any,
    tenant_id: str,
    scope: Scope,
    query: str,
    *,
    pool: int,
    kinds: Sequence[str] | None,
    include_superseded: bool,
    facts: Facts | None = None,
    coordinate: bool = False,
) -> dict[int, float]:
    """``seq → calibrated lexical score`` for the best ``pool`` matches; ``repos`` is a
    ``Store`` or a unit of work. ``facts``, if given, gets the matches' ranking facts (as
    ``rank_facts`` reads them). ``coordinate``: scores scaled by the share of the query a
    match holds (beside a vector lane: see ``search_memories``)."""
    raw = repos.memories.lexical(
        tenant_id,
        scope,
        ranking_terms(query),
        limit=pool,
        kinds=kinds,
        include_superseded=include_superseded,
        facts=facts,
        coordinate=coordinate,
    )
    return calibrate(raw, MEMORY_HALF)


# --------------------------------------------------------------------------- vectors


def vector_lane(
    query: str,
    embedder: Embedder,
    matrix: _Matrix,
    dots: Int8Dots,
    *,
    pool: int,
    query_vector: Callable[[], np.ndarray] | None = None,
) -> dict[int, float]:
    """``seq → max(0, cosine)`` for the ``pool`` nearest memories of the partition whose
    ``matrix`` is given (any status or kind: the caller filters); ``dots`` scores a coded
    matrix (the index's that read it); ``query_vector`` waits for an embedding already under
    way. A partition without vectors embeds nothing."""
    if not len(matrix.seqs):
        return {}
    if query_vector is not None:
        q = query_vector()
    else:
        q = np.asarray(vector_of_query(embedder, query), dtype="<f4")
    if q.shape[0] != matrix.dim:
        return {}  # vectors of another model: re-embed (cairn embeds on compile)
    nearest = matrix.nearest(q, pool, dots)
    return {seq: max(0.0, min(1.0, sim)) for seq, sim in nearest.items()}


EMBED_CONTEXT = True


def embedding_text(content: str, metadata: dict[str, Any]) -> str:
    """What is embedded for a memory: its content, plus (for turns) the words of the
    neighbouring messages the compiler indexed, so a reply sits near its question. (For e5,
    leaving them out halves the tokens and kept recall on Cairn's own sets, but lost 1 point
    of LoCoMo at 250 and 4,000 tokens: docs/benchmarks.md, "Session 31".)"""
    context = metadata.get("context_terms") if EMBED_CONTEXT else None
    return f"{content} ({context})" if context else content


# How long a batch of memories to embed stays claimed by the process embedding it: far
# longer than a batch takes (a second or two); should that process die, another takes the
# batch when the claim runs out.
EMBED_CLAIM = timedelta(seconds=120)


def embed_memories(
    store: Store,
    embedder: Embedder,
    tenant_id: str,
    scope: Scope,
    batch: int = 256,
    max_batches: int | None = None,
) -> int:
    """Embed the partition's memories that have no vector yet (at most ``max_batches``
    batches of ``batch``); returns how many. Each batch is claimed first (for
    ``EMBED_CLAIM``): another process of a fleet embedding the same partition takes the
    next batch, not the same one."""
    done = 0
    for _ in range(max_batches) if max_batches is not None else itertools.count():
        with store.transaction() as tx:
            todo = tx.memories.claim_waiting(tenant_id, scope, batch, utcnow(), EMBED_CLAIM)
        if not todo:
            return done
        vectors = embedder.embed([embedding_text(content, meta) for _, content, meta in todo])
        stored = _store_vectors(store, tenant_id, scope, todo, vectors)
        if not stored:
            # Every row changed since it was read, or another pass holds it: leave them to
            # the background pass rather than embed the same batch again at once.
            return done
        done += stored
    return done


def embed_memory(store: Store, embedder: Embedder, tenant_id: str, memory: Memory) -> None:
    """Give one stored memory its vector now (a correction's new version)."""
    vectors = embedder.embed([embedding_text(memory.content, memory.metadata)])
    _store_vectors(
        store, tenant_id, memory.scope, [(memory.seq, memory.content, memory.metadata)], vectors
    )


def _store_vectors(
    store: Store,
    tenant_id: str,
    scope: Scope,
    rows: list[tuple[int, str, dict[str, Any]]],
    vectors: list[list[float]],
) -> int:
    """Store the vectors of ``(seq, content, metadata)`` rows, each only if the row still
    says what it was computed from (``set_embeddings``'s ``made_from``); how many were."""
    blobs = [np.asarray(v, dtype="<f4").tobytes() for v in vectors]
    made_from = {
        seq: (content, str(meta.get("context_terms") or "")) for seq, content, meta in rows
    }
    items = [(row[0], blob) for row, blob in zip(rows, blobs, strict=True)]
    with store.transaction() as tx:
        stored = tx.memories.set_embeddings(tenant_id, scope, items, made_from=made_from)
        if stored < len(items):  # (those stored left the waiting list)
            tx.memories.release_claims([seq for seq, _ in items])
        return stored


# --------------------------------------------------------------------------- search

# Absolute: every lane's calibrated score keeps its meaning (no per-query rescaling).
FUSION = "weighted"
# The lexical lane is coordinated (each BM25 score scaled by the share of the query the row
# holds) only beside a vector lane that has seen at least this share of the partition: with
# vectors for few of its memories (a big compile whose vectors are still being written),
# coordinated BM25 is the weaker ranking and the vector lane cannot make up for it
# (docs/benchmarks.md, session 16: vectors for 30 % of the memories, recall at 1,000 tokens
# 0.894 coordinated against 0.913 plain on LoCoMo, 0.828 against 0.857 on held-out sets; at
# 60 % a draw; with every vector, coordination wins by 0.006 and 0.017). At least 0.5
# (``VectorIndex`` counts unembedded rows up to the number embedded).
COORDINATE_COVERAGE = 0.5
# A query that names a speaker of the partition ("What did Caroline paint?") is most often
# answered by what that person said: other memories (other speakers' turns, summaries, facts
# of no one) keep this share of their score. A discount, not a boost, so scores stay in [0, 1]
# and a memory of the named speaker keeps exactly the score it would have had.
OTHER_SPEAKER_WEIGHT = 1 / 1.2
# Below ``_floor``'s bound: scores multiplied in another order may differ in the last bits.
FLOOR_MARGIN = 1e-9


@dataclass(frozen=True)
class Ranking:
    """A search's order before any memory is read: ``order`` the seqs best first, ``final``
    their fused scores, ``scores`` each lane's calibrated scores. ``results`` reads what a
    caller needs of it, so a caller that uses only the first few (context packing) reads
    only those (``cairn.engine.context.lanes.LongTermLane``)."""

    order: list[int]
    final: dict[int, float]
    scores: dict[str, dict[int, float]]
    lanes: list[str]

    def results(
        self, tx: UnitOfWork, tenant_id: str, scope: Scope, seqs: Sequence[int]
    ) -> list[ScoredMemory]:
        """``seqs`` (of ``order``) as results, read in ``tx``; a memory deleted since the
        ranking is left out."""
        found = tx.memories.by_seqs(tenant_id, scope, list(seqs))
        return [
            _scored(found[seq], self.final[seq], self.scores, self.lanes)
            for seq in seqs
            if seq in found
        ]


def search_memories(
    store: Store,
    tenant_id: str,
    scope: Scope,
    query: str,
    *,
    limit: int = 20,
    kinds: list[str] | None = None,
    include_superseded: bool = False,
    embedder: Embedder | None = None,
    lanes: Sequence[str] | None = None,
    weights: dict[str, float] | None = None,
    pool: int | None = None,
    caches: SearchCaches | None = None,
    tx: UnitOfWork | None = None,
) -> list[ScoredMemory]:
    """The ``limit`` memories of one partition that best match ``query``, best first.

    Lanes default to lexical, plus vector when an ``embedder`` is given; pass
    ``lanes=["vector"]`` for semantic-only search. ``caches`` (the process's) keep partition
    matrices and query embeddings; ``tx``: a read of ``store`` to search in, or its own."""
    if limit <= 0:
        return []
    with nullcontext(tx) if tx is not None else store.snapshot() as tx:
        ranking = rank_memories(
            store,
            tenant_id,
            scope,
            query,
            limit=limit,
            kinds=kinds,
            include_superseded=include_superseded,
            embedder=embedder,
            lanes=lanes,
            weights=weights,
            pool=pool,
            caches=caches,
            tx=tx,
        )
        return ranking.results(tx, tenant_id, scope, ranking.order)


def rank_memories(
    store: Store,
    tenant_id: str,
    scope: Scope,
    query: str,
    *,
    limit: int,
    tx: UnitOfWork,
    kinds: list[str] | None = None,
    include_superseded: bool = False,
    embedder: Embedder | None = None,
    lanes: Sequence[str] | None = None,
    weights: dict[str, float] | None = None,
    pool: int | None = None,
    caches: SearchCaches | None = None,
) -> Ranking:
    """``search_memories`` up to reading the memories: the ``limit`` best seqs and their
    scores, in ``tx``."""
    lanes = _pick_lanes(lanes, embedder)
    weights = weights or lane_weights(embedder, query)
    pool = pool or max(limit * 2, 50)
    allowed = {"active", "superseded"} if include_superseded else {"active"}
    matrix = query_vector = None
    vectors = caches.vectors if caches is not None else VectorIndex(1)
    if "vector" in lanes:
        matrix = vectors.matrix(store, tx, tenant_id, scope)
        if caches is not None and len(matrix.seqs):
            assert embedder is not None
            if getattr(embedder, "overlap", False):
                # A CPU model (the slow part of hybrid search) embeds the query while the
                # lexical lane runs.
                query_vector = caches.queries.prefetch(tenant_id, embedder, query)
            else:
                query_vector = partial(caches.queries.get, tenant_id, embedder, query)
    scores: dict[str, dict[int, float]] = {}
    known: Facts = {}  # the lexical lane's rows come with their facts
    if "lexical" in lanes:
        scores["lexical"] = lexical_lane(
            tx,
            tenant_id,
            scope,
            query,
            pool=pool,
            kinds=kinds,
            include_superseded=include_superseded,
            facts=known,
            coordinate=matrix is not None and matrix.covers(COORDINATE_COVERAGE),
        )
    if "vector" in lanes:
        assert embedder is not None and matrix is not None
        scores["vector"] = vector_lane(
            query,
            embedder,
            matrix,
            vectors.dots,
            pool=pool * 2,
            query_vector=query_vector,
        )
    fused = fuse(scores, lanes, weights, FUSION, _unseen(scores, matrix, caches, tenant_id, scope))
    wanted = _Wanted(query, limit, allowed, kinds, matrix)
    facts, named = _ranking_facts(tx, tenant_id, scope, fused, known, wanted)
    final = _final_scores(fused, facts, allowed, kinds, named)
    order = sorted(final, key=lambda seq: (-final[seq], seq))[:limit]
    return Ranking(order, {seq: final[seq] for seq in order}, scores, lanes)


def _scored(
    memory: Memory, score: float, scores: dict[str, dict[int, float]], lanes: Sequence[str]
) -> ScoredMemory:
    """A result: the fused score and each lane's, rounded to six decimals."""
    return ScoredMemory(
        memory=memory,
        score=round(score, 6),
        lanes={lane: round(scores[lane].get(memory.seq, 0.0), 6) for lane in lanes},
    )


def lane_weights(embedder: Embedder | None, query: str) -> dict[str, float]:
    """The default lane weights for ``query``: ``MULTILINGUAL_WEIGHTS`` when the embedder is
    multilingual and the query is not English (``english_text``), else ``DEFAULT_WEIGHTS``."""
    if not english_text(query) and getattr(embedder, "multilingual", False):
        return MULTILINGUAL_WEIGHTS
    return DEFAULT_WEIGHTS


@dataclass(frozen=True)
class _Wanted:
    """What a ranking keeps: ``limit`` memories of the ``allowed`` statuses and ``kinds`` for
    ``query``; ``matrix``: the vector lane's (its rows' speakers)."""

    query: str
    limit: int
    allowed: set[str]
    kinds: list[str] | None
    matrix: _Matrix | None


def _ranking_facts(
    tx: UnitOfWork,
    tenant_id: str,
    scope: Scope,
    fused: dict[int, float],
    known: Facts,
    wanted: _Wanted,
) -> tuple[Facts, set[str]]:
    """The ranking facts of the candidates that may rank among the first ``wanted.limit``,
    and the speakers the query names. The lexical lane's rows came with their facts; of the
    others (the vector lane's, some 300 a request, read by key: 1.5 ms at 10,000 memories on
    SQLite, 3.3 on PostgreSQL) only those whose fused score reaches ``_floor`` are read, as a
    final score is at most the fused one. The result is the same as reading every one: should
    the speakers of the rows left unread (``matrix.speakers``, a superset) let the query name
    someone the rows read do not, the rest are read too."""
    speakers = wanted.matrix.speakers if wanted.matrix is not None else None
    missing = [seq for seq in fused if seq not in known]
    floor = 0.0
    if speakers is not None and missing:
        named = named_speakers(wanted.query, {got[3] for got in known.values()})
        floor = _floor(fused, known, wanted, named)
    read = [seq for seq in missing if max(0.0, fused[seq]) >= floor]
    facts = {**known, **tx.memories.rank_facts(tenant_id, scope, read)}
    named = named_speakers(wanted.query, {got[3] for got in facts.values()})
    if len(read) < len(missing):
        assert speakers is not None
        everyone = speakers | {got[3] for got in facts.values()}
        if named_speakers(wanted.query, everyone) != named:
            rest = [seq for seq in missing if max(0.0, fused[seq]) < floor]
            facts.update(tx.memories.rank_facts(tenant_id, scope, rest))
            named = named_speakers(wanted.query, {got[3] for got in facts.values()})
    return facts, named


def _floor(fused: dict[int, float], known: Facts, wanted: _Wanted, named: set[str]) -> float:
    """A score below which no candidate can rank among the first ``wanted.limit``: the
    ``limit``-th best final score of the candidates whose facts are ``known`` (more
    candidates only raise it), times ``OTHER_SPEAKER_WEIGHT`` while the query names no
    speaker among them (one named later discounts the others), less a margin for the order in
    which the factors were multiplied; 0 when there are fewer. A candidate's final score is at
    most its fused score, or 0 when that is negative: a confidence and a discount are at most
    1 (an import checks the confidence), and the final score is clamped to [0, 1]."""
    scored = {seq: fused[seq] for seq in known if seq in fused}
    finals = _final_scores(scored, known, wanted.allowed, wanted.kinds, named)
    if len(finals) < wanted.limit:
        return 0.0
    best = heapq.nlargest(wanted.limit, finals.values())[-1]
    return (best if named else best * OTHER_SPEAKER_WEIGHT) - FLOOR_MARGIN


def _unseen(
    scores: dict[str, dict[int, float]],
    matrix: _Matrix | None,
    caches: SearchCaches | None,
    tenant_id: str,
    scope: Scope,
) -> dict[str, Collection[int]]:
    """Per lane, the candidates it could not see: for the vector lane, those without a vector
    yet (all of them when the lane found nothing), so they are ranked by the other lanes. When
    there are some, the caches' ``on_missing_vectors`` hears of the partition."""
    if "vector" not in scores:
        return {}
    candidates = set(scores.get("lexical", {})) | set(scores["vector"])
    blind = without_vectors(matrix, candidates) if scores["vector"] else candidates
    if blind and caches is not None and caches.on_missing_vectors is not None:
        caches.on_missing_vectors(tenant_id, scope)
    return {"vector": blind}


def _pick_lanes(lanes: Sequence[str] | None, embedder: Any) -> list[str]:
    """The lanes asked for; by default lexical, plus vector when there is an embedder."""
    picked = (
        list(lanes)
        if lanes is not None
        else (["lexical", "vector"] if embedder is not None else ["lexical"])
    )
    if "vector" in picked and embedder is None:
        raise InvalidInput(
            "semantic search needs an embedder: CAIRN_EMBEDDER is none (use e5, the default)",
            code="embedder_not_configured",
        )
    return picked


def _final_scores(
    fused: dict[int, float],
    facts: dict[int, tuple[float, str, str, str]],
    allowed: set[str],
    kinds: list[str] | None,
    named: set[str],
) -> dict[int, float]:
    """Relevance times confidence, in [0, 1]: a verbatim turn (1.0) outranks an equally
    relevant extracted fact or summary. Status and kind filters apply to the vector lane
    here (the lexical lane filtered in its query). When the query ``named`` speakers of the
    partition, what others said is discounted by ``OTHER_SPEAKER_WEIGHT``."""
    final: dict[int, float] = {}
    for seq, value in fused.items():
        got = facts.get(seq)
        if got is None or got[1] not in allowed or (kinds and got[2] not in kinds):
            continue
        if named and got[3] not in named:
            value *= OTHER_SPEAKER_WEIGHT
        final[seq] = max(0.0, min(1.0, value * got[0]))
    return final
