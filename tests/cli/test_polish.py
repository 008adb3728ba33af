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
    # In the order applied (each after the revisions it builds on): every one of them.
    assert sorted(name.strip() for name in listed) == revisions
    again = runner.invoke(app, ["migrate", "--database-url", url])
    assert again.output.strip() == "up to date"


def test_the_package_is_typed() -> None:
    import cairn

    assert (Path(cairn.__file__).parent / "py.typed").is_file()


def _key_env(tmp_path: Path) -> tuple[dict[str, str], str, str]:
    """A SQLite database holding keys of tenants a and b (so no longer open)."""
    from cairn.store import open_store

    url = f"sqlite:///{tmp_path / 'keys.db'}"
    ladders = Path(__file__).resolve().parents[2] / "examples" / "ladders"
    store = open_store(url)
    try:
        key_a, _ = store.keys.create("tenant-a")
        key_b, _ = store.keys.create("tenant-b")
    finally:
        store.close()
    env = {"CAIRN_DATABASE_URL": url, "CAIRN_LADDERS_DIR": str(ladders), "COLUMNS": "200"}
    return env, key_a, key_b


WRITES = [
    ["slates", "write", "memory-ladder", "Memory", "facts", "core.md", "Rome is in Italy"],
    [
        "templates",
        "apply",
        "customer-support-handoff",
        "--subject",
        "customer:globex",
        "--set",
        "customer=Globex Corp",
        "--set",
        "issue=Duplicate charge",
    ],
    ["ladders", "run", "memory-ladder", "What is the capital of France?"],
]


@pytest.mark.parametrize("command", WRITES)
def test_write_commands_need_a_key_once_keys_exist(tmp_path: Path, command: list[str]) -> None:
    env, key_a, key_b = _key_env(tmp_path)
    # No key, a tenant picked by name: the back door is closed.
    refused = runner.invoke(app, [*command, "--tenant", "tenant-a"], env=env)
    assert refused.exit_code == 1 and "missing_api_key" in refused.output, refused.output
    # A key of another tenant cannot act as tenant a.
    other = runner.invoke(app, [*command, "--tenant", "tenant-a", "--api-key", key_b], env=env)
    assert other.exit_code == 1 and "tenant_mismatch" in other.output, other.output
    wrong = runner.invoke(app, [*command, "--api-key", "cairn_not-a-key"], env=env)
    assert wrong.exit_code == 1 and "invalid_api_key" in wrong.output, wrong.output
    # The key decides the tenant (CAIRN_API_KEY works the same).
    ok = runner.invoke(app, command, env={**env, "CAIRN_API_KEY": key_a})
    assert ok.exit_code == 0, ok.output
    # The database's operator names the database and may pick the tenant.
    operator = runner.invoke(
        app,
        [*command, "--tenant", "tenant-b", "--database-url", env["CAIRN_DATABASE_URL"]],
        env=env,
    )
    assert operator.exit_code == 0, operator.output


@pytest.mark.parametrize(
    "command",
    [["subjects", "list"], ["search", "user-1", "tea"], *WRITES],
    ids=["subjects", "search", "slates", "templates", "ladders"],
)
def test_an_unknown_cairn_api_key_is_refused_and_never_stored(
    tmp_path: Path, command: list[str]
) -> None:
    """CAIRN_API_KEY is the key an in-process command sends: an unknown one (a typo) is 403
    as over HTTP, and it is not stored as a key of the tenant ``default`` (which a server on
    the same database would then accept)."""
    from cairn.store import open_store

    env, _, _ = _key_env(tmp_path)
    typo = runner.invoke(app, command, env={**env, "CAIRN_API_KEY": "cairn_typo-key"})
    assert typo.exit_code == 1 and "invalid_api_key" in typo.output, typo.output
    store = open_store(env["CAIRN_DATABASE_URL"], migrate=False)
    try:
        assert store.keys.tenant_for("cairn_typo-key") is None
        assert {k.tenant_id for k in store.keys.list()} == {"tenant-a", "tenant-b"}
    finally:
        store.close()


def test_cairn_api_key_on_a_database_without_keys_is_open_mode(tmp_path: Path) -> None:
    """No key stored yet (no server has started with it): in-process commands work as the
    API does in open mode, and the key is still not stored."""
    from cairn.store import open_store

    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    env = {"CAIRN_DATABASE_URL": url, "CAIRN_API_KEY": "cairn_not-stored", "COLUMNS": "200"}
    listed = runner.invoke(app, ["subjects", "list"], env=env)
    assert listed.exit_code == 0, listed.output
    store = open_store(url, migrate=False)
    try:
        assert not store.keys.any_key_exists()
    finally:
        store.close()


def test_reads_of_slates_follow_the_same_rule(tmp_path: Path) -> None:
    env, key_a, _ = _key_env(tmp_path)
    show = ["slates", "show", "memory-ladder", "Memory", "--json"]
    refused = runner.invoke(app, [*show, "--tenant", "tenant-a"], env=env)
    assert refused.exit_code == 1 and "missing_api_key" in refused.output
    assert runner.invoke(app, [*show, "--api-key", key_a], env=env).exit_code == 0


def test_the_key_decides_where_a_write_lands(tmp_path: Path) -> None:
    env, key_a, key_b = _key_env(tmp_path)
    where = ["memory-ladder", "Memory", "facts", "core.md"]
    wrote = runner.invoke(
        app, ["slates", "write", *where, "Rome is in Italy", "--api-key", key_a], env=env
    )
    assert wrote.exit_code == 0, wrote.output
    mine = runner.invoke(app, ["slates", "read", *where, "--api-key", key_a, "--peek"], env=env)
    theirs = runner.invoke(app, ["slates", "read", *where, "--api-key", key_b, "--peek"], env=env)
    assert "Rome is in Italy" in mine.output and "Rome" not in theirs.output, theirs.output


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("CAIRN_PORT", "abc", "CAIRN_PORT: Input should be a valid integer"),
        ("CAIRN_PORT", "99999", "CAIRN_PORT: Input should be less than or equal to 65535"),
        ("CAIRN_LOG_LEVEL", "LOUD", "CAIRN_LOG_LEVEL: Input should be 'DEBUG'"),
        ("CAIRN_DB_POOL_SIZE", "0", "CAIRN_DB_POOL_SIZE: Input should be greater than 0"),
        ("CAIRN_EMBEDDER", "openai", "needs CAIRN_LLM_BASE_URL"),
    ],
)
def test_a_bad_setting_is_a_configuration_error_naming_it(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    """Exit 3 with the variable and the rule, as cli.md documents, not a traceback."""
    env = {"CAIRN_DATA_DIR": str(tmp_path / "data"), variable: value}
    result = runner.invoke(app, ["serve"], env=env)
    said = " ".join(result.output.split())
    assert result.exit_code == 3 and says in said and "Traceback" not in said, said


def test_help_texts_are_plain_and_each_command_is_one_line_in_its_list() -> None:
    """No reStructuredText (``x``) in what a user reads, and each command's summary (the
    first paragraph, shown in its group's list) is one line."""
    import typer

    def walk(command: object, path: str) -> list[str]:
        problems = []
        texts = [getattr(command, "help", None) or ""]
        texts += [getattr(p, "help", None) or "" for p in getattr(command, "params", [])]
        if any("``" in t for t in texts):
            problems.append(f"{path}: ``")
        if "\n" in texts[0].split("\n\n")[0].strip():
            problems.append(f"{path}: a summary of several lines")
        for name, sub in getattr(command, "commands", {}).items():
            problems += walk(sub, f"{path} {name}")
        return problems

    assert walk(typer.main.get_command(app), "cairn") == []


def test_retention_set_refuses_what_the_api_refuses(tmp_path: Path) -> None:
    from cairn.cli.lifecycle import TTL_DAYS_MAX
    from cairn.engine.retention import MAX_TTL_DAYS

    assert TTL_DAYS_MAX == MAX_TTL_DAYS
    env = {"CAIRN_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    too_long = runner.invoke(app, ["retention", "set", "--episode-ttl-days", "36501"], env=env)
    assert too_long.exit_code == 2 and "36500" in too_long.output, too_long.output
    help_text = runner.invoke(app, ["retention", "set", "--help"], env=env).output
    assert "1<=x<=36500" in help_text, help_text
