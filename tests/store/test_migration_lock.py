"""SQLite: one process migrates a file at a time, as PostgreSQL's advisory lock makes it there.
Each revision runs in its own transaction, so two processes starting at once on one file
each planned the same revisions and the second failed ("table … already exists")."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, inspect

from cairn.store.database import _file_lock

MIGRATE = (
    "import sys; from cairn.store import open_store; print('ready', flush=True); "
    "open_store(sys.argv[1]).close(); print('migrated')"
)


def test_a_second_process_waits_for_the_migration_lock(tmp_path: Path) -> None:
    db = tmp_path / "cairn.db"
    url = f"sqlite:///{db}"
    with _file_lock(f"{db}.migrate-lock"):  # as another process migrating would hold it
        child = subprocess.Popen(
            [sys.executable, "-c", MIGRATE, url], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # (imports done: it is opening the store now)
        assert child.poll() is None  # waiting, not migrating beside the holder
        engine = create_engine(url)
        try:
            assert "alembic_version" not in inspect(engine).get_table_names()
        finally:
            engine.dispose()
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and "migrated" in out
