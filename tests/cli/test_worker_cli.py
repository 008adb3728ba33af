"""``cairn worker --once`` drains the compile queue of a database."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cairn.cli.main import app
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.store import open_store


def test_worker_once_runs_queued_jobs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    store = open_store(url)
    scope = Scope.for_subject("u")
    store.episodes.append_many(
        "default",
        [
            NewEpisode(
                scope=scope,
                source="s",
                type="note",
                payload={"text": "Water the plants on Sunday."},
            )
        ],
    )
    job = store.jobs.enqueue("default", scope)
    result = CliRunner().invoke(app, ["worker", "--once", "--database-url", url])
    assert result.exit_code == 0, result.output
    done = store.jobs.get("default", job.id)
    assert done is not None and done.status == "succeeded" and done.memories_created == 1
    assert store.memories.list("default", scope)[0].content == "Water the plants on Sunday."
    store.close()
