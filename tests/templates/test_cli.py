"""``cairn templates …`` and ``cairn serve`` with operator templates, as a user runs them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from cairn.cli.main import app
from cairn.config import Settings
from cairn.core.scope import Scope
from cairn.store import open_store
from tests.templates.helpers import SIXTH, write_yaml
from tests.templates.test_api import SEED_CONTENT, SEED_REQUEST

runner = CliRunner()


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env["CAIRN_DATA_DIR"] = str(tmp_path / "data")
    env["COLUMNS"] = "500"  # keep Rich from folding long paths in messages
    env.update(extra)
    return env


def invoke(tmp_path: Path, args: list[str], **env: str):  # type: ignore[no-untyped-def]
    # CliRunner only adds variables; blank any CAIRN_* the caller's shell might carry.
    blank = {k: "" for k in os.environ if k.startswith("CAIRN_")}
    return runner.invoke(app, ["templates", *args], env={**blank, **env_for(tmp_path, **env)})


def test_list_and_show(tmp_path: Path) -> None:
    r = invoke(tmp_path, ["list", "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)) == 5
    r = invoke(tmp_path, ["list"])
    assert r.exit_code == 0 and "customer-support-handoff" in r.stdout
    r = invoke(tmp_path, ["show", "project-decision", "--json"])
    assert json.loads(r.stdout)["episode_type"] == "project.decision"
    r = invoke(tmp_path, ["show", "project-decision"])
    assert r.exit_code == 0 and "Project decision: {decision}" in r.stdout
    r = invoke(tmp_path, ["show", "nope"])
    assert r.exit_code == 1 and "template_not_found" in r.output


def test_list_keeps_ids_whole_in_a_narrow_terminal(tmp_path: Path) -> None:
    ids = [t["id"] for t in json.loads(invoke(tmp_path, ["list", "--json"]).stdout)]
    r = invoke(tmp_path, ["list"], COLUMNS="80")
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    assert all(f"│ {i} " in r.stdout for i in ids), r.stdout


def test_list_includes_operator_directory(tmp_path: Path) -> None:
    write_yaml(tmp_path / "ops", "sales.yaml", SIXTH)
    r = invoke(tmp_path, ["list", "--json"], CAIRN_TEMPLATE_DIRS=str(tmp_path / "ops"))
    assert [t["id"] for t in json.loads(r.stdout)].count("sales-call-note") == 1
    assert len(json.loads(r.stdout)) == 6


def test_apply_writes_the_episode(tmp_path: Path) -> None:
    v = SEED_REQUEST["values"]
    args = [
        "apply",
        "customer-support-handoff",
        "--subject",
        "customer:globex",
        "--session",
        "ticket-8842",
        "--idempotency-key",
        "k1",
    ]
    args += [f"--set={name}={value}" for name, value in v.items()]
    r = invoke(tmp_path, args)
    assert r.exit_code == 0, r.output
    ep = json.loads(r.stdout)
    assert ep["payload"]["content"] == SEED_CONTENT
    assert ep["payload"]["fields"] == v
    assert ep["metadata"]["template"] == {"id": "customer-support-handoff", "version": 1}
    again = invoke(tmp_path, args)
    assert json.loads(again.stdout)["id"] == ep["id"]
    store = open_store(Settings(data_dir=tmp_path / "data").resolved_database_url())
    try:
        (stored,) = store.episodes.list("default", Scope.for_subject("customer:globex"))
    finally:
        store.close()
    assert str(stored.id) == ep["id"] and stored.session_id == "ticket-8842"


def test_apply_errors(tmp_path: Path) -> None:
    base = ["apply", "customer-support-handoff", "--subject", "s1", "--set", "customer=Globex"]
    r = invoke(tmp_path, base)
    assert r.exit_code == 1 and "template_missing_field" in r.output and "'issue'" in r.output
    r = invoke(tmp_path, [*base, "--set", "issue=x", "--set", "colour=red"])
    assert r.exit_code == 1 and "template_unknown_field" in r.output
    r = invoke(tmp_path, [*base, "--set", "no-equals-sign"])
    assert r.exit_code == 2
    r = invoke(tmp_path, [*base, "--set", "customer=again"])
    assert r.exit_code == 2 and "set twice" in r.output
    r = invoke(tmp_path, ["apply", "customer-support-handoff", "--subject", "bad/subject"])
    assert r.exit_code == 1 and "validation_error" in r.output
    r = invoke(tmp_path, ["apply", "nope", "--subject", "s1"])
    assert r.exit_code == 1 and "template_not_found" in r.output
    store = open_store(Settings(data_dir=tmp_path / "data").resolved_database_url())
    try:
        assert store.episodes.list("default", Scope.for_subject("s1")) == []
    finally:
        store.close()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--subject", "a/b"], "--subject: subject id must not contain '/'"),
        (["--subject", ""], "--subject: subject id must be 1-256 characters"),
        (["--subject", ".."], "--subject: subject id must not be '.' or '..'"),
        (["--subject", " a"], "--subject: subject id must not start or end with whitespace"),
        (["--subject", "x" * 257], "--subject: subject id must be 1-256 characters"),
        (["--subject", "a\x00b"], "--subject: subject id"),
        (["--subject", "ok", "--session", ""], "--session:"),
        (["--subject", "ok", "--idempotency-key", "k" * 257], "--idempotency-key:"),
    ],
)
def test_apply_rejects_invalid_options_with_the_error_code(
    tmp_path: Path, options: list[str], said: str
) -> None:
    """docs/templates.md: a rejected apply prints its error code and exits 1 — the API's
    ``validation_error`` for the same request, naming the option, not pydantic's dump."""
    values = ["--set", "customer=x", "--set", "issue=y"]
    r = invoke(tmp_path, ["apply", "customer-support-handoff", *options, *values])
    text = " ".join(r.output.split())
    assert r.exit_code == 1, text
    assert text.startswith(f"error (validation_error): {said}"), text
    assert "pydantic" not in text and "Traceback" not in text


def test_apply_refuses_a_value_that_is_not_text(tmp_path: Path) -> None:
    """An argument's bytes that are not UTF-8 arrive as a lone surrogate, which the API
    refuses as ``invalid_text``: so does the command, and nothing is written."""
    args = ["apply", "customer-support-handoff", "--subject", "s1", "--set", "issue=y"]
    r = invoke(tmp_path, [*args, "--set", "customer=\udcff"])
    text = " ".join(r.output.split())
    assert r.exit_code == 1 and text.startswith("error (invalid_text): --set customer:"), text
    assert invoke(tmp_path, [*args, "--set", "customer=x"]).exit_code == 0
    store = open_store(Settings(data_dir=tmp_path / "data").resolved_database_url())
    try:
        (stored,) = store.episodes.list("default", Scope.for_subject("s1"))
    finally:
        store.close()
    assert stored.payload["fields"]["customer"] == "x"


def test_validate(tmp_path: Path) -> None:
    good = write_yaml(tmp_path / "good", "sales.yaml", SIXTH)
    r = invoke(tmp_path, ["validate", str(tmp_path / "good")])
    assert r.exit_code == 0 and "ok: 1 template(s)" in r.stdout
    r = invoke(tmp_path, ["validate", str(good)])
    assert r.exit_code == 0
    bad = write_yaml(tmp_path / "bad", "sales.yaml", SIXTH | {"content_template": "{nope}"})
    r = invoke(tmp_path, ["validate", str(tmp_path / "bad")])
    assert r.exit_code == 3
    assert str(bad) in r.output and "{nope}" in r.output
    dup = write_yaml(tmp_path / "dup", "pref.yaml", SIXTH | {"id": "user-preference"})
    r = invoke(tmp_path, ["validate", str(tmp_path / "dup")])
    assert r.exit_code == 3 and str(dup) in r.output and "duplicate template id" in r.output
    r = invoke(tmp_path, ["validate", str(tmp_path / "good"), str(good)])
    assert r.exit_code == 3 and "duplicate template id 'sales-call-note'" in r.output
    r = invoke(tmp_path, ["validate", str(tmp_path / "missing")])
    assert r.exit_code == 3 and "does not exist" in r.output


def test_serve_refuses_to_start_with_a_bad_template(tmp_path: Path) -> None:
    bad = write_yaml(tmp_path / "ops", "broken-template.yaml", SIXTH | {"version": 0})
    proc = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", "1"],
        env=env_for(tmp_path, CAIRN_TEMPLATE_DIRS=str(tmp_path / "ops")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr
    assert "broken-template.yaml" in proc.stderr
    # The full path, even if the console folded the line.
    assert str(bad) in "".join(proc.stderr.split())
    assert "version" in proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A real ``cairn serve`` with an operator template directory, on a free loopback port."""
    write_yaml(tmp_path / "ops", "sales.yaml", SIXTH)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "serve", "--port", str(port)],
        # Templates, no vector: without an embedder the server does not load the default
        # model in the background as it starts (and its shutdown does not wait for that).
        env=env_for(tmp_path, CAIRN_TEMPLATE_DIRS=str(tmp_path / "ops"), CAIRN_EMBEDDER="none"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server did not start")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()


@pytest.mark.slow
def test_seed_request_against_a_fresh_server(server: str) -> None:
    ids = [t["id"] for t in httpx.get(f"{server}/v1/memory-templates").json()["templates"]]
    assert len(ids) == 6 and "sales-call-note" in ids
    r = httpx.post(
        f"{server}/v1/memory-templates/customer-support-handoff/apply", json=SEED_REQUEST
    )
    assert r.status_code == 201, r.text
    assert r.json()["payload"]["content"] == SEED_CONTENT
    timeline = httpx.get(f"{server}/v1/timeline", params={"subject_id": "customer:globex"}).json()
    assert [e["id"] for e in timeline["episodes"]] == [r.json()["id"]]
