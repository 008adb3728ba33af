"""Compile jobs: claimed once each, by any number of workers, on both backends."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import update

from cairn.core.ids import utcnow
from cairn.core.scope import Scope
from cairn.metrics import Metrics
from cairn.store import Store
from cairn.store.jobs import compile_jobs


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


def test_a_lapsed_lease_is_claimed_again_and_the_old_claim_is_fenced(store: Store) -> None:
    job = store.jobs.enqueue("t1", Scope.for_subject("u"))
    first = store.jobs.claim(lease_seconds=30)
    assert first is not None and first.attempts == 1
    assert store.jobs.claim() is None  # leased: nobody else takes it
    assert store.jobs.renew(job.id, 1, 30)
    # The worker dies: its lease runs out (moved into the past rather than slept through).
    with store.db.write() as conn:
        conn.execute(update(compile_jobs).values(lease_until=utcnow() - timedelta(seconds=1)))
    second = store.jobs.claim(lease_seconds=30)
    assert second is not None and second.id == job.id and second.attempts == 2
    # The first claim can neither renew nor record an outcome over the second.
    assert not store.jobs.renew(job.id, 1, 30)
    assert not store.jobs.finish(job.id, error="late", attempt=1)
    assert store.jobs.finish(job.id, memories=[], attempt=2)
    done = store.jobs.get("t1", job.id)
    assert done is not None and done.status == "succeeded" and done.error is None


def test_a_dead_workers_job_is_retaken_within_the_lease(store: Store) -> None:
    job = store.jobs.enqueue("t1", Scope.for_subject("u"))
    assert store.jobs.claim(lease_seconds=0.5) is not None  # then never renewed
    started = time.monotonic()
    while (again := store.jobs.claim(lease_seconds=30)) is None:
        assert time.monotonic() - started < 5, "the lapsed job was not claimed again"
        time.sleep(0.05)
    assert again.id == job.id and again.attempts == 2
    assert time.monotonic() - started >= 0.4


def test_a_slow_live_worker_keeps_its_job(
    store: Store, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The compile takes three leases; the heartbeat keeps the job, no one else claims it."""
    from cairn.engine.worker import JobRunner

    def slow_compile(*_: object) -> SimpleNamespace:
        time.sleep(1.8)
        return SimpleNamespace(memories=[], has_more=False, episodes_compiled=0)

    job_runner = JobRunner(store, slow_compile, Metrics(), lease_s=0.6)  # type: ignore[arg-type]
    job = store.jobs.enqueue("t1", Scope.for_subject("u"))
    claimed = store.jobs.claim(0.6)
    assert claimed is not None
    runner = threading.Thread(target=job_runner.run_job, args=(claimed,))
    runner.start()
    stolen = []
    while runner.is_alive():
        other = store.jobs.claim(0.6)
        if other is not None:
            stolen.append(other)
        time.sleep(0.05)
    runner.join()
    assert stolen == []
    done = store.jobs.get("t1", job.id)
    assert done is not None and done.status == "succeeded" and done.attempts == 1


class _Died(BaseException):
    """A worker process killed in the middle of a job (nothing after it runs)."""


def test_a_job_taken_over_lists_what_every_attempt_created(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker dies after two compile steps of a job; the claim that takes the job over
    compiles the rest, and the job then lists (and counts) every memory the job created, not
    only its last attempt's. While it runs, its status shows what it created so far. The
    log says when a job starts, when it is taken over (a warning) and how it ended."""
    from cairn.core.episodes import NewEpisode
    from cairn.engine import worker as worker_module
    from cairn.engine.compile import compile_scope
    from cairn.engine.worker import JobRunner

    monkeypatch.setattr(worker_module, "PROGRESS_S", 0.0)
    scope = Scope.for_subject("u")
    store.episodes.append_many(
        "t1",
        [
            NewEpisode(
                scope=scope,
                source="t",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "content": f"I visited city number {i}."}]},
            )
            for i in range(30)
        ],
    )
    steps = []

    def step(tenant_id: str, scope_: Scope) -> object:
        if len(steps) == 2:
            raise _Died
        result = compile_scope(store, tenant_id, scope_, max_episodes=5)
        steps.append(result)
        return result

    job = store.jobs.enqueue("t1", scope)
    claimed = store.jobs.claim(30)
    assert claimed is not None
    caplog.set_level("INFO", logger="cairn.worker")
    with pytest.raises(_Died):
        JobRunner(store, step, Metrics(), lease_s=30).run_job(claimed)  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [f"compile job {job.id} (tenant t1) started"]
    caplog.clear()
    first = [(m.seq, m.created_at) for r in steps for m in r.memories]
    assert first and all(r.has_more for r in steps)
    running = store.jobs.get("t1", job.id)
    assert running is not None and running.status == "running"
    assert running.memories == first and running.memories_created == len(first)
    with store.db.write() as conn:  # its lease runs out
        conn.execute(update(compile_jobs).values(lease_until=utcnow() - timedelta(seconds=1)))
    again = store.jobs.claim(30)
    assert again is not None and again.attempts == 2

    def rest(tenant_id: str, scope_: Scope) -> object:
        return compile_scope(store, tenant_id, scope_)

    JobRunner(store, rest, Metrics(), lease_s=30).run_job(again)  # type: ignore[arg-type]
    done = store.jobs.get("t1", job.id)
    assert done is not None and done.status == "succeeded"
    with store.snapshot() as tx:
        every = {(m.seq, m.created_at) for m in tx.memories.list("t1", scope, limit=1000)}
    assert set(done.memories) == every and done.memories_created == len(every)
    assert len(done.memories) == len(every) and set(first) < every
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert said[0] == (
        "WARNING",
        f"compile job {job.id} (tenant t1) taken over, attempt 2; {len(first)} memories of "
        "earlier attempts kept",
    )
    assert said[1][0] == "INFO"
    assert said[1][1].startswith(f"compile job {job.id} completed: {len(every)} memories in ")
