"""``cairn bench scale`` at toy sizes: a real server on each backend, every row of the table
filled from what the server answered."""

from __future__ import annotations

import pytest

from cairn.bench import scale


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_scale_table_runs_through_a_real_server(
    backend: str, request: pytest.FixtureRequest
) -> None:
    pg = request.getfixturevalue("pg_url") if backend == "postgres" else scale.PG_DEFAULT
    admin = pg.rsplit("/", 1)[0] + "/postgres"
    result = scale.run_one(
        backend,
        "lexical",
        sizes=(60, 200),
        fill=40,
        fill_subjects=2,
        contexts=8,
        searches=8,
        pg_url=admin,
    )
    for n in (60, 200):
        subject = result["subjects"][n]
        assert subject["memories"] >= n  # one turn memory per episode at least
        assert subject["context"]["found"] >= 4 and subject["context"]["p50"] > 0
        assert subject["ingest_eps"] > 0 and subject["compile_eps"] > 0
    assert result["search"]["found"] >= 4 and result["search_subject"] == 200
    assert result["rss_mb"] and result["rss_mb"] > 20
    table = scale.markdown([result])
    assert f"| {backend} lexical |" in table
    assert "200-episode subject" in table and "server RSS" in table


@pytest.mark.slow
def test_hybrid_mode_can_wait_for_the_vectors() -> None:
    """``--settle``: hybrid mode measures once every vector is written, and says how many
    were (without it, right after the compile, the share is whatever the background wrote)."""
    result = scale.run_one(
        "sqlite", "hybrid", sizes=(40, 120), contexts=6, searches=6, settle_s=120
    )
    assert result["vectors"] == 1.0
    assert result["search"]["found"] >= 3
    table = scale.markdown([result])
    assert "| vectors written when measured, largest subject | 100 % |" in table
