"""CLI polish: ``--version``, help without ``<bool>`` on flags, whole ids in tables, messages
printed as they are (brackets included)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn import __version__
from cairn.cli.main import app
from tests.cli.test_data_commands import EPISODES, run, runner, write_jsonl

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_version_option() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == __version__


@pytest.mark.parametrize(
    "command", [[], ["search"], ["context"], ["ingest"], ["keys", "create"], ["slates", "write"]]
)
def test_help_shows_no_bool_placeholder(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "--help" in result.output and "<bool>" not in result.output
    assert "<int" in result.output or command in ([], ["keys", "create"], ["slates", "write"])


def test_tables_show_whole_ids(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "eps.jsonl", EPISODES)
    assert run(tmp_path, "ingest", str(src), "--compile").exit_code == 0
    found = json.loads(run(tmp_path, "search", "user-1", "tea", "--json").output)
    ids = {m["id"] for m in found["memories"]}
    assert ids
    table = run(tmp_path, "search", "user-1", "tea").output
    assert set(UUID.findall(table)) == ids, table
    context = run(tmp_path, "context", "user-1", "green tea").output
    assert set(UUID.findall(context)) & ids, context


def test_error_messages_keep_their_brackets(tmp_path: Path) -> None:
    result = run(tmp_path, "search", "user-1", "tea", "--kind", "[bold]x[/bold]")
    assert result.exit_code == 1
    assert "unknown kind [bold]x[/bold]" in result.output, result.output
    bad = run(tmp_path, "search", "bad/id", "tea")
    assert bad.exit_code == 1 and "'/'" in bad.output, bad.output


def test_migrate_lists_every_revision_it_applies(tmp_path: Path) -> None:
    versions = Path(__file__).resolve().parents[2] / "src/cairn/store/migrations/versions"
    revisions = sorted(p.stem for p in versions.glob("0*.py"))
    url = f"sqlite:///{tmp_path / 'm.db'}"
    first = runner.invoke(app, ["migrate", "--database-url", url], env={"COLUMNS": "400"})
    assert first.exit_code == 0, first.output
    listed = first.output.removeprefix("applied: ").split(", ")
    assert [name.strip() for name in listed] == revisions
    again = runner.invoke(app, ["migrate", "--database-url", url])
    assert again.output.strip() == "up to date"


def test_the_package_is_typed() -> None:
    import cairn

    assert (Path(cairn.__file__).parent / "py.typed").is_file()
