"""Alembic environment: runs on the connection Cairn hands over (never from a URL here)."""

import logging
from typing import Any

from alembic import context

log = logging.getLogger("cairn.migrations")
connection = context.config.attributes["connection"]
applied: list[str] = context.config.attributes.setdefault("applied", [])


def _record(ctx: Any, step: Any, heads: Any, run_args: Any) -> None:
    # One line per revision applied (merge points are bookkeeping, not migrations).
    if step.is_upgrade and step.is_migration:
        for revision in step.up_revision_ids:
            applied.append(revision)
            log.info("migration applied: %s", revision)


context.configure(
    connection=connection,
    target_metadata=None,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=True,
    on_version_apply=_record,
)
with context.begin_transaction():
    context.run_migrations()
