"""``ingest``, ``timeline``, ``search``, ``context``, ``subjects``: happy paths and failures,
in-process (the default) and against a live server (``--url``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cairn.app import create_app
from cairn.cli.main import app
from cairn.config import Settings
from cairn.services import Services
from tests.client.conftest import free_port, live_server
from tests.conftest import make_settings

runner = CliRunner()

EPISODES = [
    {
        "subject_id": "user-1",
        "source": "chat",
        "type": "message",
        "session_id": "s1",
        "payload": {"role": "user", "text": "I prefer green tea in the morning"},
    },
    {
        "subject_id": "user-1",
        "source": "chat",
        "type": "message",
        "session_id": "s1",
        "payload": {"role": "user", "text": "My sister Maya lives in Porto"},
    },
    {"subject_id": "user-2", "source": "chat", "type": "message", "payload": {"text": "hello"}},
]


def env_for(tmp_path: Path, embedder: str = "none") -> dict[str, str]:
    """A user's environment with a data directory of the test's own. Lexical search only
    unless a test asks for an embedder (as in tests/conftest.py): each command builds its own
    services, and with the default embedder the background embedding pass they start loads
    the model at once (its first sweep asks for the vector size), and the command waits for
    that on exit: seconds per command, in tests that check no vector.
    ``test_ingest_locomo_then_compile_search_and_timeline`` compiles and searches with the
    default embedder; ``tests/cli/test_worker_cli.py`` checks the vectors ``cairn worker``
    writes with it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_DATA_DIR"] = str(tmp_path / "data")
    env["CAIRN_EMBEDDER"] = embedder
    return env


def run(tmp_path: Path, *args: str, input: str | None = None, embedder: str = "none") -> Any:
    return runner.invoke(app, list(args), env=env_for(tmp_path, embedder), input=input)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_ingest_jsonl_summary_and_rerun_writes_nothing(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "eps.jsonl", EPISODES)
    first = run(tmp_path, "ingest", str(src), "--json")
    assert first.exit_code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert (summary["format"], summary["created"], summary["subjects"]) == ("jsonl", 3, 2)
    again = json.loads(run(tmp_path, "ingest", str(src), "--json").stdout)
    assert (again["created"], again["duplicates"]) == (0, 3)
    pretty = run(tmp_path, "ingest", str(src))
    assert pretty.exit_code == 0 and "ingest summary" in pretty.stdout


def test_ingest_rejects_a_bad_file_and_writes_nothing(tmp_path: Path) -> None:
    src = write_jsonl(
        tmp_path / "bad.jsonl", [EPISODES[0], "{not json", {**EPISODES[1], "subject_id": "bad/id"}]
    )
    result = run(tmp_path, "ingest", str(src))
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "line 3" in result.stderr
    assert "nothing was imported" in result.stderr
    listed = json.loads(run(tmp_path, "subjects", "list", "--json").stdout)
    assert listed["total"] == 0
    skipped = json.loads(run(tmp_path, "ingest", str(src), "--skip-invalid", "--json").stdout)
    assert (skipped["created"], skipped["invalid"]) == (1, 2)
    assert run(tmp_path, "ingest", str(src), "--format", "xml").exit_code == 2


def locomo_file(path: Path) -> Path:
    sample = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group."},
                {"speaker": "Melanie", "dia_id": "D1:2", "text": "I love painting sunsets."},
            ],
            "session_2_date_time": "2:10 pm on 25 May, 2023",
            "session_2": [
                {"speaker": "Caroline", "dia_id": "D2:1", "text": "I adopted a dog named Rex."},
            ],
        },
        "qa": [],
    }
    path.write_text(json.dumps([sample]))
    return path


def test_ingest_locomo_then_compile_search_and_timeline(tmp_path: Path) -> None:
    """The compile and the first search run with the default embedder, as a user runs them
    (each command loads the model: for the search's query, and in its background pass)."""
    src = locomo_file(tmp_path / "locomo.json")
    default = Settings.model_fields["embedder"].default
    result = run(tmp_path, "ingest", str(src), "--compile", "--json", embedder=default)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["format"], summary["created"]) == ("locomo", 3)
    assert summary["compiled"]["locomo:conv-1"] >= 1
    timeline = json.loads(run(tmp_path, "timeline", "locomo:conv-1", "--json").stdout)
    assert [e["metadata"]["dia_id"] for e in timeline["episodes"]] == ["D1:1", "D1:2", "D2:1"]
    assert [e["session_id"] for e in timeline["episodes"]] == ["session_1"] * 2 + ["session_2"]
    # Each session's turns count their seconds from its own date (D2:1 is its first turn).
    starts = [e["occurred_at"][:19] for e in timeline["episodes"]]
    assert starts == ["2023-05-08T13:56:00", "2023-05-08T13:56:01", "2023-05-25T14:10:00"]
    found = run(tmp_path, "search", "locomo:conv-1", "dog Rex", "--json", embedder=default)
    assert any("Rex" in m["content"] for m in json.loads(found.stdout)["memories"])
    pretty = run(tmp_path, "search", "locomo:conv-1", "dog Rex")
    assert pretty.exit_code == 0 and "Rex" in pretty.stdout
    bad_kind = run(tmp_path, "search", "locomo:conv-1", "dog", "--kind", "nope")
    assert bad_kind.exit_code == 1 and "unknown_kind" in bad_kind.stderr


def test_ingest_chat_export(tmp_path: Path) -> None:
    src = tmp_path / "chats.jsonl"
    write_jsonl(
        src,
        [
            {
                "id": "c1",
                "messages": [
                    {
                        "role": "user",
                        "content": "Book me a table for two",
                        "timestamp": "2024-03-01T19:00:00Z",
                    },
                    {"role": "assistant", "content": "Done, 8pm at Lupa."},  # (no time)
                ],
            }
        ],
    )
    result = run(tmp_path, "ingest", str(src), "--subject", "user-7", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["format"] == "chat"
    timeline = json.loads(run(tmp_path, "timeline", "user-7", "--json").stdout)
    assert [e["payload"]["messages"][0]["role"] for e in timeline["episodes"]] == [
        "user",
        "assistant",
    ]
    # A message without a time follows the one before it (not the time of the import).
    times = [e["occurred_at"][:19] for e in timeline["episodes"]]
    assert times == ["2024-03-01T19:00:00", "2024-03-01T19:00:01"]
    no_subject = run(tmp_path, "ingest", str(src), "--json")
    assert no_subject.exit_code == 1


def test_timeline_context_and_subjects(tmp_path: Path) -> None:
    run(tmp_path, "ingest", str(write_jsonl(tmp_path / "e.jsonl", EPISODES)))
    pretty = run(tmp_path, "timeline", "user-1")
    assert pretty.exit_code == 0 and "green tea" in pretty.stdout
    markup = write_jsonl(
        tmp_path / "m.jsonl",
        [{**EPISODES[2], "subject_id": "user-3", "payload": {"text": "[bold]not markup[/bold]"}}],
    )
    run(tmp_path, "ingest", str(markup))
    shown = run(tmp_path, "timeline", "user-3")
    # Stored text is shown as it is, never read as Rich markup.
    assert "[bold]" in shown.stdout and "[/bold]" in shown.stdout
    bad = run(tmp_path, "timeline", "bad/id")
    assert bad.exit_code == 1 and "validation_error" in bad.stderr
    bad_json = run(tmp_path, "timeline", "bad/id", "--json")
    assert json.loads(bad_json.stderr)["error"]["code"] == "validation_error"
    ctx = json.loads(
        run(
            tmp_path,
            "context",
            "user-1",
            "what does the user drink?",
            "--session",
            "s1",
            "--max-tokens",
            "300",
            "--json",
        ).stdout
    )
    assert "green tea" in ctx["assembled_context"] and ctx["token_estimate"] <= 300
    text = run(tmp_path, "context", "user-1", "drink", "--session", "s1", "--text")
    assert text.stdout.startswith("<recalled-memory>")
    table = run(tmp_path, "context", "user-1", "drink", "--session", "s1")
    assert table.exit_code == 0 and "context for user-1" in table.stdout
    assert run(tmp_path, "context", "user-1", "drink", "--max-tokens", "0").exit_code == 2
    listed = run(tmp_path, "subjects", "list")
    assert "user-1" in listed.stdout and "3 subject(s)" in listed.stdout
    refused = run(tmp_path, "subjects", "delete", "user-2", input="n\n")
    assert refused.exit_code == 1
    deleted = json.loads(run(tmp_path, "subjects", "delete", "user-2", "--yes", "--json").stdout)
    assert deleted["episodes_deleted"] == 1
    assert json.loads(run(tmp_path, "subjects", "list", "--json").stdout)["total"] == 2


def test_commands_against_a_server_with_a_key(tmp_path: Path) -> None:
    services = Services.from_settings(make_settings(tmp_path / "server"))
    key, _ = services.store.keys.create("acme")
    src = write_jsonl(tmp_path / "e.jsonl", EPISODES)
    try:
        with live_server(create_app(services=services)) as url:
            ok = run(tmp_path, "ingest", str(src), "--url", url, "--api-key", key, "--json")
            assert ok.exit_code == 0 and json.loads(ok.stdout)["created"] == 3
            listed = run(tmp_path, "subjects", "list", "--url", url, "--api-key", key, "--json")
            assert json.loads(listed.stdout)["total"] == 2
            wrong = run(tmp_path, "timeline", "user-1", "--url", url, "--api-key", "nope")
            assert wrong.exit_code == 1 and "invalid_api_key" in wrong.stderr
        # The local database of the CLI was never touched: everything went to the server.
        assert json.loads(run(tmp_path, "subjects", "list", "--json").stdout)["total"] == 0
    finally:
        services.close()
    down = run(tmp_path, "subjects", "list", "--url", f"http://127.0.0.1:{free_port()}")
    assert down.exit_code == 1 and "error" in down.stderr


def test_an_invalid_ladder_file_stops_nothing_and_is_reported(tmp_path: Path) -> None:
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    (ladders / "broken.yaml").write_text("slates: 7\n")
    env = env_for(tmp_path) | {"CAIRN_LADDERS_DIR": str(ladders)}
    result = runner.invoke(app, ["subjects", "list"], env=env)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    result = runner.invoke(app, ["ladders", "list"], env=env)
    assert result.exit_code == 0 and "invalid broken.yaml" in result.stderr, result.stderr


def _leaf_commands() -> list[str]:
    """Every command that runs something (``cairn retention show``), not a group of them."""
    import typer

    root = typer.main.get_command(app)
    ctx = root.context_class(root)
    found: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "list_commands"):  # a group (typer's own click, or click's)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name])
        else:
            found.append(" ".join(path))

    walk(root, [])
    return found


@pytest.mark.parametrize("command", _leaf_commands())
def test_every_command_has_help_with_an_example(command: str) -> None:
    result = runner.invoke(app, [*command.split(), "--help"])
    assert result.exit_code == 0
    assert "Example" in result.stdout or "example" in result.stdout


def test_ingest_and_timeline_in_a_real_process(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "e.jsonl", EPISODES)
    env = env_for(tmp_path)
    cmd = [sys.executable, "-m", "cairn.cli.main"]
    done = subprocess.run(
        [*cmd, "ingest", str(src), "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 3
    shown = subprocess.run(
        [*cmd, "timeline", "user-1", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0
    assert len(json.loads(shown.stdout)["episodes"]) == 2
    assert run(tmp_path, "ingest", str(tmp_path / "nope.jsonl")).exit_code == 2


def test_ingest_a_chatgpt_export_follows_the_current_thread(tmp_path: Path) -> None:
    def node(nid: str, parent: str | None, role: str | None, text: str, t: float) -> Any:
        message = (
            None
            if role is None
            else {
                "author": {"role": role},
                "create_time": t,
                "content": {"content_type": "text", "parts": [text]},
            }
        )
        return {"id": nid, "parent": parent, "message": message, "children": []}

    conversation = {
        "id": "conv-9",
        "title": "Trip",
        "current_node": "a2",
        "mapping": {
            "root": node("root", None, None, "", 0),
            "sys": node("sys", "root", "system", "You are helpful", 1_700_000_000),
            "u1": node("u1", "sys", "user", "Plan a trip to Kyoto", 1_700_000_010),
            "a1-old": node("a1-old", "u1", "assistant", "An abandoned answer", 1_700_000_020),
            "a1": node("a1", "u1", "assistant", "Day 1: Fushimi Inari", 1_700_000_030),
            "u2": node("u2", "a1", "user", "Add a tea ceremony", 1_700_000_040),
            "a2": node("a2", "u2", "assistant", "Day 2: tea in Uji", 1_700_000_050),
        },
    }
    src = tmp_path / "conversations.json"
    src.write_text(json.dumps([conversation]))
    result = run(tmp_path, "ingest", str(src), "--subject", "me", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["format"] == "chat"
    episodes = json.loads(run(tmp_path, "timeline", "me", "--json").stdout)["episodes"]
    assert [e["payload"]["messages"][0]["content"] for e in episodes] == [
        "Plan a trip to Kyoto",
        "Day 1: Fushimi Inari",
        "Add a tea ceremony",
        "Day 2: tea in Uji",
    ]
    assert {e["session_id"] for e in episodes} == {"conv-9"}
    assert episodes[0]["occurred_at"].startswith("2023-11-14T22:13:30")


def test_ingest_reads_standard_input(tmp_path: Path) -> None:
    lines = "\n".join(
        json.dumps({k: v for k, v in e.items() if k != "subject_id"}) for e in EPISODES[:2]
    )
    result = run(tmp_path, "ingest", "-", "--subject", "piped", "--json", input=lines)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["created"] == 2
    again = run(tmp_path, "ingest", "-", "--subject", "piped", "--json", input=lines)
    assert json.loads(again.stdout)["duplicates"] == 2  # keys from the records' content
    # Other records on the same line numbers are new data, not duplicates; a repeated record
    # in one input is kept as often as it occurs.
    other = {"source": "chat", "type": "note", "payload": {"text": "I am allergic to peanuts"}}
    twice = "\n".join([json.dumps(other), json.dumps(other)])
    third = run(tmp_path, "ingest", "-", "--subject", "piped", "--json", input=twice)
    assert (json.loads(third.stdout)["created"], json.loads(third.stdout)["duplicates"]) == (2, 0)


def test_ingest_refuses_text_that_is_not_utf8_and_reads_a_byte_order_mark(tmp_path: Path) -> None:
    bad = tmp_path / "bin.jsonl"
    bad.write_bytes(b"\xff\xfe garbage\n")
    result = run(tmp_path, "ingest", str(bad))
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "not UTF-8 text" in said, said
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(EPISODES[0]).encode() + b"\n")
    result = run(tmp_path, "ingest", str(bom), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["created"] == 1


def test_a_chatgpt_conversation_with_nothing_to_import_is_invalid(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps([{"title": "t", "id": "cx", "mapping": {}, "current_node": "x"}]))
    result = run(tmp_path, "ingest", str(export), "--subject", "u", "--json")
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "record 0" in said and "no user or assistant message" in said, said


# Records the server refuses for their text, with where (and what) the local check reports.
# JSON may escape both NUL and a lone surrogate, in values and in keys alike.
UNSTORABLE = {
    "nul in a value": ('{"text": "a\\u0000b"}', "payload.text: must not contain a NUL character"),
    "nul in a key": ('{"k\\u0000": "v"}', "payload.k\\x00: must not contain a NUL character"),
    "surrogate in a value": (
        '{"text": "a\\ud800b"}',
        "payload.text: must not contain a lone UTF-16 surrogate",
    ),
    "surrogate in a key": (
        '{"\\udfff": "v"}',
        "payload.\\udfff: must not contain a lone UTF-16 surrogate",
    ),
    "NaN": ('{"x": NaN}', "payload.x: nan is not a JSON number"),
    "Infinity": ('{"x": [1, -Infinity]}', "payload.x.1: -inf is not a JSON number"),
}


@pytest.mark.parametrize("case", UNSTORABLE, ids=list(UNSTORABLE))
def test_ingest_checks_text_by_the_servers_rules(tmp_path: Path, case: str) -> None:
    """A record with a NUL or a lone surrogate is reported with its line before anything is
    sent (the server would refuse its whole batch): refused by default, skipped with
    ``--skip-invalid`` while the valid lines are imported — never a traceback."""
    payload, said = UNSTORABLE[case]
    bad = f'{{"subject_id": "u", "source": "s", "type": "note", "payload": {payload}}}'
    src = write_jsonl(tmp_path / "odd.jsonl", [bad, EPISODES[2]])
    refused = run(tmp_path, "ingest", str(src))
    assert refused.exit_code == 1, refused.output
    text = " ".join(refused.stderr.split())
    assert f"line 1: {said}" in text and "nothing was imported" in text, text
    assert json.loads(run(tmp_path, "subjects", "list", "--json").stdout)["total"] == 0
    skipped = run(tmp_path, "ingest", str(src), "--skip-invalid", "--json")
    assert skipped.exit_code == 0, skipped.output
    summary = json.loads(skipped.stdout)
    assert (summary["created"], summary["invalid"], summary["sent"]) == (1, 1, 1)
    assert summary["errors"][0]["where"] == "line 1"
    assert summary["errors"][0]["error"].startswith(said)
    pretty = run(tmp_path, "ingest", str(src), "--skip-invalid")
    assert pretty.exit_code == 0 and "Traceback" not in pretty.output
    assert f"skipped line 1: {said}" in " ".join(pretty.stderr.split())


def test_ingest_refuses_json_nested_deeper_than_a_batch_may_carry(tmp_path: Path) -> None:
    """A batch is two levels around its records, and the server refuses a body nested over
    128 levels: a record's own nesting may reach 126."""
    lines = [
        json.dumps({"subject_id": "u", "source": "s", "type": "note", "payload": {"x": deep}})
        for deep in (_nested(124), _nested(125))  # 128 and 129 levels in a batch
    ]
    src = write_jsonl(tmp_path / "deep.jsonl", lines)
    result = run(tmp_path, "ingest", str(src), "--skip-invalid", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["created"], summary["invalid"]) == (1, 1)
    assert summary["errors"][0]["where"] == "line 2"
    assert summary["errors"][0]["error"].endswith(": nested more than 128 levels")


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def test_ingest_skips_unstorable_text_against_a_server(tmp_path: Path) -> None:
    """The same check in front of a real server (``--url``), where the defect was seen: the
    valid line is imported, the NUL and the lone surrogate reported with their lines."""
    services = Services.from_settings(make_settings(tmp_path / "server"))
    lines = [
        f'{{"subject_id": "u", "source": "s", "type": "note", "payload": {payload}}}'
        for payload, _ in (UNSTORABLE["nul in a value"], UNSTORABLE["surrogate in a value"])
    ]
    src = write_jsonl(tmp_path / "odd.jsonl", [*lines, EPISODES[2]])
    try:
        with live_server(create_app(services=services)) as url:
            result = run(tmp_path, "ingest", str(src), "--url", url, "--skip-invalid", "--json")
    finally:
        services.close()
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["created"], summary["invalid"]) == (1, 2)
    assert [e["where"] for e in summary["errors"]] == ["line 1", "line 2"]
