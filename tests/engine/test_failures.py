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
