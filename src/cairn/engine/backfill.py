"""The background embedding pass: memories get their vectors after a compile, off the request.

A compile stores memories and makes them lexically searchable in the same transaction; the
vectors follow here. A compile (in the server or in ``cairn worker``) names its partition with
``notify``; a thread embeds that partition's memories that have no vector yet, in batches of
``CAIRN_EMBED_BATCH``, until none is left, taking turns between the partitions pending, except
that a partition in which a search found memories without a vector goes first and stays first
until it is done (``prefer``). At
start and every ``sweep_s`` it also looks for any partition with memories lacking a vector
(memories compiled by another process, such as ``cairn compile``, or before a restart, or before
the embedder was switched on).

Nothing waits for this: a search or context request uses the vectors that exist and finds the
other memories lexically. Two processes may embed the same rows; the vectors are the same.
"""

from __future__ import annotations

import logging
import threading
import time

from cairn.core.scope import Scope
from cairn.engine.embedders import Embedder
from cairn.engine.failures import FailureLog
from cairn.engine.niceness import lower_priority
from cairn.engine.yielding import RequestGate, Yielder, pause_point, stepping_aside
from cairn.store import Store

log = logging.getLogger("cairn.embedding")

Partition = tuple[str, str, str, str]


class EmbeddingBackfill:
    """A thread that writes vectors for memories that lack one, partition by partition."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        batch: int = 64,
        sweep_s: float = 60.0,
        gate: RequestGate | None = None,
    ) -> None:
        self.store = store
        # Requests in flight (the server's search and context calls): the pass steps aside
        # for them between its model calls, for at most as long as it worked.
        self.gate = gate
        self._yielder: Yielder | None = None
        self.embedder = embedder
        self.batch = batch
        self.sweep_s = sweep_s
        # Partition -> how often it was asked for; a batch that finds the partition done
        # drops it only if nobody asked again meanwhile.
        self._pending: dict[Partition, int] = {}
        # Partitions a search asked for (``prefer``): kept first until they are done.
        self._preferred: set[Partition] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._sweep_due = True
        self._sizes_checked = False
        self._thread: threading.Thread | None = None
        self.embedded = 0  # memories embedded since start (for the bench and logs)

    def notify(self, tenant_id: str, scope: Scope) -> None:
        """Ask for the partition's memories without a vector to be embedded soon."""
        key = (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        with self._lock:
            self._pending[key] = self._pending.get(key, 0) + 1
            self._idle.clear()
        self._wake.set()

    def prefer(self, tenant_id: str, scope: Scope) -> None:
        """A search found memories of the partition without a vector: embed it before the
        others pending (a subject asked about right after its compile gets its vectors first,
        instead of its turn among every partition compiled at the same time)."""
        key = (tenant_id, scope.runtime_id, scope.user_id, scope.agent_id)
        with self._lock:
            self._preferred.add(key)
            if next(iter(self._pending), None) != key:
                asked = self._pending.pop(key, 0) + 1
                self._pending = {key: asked, **self._pending}
                self._idle.clear()
        self._wake.set()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._sweep_due = True
        self._idle.clear()
        self._thread = threading.Thread(target=self._run, name="cairn-embedding", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until nothing is pending (tests, the bench, ``cairn worker --once``)."""
        return self._idle.wait(timeout)

    def run_until_idle(self) -> int:
        """Embed everything pending and every partition the sweep finds, in this thread."""
        self._sweep()
        before = self.embedded
        while self._step():
            pass
        return self.embedded - before

    def _run(self) -> None:
        lower_priority()
        with stepping_aside(self.gate) as self._yielder:
            self._loop()

    def _loop(self) -> None:
        last_sweep = float("-inf")
        failures = FailureLog(log, "background embedding")
        while not self._stop.is_set():
            try:
                if self._sweep_due or time.monotonic() - last_sweep >= self.sweep_s:
                    self._sweep()
                    last_sweep = time.monotonic()
                    self._sweep_due = False
                stepped = self._step()
                failures.succeeded()
                if stepped:
                    continue
            except Exception:  # e.g. the database is unavailable for a while; retried
                self._stop.wait(failures.failed())
                continue
            with self._lock:
                if not self._pending:
                    self._idle.set()
            self._wake.wait(self.sweep_s)
            self._wake.clear()

    def _sweep(self) -> None:
        store = self.store
        if not self._sizes_checked:
            self._drop_other_sizes()
        with store.snapshot() as tx:
            found = tx.memories.partitions_without_embedding()
        for tenant_id, scope in found:
            self.notify(tenant_id, scope)

    def _drop_other_sizes(self) -> None:
        """Once per process: vectors of another size (stored by another embedder, before
        ``CAIRN_EMBEDDER`` changed) are forgotten, so the sweep embeds those memories again."""
        dim = self.embedder.dim  # an openai embedder learns it from its first answer
        if dim:
            while True:
                with self.store.transaction() as tx:
                    dropped = tx.memories.drop_vectors_of_other_size(4 * dim)
                if dropped:
                    log.info("re-embedding %d memories stored with another embedder", dropped)
                if dropped < 5_000:
                    break
        self._sizes_checked = True

    def _step(self) -> bool:
        """Embed one batch of the oldest pending partition; False when nothing is pending."""
        from cairn.engine.search import embed_memories

        with self._lock:
            if not self._pending:
                return False
            key = next(iter(self._pending))
            asked = self._pending[key]
        if self._yielder is not None:  # idle time before this batch is not work
            self._yielder.restart()
        tenant_id, runtime_id, user_id, agent_id = key
        scope = Scope.model_construct(runtime_id=runtime_id, user_id=user_id, agent_id=agent_id)
        done = embed_memories(
            self.store, self.embedder, tenant_id, scope, batch=self.batch, max_batches=1
        )
        self.embedded += done
        pause_point()  # between batches too, whatever the embedder
        with self._lock:
            if done < self.batch and self._pending.get(key) == asked:
                del self._pending[key]
                self._preferred.discard(key)
            elif key in self._pending and key not in self._preferred:
                # More to do: let other partitions have a turn (a preferred one keeps its).
                self._pending[key] = self._pending.pop(key)
        return True
