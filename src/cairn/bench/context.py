"""Context assembly latency: p50/p95 of ``POST /v1/scopes/context`` (and Statewave's
``POST /v1/context``) through a real server on loopback, with N memories in one subject.

Each size gets a fresh database: N compiled-style memories (synthetic 8-24 word sentences over
a 4,000-word Zipf-distributed vocabulary, written in bulk so the database maintains their
full-text index as usual), a 40-turn conversation for the recent lane, and a 50-document
dataset. Requests ask for a random 3-7 content-word query plus the conversation, with the
default budget. Requests are sequential: the numbers are per-request latency, not throughput.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from cairn.bench.server import running_server
from cairn.core.memory import ContextRequest, Document, Message, Turn
from cairn.core.scope import Scope
from cairn.engine.context import CairnAssembly
from cairn.store import open_store
from cairn.store.memory_search import search_text

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"
SUBJECT = "bench-subject"
TENANT = "default"
T0 = datetime(2024, 1, 1, tzinfo=UTC)

_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ren",
    "to",
    "sa",
    "vel",
    "dor",
    "an",
    "is",
    "pra",
    "que",
    "ni",
    "bo",
    "tur",
    "ge",
    "fa",
    "lin",
    "os",
    "ce",
)
# A 4,000-word vocabulary with Zipf (s = 1) frequencies, like natural text. The 100 most common
# words stand for function words: queries never use them, as query processing drops stop words.
_VOCAB = [
    a + b + c
    for a in _SYLLABLES
    for b in _SYLLABLES
    for c in ("", "n", "s", "r", "l", "m", "t", "x", "k", "d")
][:4000]
_WEIGHTS = [1.0 / (rank + 1) for rank in range(len(_VOCAB))]
_CONTENT_WORDS = _VOCAB[100:]
_CONTENT_WEIGHTS = _WEIGHTS[100:]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_VOCAB, _WEIGHTS, k=n)).capitalize() + "."


def query_text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_CONTENT_WORDS, _CONTENT_WEIGHTS, k=n)) + "?"


def populate(url: str, n: int, seed: int = 7) -> None:
    """N memories, a conversation and a dataset in the subject's scope."""
    rng = random.Random(seed)
    store = open_store(url)
    scope = Scope.for_subject(SUBJECT)
    try:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if batch:
                with store.transaction() as tx:
                    tx.memories.load_rows(TENANT, batch)
                batch.clear()

        for i in range(n):
            speaker = rng.choice(["Caroline", "Melanie", "User"])
            content = f"{speaker}: {sentence(rng, rng.randint(8, 24))}"
            at = T0 + timedelta(minutes=i)
            batch.append(
                {
                    "id": uuid.uuid4(),
                    "tenant_id": TENANT,
                    "runtime_id": scope.runtime_id,
                    "user_id": scope.user_id,
                    "agent_id": scope.agent_id,
                    "session_id": f"s{i // 40}",
                    "kind": "turn" if i % 10 else "profile_fact",
                    "content": content,
                    "search_text": search_text(content, {}),
                    "summary": content,
                    "confidence": 1.0,
                    "valid_from": at,
                    "valid_to": None,
                    "status": "active",
                    "source_episode_ids": [str(uuid.uuid4())],
                    "metadata": {"speaker": speaker},
                    "content_hash": hashlib.sha256(f"{i}:{content}".encode()).hexdigest(),
                    "superseded_by": None,
                    "embedding": None,
                    "created_at": at,
                    "updated_at": at,
                }
            )
            if len(batch) >= 2000:
                flush()
        flush()
        a = CairnAssembly(store, TENANT)
        for t in range(40):
            a.commit_turn(
                Turn(
                    scope=scope,
                    conversation_id="live",
                    idempotency_key=f"t{t}",
                    messages=[
                        Message(role="user", content=sentence(rng, 14)),
                        Message(role="assistant", content=sentence(rng, 10)),
                    ],
                )
            )
        for d in range(50):
            a.put_document(
                Document(
                    scope=scope,
                    dataset_id="docs",
                    document_id=f"d{d}",
                    content=" ".join(sentence(rng, 15) for _ in range(20)),
                )
            )
    finally:
        store.close()


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def measure(base: str, requests: int, seed: int = 11) -> dict[str, float]:
    rng = random.Random(seed)
    scope = Scope.for_subject(SUBJECT).model_dump()
    scoped, statewave = [], []
    with httpx.Client(base_url=base, timeout=30) as client:
        for i in range(requests + 20):
            query = query_text(rng, rng.randint(3, 7))
            t0 = time.perf_counter()
            r = client.post(
                "/v1/scopes/context",
                json={
                    "scope": scope,
                    "conversation_id": "live",
                    "query": query,
                    "dataset_ids": ["docs"],
                },
            )
            t1 = time.perf_counter()
            r.raise_for_status()
            s = client.post(
                "/v1/context",
                json={
                    "subject_id": SUBJECT,
                    "task": query,
                    "max_tokens": 1000,
                    "session_id": "live",
                },
            )
            t2 = time.perf_counter()
            s.raise_for_status()
            if i >= 20:  # warm-up
                scoped.append((t1 - t0) * 1000)
                statewave.append((t2 - t1) * 1000)
    p50, p95 = percentiles(scoped)
    s50, s95 = percentiles(statewave)
    return {"p50": p50, "p95": p95, "sw_p50": s50, "sw_p95": s95}


def measure_in_process(url: str, requests: int, seed: int = 11) -> tuple[float, float]:
    rng = random.Random(seed)
    store = open_store(url, migrate=False)
    try:
        a = CairnAssembly(store, TENANT)
        scope = Scope.for_subject(SUBJECT)
        times = []
        with_memories = 0
        for i in range(requests + 20):
            req = ContextRequest(
                scope=scope,
                conversation_id="live",
                query=query_text(rng, rng.randint(3, 7)),
                dataset_ids=["docs"],
            )
            t0 = time.perf_counter()
            result = a.context(req)
            if i >= 20:
                times.append((time.perf_counter() - t0) * 1000)
            with_memories += any(
                item.source_class == "long_term" and item.provenance[0].type != "chunk"
                for item in result.items
            )
    finally:
        store.close()
    if with_memories < (requests + 20) // 2:
        # A search lane that finds nothing is fast: refuse to report such a run.
        raise RuntimeError(
            f"only {with_memories} of {requests + 20} requests recalled a memory: the "
            "long-term lane is not searching the corpus"
        )
    return percentiles(times)


def bench_size(url: str, n: int, requests: int) -> dict[str, float]:
    t0 = time.perf_counter()
    populate(url, n)
    load_s = time.perf_counter() - t0
    with (
        tempfile.TemporaryDirectory() as data_dir,
        running_server(url, data_dir=Path(data_dir)) as base,
    ):
        out = measure(base, requests)
    out["lib_p50"], out["lib_p95"] = measure_in_process(url, requests)
    out["load_s"] = load_s
    return out


def _with_pg_database(admin_url: str, fn: Callable[[str], dict[str, float]]) -> dict[str, float]:
    from cairn.store.scratch import scratch_database

    with scratch_database(admin_url, "cairn_bench_ctx") as url:
        return fn(url)


def run(
    sizes: tuple[int, ...] = (1_000, 10_000, 100_000),
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    requests: int = 300,
    pg_url: str = PG_DEFAULT,
) -> list[dict[str, Any]]:
    """Measure every backend and size and print one table."""
    rows: list[dict[str, Any]] = []
    console = Console()
    for backend in backends:
        for n in sizes:
            console.print(f"[dim]{backend}: {n:,} memories …[/dim]")
            if backend == "sqlite":
                with tempfile.TemporaryDirectory() as tmp:
                    r = bench_size(f"sqlite:///{Path(tmp) / 'ctx.db'}", n, requests)
            else:
                r = _with_pg_database(pg_url, partial(bench_size, n=n, requests=requests))
            row: dict[str, Any] = {"backend": backend, "memories": n, **r}
            rows.append(row)
            console.print(
                f"[dim]  HTTP p50 {r['p50']:.1f} / p95 {r['p95']:.1f} ms, /v1/context p50 "
                f"{r['sw_p50']:.1f} / p95 {r['sw_p95']:.1f} ms, library p50 {r['lib_p50']:.1f} "
                f"/ p95 {r['lib_p95']:.1f} ms (load {r['load_s']:.0f} s)[/dim]"
            )
    table = Table(title=f"context assembly latency, {requests} sequential requests (ms)")
    for col in (
        "backend",
        "memories",
        "HTTP p50",
        "HTTP p95",
        "/v1/context p50",
        "/v1/context p95",
        "library p50",
        "library p95",
    ):
        table.add_column(col, justify="right")
    for line in rows:
        table.add_row(
            line["backend"],
            f"{line['memories']:,}",
            f"{line['p50']:.1f}",
            f"{line['p95']:.1f}",
            f"{line['sw_p50']:.1f}",
            f"{line['sw_p95']:.1f}",
            f"{line['lib_p50']:.1f}",
            f"{line['lib_p95']:.1f}",
        )
    console.print(table)
    return rows
