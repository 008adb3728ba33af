"""The default embedder's speed: query latency on one core, bulk memories/s, and how long after a
compile the vectors exist.

1. **Query**: ``--queries`` distinct questions embedded one at a time, the process pinned to one
   CPU and the model on one thread (as a server embeds a search query): p50/p95 ms. With
   ``--data``, the dataset's questions; otherwise synthetic ones of made-up words, which cost a
   model of many sentence pieces (e5) several times a real question's.
2. **Bulk**: the memories of a compiled synthetic conversation (their real embedding text, with
   context words) embedded in batches of ``CAIRN_EMBED_BATCH``, on one core and on all cores.
3. **Vectors after a compile**: ``--memories`` turns ingested into a SQLite file and compiled
   through ``Services`` with the background pass running; the time from the compile's return
   until every memory has its vector (the pass uses one thread).

The machine's load average is printed with the numbers: on a shared machine they are
indicative only.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cairn.bench.memories import questions, synthetic_episodes
from cairn.core.scope import Scope

TENANT = "default"


@contextmanager
def pinned(cores: int) -> Any:
    """Run the block on the first ``cores`` CPUs this process may use (Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        yield
        return
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(allowed[: max(1, cores)]))
    try:
        yield
    finally:
        os.sched_setaffinity(0, set(allowed))


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[int(p * (len(ordered) - 1))]


def query_latency(embedder: Any, n: int, data: Path | None = None) -> dict[str, float]:
    """Distinct questions embedded one at a time: the dataset's own questions when ``data``
    is given (real length), else seeded synthetic ones (made-up words: many more tokens)."""
    from cairn.engine.embedders import query_vector

    qs = questions(n + 20, seed=5)
    if data is not None:
        from cairn.bench.locomo import load

        real = list(dict.fromkeys(q["question"] for c in load(data) for q in c.questions))
        qs = real[: n + 20] if len(real) >= n + 20 else qs
    for q in qs[:20]:  # warm-up
        query_vector(embedder, q)
    times = []
    with pinned(1):
        for q in qs[20:]:
            t0 = time.perf_counter()
            query_vector(embedder, q)
            times.append((time.perf_counter() - t0) * 1000)
    return {"p50": statistics.median(times), "p95": _percentile(times, 0.95)}


def bulk_rate(embedder: Any, texts: list[str], batch: int, cores: int) -> float:
    with pinned(cores):
        t0 = time.perf_counter()
        for start in range(0, len(texts), batch):
            embedder.embed(texts[start : start + batch])
        return len(texts) / (time.perf_counter() - t0)


def _ingest(store: Any, episodes: list[Any]) -> None:
    for start in range(0, len(episodes), 1000):
        store.episodes.append_many(TENANT, episodes[start : start + 1000])


def vectors_after_compile(
    n: int, threads: int, data: Path | None = None, matmul: str = "int8", name: str = "e5"
) -> dict[str, Any]:
    """Ingest and compile ``n`` turns with the server's wiring; time the vectors' arrival."""
    from cairn.config import Settings
    from cairn.engine.search import embedding_text
    from cairn.services import Services

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp), embedder=name, embedder_threads=threads, onnx_matmul=matmul
        )
        services = Services.from_settings(settings)
        try:
            backfill, embedder = services.embedding_backfill, services.embedder
            assert backfill is not None and embedder is not None
            embedder.embed(["load the model before the clock starts"])
            backfill.start()
            backfill.wait_idle(10)
            scope = Scope.for_subject("bench")
            store = services.store
            _ingest(store, episodes_for(n, data, "bench"))
            t0 = time.perf_counter()
            while services.compile_step(TENANT, scope).has_more:
                pass
            compiled = time.perf_counter() - t0
            with store.snapshot() as tx:
                memories = len(tx.memories.without_embedding(TENANT, scope, limit=10**6))
            t1 = time.perf_counter()
            backfill.wait_idle(3600)
            lag = time.perf_counter() - t1
            with store.snapshot() as tx:
                texts = [
                    embedding_text(content, meta)
                    for _, content, meta in tx.memories.without_embedding(
                        TENANT, scope, limit=10**6
                    )
                ]
                left = len(texts)
                rows = tx.memories.vectors(TENANT, scope)
            backfill.stop()
        finally:
            services.close()
    return {
        "memories": memories,
        "compile_s": compiled,
        "vectors_s": lag,
        "left": left,
        "rate": memories / lag if lag else 0.0,
        "vectors": len(rows.seqs),
    }


def episodes_for(n: int, data: Path | None, subject: str) -> list[Any]:
    """``n`` turns: from a LoCoMo file's conversations when ``data`` is given (real English
    turns), else the seeded synthetic conversation (made-up words: many more tokens each)."""
    if data is None:
        return synthetic_episodes(n, subject)
    from cairn.bench.locomo import load
    from cairn.core.episodes import NewEpisode

    out: list[Any] = []
    for conv in load(data):
        for turn in conv.turns:
            msg = {"role": "user", "name": turn["speaker"], "content": turn["text"]}
            out.append(
                NewEpisode(
                    scope=Scope.for_subject(subject),
                    source="bench",
                    type="conversation.turn",
                    payload={"messages": [msg]},
                    session_id=f"{conv.sample_id}-{turn['session']}",
                    occurred_at=turn["at"],
                )
            )
            if len(out) >= n:
                return out
    return out


def memory_texts(n: int, data: Path | None = None) -> list[str]:
    """The embedding texts of ``n`` compiled turns (content plus context words)."""
    from cairn.engine.compile import compile_scope
    from cairn.engine.search import embedding_text
    from cairn.store import open_store

    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'texts.db'}")
        try:
            scope = Scope.for_subject("texts")
            _ingest(store, episodes_for(n, data, "texts"))
            while compile_scope(store, TENANT, scope).has_more:
                pass
            with store.snapshot() as tx:
                rows = tx.memories.without_embedding(TENANT, scope, limit=10**6)
        finally:
            store.close()
    return [embedding_text(content, meta) for _, content, meta in rows]


def run(
    queries: int,
    memories: int,
    batch: int,
    data: Path | None = None,
    console: Console | None = None,
    matmul: str = "int8",
    name: str = "e5",
) -> dict[str, Any]:
    from cairn.bench.paraphrases import recall_at_1
    from cairn.config import Settings
    from cairn.engine.embedders import get_embedder, query_vector

    console = console or Console()
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    one: Any = get_embedder(Settings(embedder=name, embedder_threads=1, onnx_matmul=matmul))
    load_s = time.perf_counter() - t0
    two: Any = get_embedder(Settings(embedder=name, embedder_threads=2, onnx_matmul=matmul))
    query = query_latency(one, queries, data)
    texts = memory_texts(memories, data)
    bulk1 = bulk_rate(one, texts, batch, cores=1)
    bulk2 = bulk_rate(two, texts, batch, cores=2)
    after = vectors_after_compile(memories, threads=1, data=data, matmul=matmul, name=name)
    recall = recall_at_1(one.embed, lambda text: query_vector(one, text))
    load_after = os.getloadavg()
    result = {
        "model": one.name,
        "matmul": matmul,
        "load_s": load_s,
        "query_ms": query,
        "bulk_per_s": {"1 core": bulk1, "2 cores": bulk2},
        "after_compile": after,
        "paraphrase_recall_at_1": recall["recall_at_1"],
        "texts": "locomo" if data else "synthetic",
        "loadavg": {"before": load_before, "after": load_after},
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    source = "LoCoMo turns" if data else "synthetic turns"
    products = "" if name == "e5" else f", {matmul} onnx products"  # e5 has its own
    table = Table(title=f"cairn bench embed ({one.name}{products}; {source})")
    table.add_column("measure")
    table.add_column("result", justify="right")
    table.add_row("model load", f"{load_s * 1000:.0f} ms")
    table.add_row(
        f"query, 1 core, {queries} queries", f"p50 {query['p50']:.1f} / p95 {query['p95']:.1f} ms"
    )
    table.add_row(f"bulk, 1 core, batch {batch}", f"{bulk1:.0f} memories/s")
    table.add_row(f"bulk, 2 cores, batch {batch}", f"{bulk2:.0f} memories/s")
    table.add_row(
        f"compile {after['memories']} memories (heuristic)", f"{after['compile_s']:.2f} s"
    )
    table.add_row(
        "then all vectors written (background, 1 thread)",
        f"{after['vectors_s']:.2f} s ({after['rate']:.0f}/s)",
    )
    table.add_row(
        "paraphrase recall@1 (vector only)",
        " ".join(f"{k} {v:.1f}" for k, v in recall["recall_at_1"].items()),
    )
    console.print(table)
    console.print(
        "load average before "
        + " ".join(f"{x:.2f}" for x in load_before)
        + ", after "
        + " ".join(f"{x:.2f}" for x in load_after)
        + " (numbers are indicative unless the machine was idle)"
    )
    return result
