"""Ingest throughput and latency through the HTTP API on loopback, on SQLite and PostgreSQL.

Measures: single ``POST /v1/episodes`` one at a time (p50/p95 latency), single requests with
several in flight (episodes/s), and 100-episode batches with several in flight (episodes/s).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
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


async def post_concurrently(base: str, bodies: list[tuple[str, Any]], concurrency: int) -> float:
    queue = list(reversed(bodies))

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            path, body = queue.pop()
            r = await client.post(path, json=body)
            r.raise_for_status()

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        return time.perf_counter() - t0


def bench_backend(name: str, url: str, episodes: int, concurrency: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp, running_server(url, data_dir=Path(tmp)) as base:
        # Warm up connections, caches and the statement cache.
        asyncio.run(_sequential(base, 50))
        latencies = asyncio.run(_sequential(base, min(episodes, 2000)))
        subject = f"bench-{uuid.uuid4().hex[:8]}"
        singles = [("/v1/episodes", _episode(i, subject)) for i in range(episodes)]
        single_s = asyncio.run(post_concurrently(base, singles, concurrency))
        subject = f"bench-{uuid.uuid4().hex[:8]}"
        batches = [
            (
                "/v1/episodes/batch",
                {"episodes": [_episode(b * 100 + j, subject) for j in range(100)]},
            )
            for b in range(episodes // 100)
        ]
        batch_s = asyncio.run(post_concurrently(base, batches, max(2, concurrency // 2)))
    return {
        "p50_ms": statistics.median(latencies),
        "p95_ms": percentile(latencies, 95),
        "single_eps": episodes / single_s,
        "batch_eps": (episodes // 100) * 100 / batch_s,
    }


def run(
    episodes: int = 10_000,
    concurrency: int = 8,
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    pg_url: str = PG_DEFAULT,
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name in backends:
        if name == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = bench_backend(
                    name, f"sqlite:///{tmp}/bench.db", episodes, concurrency
                )
        else:
            results[name] = _with_pg_database(
                pg_url, lambda u, n=name: bench_backend(n, u, episodes, concurrency)
            )
    table = Table(title=f"HTTP ingest on loopback ({episodes} episodes per mode)")
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
    from sqlalchemy import create_engine, text

    from cairn.store.database import normalize_url

    name = f"cairn_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        return fn(admin_url.rsplit("/", 1)[0] + f"/{name}")
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
