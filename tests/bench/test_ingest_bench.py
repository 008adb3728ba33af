"""The ingest benchmark at toy size with its batches spread over two server processes: every
batch reaches the one database, whichever process took it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from cairn.bench import ingest


@pytest.mark.slow
def test_batches_spread_over_two_servers_all_land(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    result = ingest.bench_backend("sqlite", url, episodes=400, concurrency=2, servers=2)
    assert result["batch_eps"] > 0 and 0 < result["p50_ms"] <= result["p95_ms"]
    engine = create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM episodes")).scalar_one()
    engine.dispose()
    # Warm-up (50 + 400 sequential), 400 singles, 8 warm-up batches, 4 measured batches.
    assert stored == 50 + 400 + 400 + 800 + 400
