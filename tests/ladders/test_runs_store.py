"""The run records: migration 0005 matches the table, and the repository on both backends."""

from __future__ import annotations

from datetime import timedelta

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from cairn.core.ids import utcnow
from cairn.store import Store
from cairn.store.runs import COMPLETED, FAILED
from cairn.store.schema import metadata


def test_migration_matches_schema(store: Store) -> None:
    with store.db.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), metadata)
    assert [d for d in diffs if "ladder_runs" in repr(d)] == []


def test_begin_take_over_finish_and_list(store: Store) -> None:
    runs = store.runs
    rec, created = runs.begin("t1", "r1", ladder="l", request_hash="h", model="m")
    assert created and rec.status == "running" and rec.effects == []
    again, created = runs.begin("t1", "r1", ladder="l", request_hash="other", model="m")
    assert not created and again.request_hash == "h"
    # Same run id in another tenant is another run.
    _, created = runs.begin("t2", "r1", ladder="l", request_hash="h", model="m")
    assert created
    assert not runs.take_over("t1", "r1", stale_before=utcnow() - timedelta(minutes=10))
    assert runs.take_over("t1", "r1", stale_before=utcnow() + timedelta(seconds=1))
    runs.add_effect("t1", "r1", ["a/slateWrite/0"])
    runs.finish("t1", "r1", status=FAILED, duration_ms=1.5, trace={"x": 1}, error="boom")
    assert runs.take_over("t1", "r1", stale_before=utcnow() - timedelta(minutes=10))
    runs.finish(
        "t1",
        "r1",
        status=COMPLETED,
        duration_ms=2.0,
        trace={"steps": []},
        response={"id": "chatcmpl-r1"},
        effects=["a/slateWrite/0", "b/if"],
    )
    got = runs.get("t1", "r1")
    assert got is not None and got.status == COMPLETED and got.effects == ["a/slateWrite/0", "b/if"]
    assert got.response == {"id": "chatcmpl-r1"} and got.finished_at is not None
    assert runs.get("t2", "nope") is None
    listed, total = runs.list("t1")
    assert total == 1 and listed[0].id == "r1"
    assert runs.list("t2", status=COMPLETED) == ([], 0)


def test_an_attempt_that_was_taken_over_cannot_record_its_end(store: Store) -> None:
    """An attempt that only looked dead (slow, not gone) and finishes after another attempt
    took the run over must not overwrite that attempt's record, nor its effects."""
    runs = store.runs
    first, _ = runs.begin("t1", "r9", ladder="l", request_hash="h", model="m")
    second = runs.take_over("t1", "r9", stale_before=utcnow() + timedelta(seconds=1))
    assert second is not None and second != first.started_at
    runs.add_effect("t1", "r9", ["late/slateWrite/0"], attempt=first.started_at)
    assert not runs.finish(
        "t1",
        "r9",
        status=COMPLETED,
        duration_ms=1,
        trace={},
        effects=["late/slateWrite/0"],
        attempt=first.started_at,
    )
    got = runs.get("t1", "r9")
    assert got is not None and got.status == "running" and got.effects == []
    runs.add_effect("t1", "r9", ["a/if"], attempt=second)
    assert runs.finish(
        "t1", "r9", status=COMPLETED, duration_ms=1, trace={}, effects=["a/if"], attempt=second
    )
    got = runs.get("t1", "r9")
    assert got is not None and got.status == COMPLETED and got.effects == ["a/if"]
