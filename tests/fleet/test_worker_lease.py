"""A fleet on PostgreSQL as an operator runs it: two ``cairn serve`` and two ``cairn worker``
processes. A worker is killed (SIGKILL) in the middle of a compile job; the other worker takes
the job once its lease runs out and finishes it, and while the first worker was alive (slower
than the lease, but renewing it) nobody took its job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from cairn.store import open_store
from cairn.store.jobs import compile_jobs
from tests.cli.test_serve_and_keys import env_for
from tests.cli.test_serve_bind import free_port, running
from tests.conftest import database_url

LEASE_S = 3
LLM_DELAY_S = 5  # one compile call: longer than the lease, so only the heartbeat keeps it


class SlowModel:
    """A fake OpenAI-compatible endpoint whose every answer takes LLM_DELAY_S."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()


@pytest.fixture
def slow_llm() -> Iterator[tuple[str, SlowModel]]:
    model = SlowModel()
    answer = {
        "memories": [
            {"kind": "profile_fact", "content": "The user climbs in Fontainebleau.", "sources": [0]}
        ]
    }

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            with model.lock:
                model.calls += 1
            time.sleep(LLM_DELAY_S)
            content = json.dumps(answer)
            payload = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": content}}]}
            ).encode()
            try:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the worker that asked was killed

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.postgres
def test_killed_workers_job_is_finished_by_the_other_within_the_lease(
    tmp_path: Path, request: pytest.FixtureRequest, slow_llm: tuple[str, SlowModel]
) -> None:
    url = database_url("postgres", tmp_path, request)
    llm_url, model = slow_llm
    env = env_for(
        tmp_path,
        CAIRN_DATABASE_URL=url,
        CAIRN_COMPILER="llm",
        CAIRN_LLM_BASE_URL=llm_url,
        CAIRN_LLM_MODEL="fake",
        CAIRN_LLM_TIMEOUT_S="60",
        CAIRN_WORKER_IN_PROCESS="false",
        CAIRN_JOB_LEASE_SECONDS=str(LEASE_S),
    )
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    ports = [free_port(), free_port()]
    worker_cmd = [sys.executable, "-m", "cairn.cli.main", "worker", "--poll", "0.2"]
    workers: list[subprocess.Popen[bytes]] = []
    store = open_store(url, migrate=False)
    try:
        with (
            running(["cairn.cli.main", "serve", "--port", str(ports[0])], env, ports[0]),
            running(["cairn.cli.main", "serve", "--port", str(ports[1])], env, ports[1]),
        ):
            a, b = (f"http://127.0.0.1:{p}" for p in ports)
            episode = {
                "subject_id": "fleet-1",
                "source": "chat",
                "type": "message",
                "payload": {"text": "I climb in Fontainebleau every weekend."},
            }
            assert httpx.post(f"{a}/v1/episodes", json=episode, timeout=30).status_code == 201
            queued = httpx.post(
                f"{a}/v1/memories/compile",
                json={"subject_id": "fleet-1", "async": True},
                timeout=30,
            )
            assert queued.status_code == 202, queued.text
            job_id = queued.json()["job_id"]

            def attempts() -> int:
                with store.db.read() as conn:
                    row = conn.execute(
                        compile_jobs.select().where(compile_jobs.c.id == job_id)
                    ).one()
                return int(row.attempts)

            workers.append(subprocess.Popen(worker_cmd, env=env))
            wait_for(lambda: model.calls == 1, 60, "the first worker to start the job")
            workers.append(subprocess.Popen(worker_cmd, env=env))
            # Alive, slower than the lease, renewing it: the job stays the first worker's.
            time.sleep(LEASE_S + 1)
            assert attempts() == 1 and model.calls == 1
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait()
            killed_at = time.monotonic()

            def finished() -> bool:
                r = httpx.get(f"{b}/v1/memories/compile/{job_id}", timeout=30)
                return bool(r.json()["status"] == "completed")

            wait_for(finished, LEASE_S + LLM_DELAY_S + 30, "the other worker to finish")
            took = time.monotonic() - killed_at
            assert attempts() == 2 and model.calls == 2
            # Taken over within the lease (plus the one slow compile call and polling).
            assert took < LEASE_S + LLM_DELAY_S + 10, took
            job = httpx.get(f"{b}/v1/memories/compile/{job_id}", timeout=30).json()
            contents = [m["content"] for m in job["memories"]]
            # Compiled once: the killed worker's half-done call left nothing behind.
            assert "The user climbs in Fontainebleau." in contents
            assert len(contents) == len(set(contents)), contents
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        store.close()
