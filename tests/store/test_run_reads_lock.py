"""PostgreSQL: a run marking itself as reading waits for a deletion in flight in its tenant
(which may have deleted, uncommitted, what the run's hooks would read), and deletions never
wait on one another for it (``cairn.store.runs.lock_reads``)."""

from __future__ import annotations

import threading
import uuid

from sqlalchemy import Connection

from cairn.store import Store, open_store
from cairn.store.run_reads import drop_reading_runs
from cairn.store.runs import ladder_run_reads


def _deleting(store: Store, tenant: str) -> Connection:
    """A deleting transaction that has dropped the runs reading an item, not yet committed."""
    conn = store.db.engine.connect()
    conn.begin()
    drop_reading_runs(conn, tenant, ladder_run_reads.c.item_id == str(uuid.uuid4()))
    return conn


def test_a_mark_waits_for_a_deletion_in_flight_and_deletions_share(pg_url: str) -> None:
    store = open_store(pg_url)
    try:
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        run_id = "run-1"
        store.runs.begin(tenant, run_id, ladder="l", request_hash="h", model="m")
        first = _deleting(store, tenant)
        second = _deleting(store, tenant)  # shares the lock: does not wait for the first
        second.rollback()
        second.close()
        marked = threading.Event()

        def mark() -> None:
            store.runs.mark_reading(tenant, run_id)
            marked.set()

        worker = threading.Thread(target=mark)
        worker.start()
        try:
            assert not marked.wait(1.0)  # the deletion is still in flight
        finally:
            first.commit()
            first.close()
        assert marked.wait(10.0)
        worker.join()
        # A deletion after the mark drops the run, whatever it deletes.
        with store.db.engine.begin() as conn:
            dropped = drop_reading_runs(conn, tenant, ladder_run_reads.c.item_id == "other")
        assert dropped == 1 and store.runs.get(tenant, run_id) is None
    finally:
        store.close()


def test_a_new_run_with_slate_reads_waits_for_a_deletion_in_flight(pg_url: str) -> None:
    """A run claimed with the slate items it will read (``begin(reads=…)``: the lock and the
    rows in one statement) waits for a deletion in flight; one without reads does not."""
    store = open_store(pg_url)
    try:
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        deleting = _deleting(store, tenant)
        plain = threading.Thread(
            target=store.runs.begin,
            args=(tenant, "plain"),
            kwargs={"ladder": "l", "request_hash": "h", "model": "m"},
            daemon=True,
        )
        plain.start()
        plain.join(5.0)
        assert not plain.is_alive()  # a run without slate reads takes no lock
        claimed = threading.Event()

        def claim() -> None:
            store.runs.begin(
                tenant, "reader", ladder="l", request_hash="h", model="m", reads=["slate:x"]
            )
            claimed.set()

        worker = threading.Thread(target=claim)
        worker.start()
        try:
            assert not claimed.wait(1.0)  # the deletion is still in flight
        finally:
            deleting.commit()
            deleting.close()
        assert claimed.wait(10.0)
        worker.join()
        with store.db.engine.begin() as conn:
            dropped = drop_reading_runs(conn, tenant, ladder_run_reads.c.item_id == "slate:x")
        assert dropped == 1 and store.runs.get(tenant, "reader") is None
        assert store.runs.get(tenant, "plain") is not None
    finally:
        store.close()


def test_a_retried_runs_reads_wait_for_a_deletion_and_need_the_run(pg_url: str) -> None:
    """``add_items`` (a run taken over) waits for a deletion in flight, then records the
    items only while the run is stored."""
    store = open_store(pg_url)
    try:
        tenant = f"t-{uuid.uuid4().hex[:8]}"
        store.runs.begin(tenant, "kept", ladder="l", request_hash="h", model="m")
        deleting = _deleting(store, tenant)
        added = threading.Event()

        def add() -> None:
            store.runs.add_items(tenant, "kept", ["slate:y"])
            store.runs.add_items(tenant, "gone", ["slate:y"])  # no such run
            added.set()

        worker = threading.Thread(target=add)
        worker.start()
        try:
            assert not added.wait(1.0)
        finally:
            deleting.commit()
            deleting.close()
        assert added.wait(10.0)
        worker.join()
        with store.db.engine.connect() as conn:
            rows = conn.execute(
                ladder_run_reads.select().where(ladder_run_reads.c.tenant_id == tenant)
            ).all()
        assert [(r.run_id, r.item_id) for r in rows] == [("kept", "slate:y")]
    finally:
        store.close()
