"""Ingest throughput and latency through the HTTP API on loopback, on SQLite and PostgreSQL.

Measures: single ``POST /v1/episodes`` one at a time (p50/p95 latency), single requests with
several in flight (episodes/s), and 100-episode batches with several in flight (episodes/s).
With ``servers`` > 1 the batches go to that many ``cairn serve`` processes on one database
(each on its own port, batches dealt round-robin), the client sending from one process.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from cairn.bench.server import running_server

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


def _episode(i: int, subject: str) -> dict[str, Any]:
    return {
        "subject_id": subject,
        "source": "bench",
        "type": "conversation.turn",
        "session_id": f"s{i // 50}",
        "payload": {
            "messages": [{"role": "user", "content": f"message number {i} about the weather"}]
        },
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def _sequential(base: str, n: int) -> list[float]:
    latencies = []
    async with httpx.AsyncClient(base_url=base) as client:
        for i in range(n):
            t0 = time.perf_counter()
            r = await client.post("/v1/episodes", json=_episode(i, "latency"))
            latencies.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return latencies


async def post_concurrently(
    base: str,
    bodies: list[tuple[str, Any]],
    concurrency: int,
    headers: dict[str, str] | None = None,
) -> float:
    queue = list(reversed(bodies))

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            path, body = queue.pop()
            r = await client.post(path, json=body)
            r.raise_for_status()

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, limits=limits, timeout=60, headers=headers
    ) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - t0


async def _spread(bases: list[str], bodies: list[bytes], per_server: int) -> float:
    """POST pre-encoded batches, ``per_server`` in flight to each server; seconds taken."""
    queues = [bodies[i :: len(bases)] for i in range(len(bases))]

    async def worker(client: httpx.AsyncClient, queue: list[bytes]) -> None:
        while queue:
            r = await client.post(
                "/v1/episodes/batch",
                content=queue.pop(),
                headers={"content-type": "application/json"},
            )
            r.raise_for_status()

    limits = httpx.Limits(max_connections=per_server, max_keepalive_connections=per_server)
    clients = [httpx.AsyncClient(base_url=b, limits=limits, timeout=60) for b in bases]
    try:
        t0 = time.perf_counter()
        await asyncio.gather(
            *(worker(c, q) for c, q in zip(clients, queues, strict=True) for _ in range(per_server))
        )
        return time.perf_counter() - t0
    finally:
        for c in clients:
            await c.aclose()


def _batches(episodes: int) -> list[bytes]:
    """``episodes // 100`` request bodies of 100 episodes, encoded once (client CPU is scarce)."""
    subject = f"bench-{uuid.uuid4().hex[:8]}"
    return [
        json.dumps({"episodes": [_episode(b * 100 + j, subject) for j in range(100)]}).encode()
        for b in range(episodes // 100)
    ]


def bench_backend(
    name: str, url: str, episodes: int, concurrency: int, servers: int = 1
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        bases = [
            stack.enter_context(running_server(url, data_dir=Path(tmp)))
            for _ in range(max(1, servers))
        ]
        base = bases[0]
        # Warm up connections, caches and the statement cache.
        asyncio.run(_sequential(base, 50))
        latencies = asyncio.run(_sequential(base, min(episodes, 2000)))
        subject = f"bench-{uuid.uuid4().hex[:8]}"
        singles = [("/v1/episodes", _episode(i, subject)) for i in range(episodes)]
        single_s = asyncio.run(post_concurrently(base, singles, concurrency))
        per_server = max(2, concurrency // 2)
        asyncio.run(_spread(bases, _batches(100 * 4 * len(bases)), per_server))  # warm-up
        batches = _batches(episodes)
        batch_s = asyncio.run(_spread(bases, batches, per_server))
    return {
        "p50_ms": statistics.median(latencies),
        "p95_ms": percentile(latencies, 95),
        "single_eps": episodes / single_s,
        "batch_eps": len(batches) * 100 / batch_s,
    }


def run(
    episodes: int = 10_000,
    concurrency: int = 8,
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    pg_url: str = PG_DEFAULT,
    servers: int = 1,
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name in backends:
        if name == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = bench_backend(
                    name, f"sqlite:///{tmp}/bench.db", episodes, concurrency, servers
                )
        else:
            results[name] = _with_pg_database(
                pg_url, lambda u, n=name: bench_backend(n, u, episodes, concurrency, servers)
            )
    title = f"HTTP ingest on loopback ({episodes} episodes per mode"
    title += f"; batches over {servers} server processes)" if servers > 1 else ")"
    table = Table(title=title)
    for col in ("backend", "single p50 ms", "single p95 ms", "singles ep/s", "batch-100 ep/s"):
        table.add_column(col, justify="right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r['p50_ms']:.2f}",
            f"{r['p95_ms']:.2f}",
            f"{r['single_eps']:,.0f}",
            f"{r['batch_eps']:,.0f}",
        )
    Console().print(table)
    return results


def _with_pg_database(admin_url: str, fn: Any) -> dict[str, float]:
    """Run ``fn(url)`` on a scratch PostgreSQL database, dropped afterwards."""
    from cairn.store.scratch import scratch_database

    with scratch_database(admin_url) as url:
        result: dict[str, float] = fn(url)
        return result
