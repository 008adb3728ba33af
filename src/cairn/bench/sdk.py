"""What the SDK costs: per-call latency through ``Cairn``/``AsyncCairn`` against raw httpx, over
loopback HTTP and in-process, and ``cairn ingest`` throughput in both modes (SQLite).

Run: ``cairn bench sdk --calls 1000 --episodes 10000``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from cairn.bench.server import running_server
from cairn.client import AsyncCairn, Cairn
from cairn.config import Settings


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))]


def _timed(n: int, call: Callable[[int], Any]) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        call(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _episode(i: int) -> dict[str, Any]:
    return {
        "subject_id": "bench",
        "source": "bench",
        "type": "message",
        "payload": {"text": f"message {i} about the weather"},
    }


def _latencies(base: str, data_dir: Path, calls: int) -> list[tuple[str, str, list[float]]]:
    rows: list[tuple[str, str, list[float]]] = []
    with httpx.Client(base_url=base) as raw:
        rows.append(
            (
                "raw httpx",
                "loopback",
                _timed(
                    calls, lambda i: raw.post("/v1/episodes", json=_episode(i)).raise_for_status()
                ),
            )
        )
    with Cairn(base) as sdk:
        rows.append(
            ("Cairn", "loopback", _timed(calls, lambda i: sdk.episodes.create(**_episode(i))))
        )
    with Cairn.local(Settings(data_dir=data_dir)) as local:
        rows.append(
            ("Cairn", "in-process", _timed(calls, lambda i: local.episodes.create(**_episode(i))))
        )

    async def run_async() -> list[float]:
        async with AsyncCairn.local(Settings(data_dir=data_dir)) as c:
            out = []
            for i in range(calls):
                t0 = time.perf_counter()
                await c.episodes.create(**_episode(i))
                out.append((time.perf_counter() - t0) * 1000)
            return out

    rows.append(("AsyncCairn", "in-process", asyncio.run(run_async())))
    return rows


def _mcp(data_dir: Path, calls: int) -> list[tuple[str, list[float]]]:
    """Tool calls through an in-memory MCP client into ``build_server`` (in-process API)."""
    from cairn.mcp import build_server
    from mcp import Client

    async def go() -> list[tuple[str, list[float]]]:
        api = AsyncCairn.local(Settings(data_dir=data_dir))
        async with api, Client(build_server(api)) as mcp:
            rows = []
            for tool, args in (
                (
                    "record_episode",
                    lambda i: {"subject_id": "mcp", "text": f"note {i}", "session_id": "s"},
                ),
                (
                    "get_context",
                    lambda i: {"subject_id": "mcp", "task": "notes", "session_id": "s"},
                ),
            ):
                out = []
                for i in range(calls):
                    t0 = time.perf_counter()
                    result = await mcp.call_tool(tool, args(i))
                    out.append((time.perf_counter() - t0) * 1000)
                    assert not result.is_error
                rows.append((tool, out))
            return rows

    return asyncio.run(go())


def _ingest(args: list[str], data_dir: Path) -> float:
    env = {"CAIRN_DATA_DIR": str(data_dir), "PATH": "", "CAIRN_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "ingest", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(done.stdout)
    return float(summary["created"]) / float(summary["seconds"])


def run(calls: int = 1000, episodes: int = 10_000) -> None:
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server_dir, local_dir = root / "server", root / "local"
        src = root / "episodes.jsonl"
        src.write_text(
            "".join(
                json.dumps({**_episode(i), "subject_id": f"s{i % 100}"}) + "\n"
                for i in range(episodes)
            )
        )
        with running_server(f"sqlite:///{server_dir / 'cairn.db'}", data_dir=server_dir) as base:
            rows = _latencies(base, local_dir, calls)
            mcp_rows = _mcp(root / "mcp", calls)
            remote = _ingest([str(src), "--url", base], root / "unused")
        local = _ingest([str(src)], root / "ingest-local")
    table = Table(
        "client",
        "mode",
        "calls",
        "p50 ms",
        "p95 ms",
        "mean ms",
        title="POST /v1/episodes, one at a time (SQLite)",
    )
    for client, mode, lat in rows:
        table.add_row(
            client,
            mode,
            str(len(lat)),
            f"{_pct(lat, 50):.2f}",
            f"{_pct(lat, 95):.2f}",
            f"{statistics.fmean(lat):.2f}",
        )
    console.print(table)
    tools = Table(
        "tool",
        "calls",
        "p50 ms",
        "p95 ms",
        title="MCP tool calls (in-memory MCP client, in-process API)",
    )
    for tool, lat in mcp_rows:
        tools.add_row(tool, str(len(lat)), f"{_pct(lat, 50):.2f}", f"{_pct(lat, 95):.2f}")
    console.print(tools)
    ingest = Table("mode", "episodes", "episodes/s", title="cairn ingest (JSONL, 100 per batch)")
    ingest.add_row("--url (loopback server)", str(episodes), f"{remote:,.0f}")
    ingest.add_row("in-process", str(episodes), f"{local:,.0f}")
    console.print(ingest)


if __name__ == "__main__":  # pragma: no cover
    run()
