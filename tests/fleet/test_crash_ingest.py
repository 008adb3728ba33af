"""``kill -9`` during ingest, on both backends, as a bounded loop: singles and batches with
idempotency keys are sent while the server is killed mid-stream and restarted. Every
acknowledged episode is stored exactly once, and retrying everything that was sent (answered
or not) creates no duplicate."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from cairn.store import open_store
from cairn.store.schema import episodes
from tests.cli.test_serve_and_keys import env_for
from tests.cli.test_serve_bind import free_port
from tests.conftest import database_url

KILLS = 2
LOAD_S = 1.5  # ingest this long before each kill
BATCH = 5


def start(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)


def episode(key: str) -> dict[str, object]:
    return {
        "subject_id": "crash-1",
        "source": "crash-test",
        "type": "message",
        "payload": {"text": f"event {key} — ünïcödé 東京 🧗"},
        "idempotency_key": key,
    }


class Sender:
    """Sends singles or batches until stopped; records what was sent and what was answered."""

    def __init__(self, base: str, kind: str, round_no: int) -> None:
        self.base, self.kind, self.round_no = base, kind, round_no
        self.sent: list[list[str]] = []
        self.acked: list[str] = []
        self.errors: list[str] = []  # an answer other than 201: the test fails on it
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self.stop.is_set():
                keys = [f"{self.kind}-{self.round_no}-{n}-{i}" for i in range(self._size())]
                n += 1
                self.sent.append(keys)
                try:
                    if self.kind == "single":
                        r = client.post("/v1/episodes", json=episode(keys[0]))
                    else:
                        body = {"episodes": [episode(k) for k in keys]}
                        r = client.post("/v1/episodes/batch", json=body)
                except httpx.HTTPError:
                    return  # the server died under this request: unanswered
                if r.status_code != 201:
                    self.errors.append(f"{r.status_code} {r.text[:200]}")
                    return
                self.acked.extend(keys)

    def _size(self) -> int:
        return 1 if self.kind == "single" else BATCH


@pytest.mark.slow
def test_kill_9_during_ingest_loses_nothing_and_duplicates_nothing(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = database_url(backend, tmp_path, request)
    env = env_for(tmp_path, CAIRN_DATABASE_URL=url, CAIRN_WORKER_IN_PROCESS="false")
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    sent: list[list[str]] = []
    acked: list[str] = []
    for round_no in range(KILLS):
        server = start(env, port)
        senders = [Sender(base, kind, round_no) for kind in ("single", "batch")]
        threads = [threading.Thread(target=s.run) for s in senders]
        for t in threads:
            t.start()
        time.sleep(LOAD_S)
        server.send_signal(signal.SIGKILL)  # mid-stream: requests are in flight
        server.wait()
        for s in senders:
            s.stop.set()
        for t in threads:
            t.join(30)
        for s in senders:
            assert not s.errors, s.errors
            sent.extend(s.sent)
            acked.extend(s.acked)
    assert acked, "nothing was acknowledged before the kills"
    # Restart and retry everything that was sent, as a client with retries would.
    server = start(env, port)
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            for keys in sent:
                if len(keys) == 1 and keys[0].startswith("single"):
                    r = client.post("/v1/episodes", json=episode(keys[0]))
                else:
                    r = client.post(
                        "/v1/episodes/batch", json={"episodes": [episode(k) for k in keys]}
                    )
                assert r.status_code in (200, 201), r.text
    finally:
        server.terminate()
        server.wait(30)
    store = open_store(url, migrate=False)
    try:
        with store.db.read() as conn:
            rows = conn.execute(
                select(episodes.c.idempotency_key, func.count())
                .where(episodes.c.source == "crash-test")
                .group_by(episodes.c.idempotency_key)
            ).all()
    finally:
        store.close()
    counts = {key: n for key, n in rows}
    every_key = {k for keys in sent for k in keys}
    assert set(acked) <= set(counts), "an acknowledged episode was lost"
    assert set(counts) == every_key
    assert all(n == 1 for n in counts.values()), "a retry stored a duplicate"
