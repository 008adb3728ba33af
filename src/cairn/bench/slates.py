"""Slate throughput and latency with eviction active, through the ``Slates`` service in process.

For each backend: appends to a full FIFO folder (every write evicts), appends alternating
between two files of a full LRU folder, ``mergeByKey`` updates of a JSON file, reads that count
as a use (an LRU folder: a small write transaction), peek reads (a read transaction), appends
from several threads at once to one folder (serialized by the folder lock), and appends to a
large (8,000-token) full folder, where each write re-counts the files it changes.

"CPU ms/op" is this process's CPU time per operation (Python, tokenizer, driver; for SQLite also
the database engine): on a busy machine it separates the cost of a write from waiting.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from cairn.bench.ingest import PG_DEFAULT, _with_pg_database, percentile

T = "bench"
LADDER = "bench"
SLATES = [
    {
        "title": "Memory",
        "folders": [
            {
                "name": "facts",
                "tokenLimit": 500,
                "evictionPolicy": "FIFO",
                "files": [{"name": "core.md"}],
            },
            {
                "name": "lessons",
                "tokenLimit": 300,
                "evictionPolicy": "LRU",
                "files": [{"name": "failures.md"}, {"name": "wins.md"}],
            },
            {
                "name": "people",
                "tokenLimit": 2000,
                "evictionPolicy": "FIFO",
                "files": [{"name": "people.json"}],
            },
            {
                "name": "large",
                "tokenLimit": 8000,
                "evictionPolicy": "FIFO",
                "files": [{"name": "a.md"}, {"name": "b.md"}],
            },
            {
                "name": "shared",
                "tokenLimit": 500,
                "evictionPolicy": "FIFO",
                "files": [{"name": "log.md"}],
            },
        ],
    }
]


def _entry(i: int) -> str:
    return f"fact {i}: the bench learnt that item {i} belongs to group {i % 17} today."


def _timed(n: int, fn: Callable[[int], Any]) -> tuple[list[float], float, int]:
    """Latencies (ms), wall seconds, and evictions counted from write results."""
    latencies, evictions = [], 0
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        result = fn(i)
        latencies.append((time.perf_counter() - t0) * 1000)
        evictions += len(getattr(result, "evictions", []) or [])
    return latencies, time.perf_counter() - start, evictions


def _measure(url: str, ops: int, threads: int) -> list[dict[str, Any]]:
    from cairn.slates.config import parse_slates
    from cairn.slates.service import Slates
    from cairn.store import open_store

    store = open_store(url)
    slates = Slates(store)
    slates.declare(LADDER, parse_slates(SLATES, "bench"))
    try:
        w = slates.write
        for i in range(60):  # fill the folders so that eviction is active from the start
            w(T, LADDER, "Memory", "facts", "core.md", _entry(i))
            w(T, LADDER, "Memory", "lessons", ("wins.md", "failures.md")[i % 2], _entry(i))
        for i in range(900):
            w(T, LADDER, "Memory", "large", ("a.md", "b.md")[i % 2], _entry(i))
        rows = [_op_row(name, n, fn) for name, n, fn in _single_thread_ops(slates, ops)]
        rows.append(_threaded_row(slates, ops, threads))
    finally:
        store.close()
    return rows


def _op_row(name: str, n: int, fn: Callable[[int], Any]) -> dict[str, Any]:
    cpu = time.process_time()
    lat, wall, ev = _timed(n, fn)
    return {
        "op": name,
        "n": n,
        "per_s": n / wall,
        "p50": percentile(lat, 50),
        "p95": percentile(lat, 95),
        "evictions": ev,
        "cpu": (time.process_time() - cpu) * 1000 / n,
    }


def _single_thread_ops(slates: Any, ops: int) -> list[tuple[str, int, Callable[[int], Any]]]:
    """The measured operations: name, how many, and one call."""
    w = slates.write
    lessons = ("wins.md", "failures.md")

    def merge(i: int) -> Any:
        note = {"id": i % 50, "note": _entry(i)}
        return w(T, LADDER, "Memory", "people", "people.json", note, on="mergeByKey", key="id")

    return [
        (
            "append, FIFO 500 (full)",
            ops,
            lambda i: w(T, LADDER, "Memory", "facts", "core.md", _entry(i)),
        ),
        (
            "append, LRU 300 (full)",
            ops,
            lambda i: w(T, LADDER, "Memory", "lessons", lessons[i % 2], _entry(i)),
        ),
        ("mergeByKey (50 keys)", ops, merge),
        (
            "append, FIFO 8000 (full)",
            max(ops // 4, 1),
            lambda i: w(T, LADDER, "Memory", "large", ("a.md", "b.md")[i % 2], _entry(i)),
        ),
        (
            "read (LRU, counted)",
            ops,
            lambda i: slates.read(T, LADDER, "Memory", "lessons", "wins.md"),
        ),
        (
            "read (peek)",
            ops,
            lambda i: slates.read(T, LADDER, "Memory", "facts", "core.md", peek=True),
        ),
        (
            "read index metatag",
            ops,
            lambda i: slates.read(T, LADDER, "Memory", "lessons", metatag="index"),
        ),
    ]


def _threaded_row(slates: Any, ops: int, threads: int) -> dict[str, Any]:
    """Appends to one shared folder from ``threads`` threads at once."""
    per_thread = max(ops // threads, 1)

    def worker(t: int) -> tuple[list[float], int]:
        lat, _, ev = _timed(
            per_thread,
            lambda i: slates.write(
                T, LADDER, "Memory", "shared", "log.md", _entry(t * 100_000 + i)
            ),
        )
        return lat, ev

    start, cpu = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(worker, range(threads)))
    wall = time.perf_counter() - start
    latencies = [x for lat, _ in results for x in lat]
    return {
        "op": f"append, {threads} threads, 1 folder",
        "n": per_thread * threads,
        "per_s": per_thread * threads / wall,
        "p50": percentile(latencies, 50),
        "p95": percentile(latencies, 95),
        "evictions": sum(ev for _, ev in results),
        "cpu": (time.process_time() - cpu) * 1000 / (per_thread * threads),
    }


def _measure_postgres(pg_url: str, ops: int, threads: int) -> list[dict[str, Any]]:
    found: list[list[dict[str, Any]]] = []

    def measure(url: str) -> dict[str, float]:
        found.append(_measure(url, ops, threads))
        return {}

    _with_pg_database(pg_url, measure)
    return found[0]


def run(
    *,
    ops: int = 2000,
    threads: int = 4,
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    pg_url: str = PG_DEFAULT,
) -> None:
    """Measure each backend and print one table."""
    console = Console(width=120)
    table = Table(
        "backend",
        "operation",
        "ops",
        "ops/s",
        "p50 ms",
        "p95 ms",
        "CPU ms/op",
        "evictions",
        title=f"cairn bench slates (ops={ops}, threads={threads})",
    )
    for backend in backends:
        if backend == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                rows = _measure(f"sqlite:///{Path(tmp) / 'bench.db'}", ops, threads)
        elif backend == "postgres":
            rows = _measure_postgres(pg_url, ops, threads)
        else:
            raise SystemExit(f"unknown backend {backend!r}: use sqlite or postgres")
        for r in rows:
            table.add_row(
                backend,
                r["op"],
                str(r["n"]),
                f"{r['per_s']:,.0f}",
                f"{r['p50']:.2f}",
                f"{r['p95']:.2f}",
                f"{r['cpu']:.2f}",
                str(r["evictions"]),
            )
    console.print(table)
