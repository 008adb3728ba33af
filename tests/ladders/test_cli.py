"""``cairn ladders list | validate | run`` as a user runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cairn.cli.main import app
from tests.ladders.conftest import EXAMPLES

runner = CliRunner()


def env_for(tmp_path: Path, ladders: Path | None = EXAMPLES) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_DATA_DIR"] = str(tmp_path / "data")
    if ladders is not None:
        env["CAIRN_LADDERS_DIR"] = str(ladders)
    return env


def test_list(tmp_path: Path) -> None:
    r = runner.invoke(app, ["ladders", "list", "--json"], env=env_for(tmp_path))
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [r["name"] for r in rows] == ["assistant", "assistant:assistant", "memory-ladder"]
    assert rows[2] == {
        "name": "memory-ladder",
        "file": str(EXAMPLES / "memory-ladder.yaml"),
        "agent": None,
        "steps": ["answer"],
        "slates": ["Memory"],
    }
    assert rows[0]["agent"] == "assistant" and rows[0]["steps"] == ["reply"]
    # An invalid file is named on stderr, with --json too (stdout stays the JSON).
    ladders = tmp_path / "ladders"
    shutil.copytree(EXAMPLES, ladders)
    (ladders / "broken.yaml").write_text("steps: [\n")
    r = runner.invoke(app, ["ladders", "list", "--json"], env=env_for(tmp_path, ladders))
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 3
    assert "broken.yaml" in r.stderr


def test_the_example_agent_remembers(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    args = ["ladders", "run", "assistant", "--conversation", "demo"]
    r = runner.invoke(app, [*args[:3], "My favourite colour is teal.", *args[3:]], env=env)
    assert r.exit_code == 0 and r.stdout.strip() == "Noted.", r.output
    r = runner.invoke(app, [*args[:3], "What is my favourite colour?", *args[3:]], env=env)
    assert r.stdout.strip() == "Your favourite colour is teal."


def test_validate_good_and_bad(tmp_path: Path) -> None:
    r = runner.invoke(
        app, ["ladders", "validate", str(EXAMPLES / "memory-ladder.yaml")], env=env_for(tmp_path)
    )
    assert r.exit_code == 0 and "ok" in r.stdout and "memory-ladder" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  - id: a\n    fields:\n      - {name: Q, type: text, from: nowhere}\n")
    r = runner.invoke(app, ["ladders", "validate", str(bad)], env=env_for(tmp_path))
    assert r.exit_code == 3
    assert "bad.yaml: steps[0].fields[0].from: unknown text source 'nowhere'" in r.stderr.replace(
        "\n", ""
    )
    # A recordTemplate is checked as the server checks it (it printed "ok" for a file the
    # server refuses).
    template = tmp_path / "template.yaml"
    template.write_text(
        "steps:\n  - id: a\n    recordTemplate:\n      template: user-preference\n"
        "      subject_id: u\n      values: {subject: x, preference: y, source: z}\n"
    )
    r = runner.invoke(app, ["ladders", "validate", str(template)], env=env_for(tmp_path))
    assert r.exit_code == 3, r.output
    assert "'source' not a field of template 'user-preference'" in " ".join(r.stderr.split())
    # A file that is not there is bad usage (cli.md: exit 2), not a configuration error.
    for missing in (tmp_path / "nonexistent.yaml", tmp_path):
        r = runner.invoke(app, ["ladders", "validate", str(missing)], env=env_for(tmp_path))
        assert r.exit_code == 2, r.output


def test_run_twice_learns_and_replays(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    r = runner.invoke(
        app,
        [
            "ladders",
            "run",
            "memory-ladder",
            "What is the capital of France?",
            "--idempotency-key",
            "cli-1",
        ],
        env=env,
    )
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("Paris.")
    r = runner.invoke(
        app,
        [
            "ladders",
            "run",
            "memory-ladder",
            "What is the capital of Germany?",
            "--stream",
            "--trace",
        ],
        env=env,
    )
    assert r.exit_code == 0, r.output
    assert "from what I learnt before: Paris is the capital of France" in r.stdout
    trace = json.loads(r.stdout[r.stdout.index("\n{\n") :])
    assert trace["steps"][0]["slate_reads"][0]["fallback_used"] is False
    r = runner.invoke(
        app,
        [
            "ladders",
            "run",
            "memory-ladder",
            "What is the capital of France?",
            "--idempotency-key",
            "cli-1",
            "--json",
        ],
        env=env,
    )
    assert json.loads(r.stdout)["id"] == "chatcmpl-cli-1"
    assert "(replayed)" in r.stderr


def test_run_unknown_ladder_fails(tmp_path: Path) -> None:
    r = runner.invoke(app, ["ladders", "run", "nope", "hi"], env=env_for(tmp_path))
    assert r.exit_code == 1 and "ladder_not_found" in r.stderr


def test_data_commands_do_not_repeat_the_ladder_files_warnings(tmp_path: Path) -> None:
    """Every in-process command loads the ladder files, and each printed every invalid
    file's warning (``retention show`` about a ladder); ``ladders list`` still reports it."""
    d = tmp_path / "ladders"
    d.mkdir()
    (d / "broken.yaml").write_text("steps: [unclosed")
    env = env_for(tmp_path, d)
    # (A process of its own: in this one the test runner's log capture takes the warnings.)
    cli = [sys.executable, "-m", "cairn.cli.main"]
    shown = subprocess.run([*cli, "retention", "show"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "broken.yaml" not in shown.stderr, shown.stderr
    listed = subprocess.run([*cli, "ladders", "list"], env=env, capture_output=True, text=True)
    assert "broken.yaml" in listed.stdout + listed.stderr
