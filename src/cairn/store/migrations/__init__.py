"""Versioned migrations (Alembic), applied at start and by ``cairn migrate``.

Each feature owns its revisions under ``versions/``. Revisions of independent features branch
from the foundation revision and are all applied (``upgrade heads``), so features can add
tables without touching each other's files; use ``depends_on`` when one needs another's tables.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

HERE = Path(__file__).parent


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = conn
    return cfg


def current_revisions(conn: Connection) -> set[str]:
    return set(MigrationContext.configure(conn).get_current_heads())


def _applied_through(cfg: Config, heads: set[str]) -> set[str]:
    """Every revision a database at ``heads`` has applied: the heads and all they build on."""
    if not heads:
        return set()
    script = ScriptDirectory.from_config(cfg)
    return {rev.revision for rev in script.iterate_revisions(tuple(heads), "base")}


def upgrade(conn: Connection) -> list[str]:
    """Bring the database up to every head; returns every revision this call applied (not
    only the new heads: on a fresh database that is all of them)."""
    cfg = _config(conn)
    before = current_revisions(conn)
    conn.commit()
    command.upgrade(cfg, "heads")
    conn.commit()
    after = current_revisions(conn)
    conn.commit()
    return sorted(_applied_through(cfg, after) - _applied_through(cfg, before))
