"""The long-term lane read in pages: a context request reads the memories packing reaches,
not every candidate its budget allows for, and packs what reading them all would pack.
On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cairn.core.memory import Budget, ContextRequest, ContextResult
from cairn.engine.context import CairnAssembly
from cairn.engine.context.assembly import FILL, candidate_limit, first_page
from cairn.engine.context.packing import apply_min_score, pack_context
from cairn.engine.search import Ranking
from cairn.store import Store
from tests.engine.context.helpers import SCOPE, add_memory

TENANT = "t1"


@pytest.fixture
def assembly(store: Store) -> CairnAssembly:
    return CairnAssembly(store, TENANT)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many memories each read of a ranking asked for."""
    seen: list[int] = []
    original = Ranking.results

    def counted(self: Ranking, tx: Any, tenant_id: str, scope: Any, seqs: Any) -> Any:
        seen.append(len(seqs))
        return original(self, tx, tenant_id, scope, seqs)

    monkeypatch.setattr(Ranking, "results", counted)
    yield seen


def request(query: str, budget: Budget, min_score: float = 0.0) -> ContextRequest:
    return ContextRequest(scope=SCOPE, query=query, budget=budget, min_score=min_score)


def read_all(assembly: CairnAssembly, req: ContextRequest) -> ContextResult:
    """What packing gives when every candidate is read first (as the inspector shows it)."""
    found = assembly.candidates(req)
    return pack_context(apply_min_score(found.result.items, req.min_score), req.budget)


def ids(result: ContextResult) -> list[str]:
    return [i.id for i in result.items]


def test_a_context_reads_the_first_page_only_when_it_fills_the_budget(
    assembly: CairnAssembly, store: Store, reads: list[int]
) -> None:
    # About 40 tokens each (``PAGE_TOKENS``): the first page holds what the budget takes.
    words = "tomatoes peppers basil watered at dawn before the heat of the day"
    for i in range(150):
        text = f"Entry {i:03d} of the greenhouse log: {words}, {words}, {words}."
        add_memory(store, TENANT, text, kind="turn", minute=i)
    budget = Budget(max_tokens=400)
    req = request("greenhouse log", budget)
    result = assembly.context(req)
    limits = budget.resolved()
    assert reads == [first_page(limits, candidate_limit(budget))]
    assert reads[0] < candidate_limit(budget) + 1  # fewer than the lane may give
    assert result.token_count >= FILL * 400 and result.truncated
    reads.clear()
    assert ids(result) == ids(read_all(assembly, req))
    assert reads == [candidate_limit(budget) + 1]  # the inspector's path reads them all


def test_reading_goes_on_while_the_packed_items_leave_room(
    assembly: CairnAssembly, store: Store, reads: list[int]
) -> None:
    """The best matches are too long for the budget: packing skips them, so more pages are
    read until short ones fill it, and the result is what reading every candidate gives."""
    long_text = " ".join(["the greenhouse log says the tomatoes ripen"] * 40)
    for i in range(10):
        add_memory(store, TENANT, f"{long_text} {i}", kind="turn", minute=i)
    for i in range(40):
        add_memory(store, TENANT, f"Greenhouse log {i}.", kind="turn", minute=100 + i)
    budget = Budget(max_tokens=300)
    req = request("greenhouse log tomatoes ripen", budget)
    result = assembly.context(req)
    assert len(reads) > 1
    assert any(i.content.startswith("Greenhouse log") for i in result.items)
    assert ids(result) == ids(read_all(assembly, req))


def test_unread_memories_that_pass_min_score_mark_the_result_truncated(
    assembly: CairnAssembly, store: Store, reads: list[int]
) -> None:
    words = "apples pears and plums picked in the rain, crates stacked by the barn door"
    for i in range(120):
        add_memory(store, TENANT, f"Orchard note {i:03d}: {words}, {words}.", kind="turn", minute=i)
    budget = Budget(max_tokens=600)
    result = assembly.context(request("orchard note", budget))
    assert sum(reads) < candidate_limit(budget) + 1
    assert result.items and result.truncated
    # A min_score above every memory's: nothing passes, nothing more is read.
    reads.clear()
    none = assembly.context(request("orchard note", budget, min_score=1.0))
    assert none.items == [] and not none.truncated
    assert reads == [first_page(budget.resolved(), candidate_limit(budget))]


def test_a_lane_read_to_its_end_packs_as_before(
    assembly: CairnAssembly, store: Store, reads: list[int]
) -> None:
    """Fewer matches than a page: one read, everything packed, nothing left out."""
    for i in range(6):
        add_memory(store, TENANT, f"Beehive inspection {i}.", kind="turn", minute=i)
    req = request("beehive inspection", Budget(max_tokens=2000))
    result = assembly.context(req)
    assert len(result.items) == 6 and not result.truncated
    assert len(reads) == 1
    assert ids(result) == ids(read_all(assembly, req))
