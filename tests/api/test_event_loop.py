"""The event loop never waits on the database: while a 20,000-episode compile runs, /healthz
and single-episode ingest stay responsive (a real ``cairn serve``, both backends).

Bounds: /healthz p99 ≤ 50 ms (the loop itself is never blocked) and one episode's POST p99 ≤
100 ms, generous against the milliseconds they take on an idle machine; a loop blocked by a lock
wait or a compile batch misses them by seconds. On SQLite a single POST may wait for one compile
step's write transaction (about 10-15 ms of CPU); the slow tail it used to have came from full
garbage collections over the server's start-up heap (80-280 ms with every thread stopped), which
``settle_server_heap`` takes out of the collector's sight (docs/benchmarks.md). The compile
steps aside for requests in flight (``cairn.engine.yielding``), which took the single POST's
p99 here from 33-45 ms to 22-31 ms on a quiet machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.alone]

EPISODES = 20_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=["sqlite", "postgres"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    env = {
        **os.environ,
        "CAIRN_DATA_DIR": str(tmp_path / "data"),
        "CAIRN_LOG_LEVEL": "WARNING",
        "CAIRN_WORKER_IN_PROCESS": "true",
        "CAIRN_EMBEDDER": "none",
    }
    if request.param == "postgres":
        from tests.conftest import database_url

        env["CAIRN_DATABASE_URL"] = database_url("postgres", tmp_path, request)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("server did not start")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def test_loop_stays_responsive_during_a_big_compile(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as c:
        for start in range(0, EPISODES, 100):
            batch = [
                {
                    "subject_id": "big",
                    "source": "chat",
                    "type": "conversation.turn",
                    "session_id": f"s{(start + i) // 500}",
                    "payload": {
                        "messages": [
                            {
                                "role": "user",
                                "content": f"Note {start + i}: I moved the meeting with Dana "
                                f"to room {start + i} and ordered {i % 7} coffees.",
                            }
                        ]
                    },
                }
                for i in range(100)
            ]
            assert c.post("/v1/episodes/batch", json={"episodes": batch}).status_code == 201
        job = c.post("/v1/memories/compile", json={"subject_id": "big", "async": True})
        assert job.status_code == 202, job.text
        job_id = job.json()["job_id"]

        health: list[float] = []
        ingest: list[float] = []
        seen_running = False
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            status = c.get(f"/v1/memories/compile/{job_id}").json()["status"]
            if status in ("completed", "failed"):
                break
            seen_running = seen_running or status == "running"
            t0 = time.perf_counter()
            assert c.get("/healthz").status_code == 200
            health.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = c.post(
                "/v1/episodes",
                json={
                    "subject_id": "other",
                    "source": "chat",
                    "type": "note",
                    "payload": {"text": f"probe {len(ingest)}"},
                },
            )
            assert r.status_code == 201
            ingest.append(time.perf_counter() - t0)
            time.sleep(0.01)
        assert status == "completed", status
    assert seen_running and len(health) >= 20, "the compile ended before it could be probed"
    slowest = {
        k: [round(x * 1000) for x in sorted(v)[-5:]]
        for k, v in (("health", health), ("ingest", ingest))
    }
    health_p99, ingest_p95, ingest_p99 = _pct(health, 0.99), _pct(ingest, 0.95), _pct(ingest, 0.99)
    seen = (
        f"ingest p95 {ingest_p95 * 1000:.0f} ms, p99 {ingest_p99 * 1000:.0f} ms of {len(ingest)}; "
        f"slowest {slowest}"
    )
    assert health_p99 <= 0.050, f"/healthz p99 {health_p99 * 1000:.0f} ms; {seen}"
    assert ingest_p99 <= 0.100, seen
