"""``cairn slates show|read|write|evictions`` on a SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cairn.cli.main import app


def run(args: list[str], env: dict[str, str], input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, env=env, input=input)
    return result.exit_code, result.output


def test_cli_round_trip(tmp_path: Path, ladders_dir: Path) -> None:
    env = {
        "CAIRN_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}",
        "CAIRN_LADDERS_DIR": str(ladders_dir),
    }
    code, out = run(
        [
            "slates",
            "write",
            "memory-ladder",
            "Memory",
            "facts",
            "core.md",
            "Paris is the capital of France",
            "--tag",
            "geo",
        ],
        env,
    )
    assert code == 0, out
    assert json.loads(out)["usage"] == {"tokens": 6, "tokenLimit": 500}
    code, out = run(
        ["slates", "write", "memory-ladder", "Memory", "facts", "core.md", "-"],
        env,
        input="Rome is in Italy",
    )
    assert code == 0, out
    # A user named for a slate every user shares is refused, as over HTTP.
    code, out = run(
        ["slates", "write", "memory-ladder", "Memory", "facts", "core.md", "x", "--user", "al"],
        env,
    )
    assert code == 1 and "slate_not_per_user" in out, out
    code, out = run(["slates", "read", "memory-ladder", "Memory", "facts", "core.md"], env)
    assert (code, out) == (0, "Paris is the capital of France\nRome is in Italy\n")
    code, out = run(
        ["slates", "read", "memory-ladder", "Memory", "facts", "core.md", "--metatag", "tags"], env
    )
    assert json.loads(out) == ["geo"]
    code, out = run(["slates", "read", "memory-ladder", "Memory", "lessons"], env)
    assert json.loads(out) == [
        {"name": "failures.md", "tokens": 0, "bytes": 0},
        {"name": "wins.md", "tokens": 0, "bytes": 0},
    ]
    code, out = run(["slates", "show", "memory-ladder", "--json"], env)
    (tree,) = json.loads(out)
    assert tree["folders"][0]["files"][0]["content"].startswith("Paris")
    code, out = run(["slates", "show", "memory-ladder", "Memory"], env)
    assert code == 0 and "core.md" in out and "failures.md" in out
    code, out = run(["slates", "evictions", "memory-ladder", "Memory", "--json"], env)
    assert (code, json.loads(out)) == (0, [])
    code, out = run(["slates", "evictions", "memory-ladder", "Memory"], env)
    assert code == 0 and "evicted at" in out and "preview" in out  # a table by default


def test_cli_errors(tmp_path: Path, ladders_dir: Path) -> None:
    env = {
        "CAIRN_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}",
        "CAIRN_LADDERS_DIR": str(ladders_dir),
    }
    code, out = run(["slates", "read", "memory-ladder", "Memory", "nope", "x"], env)
    assert code == 1 and "folder_not_found" in out
    code, out = run(["slates", "show", "unknown-ladder"], env)
    assert code == 1 and "slate_not_found" in out
    # An invalid ladder file is reported and skipped, as the server skips it: the valid ones
    # (and their slates) still answer.
    (ladders_dir / "broken.yaml").write_text("slates:\n  - title: X\n    folders: []\n")
    (ladders_dir / "dup.yaml").write_text("name: a\nname: b\nslates: []\n")
    code, out = run(["slates", "show", "memory-ladder"], env)
    assert code == 0 and "core.md" in out, out
    assert "skipped an invalid ladder file" in out and "broken.yaml" in out and "dup.yaml" in out


def test_the_evictions_table_shows_text_as_it_is(tmp_path: Path, ladders_dir: Path) -> None:
    env = {
        "CAIRN_DATABASE_URL": f"sqlite:///{tmp_path / 'c.db'}",
        "CAIRN_LADDERS_DIR": str(ladders_dir),
        "COLUMNS": "300",
    }
    write = ["slates", "write", "memory-ladder", "Memory", "facts", "core.md"]
    code, out = run([*write, "--", "- [x] buy milk [/INST] [link](u)"], env)
    assert code == 0, out
    code, out = run([*write, " ".join(f"filler{i}" for i in range(245))], env)  # evicts it
    assert code == 0, out
    code, out = run(["slates", "evictions", "memory-ladder", "Memory"], env)
    assert code == 0, out  # (markup in the text crashed the table, or was swallowed)
    assert "- [x] buy milk [/INST] [link](u)" in out
