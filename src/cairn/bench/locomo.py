"""LoCoMo evidence recall: ingest each conversation as a subject, compile, search every question.

Each conversation of a LoCoMo file becomes one subject: one episode per turn (payload
``messages[{role, name, content, caption}]``, the session's date as ``occurred_at``, the
session as ``session_id``). After compiling, every non-adversarial question (category ≠ 5) is
searched. Only the scoring here reads ``evidence``: it maps evidence turn ids (``D1:3``) to the
episodes the bench created, and checks them against the provenance of what search returned.

The older, in-process measurement (``cairn bench locomo --through search``) — **evidence recall
within a token budget B**: results are taken in rank order while their content fits B cl100k
tokens (the first that does not fit ends the list); a question is a hit when any evidence turn
is in the provenance of an included memory. It leaves out the rendering's markup and counts
provenance, so it reads higher than the headline metric of ``cairn.bench.recall`` (evidence text
in the ``assembled_context`` of ``POST /v1/context`` from a real server).
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.core.tokens import get_tokenizer
from cairn.engine.compile import compile_scope
from cairn.engine.search import search_memories
from cairn.store import Store, open_store

BUDGETS = (250, 500, 1000, 2000, 4000)
RECALL_AT = (1, 5, 10)
TENANT = "bench"
_DIA = re.compile(r"D\d+:\d+")


@dataclass
class Conversation:
    sample_id: str
    turns: list[dict[str, Any]]  # {dia_id, speaker, text, caption, session, at}
    questions: list[dict[str, Any]]  # {question, evidence: [dia_id], category}


@dataclass
class LocomoReport:
    questions: int
    budget_recall: dict[str, float]
    recall_at: dict[str, float]
    p50_ms: float
    p95_ms: float
    compile_s: float = 0.0
    memories: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "questions": self.questions,
            "budget_recall": self.budget_recall,
            "recall_at": self.recall_at,
            "p50_ms": self.p50_ms,
            "p95_ms": self.p95_ms,
        }


def parse_date(value: str) -> datetime:
    """LoCoMo dates look like ``1:56 pm on 8 May, 2023``."""
    cleaned = re.sub(r"\s+", " ", value.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognized LoCoMo date {value!r}")


def load(path: Path) -> list[Conversation]:
    data = json.loads(Path(path).read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            at = parse_date(conv[f"session_{n}_date_time"])
            for turn in conv[f"session_{n}"]:
                turns.append(
                    {
                        "dia_id": turn["dia_id"],
                        "speaker": turn["speaker"],
                        "text": turn["text"],
                        "caption": turn.get("blip_caption"),
                        "session": n,
                        "at": at,
                    }
                )
            n += 1
        questions = [
            {
                "question": q["question"],
                "category": q.get("category"),
                "evidence": _DIA.findall(" ".join(map(str, q.get("evidence", [])))),
            }
            for q in sample.get("qa", [])
        ]
        out.append(Conversation(sample["sample_id"], turns, questions))
    return out


def ingest(store: Store, conv: Conversation) -> dict[str, Any]:
    """One episode per turn; returns ``dia_id → episode id``."""
    scope = Scope.for_subject(conv.sample_id)
    items = []
    for turn in conv.turns:
        msg: dict[str, Any] = {"role": "user", "name": turn["speaker"], "content": turn["text"]}
        if turn["caption"]:
            msg["caption"] = turn["caption"]
        items.append(
            NewEpisode(
                scope=scope,
                source="locomo",
                type="conversation.turn",
                payload={"messages": [msg]},
                session_id=f"session_{turn['session']}",
                idempotency_key=turn["dia_id"],
                occurred_at=turn["at"],
            )
        )
    episodes, _ = store.episodes.append_many(TENANT, items)
    return {turn["dia_id"]: ep.id for turn, ep in zip(conv.turns, episodes, strict=True)}


def budget_hits(
    results: Sequence[Any], evidence: set[Any], budget: int, count: Callable[[str], int]
) -> bool:
    used = 0
    for r in results:
        cost = count(r.memory.content)
        if used + cost > budget:
            return False
        used += cost
        if evidence.intersection(r.memory.source_episode_ids):
            return True
    return False


def run(
    data: Path,
    *,
    embedder: Any = None,
    database_url: str | None = None,
    limit: int = 200,
    search: Callable[..., Any] = search_memories,
    conversations: Iterable[Conversation] | None = None,
    progress: Callable[[str], None] | None = None,
) -> LocomoReport:
    """Run the benchmark; a fresh SQLite file in a temporary directory unless a URL is given."""
    convs = list(conversations) if conversations is not None else load(data)
    tok = get_tokenizer()
    counts: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in counts:
            counts[text] = tok.count(text)
        return counts[text]

    hits_budget = {b: 0 for b in BUDGETS}
    hits_at = {k: 0 for k in RECALL_AT}
    latencies: list[float] = []
    asked = 0
    compile_s = 0.0
    n_memories = 0
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(database_url or f"sqlite:///{Path(tmp) / 'locomo.db'}")
        try:
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
                    evidence = {ids[d] for d in q["evidence"] if d in ids}
                    if not evidence:
                        continue
                    asked += 1
                    t1 = time.perf_counter()
                    results = search(
                        store, TENANT, scope, q["question"], limit=limit, embedder=embedder
                    )
                    latencies.append((time.perf_counter() - t1) * 1000)
                    for b in BUDGETS:
                        hits_budget[b] += budget_hits(results, evidence, b, count)
                    for k in RECALL_AT:
                        hits_at[k] += any(
                            evidence.intersection(r.memory.source_episode_ids) for r in results[:k]
                        )
                if progress:
                    progress(f"{conv.sample_id}: {asked} questions so far")
        finally:
            store.close()
    return make_report(asked, hits_budget, hits_at, latencies, compile_s, n_memories)


def make_report(
    asked: int,
    hits_budget: dict[int, int],
    hits_at: dict[int, int],
    latencies: list[float],
    compile_s: float,
    n_memories: int,
) -> LocomoReport:
    """Turn hit counts and latencies into the report (shared by the search and context modes)."""
    n = max(asked, 1)
    latencies = sorted(latencies)
    return LocomoReport(
        questions=asked,
        budget_recall={str(b): round(hits_budget[b] / n, 3) for b in BUDGETS},
        recall_at={str(k): round(hits_at[k] / n, 3) for k in RECALL_AT},
        p50_ms=round(statistics.median(latencies), 2) if latencies else 0.0,
        p95_ms=round(latencies[int(0.95 * (len(latencies) - 1))], 2) if latencies else 0.0,
        compile_s=round(compile_s, 2),
        memories=n_memories,
    )


def format_table(report: LocomoReport) -> str:
    lines = [
        f"questions: {report.questions}   memories: {report.memories}   "
        f"compile: {report.compile_s}s",
        "budget (tokens) | " + " | ".join(report.budget_recall),
        "evidence recall | " + " | ".join(f"{v:.3f}" for v in report.budget_recall.values()),
        "recall_any@k    | " + " | ".join(f"@{k} {v:.3f}" for k, v in report.recall_at.items()),
        f"search latency  | p50 {report.p50_ms} ms | p95 {report.p95_ms} ms",
    ]
    return "\n".join(lines)
