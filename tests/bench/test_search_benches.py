"""The compile/search and context benchmarks' code paths at toy sizes: they run, count what
they claim to, and refuse to report a run whose search lane found nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.bench import context as context_bench
from cairn.bench.memories import measure
from cairn.store import fts, open_store


def test_memories_bench_with_other_tenants(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        row = measure(store, memories=300, queries=10, embedder=None, tenants=4)
        with store.db.read() as conn:
            registered = conn.exec_driver_sql(
                "SELECT count(*) FROM fts_tenants WHERE base = 'memories'"
            ).scalar_one()
    finally:
        store.close()
    assert registered == 4  # the bench tenant and three others, each with its own index
    assert row["episodes"] == 300 and row["memories"] >= 300
    assert row["compile_eps"] > 0 and 0 < row["lexical_p50"] <= row["lexical_p95"]


def test_context_bench_measures_a_searching_lane(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    context_bench.populate(url, 300)
    p50, p95 = context_bench.measure_in_process(url, requests=10)
    assert 0 < p50 <= p95


def test_context_bench_refuses_a_run_that_recalls_no_memory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    context_bench.populate(url, 300)
    store = open_store(url)
    try:  # empty the tenant's index: the memories stay, search can no longer find them
        with store.db.write() as conn:
            table = fts.MEMORIES.table(context_bench.TENANT)
            conn.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
    finally:
        store.close()
    with pytest.raises(RuntimeError, match="not searching the corpus"):
        context_bench.measure_in_process(url, requests=10)


def test_memories_bench_runs_on_both_backends(capsys: pytest.CaptureFixture[str]) -> None:
    """The command's own set-up path: a scratch PostgreSQL database made and dropped."""
    from cairn.bench.memories import run
    from tests.conftest import PG_ADMIN_URL

    rows = run(
        memories=200, queries=5, embedder=None, backends=("sqlite", "postgres"), pg_url=PG_ADMIN_URL
    )
    assert [r["backend"] for r in rows] == ["sqlite", "postgres"]
    assert all(r["memories"] >= 200 and r["lexical_p50"] > 0 for r in rows)
    assert "postgres" in capsys.readouterr().out


def test_embed_bench_counts_every_vector() -> None:
    """``cairn bench embed`` at toy size: every compiled memory gets its vector from the
    background pass, and the numbers it prints are there and positive."""
    from io import StringIO

    from rich.console import Console

    from cairn.bench.embed import run

    out = StringIO()
    result = run(queries=3, memories=10, batch=4, console=Console(file=out, width=120))
    after = result["after_compile"]
    assert after["memories"] >= 10 and after["left"] == 0
    assert after["vectors"] == after["memories"]
    assert 0 < result["query_ms"]["p50"] <= result["query_ms"]["p95"]
    assert result["bulk_per_s"]["1 core"] > 0 and result["paraphrase_recall_at_1"]["en"] == 1.0
    assert "load average" in out.getvalue()
