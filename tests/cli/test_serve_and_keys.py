"""The server command's safety rules and the keys commands, as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cairn.cli.main import app, is_loopback

runner = CliRunner()


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A user's environment with a data directory of the test's own, for ``cairn serve`` and
    ``cairn worker`` processes (here, tests/cli/test_serve_bind.py and tests/fleet). Lexical
    search only unless ``extra`` names an embedder: a process with the default embedder loads
    the model in the background as it starts (the embedding pass's first sweep asks for its
    size), seconds of both cores while these tests, which check no vector, time a lease or
    start the next process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_DATA_DIR"] = str(tmp_path / "data")
    env["CAIRN_EMBEDDER"] = "none"
    env.update(extra)
    return env


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_serve_refuses_public_bind_without_keys(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--host", "0.0.0.0", "--port", "1"],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "refusing to bind 0.0.0.0" in proc.stderr


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    created = runner.invoke(
        app, ["keys", "create", "--tenant", "acme", "--name", "ci", "--json"], env=env
    )
    assert created.exit_code == 0, created.output
    import json

    info = json.loads(created.stdout)
    assert info["key"].startswith("cairn_") and info["tenant"] == "acme"
    listed = runner.invoke(app, ["keys", "list", "--json"], env=env)
    rows = json.loads(listed.stdout)
    assert [(r["id"], r["tenant"], r["revoked_at"]) for r in rows] == [(info["id"], "acme", None)]
    assert info["key"] not in listed.stdout
    revoked = runner.invoke(app, ["keys", "revoke", info["id"]], env=env)
    assert revoked.exit_code == 0
    again = runner.invoke(app, ["keys", "revoke", info["id"]], env=env)
    assert again.exit_code == 1


def test_migrate_is_idempotent(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    first = runner.invoke(app, ["migrate"], env=env)
    assert first.exit_code == 0
    second = runner.invoke(app, ["migrate"], env=env)
    assert second.exit_code == 0 and "up to date" in second.stdout
