"""``search_memories`` on both backends: lanes, calibration, fusion, filters, isolation."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine import search as search_module
from cairn.engine import vectors as vectors_module
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.query import named_speakers, query_terms
from cairn.engine.search import ScoredMemory, embed_memories, search_memories
from cairn.engine.search_caches import SearchCaches
from cairn.store import Store

TENANT = "t1"
TEXTS = [
    ("Ann", "I adopted a golden retriever puppy named Max last spring."),
    ("Ben", "We went hiking in the Rocky Mountains in July 2022."),
    ("Ann", "My sister is a nurse at the city hospital."),
    ("Ben", "I started pottery classes, the clay bowls came out great."),
    ("Ann", "I work at Acme Corp."),
    ("Ann", "I work at Globex now."),
]


def compile_turns(
    store: Store,
    scope: Scope,
    turns: list[tuple[str, str]],
    step: timedelta = timedelta(days=1),
    tenant: str = TENANT,
) -> None:
    """One conversation turn per ``(speaker, text)``, ``step`` apart from 2023-05-01, compiled."""
    t0 = datetime(2023, 5, 1, tzinfo=UTC)
    store.episodes.append_many(
        tenant,
        [
            NewEpisode(
                scope=scope,
                source="t",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "name": n, "content": text}]},
                occurred_at=t0 + step * i,
            )
            for i, (n, text) in enumerate(turns)
        ],
    )
    compile_scope(store, tenant, scope)


def seed(store: Store, subject: str = "s", tenant: str = TENANT) -> Scope:
    scope = Scope.for_subject(subject)
    compile_turns(store, scope, TEXTS, tenant=tenant)
    return scope


def test_lexical_ranks_the_matching_turn_first(store: Store) -> None:
    scope = seed(store)
    results = search_memories(store, TENANT, scope, "What is the name of Ann's puppy?")
    assert results and isinstance(results[0], ScoredMemory)
    assert "puppy" in results[0].memory.content
    assert set(results[0].lanes) == {"lexical"}
    assert all(0.0 <= r.score <= 1.0 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_stemming_and_stop_words(store: Store) -> None:
    scope = seed(store)
    results = search_memories(store, TENANT, scope, "Where did they hike?", kinds=["turn"])
    assert "hiking" in results[0].memory.content
    assert query_terms("What did you do?") == ["what", "did", "you", "do"]  # nothing else left
    assert query_terms("When did Ben go hiking in 2022?") == ["ben", "go", "hiking", "2022"]


def test_superseded_excluded_unless_asked(store: Store) -> None:
    scope = seed(store)
    plain = search_memories(store, TENANT, scope, "Ann works at", kinds=["profile_fact"])
    assert [r.memory.content for r in plain] == ["Ann works at Globex"]
    both = search_memories(
        store, TENANT, scope, "Ann works at", kinds=["profile_fact"], include_superseded=True
    )
    assert {r.memory.content for r in both} == {"Ann works at Globex", "Ann works at Acme Corp"}


def test_partitions_never_mix(store: Store) -> None:
    seed(store, "a")
    other = Scope(runtime_id="default", user_id="a", agent_id="bot")
    assert search_memories(store, TENANT, other, "puppy") == []
    assert search_memories(store, "tenant-2", Scope.for_subject("a"), "puppy") == []


def test_ties_break_deterministically(store: Store) -> None:
    scope = seed(store)
    first = search_memories(store, TENANT, scope, "Ann", limit=50)
    for _ in range(3):
        again = search_memories(store, TENANT, scope, "Ann", limit=50)
        assert [r.memory.id for r in again] == [r.memory.id for r in first]


def test_vector_and_hybrid_lanes_with_a_deterministic_embedder(store: Store) -> None:
    scope = Scope.for_subject("v")
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(scope=scope, source="t", type="note", payload={"text": text})
            for _, text in TEXTS
        ],
    )
    compile_scope(store, TENANT, scope)
    emb = HashingEmbedder()
    assert embed_memories(store, emb, TENANT, scope) > 0
    assert embed_memories(store, emb, TENANT, scope) == 0  # all have vectors now
    semantic = search_memories(
        store, TENANT, scope, "clay bowls pottery", embedder=emb, lanes=["vector"]
    )
    assert "pottery" in semantic[0].memory.content
    assert set(semantic[0].lanes) == {"vector"}
    hybrid = search_memories(store, TENANT, scope, "clay bowls pottery", embedder=emb)
    assert set(hybrid[0].lanes) == {"lexical", "vector"}
    assert "pottery" in hybrid[0].memory.content
    assert all(0.0 <= r.score <= 1.0 and all(0 <= v <= 1 for v in r.lanes.values()) for r in hybrid)
    # New memories are seen by the cached vector index.
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(
                scope=scope, source="t", type="note", payload={"text": "Zebra crossing stripes."}
            )
        ],
    )
    compile_scope(store, TENANT, scope, embedder=emb)
    found = search_memories(store, TENANT, scope, "zebra stripes", embedder=emb, lanes=["vector"])
    assert "Zebra" in found[0].memory.content


def test_semantic_without_embedder_is_a_clear_error(store: Store) -> None:
    import pytest

    from cairn.errors import InvalidInput

    scope = seed(store)
    with pytest.raises(InvalidInput) as err:
        search_memories(store, TENANT, scope, "x", lanes=["vector"])
    assert err.value.code == "embedder_not_configured"


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=80))
def check_any_query_is_safe_and_scores_stay_in_range(query: str) -> None:
    # Arbitrary text (quotes, operators, NUL-free unicode) never breaks the FTS syntax.
    results = search_memories(_STORE["s"], TENANT, _STORE["scope"], query.replace("\x00", ""))
    assert all(0.0 <= r.score <= 1.0 for r in results)


_STORE: dict[str, object] = {}


def test_fuzz_queries(store: Store) -> None:
    _STORE["s"], _STORE["scope"] = store, seed(store)
    try:
        check_any_query_is_safe_and_scores_stay_in_range()
    finally:
        _STORE.clear()


class _Recording(HashingEmbedder):
    """Records the thread of each call; ``fail`` makes every call raise."""

    def __init__(self, overlap: bool, fail: bool = False) -> None:
        super().__init__()
        self.name = f"recording-{overlap}-{fail}"
        self.overlap = overlap
        self.fail = fail
        self.threads: list[str] = []

    def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        import threading

        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise RuntimeError("embedding service unreachable")
        return super().embed(texts)


def test_a_partition_without_vectors_embeds_no_query(store: Store) -> None:
    """Hybrid search of a partition compiled without an embedder is its lexical lane: the
    query is not embedded, so an embedder that is down changes nothing."""
    scope = seed(store)
    down = _Recording(overlap=True, fail=True)
    found = search_memories(store, TENANT, scope, "golden retriever puppy", embedder=down)
    assert found and "retriever" in found[0].memory.content and down.threads == []


def test_only_an_overlapping_embedder_runs_on_the_helper_thread(store: Store) -> None:
    """With caches (a server's), an overlapping embedder embeds the query on the caches'
    helper thread, which ends when they close; without caches nothing leaves the caller's
    thread."""
    import threading

    scope = seed(store)
    embed_memories(store, HashingEmbedder(), TENANT, scope)
    caches = SearchCaches()
    try:
        for overlap in (False, True):
            emb = _Recording(overlap=overlap)
            emb.name = HashingEmbedder().name  # the stored vectors' model: the lane runs
            query = f"pottery clay bowls {uuid.uuid4().hex}"  # not in the query cache
            search_memories(store, TENANT, scope, query, embedder=emb, caches=caches)
            assert len(emb.threads) == 1
            assert emb.threads[0].startswith("cairn-query-embed") is overlap
        alone = _Recording(overlap=True)
        alone.name = HashingEmbedder().name
        search_memories(store, TENANT, scope, "pottery clay bowls", embedder=alone)
        assert alone.threads == [threading.current_thread().name]
    finally:
        caches.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("cairn-query-embed")]


def seed_two_speakers(store: Store) -> Scope:
    scope = Scope.for_subject("pottery")
    texts = [
        ("Ann", "Ben and I love pottery: pottery class, pottery wheel, pottery every week."),
        ("Ben", "I tried a pottery class once with Ann, at the studio downtown."),
        ("Ann", "The weather was lovely today."),
    ]
    compile_turns(store, scope, texts)
    return scope


def test_a_named_speaker_keeps_full_score_and_others_are_discounted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query naming a speaker of the partition discounts every memory that speaker did not
    say by ``OTHER_SPEAKER_WEIGHT``; the named speaker's memories keep their score, and a
    query that names no one is unchanged."""
    scope = seed_two_speakers(store)

    def scores(query: str) -> dict[str, float]:
        found = search_memories(store, TENANT, scope, query, limit=50)
        return {r.memory.content: r.score for r in found}

    named = "Did Ben enjoy the pottery class?"
    monkeypatch.setattr(search_module, "OTHER_SPEAKER_WEIGHT", 1.0)
    flat, flat_none = scores(named), scores("pottery class")
    monkeypatch.undo()
    discounted, none = scores(named), scores("pottery class")
    assert none == flat_none  # no speaker named: nothing changes
    assert set(discounted) == set(flat) and len(flat) >= 2
    for content, score in flat.items():
        factor = 1.0 if content.startswith("Ben:") else search_module.OTHER_SPEAKER_WEIGHT
        assert abs(discounted[content] - score * factor) <= 2e-6, content
    # Ann's turn says "pottery" four times and names Ben too: it leads (by about a tenth on
    # both backends); discounted, what Ben said comes first.
    assert next(iter(flat)).startswith("Ann: Ben and I love pottery")
    assert next(iter(discounted)).startswith("Ben: I tried a pottery class")


def test_role_labels_and_partial_names_are_not_speakers() -> None:
    assert named_speakers("What does the user like?", ["user", "assistant"]) == set()
    assert named_speakers("Is Samantha coming?", ["Sam"]) == set()
    assert named_speakers("What did Caroline's mom say?", ["Caroline", "Mel"]) == {"Caroline"}
    assert named_speakers("林晓住在哪里?", ["林晓", "王浩"]) == {"林晓"}
    assert named_speakers("Что Лену беспокоит?", ["Лена", "Йонас"]) == {"Лена"}
    assert named_speakers("Wo arbeitet Jonas jetzt?", ["Lena", "Jonas"]) == {"Jonas"}


def _compile_notes(store: Store, scope: Scope, texts: list[str]) -> None:
    """One note episode per text, compiled."""
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(scope=scope, source="t", type="note", payload={"text": text})
            for text in texts
        ],
    )
    compile_scope(store, TENANT, scope)


def test_a_memory_without_a_vector_yet_is_ranked_by_the_lexical_lane_alone(
    store: Store,
) -> None:
    """While the background pass has embedded only part of a partition, a memory it has not
    reached scores its lexical score (the weighted mean over the lanes that saw it), not 0.7
    of it; an embedded memory keeps the weighted mean of both lanes."""
    scope = Scope.for_subject("partial")
    texts = [f"Pottery note {i}: the clay bowls came out {w}." for i, w in enumerate("abcdef")]
    _compile_notes(store, scope, texts)
    emb = HashingEmbedder()
    assert embed_memories(store, emb, TENANT, scope, batch=2, max_batches=1) == 2
    found = search_memories(store, TENANT, scope, "pottery clay bowls", embedder=emb, limit=10)
    with store.snapshot() as tx:
        embedded = set(tx.memories.vectors(TENANT, scope).seqs)
    assert len(found) == len(texts)
    w = search_module.DEFAULT_WEIGHTS
    for r in found:
        lex, vec = r.lanes["lexical"], r.lanes["vector"]
        if r.memory.seq in embedded:
            expected = (w["lexical"] * lex + w["vector"] * vec) / (w["lexical"] + w["vector"])
        else:
            assert vec == 0.0
            expected = lex
        assert abs(r.score - expected * r.memory.confidence) <= 2e-6, r.memory.content


class _MultilingualHashing(HashingEmbedder):
    multilingual = True


def test_lane_weights_let_a_multilingual_model_lead_outside_english_script() -> None:
    """With a multilingual embedder, a query whose letters are not all ASCII weighs the vector
    lane more; English-script queries, and every query of an English-only embedder, keep the
    default weights."""
    multi, english = _MultilingualHashing(), HashingEmbedder()
    lane_weights = search_module.lane_weights
    for query in (
        "Где сейчас работает Лена?",
        "王浩的猫叫什么名字",
        "Wovor fürchtet sich Jonas?",
    ):
        assert lane_weights(multi, query) == search_module.MULTILINGUAL_WEIGHTS
        assert lane_weights(english, query) == search_module.DEFAULT_WEIGHTS
        assert lane_weights(None, query) == search_module.DEFAULT_WEIGHTS
    assert lane_weights(multi, "Where does Maya work now? 🙂") == search_module.DEFAULT_WEIGHTS
    assert search_module.MULTILINGUAL_WEIGHTS["vector"] > search_module.DEFAULT_WEIGHTS["vector"]


def test_a_non_english_query_fuses_with_the_multilingual_weights(store: Store) -> None:
    """Every hybrid score of a Russian query over a multilingual embedder is the weighted mean
    of its lanes with ``MULTILINGUAL_WEIGHTS``, times the memory's confidence."""
    scope = Scope.for_subject("ru")
    texts = [f"Заметка {i}: глиняные миски получились {w}." for i, w in enumerate("абвгде")]
    _compile_notes(store, scope, texts)
    emb = _MultilingualHashing()
    embed_memories(store, emb, TENANT, scope)
    found = search_memories(store, TENANT, scope, "глиняные миски", embedder=emb, limit=10)
    assert len(found) == len(texts)
    w, d = search_module.MULTILINGUAL_WEIGHTS, search_module.DEFAULT_WEIGHTS
    differs = 0
    for r in found:
        lex, vec = r.lanes["lexical"], r.lanes["vector"]
        expected = (w["lexical"] * lex + w["vector"] * vec) / (w["lexical"] + w["vector"])
        assert abs(r.score - expected * r.memory.confidence) <= 2e-6, r.memory.content
        default = (d["lexical"] * lex + d["vector"] * vec) / (d["lexical"] + d["vector"])
        differs += abs(r.score - default * r.memory.confidence) > 1e-3
    assert differs  # the weights made a difference


def test_a_partition_matrix_is_its_vectors_row_by_row() -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    rows = [rng.standard_normal(8).astype("<f4") for _ in range(5)]
    matrix = vectors_module._stacked([r.tobytes() for r in rows])
    assert matrix.shape == (5, 8) and matrix.dtype == np.dtype("<f4")
    assert all(np.array_equal(matrix[i], rows[i]) for i in range(5))
    assert vectors_module._stacked([]).shape == (0, 0)
    # Vectors of two models in one partition are refused, never reshaped into wrong rows.
    with pytest.raises(ValueError):
        vectors_module._stacked([rows[0].tobytes(), rows[1].tobytes()[:16]])


def test_a_partition_matrix_grows_with_the_vectors_written_after_it(tmp_path: Any) -> None:
    """After a batch of the background pass only the new rows are read and appended; a change
    that is not an append (a vector dropped) reads the partition again. Either way the matrix
    equals the partition's vectors."""
    import numpy as np

    from cairn.engine.vectors import VectorIndex
    from cairn.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    scope = Scope.for_subject("u")
    try:
        store.episodes.append_many(
            "default",
            [
                NewEpisode(scope=scope, source="s", type="note", payload={"text": f"fact {i}"})
                for i in range(6)
            ],
        )
        from cairn.engine.compile import compile_scope

        while compile_scope(store, "default", scope).has_more:
            pass
        with store.snapshot() as tx:
            seqs = [seq for seq, _, _ in tx.memories.without_embedding("default", scope)]
        assert len(seqs) == 6

        def write(rows: list[int], value: float) -> None:
            with store.transaction() as tx:
                blob = np.full(4, value, dtype="<f4").tobytes()
                tx.memories.set_embeddings("default", scope, [(s, blob) for s in rows])

        from cairn.store.memory_vectors import MemoryVectors

        index, reads = VectorIndex(), []  # 0: read whole; else the rows after that seq
        original, whole = MemoryVectors.vectors, MemoryVectors.vector_pages

        def counted(self: Any, tenant_id: str, scope_: Scope, after: int = 0) -> Any:
            reads.append(after)
            return original(self, tenant_id, scope_, after)

        def counted_whole(self: Any, tenant_id: str, scope_: Scope, size: int) -> Any:
            reads.append(0)
            return whole(self, tenant_id, scope_, size)

        def matrix() -> Any:
            with store.snapshot() as tx:
                return index.matrix(store, tx, "default", scope)

        import unittest.mock

        with (
            unittest.mock.patch.object(MemoryVectors, "vectors", counted),
            unittest.mock.patch.object(MemoryVectors, "vector_pages", counted_whole),
        ):
            write(seqs[:2], 1.0)
            m = matrix()
            assert list(m.seqs) == seqs[:2] and reads == [0]
            # The rows still waiting, counted up to one more than those written: 4 → 3.
            assert m.unembedded == 3 and not m.covers(0.5)
            write(seqs[2:4], 2.0)
            m = matrix()
            assert list(m.seqs) == seqs[:4] and reads == [0, seqs[1]]  # only the new rows
            assert m.unembedded == 2 and m.covers(0.5)  # counted again for the new version
            assert matrix() is m  # the same version: cached, count and all
            assert m.vectors[:, 0].tolist() == [1.0, 1.0, 2.0, 2.0]
            with store.transaction() as tx:  # not an append: a vector is dropped
                tx.memories.drop_vectors_of_other_size(8)
            write(seqs[4:], 3.0)
            m = matrix()
            assert reads[-1] == 0 and m.vectors.shape == (2, 4)  # read whole again
            assert m.vectors[:, 0].tolist() == [3.0, 3.0]
            # Cleared and written again for the same rows: the count is as it was, the
            # vectors are not; the matrix is read again, not extended.
            with store.transaction() as tx:
                tx.memories.drop_vectors_of_other_size(8)
            write(seqs[4:], 4.0)
            m = matrix()
            assert reads[-1] == 0 and m.vectors[:, 0].tolist() == [4.0, 4.0]
    finally:
        store.close()


def test_the_lexical_lane_is_coordinated_only_beside_a_vector_lane(store: Store) -> None:
    """Alone, the lexical lane ranks by plain BM25 (a brief row holding one word of the
    question keeps its partial match); once the partition has vectors, each lexical score is
    scaled by the share of the question the row holds, and the row holding both words wins
    the lexical lane."""
    scope = Scope.for_subject("coordinated")
    brief = "acme"
    full = (
        "I still work at acme, building dashboards for the warehouse team, since the office "
        "moved to the old harbour depot last month and the commute got longer"
    )
    others = [f"the {w} was nice today {i}" for w in ("ferry", "walk", "lunch") for i in range(8)]
    store.episodes.append_many(
        TENANT,
        [
            NewEpisode(scope=scope, source="t", type="note", payload={"text": text})
            for text in [brief, full, *others]
        ],
    )
    compile_scope(store, TENANT, scope)
    query = "acme dashboards"

    def lexical(**kwargs: Any) -> dict[str, float]:
        found = search_memories(store, TENANT, scope, query, **kwargs)
        return {r.memory.content: r.lanes["lexical"] for r in found if r.lanes["lexical"] > 0}

    emb = HashingEmbedder()
    alone = lexical()
    assert alone[brief] > alone[full]
    without_vectors = lexical(embedder=emb)  # a vector lane that sees nothing yet
    assert without_vectors == alone
    assert embed_memories(store, emb, TENANT, scope) > 0
    beside = lexical(embedder=emb)
    assert beside[full] > beside[brief]
    assert beside[full] == pytest.approx(alone[full])  # it holds the whole question


def test_coordination_waits_for_most_of_the_partitions_vectors(store: Store) -> None:
    """While fewer than half of a partition's memories have a vector (a big compile whose
    vectors are still being written), the lexical lane stays plain BM25 beside the vector
    lane; from half on it is coordinated."""
    scope = Scope.for_subject("half")
    brief = "acme"
    full = (
        "I still work at acme, building dashboards for the warehouse team, since the office "
        "moved to the old harbour depot last month and the commute got longer"
    )

    def add(texts: list[str]) -> None:
        store.episodes.append_many(
            TENANT,
            [
                NewEpisode(scope=scope, source="t", type="note", payload={"text": text})
                for text in texts
            ],
        )
        compile_scope(store, TENANT, scope)

    def leads(embedder: HashingEmbedder | None) -> str:
        found = search_memories(store, TENANT, scope, "acme dashboards", embedder=embedder)
        lexical = {r.memory.content: r.lanes["lexical"] for r in found}
        return brief if lexical[brief] > lexical[full] else full

    emb = HashingEmbedder()
    others = [f"the {w} was nice today {i}" for w in ("ferry", "lunch") for i in range(8)]
    add([brief, full, *others])
    assert leads(None) == brief  # plain BM25
    embed_memories(store, emb, TENANT, scope)
    assert leads(emb) == full  # every vector written: coordinated
    add([f"the walk was long on day {i}" for i in range(20)])  # 18 of 38 have vectors
    with store.snapshot() as tx:
        assert tx.memories.vector_count(TENANT, scope) == 18
    assert leads(emb) == brief
    embed_memories(store, emb, TENANT, scope)
    assert leads(emb) == full


def test_a_matrix_covers_a_share_of_its_partition() -> None:
    matrix = vectors_module._Matrix((1, 0), np.arange(4, dtype=np.int64), np.zeros((4, 2)))
    assert matrix.covers(0.5)  # 4 of 4
    matrix.unembedded = 4  # 4 of 8
    assert matrix.covers(0.5) and not matrix.covers(0.6)
    matrix.unembedded = 5  # 4 of 9
    assert not matrix.covers(0.5)
    matrix.unembedded = 0
    assert matrix.covers(1.0)
    empty = vectors_module._Matrix((0, 0), np.zeros(0, dtype=np.int64), np.zeros((0, 0)))
    assert not empty.covers(0.5)
    with pytest.raises(ValueError):
        matrix.covers(0.3)  # the count is capped for shares from a half
