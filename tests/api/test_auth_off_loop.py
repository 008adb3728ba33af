"""Authentication never waits on the database from the event loop: a keyed request whose
rate count waits for SQLite's write lock (held by a compile step) waits on a worker thread,
and the process keeps answering everything else meanwhile."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings

HELD_S = 2.0


def test_a_rate_count_waiting_for_the_write_lock_leaves_the_loop_free(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path, rate_limit_per_minute=100))
    try:
        key, _ = services.store.keys.create("acme")
        with TestClient(create_app(services=services)) as client:
            assert client.get("/v1/subjects", headers={"X-API-Key": key}).status_code == 200
            keyed: dict[str, float | int] = {}

            def keyed_request() -> None:
                t0 = time.monotonic()
                r = client.get("/v1/subjects", headers={"X-API-Key": key})
                keyed.update(status=r.status_code, seconds=time.monotonic() - t0)

            locked = threading.Event()

            def compile_step() -> None:  # holds the write lock as a long compile step does
                with services.store.db._write_lock:
                    locked.set()
                    time.sleep(HELD_S)

            holder = threading.Thread(target=compile_step)
            holder.start()
            locked.wait()
            waiting = threading.Thread(target=keyed_request)
            waiting.start()
            time.sleep(0.3)  # the keyed request is now waiting for the lock
            assert waiting.is_alive()
            t0 = time.monotonic()
            health = client.get("/healthz")
            answered = time.monotonic() - t0
            holder.join()
            waiting.join(timeout=30)
    finally:
        services.close()
    assert health.status_code == 200
    assert answered < HELD_S / 2  # not held behind the lock (blocked, it took ~1.7 s)
    assert keyed["status"] == 200 and keyed["seconds"] >= HELD_S * 0.8  # it did wait
