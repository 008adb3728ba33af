"""A search reads the ranking facts of the vector lane's candidates only where they can rank
(``cairn.engine.search._ranking_facts``), with the same result as reading them all."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text

from cairn.core.scope import Scope
from cairn.engine import search as search_module
from cairn.engine.embedders import HashingEmbedder
from cairn.engine.search import embed_memories, rank_memories
from cairn.engine.vectors import _Matrix
from cairn.store import Store
from cairn.store.memories import MemoryRepository
from cairn.store.schema import memories
from tests.engine.test_search import compile_turns

TENANT = "t1"
HOUR = timedelta(hours=1)
SCOPE = Scope.for_subject("s")


class _Facts:
    """A unit of work whose ``memories.rank_facts`` answers from ``rows`` and records what it
    was asked for."""

    def __init__(self, rows: dict[int, tuple[float, str, str, str]]) -> None:
        self.rows = rows
        self.asked: list[int] = []
        self.memories = SimpleNamespace(rank_facts=self._rank_facts)

    def _rank_facts(self, _tenant: str, _scope: Scope, seqs: list[int]) -> dict[int, Any]:
        self.asked.extend(seqs)
        return {seq: self.rows[seq] for seq in seqs if seq in self.rows}


def _case(query: str) -> tuple[_Facts, dict[int, float], dict[int, Any], Any]:
    """Five lexical candidates of Ann (fused 0.9 to 0.5, their facts known) and eleven of the
    vector lane alone (fused 0.01 to 0.31): ten of Ann's, the weakest one Zed's."""
    known = {seq: (1.0, "active", "turn", "Ann") for seq in range(1, 6)}
    fused = {seq: 1.0 - seq / 10 for seq in known}
    vector_only = {
        seq: (1.0, "active", "turn", "Zed" if seq == 10 else "Ann") for seq in range(10, 21)
    }
    fused |= {seq: (seq - 10) * 0.03 + 0.01 for seq in vector_only}
    matrix = _Matrix(
        (1, 0), np.arange(10, 21), np.zeros((11, 2)), speakers=frozenset({"Ann", "Zed"})
    )
    wanted = search_module._Wanted(query, 3, {"active"}, None, matrix)
    return _Facts({**known, **vector_only}), fused, known, wanted


def _final_order(fused: dict[int, float], facts: dict[int, Any], named: set[str]) -> list[int]:
    final = search_module._final_scores(fused, facts, {"active"}, None, named)
    return sorted(final, key=lambda seq: (-final[seq], seq))[:3]


def test_candidates_that_cannot_rank_are_not_read() -> None:
    tx, fused, known, wanted = _case("What did Ann say about pottery?")
    facts, named = search_module._ranking_facts(tx, TENANT, SCOPE, fused, known, wanted)  # type: ignore[arg-type]
    # The third best known score is 0.7; no vector candidate reaches it.
    assert tx.asked == [] and named == {"Ann"}
    every = {**known, **tx.rows}
    assert _final_order(fused, facts, named) == _final_order(fused, every, {"Ann"}) == [1, 2, 3]


def test_a_speaker_named_only_by_unread_rows_reads_the_rest() -> None:
    """Zed is named by the query and said only the weakest vector candidate: the rows read
    first do not name Zed, the matrix's speakers do, so the rest are read and Zed is named
    (everyone else's score discounted), as when every row is read."""
    tx, fused, known, wanted = _case("What did Zed say?")
    facts, named = search_module._ranking_facts(tx, TENANT, SCOPE, fused, known, wanted)  # type: ignore[arg-type]
    assert named == {"Zed"}
    assert sorted(tx.asked) == list(range(10, 21))
    assert facts == {**known, **tx.rows}


def test_without_the_speakers_of_the_matrix_every_candidate_is_read() -> None:
    tx, fused, known, wanted = _case("pottery")
    unknown = search_module._Wanted(wanted.query, 3, {"active"}, None, None)
    search_module._ranking_facts(tx, TENANT, SCOPE, fused, known, unknown)  # type: ignore[arg-type]
    assert sorted(tx.asked) == list(range(10, 21))


def _seed(store: Store) -> Scope:
    """Sixty turns of three speakers, half of them about pottery, with vectors."""
    scope = Scope.for_subject("pottery")
    names = ("Ann", "Ben", "Cleo")
    words = ("clay", "glaze", "wheel", "kiln", "garden", "train", "rain", "bread", "piano")
    texts = [
        f"{'I made pottery with' if i % 2 else 'We talked about'} {words[i % 9]} and "
        f"{words[(i * 7) % 9]} on day {i}."
        for i in range(60)
    ]
    compile_turns(store, scope, [(names[i % 3], text) for i, text in enumerate(texts)], HOUR)
    embed_memories(store, HashingEmbedder(), TENANT, scope)
    return scope


def _speaker_of_one_turn(store: Store, scope: Scope, speaker: Any) -> None:
    """Give one of Cleo's turns the speaker ``speaker`` (a JSON number: an import stores
    whatever object ``metadata`` it is given)."""
    with store.db.engine.begin() as conn:
        seq = conn.execute(
            text(
                "SELECT seq FROM memories WHERE user_id = :u AND content LIKE 'Cleo:%' "
                "ORDER BY seq LIMIT 1"
            ),
            {"u": scope.user_id},
        ).scalar_one()
        if store.db.is_sqlite:
            change = "json_set(metadata, '$.speaker', json(:v))"
        else:
            change = "jsonb_set(metadata, '{speaker}', CAST(:v AS jsonb))"
        conn.execute(
            text(f"UPDATE memories SET metadata = {change} WHERE seq = :s"),
            {"v": json.dumps(speaker), "s": seq},
        )


@pytest.mark.parametrize(
    ("query", "weights", "speaker"),
    [
        ("pottery clay", None, None),
        ("What did Cleo say about the kiln?", None, None),
        ("rain", None, None),
        ("pottery clay", None, 7),
        ("What did 7 say about the kiln?", None, 7),
        # A caller's own weights may make a fused score negative (its final score is 0).
        ("pottery clay", {"lexical": 1.0, "vector": -0.5}, None),
    ],
)
def test_the_ranking_is_the_same_as_with_every_candidate_read(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    query: str,
    weights: dict[str, float] | None,
    speaker: Any,
) -> None:
    """On both backends: the order and every score, with the unread candidates and with the
    floor at 0 (every candidate read); fewer rows are read."""
    scope = _seed(store)
    if speaker is not None:
        _speaker_of_one_turn(store, scope, speaker)
    asked: list[int] = []
    real = MemoryRepository.rank_facts

    def counted(self: MemoryRepository, tenant: str, scope: Scope, seqs: list[int]) -> Any:
        asked.extend(seqs)
        return real(self, tenant, scope, seqs)

    monkeypatch.setattr(MemoryRepository, "rank_facts", counted)

    def ranked() -> tuple[list[int], dict[int, float]]:
        with store.snapshot() as tx:
            got = rank_memories(
                store,
                TENANT,
                scope,
                query,
                limit=5,
                tx=tx,
                embedder=HashingEmbedder(),
                weights=weights,
            )
        return got.order, got.final

    pruned = ranked()
    read_pruned = len(asked)
    asked.clear()
    monkeypatch.setattr(search_module, "_floor", lambda *_: 0.0)
    assert ranked() == pruned
    assert len(pruned[0]) == 5
    if weights is None:  # (negative fused scores: every candidate may tie at 0)
        assert read_pruned < len(asked)


def test_a_restated_memory_whose_speaker_changes_moves_the_vector_version_on(store: Store) -> None:
    """The compiler may restate a stored memory (the same content) with new metadata: when its
    speaker changes, cached matrices (which know their rows' speakers) are read again."""
    scope = _seed(store)
    with store.db.engine.connect() as conn:
        row = dict(
            conn.execute(
                select(memories).where(memories.c.user_id == scope.user_id).order_by(memories.c.seq)
            )
            .mappings()
            .first()
            or {}
        )
    row["search_text"] = None

    def restated(speaker: str) -> tuple[int, int]:
        with store.transaction() as tx:
            tx.memories.refresh_metadata(
                {**row, "metadata": {**row["metadata"], "speaker": speaker}}
            )
        with store.snapshot() as tx:
            return tx.memories.vector_stamp(TENANT, scope)

    before = restated(str(row["metadata"]["speaker"]))
    assert restated(str(row["metadata"]["speaker"])) == before  # the same speaker: unchanged
    after = restated("Dora")
    assert after[1] == before[1] + 1  # a rewrite: the matrix is read whole again
