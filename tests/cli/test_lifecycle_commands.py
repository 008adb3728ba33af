"""``cairn memories/episodes/scopes/retention`` and ``cairn export`` / ``import``: in-process,
the export from SQLite restored into PostgreSQL with ids intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_data_commands import EPISODES, run, write_jsonl
from tests.conftest import database_url


def _json(result: object) -> object:
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    return json.loads(result.stdout)  # type: ignore[attr-defined]


def test_cli_lifecycle_and_round_trip_to_postgres(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    sqlite = database_url("sqlite", tmp_path, request)
    pg = database_url("postgres", tmp_path, request)
    db = ["--database-url", sqlite]
    src = write_jsonl(tmp_path / "eps.jsonl", EPISODES)
    assert run(tmp_path, "ingest", str(src), "--compile", *db).exit_code == 0
    timeline = _json(run(tmp_path, "timeline", "user-1", "--json", *db))
    episode_id = timeline["episodes"][0]["id"]  # type: ignore[index]
    memories = _json(run(tmp_path, "search", "user-1", "green tea", "--json", *db))
    memory_id = memories["memories"][0]["id"]  # type: ignore[index]

    detail = _json(run(tmp_path, "memories", "get", memory_id, "--json", *db))
    assert detail["current_id"] == memory_id  # type: ignore[index]
    new = _json(
        run(
            tmp_path,
            "memories",
            "update",
            memory_id,
            "--content",
            "Prefers coffee",
            "--editor",
            "cli",
            "--json",
            *db,
        )
    )
    assert new["metadata"]["correction"]["replaces"] == memory_id  # type: ignore[index]
    stale = run(tmp_path, "memories", "update", memory_id, "--confidence", "0.2", *db)
    assert stale.exit_code == 1 and "memory_superseded" in stale.output
    refused = run(tmp_path, "memories", "delete", new["id"], *db, input="n\n")  # type: ignore[index]
    assert refused.exit_code == 1
    assert _json(run(tmp_path, "episodes", "get", episode_id, *db))["id"] == episode_id  # type: ignore[index]

    out = tmp_path / "user-1.jsonl"
    exported = run(tmp_path, "export", "user-1", "-o", str(out), *db)
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["type"] == "header" and len(lines) > 3

    imported = _json(run(tmp_path, "import", "user-1", str(out), "--json", "--database-url", pg))
    assert imported["skipped"] == 0 and imported["imported"]["episode"] == 2  # type: ignore[index]
    again = run(tmp_path, "import", "user-1", str(out), "--database-url", pg)
    assert f"imported nothing new; skipped {len(lines) - 1} (" in " ".join(again.stdout.split())
    repeated = _json(run(tmp_path, "import", "user-1", str(out), "--json", "--database-url", pg))
    skipped = repeated["skipped_records"]  # type: ignore[index]
    assert [s["record"] for s in skipped] == list(range(2, len(lines) + 1))  # file lines
    for url in (sqlite, pg):  # the same history, ids and provenance on both
        got = _json(run(tmp_path, "memories", "get", memory_id, "--json", "--database-url", url))
        assert got["replaced_by"][0]["id"] == new["id"]  # type: ignore[index]
        if url == sqlite:
            expected = got
    assert got == expected
    after = [
        _json(run(tmp_path, "timeline", "user-1", "--json", "--database-url", u))
        for u in (sqlite, pg)
    ]
    assert after[0] == after[1] and after[0] != timeline

    # A bad record is named by its line in the file; a header of another version is refused.
    bad = tmp_path / "bad.jsonl"
    broken = {"type": "memory", "row": {**lines[-1]["row"], "kind": "bogus"}}
    rows = [json.dumps(r) for r in lines[:2]] + ["", json.dumps(broken)]
    bad.write_text("\n".join(rows) + "\n")
    refused_import = run(tmp_path, "import", "other", str(bad), *db)
    assert refused_import.exit_code == 1
    said = " ".join(refused_import.output.split())  # (the console wraps long lines)
    assert "line 4: unknown memory kind" in said, said
    bad.write_text(json.dumps({**lines[0], "version": 99}) + "\n" + "{oops\n")
    refused_import = run(tmp_path, "import", "other", str(bad), *db)
    said = " ".join(refused_import.output.split())
    assert refused_import.exit_code == 1 and "line 1: not a cairn-export version 1" in said
    bad.write_text(json.dumps(lines[0]) + "\n" + "{oops\n")
    refused_import = run(tmp_path, "import", "other", str(bad), *db)
    said = " ".join(refused_import.output.split())
    assert refused_import.exit_code == 1 and "line 2: not a JSON record" in said

    erased = run(tmp_path, "scopes", "delete", "--user-id", "user-1", "--yes", "--json", *db)
    assert _json(erased)["deleted"]["episodes"] == 2  # type: ignore[index]
    assert run(tmp_path, "episodes", "delete", episode_id, "--yes", *db).exit_code == 1

    shown = _json(run(tmp_path, "retention", "set", "--episode-ttl-days", "30", *db))
    assert shown == {"episode_ttl_days": 30, "memory_ttl_days": None}
    assert _json(run(tmp_path, "retention", "show", *db)) == shown
    # A policy left out is cleared (PUT semantics), and the command says so.
    cleared = run(tmp_path, "retention", "set", "--memory-ttl-days", "60", *db)
    assert _json(cleared) == {"episode_ttl_days": None, "memory_ttl_days": 60}
    assert "episode_ttl_days was 30, now none (kept forever)" in " ".join(cleared.stderr.split())
