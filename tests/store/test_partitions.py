"""The registry of per-partition tables is complete: every table of the migrated schema (both
backends) that has a partition column is registered as scoped, as user-keyed, or exempt with a
reason — a feature adding a table must say how its rows are erased."""

from __future__ import annotations

from sqlalchemy import inspect

from cairn.store import Store
from cairn.store.partitions import EXEMPT, SCOPED_TABLES, USER_TABLES

PARTITION_COLUMNS = {"tenant_id", "runtime_id", "user_id", "agent_id"}


def _schema(store: Store) -> dict[str, set[str]]:
    with store.db.engine.connect() as conn:
        insp = inspect(conn)
        return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}


def test_every_table_with_partition_columns_is_registered(store: Store) -> None:
    schema = _schema(store)
    scoped = {t.name for t in SCOPED_TABLES}
    user_keyed = {t.name for t in USER_TABLES}
    assert not (scoped & user_keyed) and not ((scoped | user_keyed) & set(EXEMPT))
    with_columns = {name for name, cols in schema.items() if cols & PARTITION_COLUMNS}
    unregistered = with_columns - scoped - user_keyed - set(EXEMPT)
    assert not unregistered, f"tables with partition columns but no erasure rule: {unregistered}"
    for name in scoped:
        assert schema[name] >= PARTITION_COLUMNS, name
    for name in user_keyed:
        assert {"tenant_id", "user_id"} <= schema[name], name
    assert "ladder_runs" in user_keyed  # its trace and response hold the user's messages
    sqlite_only = set() if store.db.is_sqlite else {"fts_tenants"}
    stale = (scoped | user_keyed | set(EXEMPT)) - set(schema) - sqlite_only
    assert not stale, f"registered tables the schema does not have: {stale}"


def test_registry_check_can_fail(store: Store) -> None:
    """The check above is not vacuous: without the registry, tables are reported."""
    schema = _schema(store)
    with_columns = {name for name, cols in schema.items() if cols & PARTITION_COLUMNS}
    assert {"episodes", "memories", "ladder_runs", "slate_folders"} <= with_columns
