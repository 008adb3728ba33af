"""A background loop's repeated failure: one traceback, then a line at doubling intervals, and
waits that double up to a minute."""

from __future__ import annotations

import logging

import pytest

from cairn.engine.failures import MAX_WAIT_S, FailureLog


def test_a_long_outage_is_a_few_lines_with_growing_waits(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("cairn.test.failures")
    failures = FailureLog(log, "reading the log")
    waits = []
    with caplog.at_level(logging.WARNING, logger="cairn.test.failures"):
        for _ in range(1000):
            try:
                raise ConnectionError("database is away")
            except ConnectionError:
                waits.append(failures.failed())
        failures.succeeded()
    assert waits[:4] == [1.0, 2.0, 4.0, 8.0] and max(waits) == MAX_WAIT_S
    records = caplog.records
    assert sum(1 for r in records if r.exc_info) == 1  # the first failure's traceback only
    assert len(records) <= 12  # 1,000 failures: reported at 1, 2, 4, … 512, then recovery
    assert "works again after 1000 failures" in records[-1].getMessage()
    assert failures.failures == 0


@pytest.mark.slow
def test_the_compile_worker_backs_off_while_it_cannot_claim(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The database away: the compile worker's loop logs one traceback and waits longer each
    time (it logged a traceback twice a second), then carries on when a claim works."""
    import itertools
    import threading
    import time
    from types import SimpleNamespace

    from cairn.engine.worker import CompileWorker

    calls: list[float] = []
    back = threading.Event()

    def work_once() -> bool:
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise ConnectionError("database is away")
        back.set()
        return False

    runner = SimpleNamespace(work_once=work_once, store=None)
    retention = SimpleNamespace(maybe_sweep=lambda store: None)
    worker = CompileWorker(runner, retention, poll_s=0.01)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="cairn.worker"):
        worker.start()
        try:
            assert back.wait(30)
        finally:
            worker.stop()
    gaps = [b - a for a, b in itertools.pairwise(calls)][:3]
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9 and gaps[2] >= 3.9, gaps  # 1, 2, 4 s
    records = [r for r in caplog.records if r.name == "cairn.worker"]
    assert sum(1 for r in records if r.exc_info) == 1
    assert "works again after 3 failures" in records[-1].getMessage()
