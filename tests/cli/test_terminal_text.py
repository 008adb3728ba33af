"""Stored text on a terminal: shown, never acted on; every script whatever the locale.

Anyone who writes a message writes what an operator's terminal shows: an escape sequence
(ESC or the one-character C1 CSI) recolours or hides it, a right-to-left override turns
``gnp.exe`` into ``exe.png``. Tables and messages show such characters as escapes; ``--json``
keeps the same JSON with them as ``\\u`` escapes. A stream that cannot encode a script
(``PYTHONIOENCODING=latin-1``) gets escapes, not a traceback, and an argument in UTF-8 is read
as UTF-8 under a C locale without UTF-8 mode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_data_commands import env_for, run, write_jsonl

ACTIVE = ("\x1b", "\x9b", "\x7f", "\u202e", "\u2066")
TEXT = (
    "Danger \x1b[31mRED\x1b[0m and \x9b32mGREEN del\x7f \u202eevil txt.exe \u2066end "
    "李雷 Ωмега " + "a" * 60 + " 👨\u200d👩\u200d👧 family"
)


def _episode(text: str = TEXT) -> dict[str, object]:
    return {"subject_id": "esc", "source": "chat", "type": "note", "payload": {"text": text}}


def test_tables_show_terminal_controls_as_escapes(tmp_path: Path) -> None:
    cut = "b" * 76 + " 👨\u200d👩\u200d👧 family"  # a cell's 79th character inside the family
    src = write_jsonl(tmp_path / "e.jsonl", [_episode(), _episode(cut)])
    assert run(tmp_path, "ingest", str(src), "--compile").exit_code == 0
    for args in (("search", "esc", "danger"), ("timeline", "esc"), ("context", "esc", "danger")):
        out = run(tmp_path, *args).stdout
        assert "Danger" in out, args
        assert not any(c in out for c in ACTIVE), (args, out)
        assert "\\x1b[31mRED" in out and "\\u202eevil" in out and "李雷" in out
    # Piped (to a model, a file), ``--text`` is the rendered context exactly: no escapes, no
    # :emoji: codes replaced, tabs kept. On a terminal it is shown with escapes (below).
    piped = run(tmp_path, "context", "esc", "danger", "--text").stdout
    assert "\x9b32mGREEN" in piped and "\u202eevil" in piped
    # The timeline's cells are cut between graphemes: never half a family.
    lines = [
        line for line in run(tmp_path, "timeline", "esc").stdout.splitlines() if "bbbb" in line
    ]
    assert len(lines) == 2 and all("👨" not in line for line in lines), lines


def test_json_output_is_the_same_text_with_controls_escaped(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "e.jsonl", [_episode()])
    assert run(tmp_path, "ingest", str(src), "--compile").exit_code == 0
    out = run(tmp_path, "search", "esc", "danger", "--json").stdout
    assert not any(c in out for c in ACTIVE) and "李雷" in out
    assert json.loads(out)["memories"][0]["content"] == TEXT


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", "from cairn.cli.main import run; run()", *args],
        env={**env_for(tmp_path), **env},
        capture_output=True,
        timeout=120,
    )


def test_a_stream_that_cannot_encode_a_script_gets_escapes(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "e.jsonl", [_episode()])
    assert run(tmp_path, "ingest", str(src), "--compile").exit_code == 0
    latin = {"PYTHONIOENCODING": "latin-1"}
    done = _cli(tmp_path, "search", "esc", "danger", "--json", **latin)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memories"][0]["content"] == TEXT
    table = _cli(tmp_path, "search", "esc", "danger", **latin)
    assert table.returncode == 0, table.stderr
    assert b"\\u674e\\u96f7" in table.stdout  # 李雷, escaped by the stream


def test_a_utf8_argument_under_a_c_locale_is_read_as_utf8(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "e.jsonl", [_episode()])
    assert run(tmp_path, "ingest", str(src), "--compile").exit_code == 0
    c_locale = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    done = _cli(tmp_path, "search", "esc", "李雷", "--json", **c_locale)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["memories"][0]["content"] == TEXT


def test_every_json_failure_has_the_documented_shape(tmp_path: Path) -> None:
    """``{"error": {"code", "status", "message", "details", "request_id"}}`` on stderr, every
    key present: a server that cannot be reached has null status and request id."""
    from tests.client.conftest import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = run(tmp_path, "search", "esc", "x", "--url", url, "--json")
    assert done.exit_code == 1
    error = json.loads(done.stderr)["error"]
    assert set(error) == {"code", "status", "message", "details", "request_id"}
    assert error["code"] == "connection_error" and error["status"] is None


def test_a_missing_key_says_how_the_cli_sends_one(tmp_path: Path) -> None:
    from cairn.store import open_store

    assert run(tmp_path, "subjects", "list").exit_code == 0  # makes the database
    store = open_store(f"sqlite:///{tmp_path / 'data' / 'cairn.db'}")
    try:
        store.keys.create("acme")
    finally:
        store.close()
    done = run(tmp_path, "subjects", "list")
    assert done.exit_code == 1 and "missing_api_key" in done.stderr
    assert "--api-key KEY or CAIRN_API_KEY" in done.stderr


def test_text_on_a_terminal_is_shown_and_piped_text_is_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from cairn.cli._common import write_text

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    text = "deploy :warning: now\tplease \x1b[2J\u202eevil"
    for out, expected in (
        (Terminal(), "deploy :warning: now\tplease \\x1b[2J\\u202eevil"),
        (io.StringIO(), text),
    ):
        monkeypatch.setattr("sys.stdout", out)
        write_text(text)
        assert out.getvalue() == expected
