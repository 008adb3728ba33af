"""Versioned migrations (Alembic), applied at start and by ``cairn migrate``.

Each feature owns its revisions under ``versions/``. Revisions of independent features branch
from the foundation revision and are all applied (``upgrade heads``), so features can add
tables without touching each other's files; use ``depends_on`` when one needs another's tables.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Alembic's templates (mako) highlight mako's own HTML error pages with pygments when it is
# importable: some 4 MB of every server process for pages Cairn never renders. Without the
# plugin mako falls back to plain escaping (its documented behaviour without pygments).
sys.modules.setdefault("mako.ext.pygmentplugin", None)  # type: ignore[arg-type]

from alembic import command  # noqa: E402
from alembic.config import Config  # noqa: E402
from alembic.runtime.migration import MigrationContext  # noqa: E402
from sqlalchemy import Connection  # noqa: E402

HERE = Path(__file__).parent


def _config(conn: Connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    cfg.attributes["connection"] = conn
    return cfg


def current_revisions(conn: Connection) -> set[str]:
    return set(MigrationContext.configure(conn).get_current_heads())


def upgrade(conn: Connection) -> list[str]:
    """Bring the database up to every head; returns every revision applied, in order."""
    cfg = _config(conn)
    conn.commit()
    command.upgrade(cfg, "heads")
    conn.commit()
    return list(cfg.attributes.get("applied", []))
