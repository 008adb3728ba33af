"""Scratch PostgreSQL databases: made empty for a benchmark or a test run, then dropped."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text

from cairn.store.database import normalize_url


@contextmanager
def scratch_database(admin_url: str, prefix: str = "cairn_bench") -> Iterator[str]:
    """Create an empty database on ``admin_url``'s PostgreSQL server and yield its URL; it is
    dropped afterwards (with any connection still open to it)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(normalize_url(admin_url), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


__all__ = ["scratch_database"]
