"""Recall reports: per-question outcomes summed per budget, category and backend; tables, JSON."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    """One question at every budget: text hit, provenance hit, cl100k tokens, over budget."""

    conversation: str
    question: str
    category: str
    evidence: tuple[str, ...]
    hits: dict[int, bool] = field(default_factory=dict)
    provenance_hits: dict[int, bool] = field(default_factory=dict)
    tokens: dict[int, int] = field(default_factory=dict)
    items: dict[int, int] = field(default_factory=dict)
    # The share of the subject's memories that had a vector when it was asked.
    vectors: float | None = None

    def over_budget(self, budget: int) -> bool:
        return self.tokens[budget] > budget

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "question": self.question,
            "category": self.category,
            "evidence": list(self.evidence),
            "hits": {str(b): v for b, v in self.hits.items()},
            "provenance_hits": {str(b): v for b, v in self.provenance_hits.items()},
            "tokens": {str(b): v for b, v in self.tokens.items()},
            "items": {str(b): v for b, v in self.items.items()},
            "vectors": self.vectors,
        }


def _rate(values: list[bool]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


@dataclass
class BackendReport:
    backend: str
    budgets: tuple[int, ...]
    outcomes: list[Outcome]
    memories: int = 0
    ingest_s: float = 0.0
    compile_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    shadowed_evidence: int = 0
    shadowed_by_conversation: dict[str, int] = field(default_factory=dict)

    @property
    def questions(self) -> int:
        return len(self.outcomes)

    def recall(self, budget: int, category: str | None = None, provenance: bool = False) -> float:
        # An over-budget context broke the request's contract: its hits do not count.
        return _rate(
            [
                (o.provenance_hits if provenance else o.hits)[budget] and not o.over_budget(budget)
                for o in self.outcomes
                if category is None or o.category == category
            ]
        )

    def categories(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.outcomes:
            counts[o.category] = counts.get(o.category, 0) + 1
        return dict(sorted(counts.items()))

    def over_budget(self) -> dict[str, int]:
        return {str(b): sum(o.over_budget(b) for o in self.outcomes) for b in self.budgets}

    def vectors_when_asked(self) -> float | None:
        """The mean share of the asked subject's memories that had a vector, over the
        questions (``None`` when it was not recorded)."""
        shares = [o.vectors for o in self.outcomes if o.vectors is not None]
        return round(statistics.fmean(shares), 3) if shares else None

    def mean_tokens(self, budget: int) -> float:
        return round(statistics.fmean(o.tokens[budget] for o in self.outcomes), 1)

    def to_json(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)
        return {
            "backend": self.backend,
            "questions": self.questions,
            "budget_recall": {str(b): self.recall(b) for b in self.budgets},
            "by_category": {
                cat: {
                    "questions": n,
                    "budget_recall": {str(b): self.recall(b, cat) for b in self.budgets},
                }
                for cat, n in self.categories().items()
            },
            "provenance_recall": {str(b): self.recall(b, provenance=True) for b in self.budgets},
            "over_budget": self.over_budget(),
            "mean_tokens": {str(b): self.mean_tokens(b) for b in self.budgets},
            "mean_items": {
                str(b): round(statistics.fmean(o.items[b] for o in self.outcomes), 1)
                for b in self.budgets
            },
            "memories": self.memories,
            "shadowed_evidence": self.shadowed_evidence,
            "ingest_s": round(self.ingest_s, 2),
            "compile_s": round(self.compile_s, 2),
            "context_p50_ms": round(statistics.median(lat), 1) if lat else 0.0,
            "vectors_when_asked": self.vectors_when_asked(),
        }


@dataclass
class RecallReport:
    dataset: str
    budgets: tuple[int, ...]
    backends: dict[str, BackendReport]

    def over_budget_total(self) -> int:
        return sum(sum(r.over_budget().values()) for r in self.backends.values())

    def to_json(self) -> dict[str, Any]:
        """``budget_recall`` is the lowest over the backends run (each is under ``backends``)."""
        per = {name: r.to_json() for name, r in self.backends.items()}
        first = next(iter(per.values()))
        return {
            "dataset": self.dataset,
            "metric": "evidence turn text in assembled_context of POST /v1/context",
            "questions": first["questions"],
            "budget_recall": {
                str(b): min(p["budget_recall"][str(b)] for p in per.values()) for b in self.budgets
            },
            "over_budget": self.over_budget_total(),
            "backends": per,
        }


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def format_backend(report: BackendReport) -> str:
    """A Markdown table: one row per budget, overall and per-category recall."""
    data = report.to_json()
    cats = report.categories()
    head = ["budget", "recall"] + [f"cat {c} ({n})" for c, n in cats.items()]
    head += ["provenance (secondary)", "over budget", "mean tokens", "mean items"]
    vectors = report.vectors_when_asked()
    lines = [
        f"{report.backend}: {report.questions} questions, {report.memories} memories, "
        f"ingest {data['ingest_s']} s, compile {data['compile_s']} s, "
        f"context p50 {data['context_p50_ms']} ms, shadowed evidence turns "
        f"{report.shadowed_evidence}"
        + (f", vectors when asked {vectors:.1%}" if vectors is not None else ""),
        _row(head),
        _row(["---"] * len(head)),
    ]
    for b in report.budgets:
        key = str(b)
        cells = [f"{b:,}", f"**{data['budget_recall'][key]:.3f}**"]
        cells += [f"{data['by_category'][c]['budget_recall'][key]:.3f}" for c in cats]
        over = data["over_budget"][key]
        cells += [
            f"{data['provenance_recall'][key]:.3f}",
            f"{over} OVER BUDGET" if over else "0",
            f"{data['mean_tokens'][key]}",
            f"{data['mean_items'][key]}",
        ]
        lines.append(_row(cells))
    return "\n".join(lines)


def format_report(report: RecallReport) -> str:
    """Every backend's table, then the PostgreSQL minus SQLite difference when both ran."""
    parts = [f"dataset {report.dataset}: evidence text in assembled_context (POST /v1/context)"]
    parts += [format_backend(r) for r in report.backends.values()]
    if {"sqlite", "postgres"} <= set(report.backends):
        lite, pg = report.backends["sqlite"], report.backends["postgres"]
        diffs = [f"{b:,}: {pg.recall(b) - lite.recall(b):+.3f}" for b in report.budgets]
        parts.append("postgres - sqlite: " + ", ".join(diffs))
    over = report.over_budget_total()
    if over:
        parts.append(f"FAIL: {over} contexts were over their budget (cl100k)")
    return "\n\n".join(parts)


def format_summary(reports: list[RecallReport]) -> str:
    """Several datasets run in one server: one row per dataset and backend, recall per
    budget (the per-category tables are in ``--json``)."""
    budgets = reports[0].budgets
    head = ["dataset", "backend", "questions"] + [f"{b:,}" for b in budgets]
    lines = [_row(head), _row(["---"] * len(head))]
    for report in reports:
        for name, r in report.backends.items():
            cells = [report.dataset, name, str(r.questions)]
            cells += [f"{r.recall(b):.3f}" for b in budgets]
            lines.append(_row(cells))
    over = sum(r.over_budget_total() for r in reports)
    if over:
        lines.append(f"\nFAIL: {over} contexts were over their budget (cl100k)")
    return "\n".join(lines)
