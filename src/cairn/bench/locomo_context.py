"""LoCoMo evidence recall *through context assembly*: what an agent would actually be told.

The same ingest and compile as ``cairn bench locomo`` (``cairn.bench.locomo``), then every
non-adversarial question is asked as a ``ContextRequest`` (the question as ``query``, the
conversation's subject scope, no conversation id — the question is not part of a live
conversation) and the result is packed under ``max_tokens`` B. A question is a hit when any
evidence turn's episode is in the provenance of a packed item. Only the scoring reads the
evidence; assembly never sees it.

The budget is tokens only (``max_items`` is raised out of the way); ``recall_at`` counts the
first k items of the packing order; latency is one ``context`` call at 1,000 tokens.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cairn.bench.locomo import (
    BUDGETS,
    RECALL_AT,
    TENANT,
    Conversation,
    LocomoReport,
    ingest,
    load,
    make_report,
)
from cairn.core.memory import Budget, ContextItem, ContextRequest
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.context import AssemblySettings, CairnAssembly, apply_min_score, pack_context
from cairn.engine.context.packing import priority_order
from cairn.store import open_store

MAX_ITEMS = 1000


def _hit(items: list[ContextItem], evidence: set[str]) -> bool:
    return any(ref.id in evidence for item in items for ref in item.provenance)


def run(
    data: Path,
    *,
    embedder: Any = None,
    database_url: str | None = None,
    candidates: int = 200,
    min_score: float = 0.0,
    conversations: Iterable[Conversation] | None = None,
    progress: Callable[[str], None] | None = None,
) -> LocomoReport:
    """Run the benchmark; a fresh SQLite file in a temporary directory unless a URL is given."""
    convs = list(conversations) if conversations is not None else load(data)
    hits_budget = {b: 0 for b in BUDGETS}
    hits_at = {k: 0 for k in RECALL_AT}
    latencies: list[float] = []
    asked = 0
    compile_s = 0.0
    n_memories = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(database_url or f"sqlite:///{Path(tmp) / 'locomo.db'}")
        try:
            assembly = CairnAssembly(
                store, TENANT, settings=AssemblySettings(candidates=candidates), embedder=embedder
            )
            for conv in convs:
                scope = Scope.for_subject(conv.sample_id)
                ids = ingest(store, conv)
                t0 = time.perf_counter()
                while compile_scope(store, TENANT, scope, embedder=embedder).has_more:
                    pass
                compile_s += time.perf_counter() - t0
                n_memories += store.memories.count(TENANT, scope)
                for q in conv.questions:
                    if q["category"] == 5 or not q["evidence"]:
                        continue
                    evidence = {str(ids[d]) for d in q["evidence"] if d in ids}
                    if not evidence:
                        continue
                    asked += 1
                    req = ContextRequest(
                        scope=scope,
                        query=q["question"],
                        min_score=min_score,
                        budget=Budget(max_tokens=1000, max_items=MAX_ITEMS),
                    )
                    t1 = time.perf_counter()
                    assembly.context(req)
                    latencies.append((time.perf_counter() - t1) * 1000)
                    kept = apply_min_score(assembly.candidates(req).result.items, min_score)
                    for b in BUDGETS:
                        packed = pack_context(kept, Budget(max_tokens=b, max_items=MAX_ITEMS))
                        hits_budget[b] += _hit(packed.items, evidence)
                    ordered = priority_order(kept)
                    for k in RECALL_AT:
                        hits_at[k] += _hit(ordered[:k], evidence)
                if progress:
                    progress(f"{conv.sample_id}: {asked} questions so far")
        finally:
            store.close()
    return make_report(asked, hits_budget, hits_at, latencies, compile_s, n_memories)
