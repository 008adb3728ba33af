"""The slate tables made by migration 0003 match the tables queries are written against."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from cairn.store import Store
from cairn.store.schema import metadata
from cairn.store.slate_tables import slate_entries  # noqa: F401  (registers the slate tables)


def test_migration_matches_schema(store: Store) -> None:
    with store.db.engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), metadata)
    ours = [d for d in diffs if "slate_" in repr(d)]
    assert ours == []
