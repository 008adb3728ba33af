"""The event loop never waits on the database: a request whose database work waits for
SQLite's write lock (held by a compile step) waits on a worker thread, and the process keeps
answering everything else meanwhile. Here: a keyed request's rate count, and an episode
written from the inspector's template form."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.services import Services
from tests.conftest import make_settings

HELD_S = 2.0


def _while_the_write_lock_is_held(
    services: Services, client: TestClient, request: Callable[[], httpx.Response]
) -> tuple[float, int, float]:
    """Send ``request`` while another thread holds the write lock for ``HELD_S``; returns
    how long a ``/healthz`` sent meanwhile took, and ``request``'s status and duration."""
    locked = threading.Event()
    done: dict[str, float | int] = {}

    def compile_step() -> None:  # holds the write lock as a long compile step does
        with services.store.db._write_lock:
            locked.set()
            time.sleep(HELD_S)

    def waiting_request() -> None:
        t0 = time.monotonic()
        done["status"] = request().status_code
        done["seconds"] = time.monotonic() - t0

    holder = threading.Thread(target=compile_step)
    holder.start()
    locked.wait()
    waiting = threading.Thread(target=waiting_request)
    waiting.start()
    time.sleep(0.3)  # the request is now waiting for the lock
    assert waiting.is_alive()
    t0 = time.monotonic()
    assert client.get("/healthz").status_code == 200
    answered = time.monotonic() - t0
    holder.join()
    waiting.join(timeout=30)
    return answered, int(done["status"]), float(done["seconds"])


def test_a_rate_count_waiting_for_the_write_lock_leaves_the_loop_free(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path, rate_limit_per_minute=100))
    try:
        key, _ = services.store.keys.create("acme")
        with TestClient(create_app(services=services)) as client:
            headers = {"X-API-Key": key}
            assert client.get("/v1/subjects", headers=headers).status_code == 200
            answered, status, waited = _while_the_write_lock_is_held(
                services, client, lambda: client.get("/v1/subjects", headers=headers)
            )
    finally:
        services.close()
    assert answered < HELD_S / 2  # not held behind the lock (blocked, it took ~1.7 s)
    assert status == 200 and waited >= HELD_S * 0.8  # the keyed request did wait


def test_a_template_form_waiting_for_the_write_lock_leaves_the_loop_free(
    tmp_path: Path,
) -> None:
    services = Services.from_settings(make_settings(tmp_path))
    form = {
        "csrf": "token",
        "subject_id": "customer:globex",
        "field.customer": "Globex Corp",
        "field.issue": "Duplicate charge on the May invoice",
    }
    try:
        with TestClient(create_app(services=services)) as client:
            client.cookies.set("cairn_csrf", "token")
            answered, status, waited = _while_the_write_lock_is_held(
                services,
                client,
                lambda: client.post("/ui/templates/customer-support-handoff", data=form),
            )
            timeline = client.get("/v1/timeline", params={"subject_id": "customer:globex"})
    finally:
        services.close()
    assert answered < HELD_S / 2
    assert status == 201 and waited >= HELD_S * 0.8
    assert len(timeline.json()["episodes"]) == 1
