"""``cairn worker --once`` drains the compile queue of a database, then writes the vectors of
memories that lack one (the default embedder; none with ``CAIRN_EMBEDDER=none``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cairn.cli.main import app
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.store import open_store


@pytest.mark.parametrize("embedder", ["multilingual", "none"])
def test_worker_once_runs_queued_jobs(db_url: str, embedder: str) -> None:
    url = db_url
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
    result = CliRunner().invoke(
        app, ["worker", "--once", "--database-url", url], env={"CAIRN_EMBEDDER": embedder}
    )
    assert result.exit_code == 0, result.output
    done = store.jobs.get("default", job.id)
    assert done is not None and done.status == "succeeded" and done.memories_created == 1
    assert store.memories.list("default", scope)[0].content == "Water the plants on Sunday."
    with store.snapshot() as tx:
        vectors = tx.memories.vectors("default", scope)
        left = tx.memories.without_embedding("default", scope)
    if embedder == "multilingual":
        assert "1 memories embedded" in result.output
        assert len(vectors.seqs) == 1 and left == []
        assert len(vectors.blobs[0]) == (384 + 512) * 4
    else:
        assert vectors.seqs == [] and len(left) == 1
    store.close()
