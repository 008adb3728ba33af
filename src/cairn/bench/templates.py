"""Memory-template costs: catalogue loading, rendering, and apply through the HTTP API.

Apply is compared with a plain ``POST /v1/episodes`` carrying the same payload, so the table
shows what validation and rendering add on top of ordinary ingest.
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
import yaml
from rich.console import Console
from rich.table import Table

from cairn.bench.ingest import PG_DEFAULT, _with_pg_database, percentile, post_concurrently
from cairn.bench.server import running_server
from cairn.core.scope import Scope
from cairn.templates import build_episode, load_catalogue

VALUES = {
    "customer": "Globex Corp",
    "issue": "Duplicate charge on the May invoice; the customer was billed twice for seat 14.",
    "steps_taken": "Checked the invoice history, confirmed both charges, opened a refund ticket.",
    "next_owner": "Tier 2 billing",
}
APPLY = "/v1/memory-templates/customer-support-handoff/apply"


def _apply_body(i: int, subject: str) -> dict[str, Any]:
    return {"subject_id": subject, "session_id": f"t{i // 50}", "values": VALUES}


def _episode_body(i: int, subject: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {
        "subject_id": subject,
        "session_id": f"t{i // 50}",
        "source": "bench",
        "type": "support.handoff_note",
        "payload": payload,
    }


def _per_second(fn: Any, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t0)


def bench_in_process(operator_files: int) -> dict[str, float]:
    """Catalogue load (bundled + N operator files) and build_episode throughput."""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(operator_files):
            data = {
                "id": f"op-{i}",
                "version": 1,
                "title": f"Operator {i}",
                "episode_type": "op.note",
                "fields": [{"name": "a", "required": True}, {"name": "b", "type": "text"}],
                "content_template": "A: {a}\n\nB: {b}\n{{literal}}",
            }
            (Path(tmp) / f"op-{i}.yaml").write_text(yaml.safe_dump(data))
        t0 = time.perf_counter()
        catalogue = load_catalogue([Path(tmp)])
        load_ms = (time.perf_counter() - t0) * 1000
    template = catalogue.get("customer-support-handoff")
    scope = Scope.for_subject("bench")
    big = {**VALUES, "steps_taken": "{customer} " * 5000}
    return {
        "load_ms": load_ms,
        "templates": float(len(catalogue)),
        "apply_per_s": _per_second(lambda: build_episode(template, scope, VALUES), 20_000),
        "apply_big_per_s": _per_second(lambda: build_episode(template, scope, big), 2_000),
    }


async def _latencies(base: str, path: str, bodies: list[dict[str, Any]]) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=base) as client:
        for body in bodies:
            t0 = time.perf_counter()
            r = await client.post(path, json=body)
            out.append((time.perf_counter() - t0) * 1000)
            r.raise_for_status()
    return out


def bench_http(url: str, n: int, concurrency: int) -> dict[str, float]:
    payload = build_episode(
        load_catalogue().get("customer-support-handoff"), Scope.for_subject("x"), VALUES
    ).payload
    with tempfile.TemporaryDirectory() as tmp, running_server(url, data_dir=Path(tmp)) as base:
        asyncio.run(_latencies(base, APPLY, [_apply_body(i, "warm") for i in range(50)]))
        seq = min(n, 1000)
        apply_lat = asyncio.run(
            _latencies(base, APPLY, [_apply_body(i, "lat-a") for i in range(seq)])
        )
        plain_lat = asyncio.run(
            _latencies(
                base, "/v1/episodes", [_episode_body(i, "lat-e", payload) for i in range(seq)]
            )
        )
        subject = f"bench-{uuid.uuid4().hex[:8]}"
        apply_s = asyncio.run(
            post_concurrently(
                base, [(APPLY, _apply_body(i, subject)) for i in range(n)], concurrency
            )
        )
        subject = f"bench-{uuid.uuid4().hex[:8]}"
        plain_s = asyncio.run(
            post_concurrently(
                base,
                [("/v1/episodes", _episode_body(i, subject, payload)) for i in range(n)],
                concurrency,
            )
        )
    return {
        "apply_p50": statistics.median(apply_lat),
        "apply_p95": percentile(apply_lat, 95),
        "plain_p50": statistics.median(plain_lat),
        "plain_p95": percentile(plain_lat, 95),
        "apply_per_s": n / apply_s,
        "plain_per_s": n / plain_s,
    }


def run(
    applies: int = 5_000,
    concurrency: int = 8,
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    pg_url: str = PG_DEFAULT,
    operator_files: int = 100,
) -> None:
    console = Console()
    local = bench_in_process(operator_files)
    table = Table(title="Templates in process")
    for col in ("catalogue", "load ms", "build_episode/s", "build_episode/s (50 KB value)"):
        table.add_column(col, justify="right")
    table.add_row(
        f"5 bundled + {operator_files} files",
        f"{local['load_ms']:.1f}",
        f"{local['apply_per_s']:,.0f}",
        f"{local['apply_big_per_s']:,.0f}",
    )
    console.print(table)

    results: dict[str, dict[str, float]] = {}
    for name in backends:
        if name == "sqlite":
            with tempfile.TemporaryDirectory() as tmp:
                results[name] = bench_http(f"sqlite:///{tmp}/bench.db", applies, concurrency)
        else:
            results[name] = _with_pg_database(pg_url, lambda u: bench_http(u, applies, concurrency))
    table = Table(title=f"HTTP on loopback: template apply vs plain episode ({applies} each)")
    for col in (
        "backend",
        "apply p50 ms",
        "apply p95 ms",
        "episode p50 ms",
        "episode p95 ms",
        "apply/s",
        "episode/s",
    ):
        table.add_column(col, justify="right")
    for name, r in results.items():
        table.add_row(
            name,
            f"{r['apply_p50']:.2f}",
            f"{r['apply_p95']:.2f}",
            f"{r['plain_p50']:.2f}",
            f"{r['plain_p95']:.2f}",
            f"{r['apply_per_s']:,.0f}",
            f"{r['plain_per_s']:,.0f}",
        )
    console.print(table)
