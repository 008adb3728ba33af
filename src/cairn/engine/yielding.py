"""Requests first: background work steps aside while requests are in flight.

The HTTP middleware counts every request in flight in the server's :class:`RequestGate`.
Background compiles (the in-process worker, the compile of committed turns) call
:func:`pause_point` before each compile step reads and before it writes, so a request neither
shares the interpreter with a compile nor waits for one of its write transactions
(tests/api/test_event_loop.py); the embedding pass does the same when ``CAIRN_EMBED_YIELD`` is
on.

A search or context request that runs while the pass embeds a batch shares the cores, the
memory bandwidth and the GIL with it (docs/benchmarks.md, "Request latency (session 6)": hybrid
right after a compile was mostly that contention; "Hybrid requests and bulk embedding,
session 7" for what this changed). The embedders call
:func:`pause_point` between their model calls (a batch of MiniLM texts, a micro-batch of the
multilingual model); in the pass's thread that waits, while a request is in flight, until
the requests are done, for at most as long as the pass has just worked, so the pass keeps
at least half its speed under any load and every vector is still written. Anywhere else
(a request's own query, a script) a pause point does nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


def pause_point() -> None:
    """Let the calling thread's pause hook run (the background pass's; others have none)."""
    hook: Callable[[], None] | None = getattr(_local, "hook", None)
    if hook is not None:
        hook()


@contextmanager
def pausing(hook: Callable[[], None]) -> Iterator[None]:
    """Run the block with ``hook`` called at every pause point of this thread."""
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous


@contextmanager
def stepping_aside(gate: RequestGate | None) -> Iterator[Yielder | None]:
    """Run the block (a background thread's loop) with this thread's pause points waiting for
    ``gate``'s requests in flight; gives the :class:`Yielder`, to ``restart`` after idle time,
    or None without a gate (the pause points then do nothing)."""
    if gate is None:
        yield None
        return
    yielder = gate.yielder()
    with pausing(yielder):
        yield yielder


class RequestGate:
    """Counts the requests in flight, so the background pass can wait for them to finish."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = 0
        self.waited_s = 0.0  # total time the pass stepped aside (for the bench and tests)

    @contextmanager
    def request(self) -> Iterator[None]:
        with self._cond:
            self._busy += 1
        try:
            yield
        finally:
            with self._cond:
                self._busy -= 1
                if not self._busy:
                    self._cond.notify_all()

    @property
    def busy(self) -> int:
        return self._busy

    def wait_quiet(self, timeout: float) -> float:
        """Wait until no request is in flight, for at most ``timeout`` seconds; returns how
        long it waited."""
        if not self._busy or timeout <= 0:
            return 0.0
        t0 = time.monotonic()
        with self._cond:
            self._cond.wait_for(lambda: not self._busy, timeout)
        waited = time.monotonic() - t0
        self.waited_s += waited
        return waited

    def yielder(self, max_share: float = 1.0) -> Yielder:
        """A pause hook for the pass (see :class:`Yielder`)."""
        return Yielder(self, max_share)


class Yielder:
    """The pass's pause hook: at each pause point it waits for the requests in flight, at most
    ``max_share`` times as long as it worked since the previous pause point or ``restart``
    (called when the pass wakes up, so time spent idle is not counted as work)."""

    def __init__(self, gate: RequestGate, max_share: float = 1.0) -> None:
        self.gate = gate
        self.max_share = max_share
        self._since = time.monotonic()

    def restart(self) -> None:
        self._since = time.monotonic()

    def __call__(self) -> None:
        worked = time.monotonic() - self._since
        self.gate.wait_quiet(worked * self.max_share)
        self._since = time.monotonic()
