"""How a background loop reports a failure that repeats (the database away for a while): the
first failure with its traceback, then one line at doubling intervals up to ``MAX_WAIT_S``
with how many failed since, and one line when it works again; the wait before the next try
doubles the same way. An hour of outage is some twenty lines, not thousands of tracebacks."""

from __future__ import annotations

import logging

MAX_WAIT_S = 60.0


class FailureLog:
    """Consecutive failures of one loop (one thread: not thread-safe)."""

    def __init__(self, log: logging.Logger, what: str, first_wait_s: float = 1.0) -> None:
        self.log = log
        self.what = what
        self.first_wait_s = first_wait_s
        self.failures = 0
        self._next_report = 1

    def failed(self) -> float:
        """Record a failure (call inside the ``except``); returns how long to wait."""
        self.failures += 1
        if self.failures == 1:
            self.log.exception("%s failed", self.what)
        elif self.failures >= self._next_report:
            self.log.warning("%s still failing (%d times in a row)", self.what, self.failures)
        if self.failures >= self._next_report:
            self._next_report *= 2
        return float(min(self.first_wait_s * 2.0 ** (self.failures - 1), MAX_WAIT_S))

    def succeeded(self) -> None:
        if self.failures:
            self.log.warning("%s works again after %d failures", self.what, self.failures)
        self.failures = 0
        self._next_report = 1


__all__ = ["MAX_WAIT_S", "FailureLog"]
