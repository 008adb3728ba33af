"""Evidence recall the way users get context: a real ``cairn serve``, over loopback HTTP.

For each backend a fresh server is started with default settings (no ``CAIRN_*`` variable of
the caller reaches it, a new data directory; PostgreSQL gets a scratch database, dropped after).
Each conversation is its own subject: one episode per turn through ``POST /v1/episodes/batch``
(payload ``messages[{role, name, content, caption}]``, the session's date as ``occurred_at``,
the session as ``session_id``), then ``POST /v1/memories/compile`` until nothing remains. Every
question is asked with ``POST /v1/context`` carrying only ``subject_id``, ``task`` (the
question) and ``max_tokens``, once per budget.

A question is recalled at a budget when the text of one of its evidence turns is in
``assembled_context`` (``cairn.bench.evidence`` says exactly how) and the context is within
the budget counted with cl100k; an over-budget context never counts and fails the run. The
secondary, provenance count is a hit when an evidence turn's episode is in the response's
provenance, whatever text of it was shown. Only the scoring reads the evidence.

The server writes vectors in the background after a compile, so a question asked at once
(``--settle 0``) may meet few of them: for each question the harness also records the share
of its subject's memories that had a vector when it was asked (read from the server's
database, beside the API), reported as "vectors when asked".
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from cairn.bench.evidence import contains_turn, normalize_context, normalize_turn, shadowed_turns
from cairn.bench.recall_data import Conversation, Dataset
from cairn.bench.recall_report import BackendReport, Outcome, RecallReport
from cairn.bench.server import running_server, scratch_postgres
from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.core.tenants import DEFAULT_TENANT
from cairn.core.tokens import get_tokenizer
from cairn.store import open_store

BUDGETS = (250, 500, 1000, 2000, 4000)
BACKENDS = ("sqlite", "postgres")
PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
BATCH = 100
Progress = Callable[[str], None]


class HarnessError(RuntimeError):
    """The server answered a benchmark request with an error."""


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    if response.status_code >= 300:
        raise HarnessError(f"POST {path} → {response.status_code}: {response.text[:500]}")
    data: dict[str, Any] = response.json()
    return data


def turn_episode(conv: Conversation, index: int) -> dict[str, Any]:
    """The ``POST /v1/episodes/batch`` item for one turn."""
    turn = conv.turns[index]
    message: dict[str, Any] = {"role": "user", "name": turn.speaker, "content": turn.text}
    if turn.caption:
        message["caption"] = turn.caption
    return {
        "subject_id": conv.id,
        "source": "bench",
        "type": "conversation.turn",
        "payload": {"messages": [message]},
        "session_id": turn.session,
        "idempotency_key": turn.id,
        "occurred_at": turn.at.isoformat(),
    }


def ingest(client: httpx.Client, conv: Conversation) -> dict[str, str]:
    """Post the conversation's turns in batches; returns turn id → episode id."""
    ids: dict[str, str] = {}
    for start in range(0, len(conv.turns), BATCH):
        items = [turn_episode(conv, i) for i in range(start, min(start + BATCH, len(conv.turns)))]
        created = _post(client, "/v1/episodes/batch", {"episodes": items})["episodes"]
        for item, episode in zip(items, created, strict=True):
            ids[item["idempotency_key"]] = str(episode["id"])
    return ids


def compile_subject(client: httpx.Client, subject_id: str) -> int:
    """Compile until nothing remains; returns the memories created."""
    created = 0
    while True:
        out = _post(client, "/v1/memories/compile", {"subject_id": subject_id})
        created += int(out.get("memories_created", 0))
        if not out.get("has_more"):
            return created


def provenance_ids(response: dict[str, Any]) -> set[str]:
    """Every episode id the response names as a source of what it returned."""
    prov = response.get("provenance") or {}
    ids = {str(i) for i in prov.get("source_episode_ids") or []}
    for item in prov.get("items") or []:
        ids.update(str(ref.get("id")) for ref in item.get("provenance") or [])
    return ids


class Scorer:
    """Scores one context response against a question's evidence."""

    def __init__(self, conv: Conversation, episode_ids: dict[str, str]) -> None:
        self.texts = {t.id: normalize_turn(t.text) for t in conv.turns}
        self.episode_ids = episode_ids
        self.count = get_tokenizer("cl100k_base").count

    def score(self, outcome: Outcome, budget: int, response: dict[str, Any]) -> None:
        context = str(response.get("assembled_context") or "")
        found = normalize_context(context)
        outcome.hits[budget] = any(contains_turn(found, self.texts[e]) for e in outcome.evidence)
        episodes = {self.episode_ids[e] for e in outcome.evidence}
        outcome.provenance_hits[budget] = bool(episodes & provenance_ids(response))
        outcome.tokens[budget] = self.count(context)
        outcome.items[budget] = len((response.get("provenance") or {}).get("items") or [])


class VectorProbe:
    """The share of a subject's memories (not deleted) that have a vector, read from the
    server's database through the store (a read beside the server's own; it changes
    nothing)."""

    def __init__(self, database_url: str) -> None:
        self.store = open_store(database_url, pool_size=1, migrate=False)

    def share(self, subject_id: str) -> float:
        scope = Scope.for_subject(subject_id)
        with self.store.snapshot() as tx:  # both counts from one snapshot
            total = tx.memories.count(DEFAULT_TENANT, scope)
            embedded = tx.memories.vector_count(DEFAULT_TENANT, scope)
        # (A forgotten memory loses its vector, so ``embedded`` counts no deleted one.)
        return min(1.0, embedded / total) if total else 0.0

    def close(self) -> None:
        self.store.close()


def ask(
    client: httpx.Client,
    conv: Conversation,
    scorer: Scorer,
    budgets: tuple[int, ...],
    probe: VectorProbe | None = None,
) -> tuple[list[Outcome], list[float]]:
    """Every question of the conversation at every budget (``probe``: record the share of
    the subject's memories with vectors as each question is asked)."""
    outcomes, latencies = [], []
    for q in conv.questions:
        outcome = Outcome(conv.id, q.question, q.category, q.evidence)
        if probe is not None:
            outcome.vectors = probe.share(conv.id)
        for budget in budgets:
            body = {"subject_id": conv.id, "task": q.question, "max_tokens": budget}
            t0 = time.perf_counter()
            response = _post(client, "/v1/context", body)
            latencies.append((time.perf_counter() - t0) * 1000)
            scorer.score(outcome, budget, response)
        outcomes.append(outcome)
    return outcomes, latencies


@contextmanager
def _database(backend: str, pg_url: str) -> Iterator[str]:
    if backend == "sqlite":
        yield ""  # the server's default: a SQLite file in its (fresh) data directory
    elif backend == "postgres":
        with scratch_postgres(pg_url, prefix="cairn_recall") as url:
            yield url
    else:
        raise ValueError(f"unknown backend {backend!r} (sqlite or postgres)")


def load(client: httpx.Client, conv: Conversation, report: BackendReport) -> Scorer:
    """Ingest and compile one conversation; returns the scorer for its questions."""
    t0 = time.perf_counter()
    episode_ids = ingest(client, conv)
    t1 = time.perf_counter()
    report.memories += compile_subject(client, conv.id)
    report.ingest_s += t1 - t0
    report.compile_s += time.perf_counter() - t1
    scorer = Scorer(conv, episode_ids)
    evidence = {e for q in conv.questions for e in q.evidence}
    shadowed = len(evidence & shadowed_turns(scorer.texts))
    report.shadowed_evidence += shadowed
    report.shadowed_by_conversation[conv.id] = shadowed
    return scorer


def run_backend(
    dataset: Dataset,
    backend: str,
    *,
    budgets: tuple[int, ...] = BUDGETS,
    pg_url: str = PG_DEFAULT,
    server_env: dict[str, str] | None = None,
    settle_s: float = 0.0,
    progress: Progress | None = None,
) -> BackendReport:
    """Start a server on ``backend``, load every conversation, then ask every question.

    ``settle_s`` waits between loading and asking, for work a server does in the background
    after a compile (e.g. embedding); 0 asks at once, as a user right after compiling would.
    """
    report = BackendReport(backend, budgets, [])
    with (
        tempfile.TemporaryDirectory() as data_dir,
        _database(backend, pg_url) as url,
        running_server(url, env=server_env, data_dir=Path(data_dir), default_settings=True) as base,
        httpx.Client(base_url=base, timeout=300) as client,
    ):
        scorers = [load(client, conv, report) for conv in dataset.conversations]
        if progress:
            progress(f"{backend}: {len(scorers)} conversations loaded, {report.memories} memories")
        time.sleep(settle_s)
        probe = VectorProbe(
            Settings(data_dir=Path(data_dir), database_url=url).resolved_database_url()
        )
        try:
            for conv, scorer in zip(dataset.conversations, scorers, strict=True):
                outcomes, latencies = ask(client, conv, scorer, budgets, probe)
                report.outcomes += outcomes
                report.latencies_ms += latencies
                if progress:
                    progress(f"{backend}: {conv.id} asked, {report.questions} questions so far")
        finally:
            probe.close()
    return report


def run(
    dataset: Dataset,
    *,
    backends: tuple[str, ...] = BACKENDS,
    budgets: tuple[int, ...] = BUDGETS,
    pg_url: str = PG_DEFAULT,
    server_env: dict[str, str] | None = None,
    settle_s: float = 0.0,
    progress: Progress | None = None,
) -> RecallReport:
    """Run the dataset on each backend in turn."""
    if not any(c.questions for c in dataset.conversations):
        raise ValueError(f"dataset {dataset.name!r} has no questions to ask")
    reports = {
        backend: run_backend(
            dataset,
            backend,
            budgets=budgets,
            pg_url=pg_url,
            server_env=server_env,
            settle_s=settle_s,
            progress=progress,
        )
        for backend in backends
    }
    return RecallReport(dataset.name, budgets, reports)


def split(report: RecallReport, datasets: list[Dataset]) -> list[RecallReport]:
    """Per dataset, the outcomes of a run of ``combined(datasets)`` (memories, timings and
    latencies stay with the combined run: they were not measured per dataset)."""
    out = []
    for d in datasets:
        ids = {c.id for c in d.conversations}
        backends = {}
        for name, r in report.backends.items():
            mine = BackendReport(name, r.budgets, [o for o in r.outcomes if o.conversation in ids])
            mine.shadowed_evidence = sum(r.shadowed_by_conversation.get(i, 0) for i in ids)
            backends[name] = mine
        out.append(RecallReport(d.name, report.budgets, backends))
    return out
