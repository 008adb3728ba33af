"""Compile jobs: claimed once each, by any number of workers, on both backends."""

from __future__ import annotations

import threading

from cairn.core.scope import Scope
from cairn.store import Store


def test_each_job_is_claimed_once(store: Store) -> None:
    queued = {store.jobs.enqueue("t1", Scope.for_subject(f"s{i}")).id for i in range(6)}
    claimed: list[object] = []
    lock = threading.Lock()
    barrier = threading.Barrier(3)

    def worker() -> None:
        barrier.wait()
        while (job := store.jobs.claim()) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(str, claimed)) == sorted(map(str, queued))  # all, none twice
    assert store.jobs.claim() is None


def test_job_lifecycle_and_tenant_scoping(store: Store) -> None:
    job = store.jobs.enqueue("t1", Scope.for_subject("u"))
    assert job.status == "queued" and store.jobs.get("t2", job.id) is None
    running = store.jobs.claim()
    assert running is not None and running.id == job.id and running.status == "running"
    assert running.attempts == 1
    store.jobs.finish(job.id, error="boom")
    failed = store.jobs.get("t1", job.id)
    assert failed is not None and failed.status == "failed" and failed.error == "boom"
