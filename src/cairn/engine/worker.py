"""Compile workers and the wiring of compile/search into ``Services``.

A worker claims queued compile jobs (``store.jobs.claim``: ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), compiles the job's partition until nothing is left, and records the outcome. Run
one with ``cairn worker``, or inside the server (``CAIRN_WORKER_IN_PROCESS``, on by default
with SQLite).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import Any

from cairn.core.ids import utcnow
from cairn.engine.compile import compile_scope
from cairn.engine.embedders import Embedder, get_embedder
from cairn.engine.retention import RetentionClock

log = logging.getLogger("cairn.worker")


class LazyEmbedder:
    """Builds the configured embedder on first use, so starting a process stays fast."""

    def __init__(self, settings: Any) -> None:
        self._settings = settings
        self._inner: Embedder | None = None
        self._lock = threading.Lock()
        self.name = f"{settings.embedder}:{settings.embedding_model or 'default'}"

    def _get(self) -> Embedder:
        with self._lock:
            if self._inner is None:
                inner = get_embedder(self._settings)
                assert inner is not None
                self._inner = inner
                self.name = inner.name
            return self._inner

    @property
    def dim(self) -> int:
        return self._get().dim

    @property
    def overlap(self) -> bool:
        """Whether search may embed the query on a helper thread while its lexical lane runs
        (the local models: they release the GIL while they compute)."""
        return bool(getattr(self._get(), "overlap", False))

    def embed(self, texts: Any) -> list[list[float]]:
        return self._get().embed(texts)


class Heartbeat:
    """Renews a claimed job's lease every third of the lease while the job runs, so a slow
    live worker keeps its job and a dead one's lease runs out within ``lease_s``."""

    def __init__(self, services: Any, job: Any, lease_s: float) -> None:
        self.services = services
        self.job = job
        self.lease_s = lease_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cairn-job-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.lease_s)

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                if not self.services.store.jobs.renew(self.job.id, self.job.attempts, self.lease_s):
                    # Taken over after a stall longer than the lease: compiling is idempotent
                    # per partition, and finish() will not overwrite the newer claim.
                    log.warning("compile job %s was taken over by another worker", self.job.id)
                    self.lost = True
                    return
            except Exception:  # the database is briefly unavailable: try again next beat
                log.exception("renewing the lease of compile job %s failed", self.job.id)


def run_job(services: Any, job: Any) -> None:
    """Compile a claimed job's partition to the end, renewing the job's lease meanwhile, then
    record success or failure (only while the job is still this claim's)."""
    created: list[uuid.UUID] = []
    error: str | None = None
    with Heartbeat(services, job, services.settings.job_lease_seconds):
        try:
            while True:
                result = compile_scope(services, job.tenant_id, job.scope)
                created.extend(m.id for m in result.memories)
                if not result.has_more or result.episodes_compiled == 0:
                    break
        except Exception as exc:  # recorded on the job; the worker keeps going
            log.exception("compile job %s failed", job.id)
            error = f"{type(exc).__name__}: {exc}"
    # After the heartbeat stopped, so a last beat never races the outcome.
    recorded = services.store.jobs.finish(
        job.id, memory_ids=created, error=error, attempt=job.attempts
    )
    metrics = services.metrics
    metrics.memories_compiled.inc(len(created))
    if recorded:  # a job taken over by another worker is that worker's to count
        metrics.compile_jobs.labels("failed" if error else "succeeded").inc()
        metrics.compile_lag.observe(max(0.0, (utcnow() - job.created_at).total_seconds()))


def work_once(services: Any) -> bool:
    """Claim and run one job; False when the queue is empty."""
    job = services.store.jobs.claim(services.settings.job_lease_seconds)
    if job is None:
        return False
    run_job(services, job)
    return True


class CompileWorker:
    """A background thread that drains the job queue, polling when idle."""

    def __init__(self, services: Any, poll_s: float = 0.5) -> None:
        self.services = services
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.retention = RetentionClock(services.settings.retention_interval_s)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="cairn-compile-worker", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def run(self) -> None:
        while not self._stop.is_set():
            self.retention.maybe_sweep(self.services)
            try:
                busy = work_once(self.services)
            except Exception:  # e.g. the database is briefly unavailable
                log.exception("compile worker error")
                busy = False
            if not busy:
                self._wake.wait(self.poll_s)
                self._wake.clear()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


class ScopeCompiler:
    """Compiles the scopes it is handed on one background thread, so a committed turn becomes
    long-term memory about as soon as its compile takes, while the commit returns at once.

    Scopes waiting are kept once each (a burst of turns of one conversation is one compile
    of everything new); the thread starts with the first scope and ends with ``stop``. A
    failed compile is logged and the episodes stay uncompiled for the next one.
    """

    def __init__(self, services: Any) -> None:
        self.services = services
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, Any], None] = {}
        self._wake = threading.Event()
        self._stopped = False
        self._running = False
        self._thread: threading.Thread | None = None

    def submit(self, tenant_id: str, scopes: list[Any]) -> None:
        """Queue ``scopes`` of ``tenant_id`` for compiling (an ingest listener)."""
        with self._lock:
            if self._stopped:
                return
            for scope in scopes:
                self._waiting.setdefault((tenant_id, scope))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cairn-turn-compiler", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _next(self) -> tuple[str, Any] | None:
        with self._lock:
            if not self._waiting:
                self._running = False
                return None
            key = next(iter(self._waiting))
            del self._waiting[key]
            self._running = True
            return key

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted scope is compiled (True) or ``timeout`` passes (False):
        for tests and tools that must see a settled store."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._waiting and not self._running:
                    return True
            time.sleep(0.005)
        return False

    def _run(self) -> None:
        while not self._stopped:
            key = self._next()
            if key is None:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            tenant_id, scope = key
            try:
                while compile_scope(self.services, tenant_id, scope).has_more:
                    if self._stopped:
                        return
            except Exception:  # the episodes stay uncompiled; the next commit retries
                log.exception("background compile of %s/%s failed", tenant_id, scope)

    def stop(self, timeout: float = 10.0) -> None:
        with self._lock:
            self._stopped = True
            thread, self._thread = self._thread, None
        self._wake.set()
        if thread is not None:
            thread.join(timeout)


def attach_compile(services: Any) -> None:
    """Give ``services`` its embedder, compiler, optional in-process worker, background
    compile of committed turns and compile-on-ingest listener, as the settings say."""
    settings = services.settings
    services.embedder = LazyEmbedder(settings) if settings.embedder != "none" else None
    # Vectors are written after a compile by a background pass (this process's compiles
    # notify it; a sweep finds the rest), so no request waits for the model.
    services.embedding_backfill = None
    if services.embedder is not None:
        from cairn.engine.backfill import EmbeddingBackfill

        backfill = EmbeddingBackfill(services, batch=settings.embed_batch)
        services.embedding_backfill = backfill
        services.on_start.append(backfill.start)
        services.on_stop.append(backfill.stop)
    if settings.compiler == "llm":
        from cairn.engine.llm_compiler import LLMCompiler

        services.compiler = LLMCompiler.from_settings(settings)
    else:
        services.compiler = None  # the heuristic default
    in_process = settings.worker_in_process
    if in_process is None:
        in_process = services.store.single_writer
    services.compile_worker = CompileWorker(services) if in_process else None
    if services.compile_worker is not None:
        services.on_start.append(services.compile_worker.start)
        services.on_stop.append(services.compile_worker.stop)
    if settings.compile_turns and not settings.compile_on_ingest:
        services.turn_compiler = ScopeCompiler(services)
        services.turn_listeners.append(services.turn_compiler.submit)
        services.on_stop.append(services.turn_compiler.stop)
    if settings.compile_on_ingest:

        def compile_after_ingest(tenant_id: str, scopes: list[Any]) -> None:
            for scope in scopes:
                while compile_scope(services, tenant_id, scope).has_more:
                    pass

        services.ingest_listeners.append(compile_after_ingest)
