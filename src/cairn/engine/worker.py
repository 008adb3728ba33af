"""Compile workers: the job queue's runner and worker thread, and the background compile of turns.

A worker claims queued compile jobs (``store.jobs.claim``: ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL), compiles the job's partition until nothing is left, and records the outcome. Run
one with ``cairn worker``, or inside the server (``CAIRN_WORKER_IN_PROCESS``, on by default
with SQLite).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from cairn.core.ids import utcnow
from cairn.core.scope import Scope
from cairn.engine.compile import CompileResult
from cairn.engine.failures import FailureLog
from cairn.engine.retention import RetentionClock
from cairn.engine.yielding import RequestGate, Yielder, stepping_aside
from cairn.metrics import Metrics
from cairn.store import Store
from cairn.store.jobs import CompileJob, JobMemory, JobRepository

log = logging.getLogger("cairn.worker")

# One compile step of one partition (``compile_scope`` with the process's compiler and
# embedding pass; ``Services.compile_step``).
CompileStep = Callable[[str, Scope], CompileResult]
# How often a running job records the memories created so far (``JobRunner.run_job``).
PROGRESS_S = 1.0


class Heartbeat:
    """Renews a claimed job's lease every third of the lease while the job runs, so a slow
    live worker keeps its job and a dead one's lease runs out within ``lease_s``."""

    def __init__(self, jobs: JobRepository, job: CompileJob, lease_s: float) -> None:
        self.jobs = jobs
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
                if not self.jobs.renew(self.job.id, self.job.attempts, self.lease_s):
                    # Taken over after a stall longer than the lease: compiling is idempotent
                    # per partition, and finish() will not overwrite the newer claim.
                    log.warning("compile job %s was taken over by another worker", self.job.id)
                    self.lost = True
                    return
            except Exception:  # the database is briefly unavailable: try again next beat
                log.exception("renewing the lease of compile job %s failed", self.job.id)


class JobRunner:
    """Claims queued compile jobs and runs each to the end with ``compile_step``."""

    def __init__(
        self, store: Store, compile_step: CompileStep, metrics: Metrics, lease_s: float
    ) -> None:
        self.store = store
        self.compile_step = compile_step
        self.metrics = metrics
        self.lease_s = lease_s

    def run_job(self, job: CompileJob) -> None:
        """Compile a claimed job's partition to the end, renewing the job's lease meanwhile,
        then record success or failure (only while the job is still this claim's). The
        memories created are recorded on the job as they come (at most every
        ``PROGRESS_S``), and a claim that takes over a dead one's job starts from those: the
        job lists what all its attempts created, not only the last one's."""
        created: list[JobMemory] = list(job.memories)
        error: str | None = None
        recorded, recorded_at = len(created), time.monotonic()
        started = recorded_at
        if job.attempts > 1:  # an earlier claim's lease ran out: its worker stopped or hung
            log.warning(
                "compile job %s (tenant %s) taken over, attempt %d; %d memories of earlier "
                "attempts kept",
                job.id,
                job.tenant_id,
                job.attempts,
                len(created),
            )
        else:
            log.info("compile job %s (tenant %s) started", job.id, job.tenant_id)
        with Heartbeat(self.store.jobs, job, self.lease_s):
            try:
                while True:
                    result = self.compile_step(job.tenant_id, job.scope)
                    created.extend((m.seq, m.created_at) for m in result.memories)
                    if not result.has_more or result.episodes_compiled == 0:
                        break
                    if len(created) > recorded and time.monotonic() - recorded_at >= PROGRESS_S:
                        self.store.jobs.progress(job.id, job.attempts, created)
                        recorded, recorded_at = len(created), time.monotonic()
            except Exception as exc:  # recorded on the job; the worker keeps going
                log.exception("compile job %s failed", job.id)
                error = f"{type(exc).__name__}: {exc}"
        # After the heartbeat stopped, so a last beat never races the outcome.
        recorded = self.store.jobs.finish(
            job.id, memories=created, error=error, attempt=job.attempts
        )
        log.info(
            "compile job %s %s: %d memories in %.1f s%s",
            job.id,
            "failed" if error else "completed",
            len(created),
            time.monotonic() - started,
            ""
            if recorded
            else " (not recorded: another worker took the job over, or it was erased)",
        )
        metrics = self.metrics
        metrics.memories_compiled.inc(len(created))
        if recorded:  # a job taken over by another worker is that worker's to count
            metrics.compile_jobs.labels("failed" if error else "succeeded").inc()
            metrics.compile_lag.observe(max(0.0, (utcnow() - job.created_at).total_seconds()))

    def work_once(self) -> bool:
        """Claim and run one job; False when the queue is empty."""
        job = self.store.jobs.claim(self.lease_s)
        if job is None:
            return False
        self.run_job(job)
        return True


class CompileWorker:
    """A background thread that drains the job queue, polling when idle. Given the server's
    ``gate``, each compile step waits for the requests in flight before it reads and before
    it writes, at most as long as it has just worked (:class:`cairn.engine.yielding.Yielder`):
    a request then neither shares the interpreter with the compile nor waits for its write
    transaction, and the compile keeps at least half its speed under any load."""

    def __init__(
        self,
        runner: JobRunner,
        retention: RetentionClock,
        poll_s: float = 0.5,
        gate: RequestGate | None = None,
    ) -> None:
        self.runner = runner
        self.gate = gate
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.retention = retention

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="cairn-compile-worker", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def run(self) -> None:
        with stepping_aside(self.gate) as yielder:
            self._drain(yielder)

    def _drain(self, yielder: Yielder | None) -> None:
        # The database away: one traceback, then a line at doubling intervals (not two
        # tracebacks a second), and polls that back off the same way.
        failures = FailureLog(log, "the compile worker (claiming or finishing a job)")
        while not self._stop.is_set():
            self.retention.maybe_sweep(self.runner.store)
            if yielder is not None:  # time spent idle is not work to be made up for
                yielder.restart()
            wait = self.poll_s
            try:
                busy = self.runner.work_once()
                failures.succeeded()
            except Exception:  # e.g. the database is briefly unavailable
                busy, wait = False, max(self.poll_s, failures.failed())
            if not busy:
                self._wake.wait(wait)
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
    failed compile is logged and the episodes stay uncompiled for the next one. Given a
    ``gate``, it steps aside for requests in flight as :class:`CompileWorker` does.
    """

    def __init__(self, compile_step: CompileStep, gate: RequestGate | None = None) -> None:
        self.compile_step = compile_step
        self.gate = gate
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, Scope], None] = {}
        self._wake = threading.Event()
        self._stopped = False
        self._running = False
        self._thread: threading.Thread | None = None

    def submit(self, tenant_id: str, scopes: list[Scope]) -> None:
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

    def _next(self) -> tuple[str, Scope] | None:
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
        with stepping_aside(self.gate) as yielder:
            self._drain(yielder)

    def _drain(self, yielder: Yielder | None) -> None:
        while not self._stopped:
            key = self._next()
            if key is None:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            tenant_id, scope = key
            if yielder is not None:
                yielder.restart()
            try:
                while self.compile_step(tenant_id, scope).has_more:
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
